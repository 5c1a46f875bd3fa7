#!/usr/bin/env bash
# Cuts a Starling release: bumps the version everywhere it appears, records the release in
# CHANGELOG.md and commits. The policy it implements is docs/releases.md.
#
#   scripts/release.sh VERSION            cut VERSION (semver, greater than the current one)
#   scripts/release.sh --dry-run VERSION  change nothing; print the diff it would commit
#
# It makes two commits on the current branch:
#   1. "Release VERSION"  the version bump (the release commit; tagged vVERSION): the
#      workspace version in Cargo.toml, the workspace crates in Cargo.lock, the chart's
#      version and appVersion, the image tags the chart and the operator default to (as
#      rendered in manifests/install.yaml, asserted by charts/test.sh, listed in
#      docs/operator.md) and the Go client's Version constant; and a copy of crds/*.yaml in
#      crds/released/VERSION/, the schema later CRDs must stay compatible with;
#   2. "CHANGELOG: VERSION"  the "Unreleased" section of CHANGELOG.md becomes the VERSION
#      entry, naming the release commit, and a new empty "Unreleased" section opens.
#
# Refuses a dirty tree (except with --dry-run), a VERSION that is not semver (MAJOR.MINOR.PATCH
# with an optional -PRERELEASE) or not greater than the current version. Idempotent: run again
# for the version it already cut, it changes nothing; interrupted after commit 1, it finishes
# commit 2. RELEASE_DATE (YYYY-MM-DD) overrides today's UTC date in the entry.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
VERSION=""
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "release: unknown option $arg" >&2; exit 2 ;;
    *) [[ -z "$VERSION" ]] || { echo "usage: $0 [--dry-run] VERSION" >&2; exit 2; }; VERSION="$arg" ;;
  esac
done
[[ -n "$VERSION" ]] || { echo "usage: $0 [--dry-run] VERSION" >&2; exit 2; }

die() { echo "release: $*" >&2; exit 1; }

SEMVER='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
[[ "$VERSION" =~ $SEMVER ]] || die "'$VERSION' is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE], no leading v)"

