#!/usr/bin/env bash
# The cache of per-checkout cargo build directories that `make test` keeps (scripts/test.sh):
# CACHE/<xx>/<hash>/, one per checkout path (cargo's build.build-dir template
# {workspace-path-hash}). Two jobs, in this order:
#
#   1. seed: a checkout path without a build directory yet (a clean clone at a new path, as
#      CI's checkout is) gets a copy of the one used most recently, minus the workspace's own
#      crates, so its first build compiles those crates and none of the ~390 dependencies
#      (22 minutes on 2 cores). Cargo names a registry crate's artifacts and fingerprints by a
#      hash of its package id, features, profile and compiler, never the checkout's path, so a
#      copied dependency is exactly what this checkout would compile; a build script's output
#      that names the old directory is rewritten by cargo (build/<pkg>-<hash>/root-output).
#      A workspace crate is named by its path relative to the workspace, so its copied
#      fingerprint could pass another commit's compile for fresh: the fingerprints, build-script
#      directories and artifacts of every workspace package are deleted from the copy.
#      Each profile directory is copied under cargo's own lock (<profile>/.cargo-lock), so a
#      build running there is never copied half-written.
#   2. trim: past STARLING_BUILD_CACHE_MAX_GB (default 30) held by the per-path directories, the
#      least recently used of them are removed, never the newest (the one just seeded or used).
#
#   scripts/build-cache.sh CACHE
#
# Run from the workspace, with CARGO_BUILD_BUILD_DIR set to CACHE/{workspace-path-hash}: this
# checkout's directory is what `cargo metadata` reports as its build_directory. Seeding needs
# room for the copy: it is skipped when the file system would be left with less than twice
# the copy's size free. STARLING_BUILD_CACHE_SEED=0 skips it. Failures leave no partial
# directory behind and never fail the caller: cargo then simply builds from nothing.
set -uo pipefail

cache=${1:?usage: scripts/build-cache.sh CACHE}
cargo=${CARGO:-cargo}
max_gb=${STARLING_BUILD_CACHE_MAX_GB:-30}

say() { echo "build-cache: $*" >&2; }

# build_dirs: every checkout directory under $cache, least recently used first. Last use: the
# newest of the directory and its profiles' deps/ and .fingerprint/ (a build that compiles
# anything adds files there). Only the {workspace-path-hash} layout (<xx>/<hash>/ holding
# cargo's CACHEDIR.TAG), never a directory someone named with CARGO_BUILD_BUILD_DIR.
build_dirs() {
  local tag d
  for tag in "$cache"/*/*/CACHEDIR.TAG; do
    [[ -f "$tag" ]] || continue
    d=${tag%/CACHEDIR.TAG}
    printf '%s %s\n' "$(stat -c %Y "$d" "$d"/*/deps "$d"/*/.fingerprint 2>/dev/null | sort -n | tail -1)" "$d"
  done | sort -n | cut -d' ' -f2-
}

# copy_profile SRC DST: one profile directory (ci/, debug/) without its incremental caches,
# under cargo's lock of the source.
copy_profile() {
  local src=$1 dst=$2 e
  mkdir -p "$dst" || return 1
  # -w: a build running there ends first; past 10 minutes the seed is skipped.
  flock -w 600 "$src/.cargo-lock" bash -c '
    src=$1 dst=$2
    for e in "$src"/* "$src"/.fingerprint; do
      [[ -e "$e" ]] || continue
      case "${e##*/}" in incremental|tmp) continue ;; esac
      cp -a --reflink=auto "$e" "$dst/" || exit 1
    done' _ "$src" "$dst"
}

