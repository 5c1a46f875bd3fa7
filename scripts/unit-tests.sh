#!/usr/bin/env bash
# `make unit`'s Rust tests: every unit, integration and doc test of the workspace but e2e, in
# the profile $STARLING_CARGO_PROFILE (default ci, so `make test`'s other phases reuse the
# build), with the test binaries run $STARLING_TEST_JOBS at a time (default 2) instead of one
# after the other: the broker's cluster, durable and integration binaries spend most of their
# time waiting on real brokers, so two of them share the 2 cores well. They start first, as
# they are the longest. Each binary runs in its package's directory, as `cargo test` runs it;
# its output is printed when it fails. A table of each binary's time ends the output.
# The build is scripts/cargo-build.sh, the one cargo build of `make test` (the e2e test binary
# and the binaries the other phases run come out of the same invocation, so no phase compiles
# the workspace again with other features); the e2e suite's binary is not run here.
#
#   scripts/unit-tests.sh
set -uo pipefail
cd "$(dirname "$0")/.."

cargo=${CARGO:-cargo}
profile=${STARLING_CARGO_PROFILE:-ci}
jobs=${STARLING_TEST_JOBS:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

t0=$SECONDS
CARGO=$cargo STARLING_CARGO_PROFILE=$profile ./scripts/cargo-build.sh --json "$work/build.json" || exit $?
echo "== build: $((SECONDS - t0))s" >&2

# One line per test binary: its package's directory, the binary, a label. The binaries that
# start brokers (broker's tests/) first. Not the e2e suite (e2e/run.sh runs it against a
# cluster); the e2e library's own unit tests run here.
python3 - "$work/build.json" >"$work/list" <<'EOF'
import json, os, sys
first, rest = [], []
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    pkg = os.path.dirname(m["manifest_path"])
    t = m["target"]
    if os.path.basename(pkg) == "e2e" and "test" in t["kind"]:
        continue
    label = f"{os.path.basename(pkg)}/{t['kind'][0]}:{t['name']}"
    row = f"{pkg}\t{m['executable']}\t{label}"
    (first if os.path.basename(pkg) == "broker" and "test" in t["kind"] else rest).append(row)
print("\n".join(first + rest))
EOF

run_one() {
  local dir=$1 exe=$2 label=$3 out=$4 t0=$SECONDS rc=0
  (cd "$dir" && CARGO_MANIFEST_DIR=$dir "$exe") >"$out" 2>&1 || rc=$?
  printf '%s\t%d\t%d\t%s\n' "$label" $((SECONDS - t0)) "$rc" "$(grep -h '^test result' "$out" | tail -1)" >"$out.row"
  return "$rc"
}

t_all=$SECONDS
i=0
running=0
while IFS=$'\t' read -r dir exe label; do
  i=$((i + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
  run_one "$dir" "$exe" "$label" "$work/$i" &
  running=$((running + 1))
done <"$work/list"
wait

failed=0
for row in "$work"/*.row; do
  IFS=$'\t' read -r label secs rc result <"$row"
  if [[ $rc -ne 0 ]]; then
    failed=$((failed + 1))
    echo "---- $label FAILED (exit $rc):" >&2
    cat "${row%.row}" >&2
  fi
done
echo "== test binaries, $jobs at a time: $((SECONDS - t_all))s" >&2
sort -t$'\t' -k2,2nr "$work"/*.row | awk -F'\t' '{printf "  %-40s %5ds  %s%s\n", $1, $2, ($3 == 0 ? "" : "FAILED "), $4}' >&2
((failed == 0)) || exit 1

# --workspace, as the build selects (the same features, so the libraries are fresh); the e2e
# crate has no doc tests.
echo "== cargo test --profile $profile --workspace --doc" >&2
t0=$SECONDS
"$cargo" test -q --profile "$profile" --workspace --doc || exit $?
echo "== doc tests: $((SECONDS - t0))s" >&2