# semver_cmp A B: prints -1, 0 or 1 by semver precedence.
semver_cmp() {
  local a="$1" b="$2" i
  local ac="${a%%-*}" bc="${b%%-*}" ap="" bp=""
  [[ "$a" == *-* ]] && ap="${a#*-}"
  [[ "$b" == *-* ]] && bp="${b#*-}"
  local -a x y
  IFS=. read -ra x <<<"$ac"
  IFS=. read -ra y <<<"$bc"
  for i in 0 1 2; do
    if ((10#${x[i]} < 10#${y[i]})); then echo -1; return; fi
    if ((10#${x[i]} > 10#${y[i]})); then echo 1; return; fi
  done
  # Equal cores: a version without a prerelease is the greater.
  if [[ -z "$ap" && -z "$bp" ]]; then echo 0; return; fi
  if [[ -z "$ap" ]]; then echo 1; return; fi
  if [[ -z "$bp" ]]; then echo -1; return; fi
  IFS=. read -ra x <<<"$ap"
  IFS=. read -ra y <<<"$bp"
  for ((i = 0; i < ${#x[@]} || i < ${#y[@]}; i++)); do
    if ((i >= ${#x[@]})); then echo -1; return; fi
    if ((i >= ${#y[@]})); then echo 1; return; fi
    local p="${x[i]}" q="${y[i]}"
    if [[ "$p" =~ ^[0-9]+$ && "$q" =~ ^[0-9]+$ ]]; then
      if ((10#$p < 10#$q)); then echo -1; return; fi
      if ((10#$p > 10#$q)); then echo 1; return; fi
    elif [[ "$p" =~ ^[0-9]+$ ]]; then echo -1; return
    elif [[ "$q" =~ ^[0-9]+$ ]]; then echo 1; return
    elif [[ "$p" < "$q" ]]; then echo -1; return
    elif [[ "$p" > "$q" ]]; then echo 1; return
    fi
  done
  echo 0
}

# The current version: [workspace.package] version in Cargo.toml.
current_version() {
  awk '/^\[/{s=($0=="[workspace.package]")} s && /^version = "/{gsub(/^version = "|"$/,""); print; exit}' Cargo.toml
}
CURRENT="$(current_version)"
[[ -n "$CURRENT" ]] || die "no [workspace.package] version in Cargo.toml"

CHANGELOG=CHANGELOG.md
entry_exists() { [[ -f "$CHANGELOG" ]] && grep -q "^## \[$1\]" "$CHANGELOG"; }

if [[ "$DRY_RUN" == 0 && -n "$(git status --porcelain)" ]]; then
  die "the working tree is not clean; commit or stash first"
fi

# Each edit: a file and a function that writes the edited file to stdout. Every edit must
# change the file: a version that is not where it is expected means this list is out of date.
bump_cargo_toml() {
  awk -v new="$VERSION" -v old="$CURRENT" '
    /^\[/ { s = ($0 == "[workspace.package]") }
    s && $0 == "version = \"" old "\"" { $0 = "version = \"" new "\"" }
    { print }' Cargo.toml
}
# Workspace crates are the starling-* packages without a source (path dependencies).
bump_cargo_lock() {
  awk -v new="$VERSION" -v old="$CURRENT" '
    function flush() { if (n) { for (i = 1; i <= n; i++) { if (ours && !src && buf[i] == "version = \"" old "\"") buf[i] = "version = \"" new "\""; print buf[i] } } n = 0; ours = 0; src = 0 }
    /^\[\[package\]\]$/ || /^\[/ { flush() }
    { buf[++n] = $0 }
    /^name = "starling-/ { ours = 1 }
    /^source = / { src = 1 }
    END { flush() }' Cargo.lock
}
bump_chart() {
  sed -e "s/^version: ${CURRENT//./\\.}\$/version: $VERSION/" \
      -e "s/^appVersion: \"${CURRENT//./\\.}\"\$/appVersion: \"$VERSION\"/" charts/starling-operator/Chart.yaml
}
# The chart's defaults as rendered: recommended labels, chart label, both images.
bump_images() {
  local o="${CURRENT//./\\.}"
  sed -e "s/app\.kubernetes\.io\/version: \"$o\"/app.kubernetes.io\/version: \"$VERSION\"/" \
      -e "s/helm\.sh\/chart: starling-operator-$o\$/helm.sh\/chart: starling-operator-$VERSION/" \
      -e "s/starling\/operator:$o\"/starling\/operator:$VERSION\"/" \
      -e "s/starling\/broker:$o\([\"\` ]\)/starling\/broker:$VERSION\1/" "$1"
}
bump_go() {
  sed -e "s/^const Version = \"${CURRENT//./\\.}\"\$/const Version = \"$VERSION\"/" clients/go/config.go
}

EDITS=(
  "Cargo.toml:bump_cargo_toml"
  "Cargo.lock:bump_cargo_lock"
  "charts/starling-operator/Chart.yaml:bump_chart"
  "manifests/install.yaml:bump_images manifests/install.yaml"
  "charts/test.sh:bump_images charts/test.sh"
  "docs/operator.md:bump_images docs/operator.md"
  "clients/go/config.go:bump_go"
)

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# Moves "## Unreleased"'s body under "## [VERSION] - DATE", naming the release commit.
changelog_entry() {
  local commit="$1" date="${RELEASE_DATE:-$(date -u +%F)}"
  [[ -f "$CHANGELOG" ]] || die "no $CHANGELOG"
  grep -q '^## Unreleased$' "$CHANGELOG" || die "$CHANGELOG has no '## Unreleased' section"
  awk -v v="$VERSION" -v d="$date" -v c="$commit" -v prev="$CURRENT" '
    /^## Unreleased$/ {
      print; print ""; print "Nothing yet."; print ""
      print "## [" v "] - " d; print ""
      print "Release commit: `" c "` (tag `v" v "`); previous release: " prev "."
      inside = 1; next
    }
    inside && /^## / { inside = 0 }
    inside && $0 == "Nothing yet." { next }
    { print }' "$CHANGELOG" | cat -s
}

order="$(semver_cmp "$VERSION" "$CURRENT")"
if [[ "$order" == 0 ]]; then
  # Already at VERSION: done, or finish an interrupted run.
  if entry_exists "$VERSION"; then
    echo "release: $VERSION is already released ($(grep -A2 "^## \[$VERSION\]" "$CHANGELOG" | grep -o 'Release commit: `[0-9a-f]*`' || true)); nothing to do"
    exit 0
  fi
  [[ "$(git log -1 --format=%s)" == "Release $VERSION" ]] ||
    die "the version is already $VERSION but HEAD is not its release commit and $CHANGELOG has no entry"
  CURRENT="$(git show HEAD~1:Cargo.toml | awk '/^\[/{s=($0=="[workspace.package]")} s && /^version = "/{gsub(/^version = "|"$/,""); print; exit}')"
  RELEASE_COMMIT="$(git rev-parse HEAD)"
elif [[ "$order" == -1 ]]; then
  die "$VERSION is not greater than the current version $CURRENT"
else
  for e in "${EDITS[@]}"; do
    file="${e%%:*}" fn="${e#*:}"
    out="$TMP/$(echo "$file" | tr / _)"
    $fn >"$out"
    if cmp -s "$file" "$out"; then die "$file: no $CURRENT found where the version belongs; update scripts/release.sh"; fi
    if [[ "$DRY_RUN" == 1 ]]; then
      diff -u --label "a/$file" --label "b/$file" "$file" "$out" || true
    else
      cat "$out" >"$file"
    fi
  done
  if [[ "$DRY_RUN" == 1 ]]; then
    changelog_entry "<release commit>" >"$TMP/changelog"
    diff -u --label "a/$CHANGELOG" --label "b/$CHANGELOG" "$CHANGELOG" "$TMP/changelog" || true
    for crd in crds/*.yaml; do echo "release: dry run: would copy $crd to crds/released/$VERSION/"; done
    echo "release: dry run: would commit \"Release $VERSION\" (tag v$VERSION) and \"CHANGELOG: $VERSION\""
    exit 0
  fi
  # Cross-check the lock file edit with cargo's own (cargo update -w changes only the
  # workspace entries); without cargo or its index cache, the edit above stands.
  if command -v cargo >/dev/null && [[ -z "${RELEASE_SKIP_CARGO:-}" ]]; then
    cp Cargo.lock "$TMP/lock"
    if cargo update -w --offline -q 2>"$TMP/cargo.err"; then
      cmp -s Cargo.lock "$TMP/lock" ||
        die "cargo update -w rewrote Cargo.lock differently from the version edit (the bump is uncommitted: git checkout -- . undoes it)"
    else
      cp "$TMP/lock" Cargo.lock
      echo "release: note: cargo update -w --offline failed ($(head -1 "$TMP/cargo.err")); Cargo.lock edited without it" >&2
    fi
  fi
  # The released CRD schemas: what operator/tests/crd_compat.rs compares later CRDs with.
  mkdir -p "crds/released/$VERSION"
  cp crds/*.yaml "crds/released/$VERSION/"
  for e in "${EDITS[@]}"; do git add "${e%%:*}"; done
  git add "crds/released/$VERSION"
  git commit -q -m "Release $VERSION" -m "Version $CURRENT -> $VERSION (scripts/release.sh)."
  RELEASE_COMMIT="$(git rev-parse HEAD)"
fi

[[ "$DRY_RUN" == 0 ]] || { echo "release: dry run: would record $VERSION in $CHANGELOG"; exit 0; }
git rev-parse -q --verify "refs/tags/v$VERSION" >/dev/null || git tag "v$VERSION" "$RELEASE_COMMIT"
changelog_entry "$RELEASE_COMMIT" >"$TMP/changelog"
cat "$TMP/changelog" >"$CHANGELOG"
git add "$CHANGELOG"
git commit -q -m "CHANGELOG: $VERSION" -m "Release commit $RELEASE_COMMIT."
echo "release: $VERSION cut at $RELEASE_COMMIT (tag v$VERSION); CHANGELOG.md committed"
