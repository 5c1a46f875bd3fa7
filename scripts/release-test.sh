#!/usr/bin/env bash
# Tests scripts/release.sh on a temporary clone of this repository's HEAD (with the working
# tree's release.sh copied in): its refusals, --dry-run changing nothing, a real release
# bumping every place the version lives consistently with the CHANGELOG entry naming the
# release commit, and a second run changing nothing. A few seconds; no network, no build.
#
#   scripts/release-test.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
R="$TMP/repo"

fail() { echo "release-test: FAIL: $*" >&2; exit 1; }
pass() { echo "release-test: ok: $*"; }
git_() { git -C "$R" "$@"; }

git clone -q --shared --no-checkout "$ROOT" "$R"
git_ checkout -q --detach "$(git -C "$ROOT" rev-parse HEAD)"
git_ config user.name "release test"
git_ config user.email "release-test@example.invalid"
git_ config commit.gpgsign false
cp "$ROOT/scripts/release.sh" "$R/scripts/release.sh"
if [[ -n "$(git_ status --porcelain)" ]]; then git_ commit -q -am "the release.sh under test"; fi

OLD="$(awk '/^\[/{s=($0=="[workspace.package]")} s && /^version = "/{gsub(/^version = "|"$/,""); print; exit}' "$R/Cargo.toml")"
[[ "$OLD" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || fail "current version '$OLD' is not a plain release"
NEW="${BASH_REMATCH[1]}.$((BASH_REMATCH[2] + 1)).0"
BASE="$(git_ rev-parse HEAD)"
export RELEASE_DATE=2026-01-02

refuses() {
  local why="$1" before out; shift
  before="$(git_ rev-parse HEAD)"
  if out="$("$R/scripts/release.sh" "$@" 2>&1)"; then fail "accepted $* ($why)"; fi
  [[ "$(git_ rev-parse HEAD)" == "$before" && -z "$(git_ status --porcelain)" ]] || fail "a refused run ($*) changed the repository"
  pass "refuses $* ($why): ${out##*release: }"
}
refuses "not semver" 1.2
refuses "leading v" "v$NEW"
"$R/scripts/release.sh" "$OLD" | grep -q "already released" || fail "the current version is not reported as released"
[[ "$(git_ rev-parse HEAD)" == "$BASE" && -z "$(git_ status --porcelain)" ]] || fail "a run for the current version changed something"
pass "the current version $OLD: already released, nothing to do"
refuses "older" 0.0.1
refuses "a prerelease of the current version is lower" "$OLD-rc.1"
echo dirt >>"$R/README.md"
if "$R/scripts/release.sh" "$NEW" >/dev/null 2>&1; then fail "accepted a dirty tree"; fi
git_ checkout -q README.md
pass "refuses a dirty tree"

DRY="$("$R/scripts/release.sh" --dry-run "$NEW")"
[[ "$(git_ rev-parse HEAD)" == "$BASE" && -z "$(git_ status --porcelain)" ]] || fail "--dry-run changed the repository"
for f in Cargo.toml Cargo.lock charts/starling-operator/Chart.yaml manifests/install.yaml clients/go/config.go CHANGELOG.md; do
  grep -q "^+++ b/$f" <<<"$DRY" || fail "--dry-run does not show $f"
done
pass "--dry-run prints the changes and changes nothing"

"$R/scripts/release.sh" "$NEW" >/dev/null
[[ -z "$(git_ status --porcelain)" ]] || fail "the release left the tree dirty"
[[ "$(git_ rev-list --count "$BASE..HEAD")" == 2 ]] || fail "expected two commits"
REL="$(git_ rev-parse HEAD~1)"
[[ "$(git_ log -1 --format=%s "$REL")" == "Release $NEW" ]] || fail "release commit subject"
[[ "$(git_ rev-parse "v$NEW^{commit}")" == "$REL" ]] || fail "tag v$NEW is not on the release commit"
CHANGED="$(git_ diff --name-only "$BASE" "$REL" | sort | tr '\n' ' ')"
WANT="Cargo.lock Cargo.toml charts/starling-operator/Chart.yaml charts/test.sh clients/go/config.go crds/released/$NEW/brokercluster.yaml crds/released/$NEW/brokertopic.yaml crds/released/$NEW/brokeruser.yaml docs/operator.md manifests/install.yaml "
[[ "$CHANGED" == "$WANT" ]] || fail "the release commit changed [$CHANGED], expected [$WANT]"
[[ "$(git_ diff --name-only "$REL" HEAD)" == CHANGELOG.md ]] || fail "the second commit must change only CHANGELOG.md"

# Every place, consistently.
grep -qx "version = \"$NEW\"" <(awk '/^\[/{s=($0=="[workspace.package]")} s' "$R/Cargo.toml") || fail "Cargo.toml"
lock_ours="$(awk '/^name = "starling-/{n=$0; getline; print n, $0}' "$R/Cargo.lock")"
[[ "$(wc -l <<<"$lock_ours")" -ge 10 ]] || fail "Cargo.lock: workspace crates not found"
! grep -v "version = \"$NEW\"" <<<"$lock_ours" || fail "Cargo.lock: a workspace crate is not at $NEW"
git_ diff "$BASE" "$REL" -- Cargo.lock | grep '^[-+]version' | grep -vq "\"$OLD\"\|\"$NEW\"" && fail "Cargo.lock: an unrelated version changed"
grep -qx "version: $NEW" "$R/charts/starling-operator/Chart.yaml" || fail "Chart.yaml version"
grep -qx "appVersion: \"$NEW\"" "$R/charts/starling-operator/Chart.yaml" || fail "Chart.yaml appVersion"
grep -q "image: \"starling/operator:$NEW\"" "$R/manifests/install.yaml" || fail "install.yaml operator image"
grep -q "\"--broker-image=starling/broker:$NEW\"" "$R/manifests/install.yaml" || fail "install.yaml broker image"
[[ "$(grep -c "helm.sh/chart: starling-operator-$NEW$" "$R/manifests/install.yaml")" == "$(git_ show "$BASE:manifests/install.yaml" | grep -c "helm.sh/chart: starling-operator-$OLD$")" ]] || fail "install.yaml chart labels"
grep -q "starling/operator:$NEW\"" "$R/charts/test.sh" || fail "charts/test.sh operator image"
grep -q "starling/broker:$NEW\"" "$R/charts/test.sh" || fail "charts/test.sh broker image"
grep -q "\`starling/broker:$NEW\`" "$R/docs/operator.md" || fail "docs/operator.md broker image"
grep -qx "const Version = \"$NEW\"" "$R/clients/go/config.go" || fail "clients/go Version"
for crd in "$R"/crds/*.yaml; do cmp -s "$crd" "$R/crds/released/$NEW/$(basename "$crd")" || fail "crds/released/$NEW: $(basename "$crd")"; done
# No other tracked file names the old version, except these, which are not this project's
# version: dependencies' versions (go.mod/go.sum), recorded bench runs and image tags of past
# measurements, example URLs, the released CRD copies and the changelog itself.
left="$(git_ grep -n -F "$OLD" -- . \
  ':!*go.sum' ':!*go.mod' ':!bench/results/**' ':!CHANGELOG.md' ':!crds/released/**' \
  ':!docs/autoscaling.md' ':!docs/local-cluster.md' \
  | grep -v "git.example/starling/blob/v$OLD/" || true)"
[[ -z "$left" ]] || fail "the old version is still named in:
$left"
grep -q "^## \[$NEW\] - $RELEASE_DATE$" "$R/CHANGELOG.md" || fail "CHANGELOG.md has no $NEW entry"
grep -q "^Release commit: \`$REL\` (tag \`v$NEW\`); previous release: $OLD.$" "$R/CHANGELOG.md" || fail "CHANGELOG.md does not name the release commit"
[[ "$(grep -c '^## Unreleased$' "$R/CHANGELOG.md")" == 1 ]] || fail "CHANGELOG.md: one Unreleased section"
awk '/^## Unreleased$/{u=1; next} u && /^## \[/{exit} u && NF && $0 != "Nothing yet." {bad=1} END{exit bad}' "$R/CHANGELOG.md" ||
  fail "CHANGELOG.md: the Unreleased section kept content"
section() { awk -v h="$1" '$0 == h {u=1; next} u && /^## /{exit} u && NF && $0 != "Nothing yet." && !/^Release commit: /' ; }
[[ "$(git_ show "$BASE:CHANGELOG.md" | section "## Unreleased")" == "$(section "## [$NEW] - $RELEASE_DATE" <"$R/CHANGELOG.md")" ]] ||
  fail "CHANGELOG.md: the $NEW entry is not what Unreleased held"
pass "$OLD -> $NEW: every place bumped, CHANGELOG names $REL"

HEAD="$(git_ rev-parse HEAD)"
"$R/scripts/release.sh" "$NEW" >/dev/null
[[ "$(git_ rev-parse HEAD)" == "$HEAD" && -z "$(git_ status --porcelain)" ]] || fail "a second run changed something"
pass "a second run for $NEW changes nothing"

# Interrupted after the release commit: a rerun finishes the CHANGELOG commit.
git_ reset -q --hard "$REL"
git_ tag -d "v$NEW" >/dev/null
"$R/scripts/release.sh" "$NEW" >/dev/null
[[ "$(git_ rev-parse HEAD~1)" == "$REL" && "$(git_ diff --name-only "$REL" HEAD)" == CHANGELOG.md ]] || fail "resume"
grep -q "^Release commit: \`$REL\`" "$R/CHANGELOG.md" && [[ "$(git_ rev-parse "v$NEW^{commit}")" == "$REL" ]] || fail "resume: entry or tag"
refuses "not greater than the new version" "$OLD"
pass "an interrupted release resumes"
echo "release-test: all passed"
