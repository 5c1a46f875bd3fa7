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
	$(CARGO) test --workspace

## Generators (their outputs are committed; tests fail when they drift).
docs:
	UPDATE_DOCS=1 $(CARGO) test -p starling-config --test docs
	$(CARGO) run -q -p starling-operator --bin crdgen -- --write-docs docs/operator.md

crds:
	$(CARGO) run -q -p starling-operator --bin crdgen > crds/brokercluster.yaml