# scrub DIR PACKAGE...: deletes every unit of these packages from the build directory DIR:
# each .fingerprint/<package>-<hash> names a unit; its artifacts carry the same hash.
scrub() {
  local dir=$1 prof pkg fp h name; shift
  for prof in "$dir"/*/; do
    [[ -d "$prof.fingerprint" ]] || continue
    for pkg in "$@"; do
      for fp in "$prof.fingerprint/$pkg"-*; do
        name=${fp##*/}
        [[ "$name" =~ ^${pkg}-([0-9a-f]{16})$ ]] || continue
        h=${BASH_REMATCH[1]}
        rm -rf "$fp" "$prof/build/$pkg-$h" "$prof"deps/*-"$h" "$prof"deps/*-"$h".* \
          "$prof"examples/*-"$h" "$prof"examples/*-"$h".* || return 1
      done
    done
  done
}

seed() {
  local meta new src=""
  meta=$("$cargo" metadata --format-version 1 --no-deps) || return 1
  new=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("build_directory") or "")' <<<"$meta") || return 1
  if [[ -z "$new" || "$new" != "$cache"/* ]]; then
    say "cargo reports build directory '$new', not under $cache: not seeding"
    return 0
  fi
  [[ -e "$new" ]] && return 0
  local d
  while read -r d; do
    [[ -n "$d" && "$d" != "$new" ]] && src=$d
  done < <(build_dirs)
  [[ -n "$src" ]] || return 0

  local need_kb free_kb
  need_kb=$(du -sk --exclude=incremental "$src" | cut -f1)
  free_kb=$(df -Pk "$cache" | awk 'NR == 2 { print $4 }')
  if [[ -z "$need_kb" || -z "$free_kb" || "$free_kb" -lt $((2 * need_kb)) ]]; then
    say "not seeding $new: $((need_kb / 1024)) MiB to copy, $((free_kb / 1024)) MiB free"
    return 0
  fi

  # The copy grows under a hidden name (build_dirs and the trim never see it) and takes its
  # place in one rename. A copy a killed run left behind is removed first.
  local t0=$SECONDS tmp="$cache/.seeding-$$" p s
  for s in "$cache"/.seeding-*; do
    [[ -d "$s" ]] && ! kill -0 "${s##*-}" 2>/dev/null && rm -rf "$s"
  done
  mapfile -t pkgs < <(python3 -c 'import json, sys; print("\n".join(p["name"] for p in json.load(sys.stdin)["packages"]))' <<<"$meta")
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp" "$(dirname "$new")" && cp -a "$src"/CACHEDIR.TAG "$tmp/" || { rm -rf "$tmp"; return 1; }
  for p in "$src"/*/; do
    p=${p%/}
    [[ -d "$p/.fingerprint" ]] || continue
    copy_profile "$p" "$tmp/${p##*/}" || { rm -rf "$tmp"; say "copying $p failed"; return 1; }
  done
  scrub "$tmp" "${pkgs[@]}" && mv -T "$tmp" "$new" || { rm -rf "$tmp"; return 1; }
  trap - EXIT
  # Used now: the trim below must not take it for the least recently used.
  touch "$new" "$new"/*/deps "$new"/*/.fingerprint
  say "seeded $new from $src in $((SECONDS - t0))s ($(du -sh "$new" | cut -f1); the ${#pkgs[@]} workspace packages left to compile)"
}

trim() {
  local used_kb dirs
  [[ -d "$cache" ]] || return 0
  while :; do
    # Only the per-path directories count towards the cap: a directory named with
    # CARGO_BUILD_BUILD_DIR (a developer's worktree) is never removed here, so counting it
    # would remove the per-path ones (CI's) for space they do not take.
    mapfile -t dirs < <(build_dirs)
    [[ ${#dirs[@]} -gt 1 ]] || break
    used_kb=$(du -sck "${dirs[@]}" 2>/dev/null | tail -1 | cut -f1)
    [[ -n "$used_kb" && "$used_kb" -gt $((max_gb * 1024 * 1024)) ]] || break
    say "$cache holds $((used_kb / 1024 / 1024)) GiB (> $max_gb): removing ${dirs[0]}, the least recently used"
    rm -rf "${dirs[0]}"
  done
}

if [[ "${STARLING_BUILD_CACHE_SEED:-1}" != 0 ]]; then
  seed || say "seeding failed: this checkout's first build compiles everything"
fi
trim
