#!/usr/bin/env bash
# Runs the replicated-topic fault schedules (replica/tests/replica/schedules.rs) over many seeds:
#   scripts/replica-soak.sh N [BASE]
# N seeds from BASE (default 1000, past the seeds `cargo test` runs). Each seed is a random
# schedule of publishes, partitions, one-way cuts, loss and delay, leader power cuts, empty
# volume restarts and membership 3 -> 5 -> 3 on simulated time; the checker fails the run on
# any acknowledged publish missing, duplicated, out of order or moved on a live replica.
# Prints the per-seed tallies and the failing seed, if any (rerun it alone with N=1 BASE=seed).
set -euo pipefail
n="${1:?usage: scripts/replica-soak.sh N [BASE]}"
base="${2:-1000}"
cd "$(dirname "$0")/.."
# The suite's package selection and profile (scripts/cargo-unified.sh): `-p starling-replica`
# alone would resolve its dependencies' features apart from `make test`'s build and compile
# them all again.
REPLICA_SEEDS="$n" REPLICA_SEED_BASE="$base" \
  cargo test --profile "${STARLING_CARGO_PROFILE:-ci}" --workspace --test replica schedules:: -- --nocapture
