#!/usr/bin/env bash
# Checks every workspace crate for module cycles (scripts/module-cycles.py over each crate's
# `src/`) and exits non-zero when any crate has one. The crate list is the workspace's members
# as `cargo metadata --no-deps` reports them, so a crate added to `Cargo.toml` is checked
# without editing this script. Crates without a `src/` directory are skipped.
#
#   scripts/module-cycles-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# One `src/` directory per workspace member, from the manifest paths cargo reports.
mapfile -t srcs < <(
  cargo metadata --no-deps --format-version 1 --offline |
    python3 -c '
import json, os, sys
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
root = meta["workspace_root"]
for pkg in sorted(meta["packages"], key=lambda p: p["manifest_path"]):
    if pkg["id"] not in members:
        continue
    src = os.path.join(os.path.dirname(pkg["manifest_path"]), "src")
    if os.path.isdir(src):
        print(os.path.relpath(src, root))
'
)

if [[ ${#srcs[@]} -eq 0 ]]; then
  echo "module-cycles-all: cargo metadata listed no workspace crate with a src/ directory" >&2
  exit 2
fi

python3 scripts/module-cycles.py "${srcs[@]}"
