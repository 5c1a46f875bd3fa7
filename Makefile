# Starling: the two commands a newcomer runs are `make demo` and `make test`.
# Everything else here is a building block of those two, or a generator.

CARGO ?= cargo
SHELL := /bin/bash

.PHONY: demo demo-local test fmt-check lint unit docs crds help

help:
	@echo "make demo   - run Starling on its embedded default and do a pub/sub round trip"
	@echo "make test   - the whole test suite (fmt, clippy, unit + integration tests)"
	@echo "make docs   - regenerate the generated parts of docs/"
	@echo "make crds   - regenerate crds/ from the Rust types"

## The demo: a local broker with no config, a subscriber, a publisher and a cache round trip.
demo: demo-local

demo-local:
	./scripts/demo-local.sh

## The whole test suite. .ci/run calls exactly this.
test: fmt-check lint unit

fmt-check:
	$(CARGO) fmt --all --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace --exclude starling-e2e

## Generators (their outputs are committed; tests fail when they drift).
docs:
	UPDATE_DOCS=1 $(CARGO) test -p starling-config --test docs
	$(CARGO) run -q -p starling-operator --bin crdgen -- --write-docs docs/operator.md

crds:
	$(CARGO) run -q -p starling-operator --bin crdgen > crds/brokercluster.yaml

## Benchmark smoke run (seconds, tiny counts): an embedded broker under the lossless `block`
## policy, closed and open loop, plus the cache and raw-QUIC modes. Fails on any loss.
.PHONY: bench-smoke
STARLING_BENCH = $(CARGO) run -q -p starling-client --bin starling -- bench
bench-smoke:
	$(STARLING_BENCH) --embedded --policy block --no-progress --producers 2 --subscribers 2 --topics 2 --payload 128 --batch 4 --count 4000 --warmup 200ms
	$(STARLING_BENCH) --embedded --policy block --no-progress --payload 256 --rate 5000 --count 2000 --warmup 100ms
	$(STARLING_BENCH) cache --embedded --no-progress --concurrency 4 --keys 200 --duration 300ms --warmup 100ms
	$(STARLING_BENCH) quic-limit --duration 300ms --rtt-count 200
