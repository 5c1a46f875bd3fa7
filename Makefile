# Starling: the two commands a newcomer runs are `make demo` and `make test`.
# Everything else here is a building block of those two, or a generator.

CARGO ?= cargo
SHELL := /bin/bash
# The one cargo profile of `make test` (Cargo.toml, `[profile.ci]`: optimised dependencies, the
# workspace at opt-level 1 with debug assertions): the unit and integration tests, bench-smoke,
# the Go client's broker and CLI, the images, the e2e test binary and the CLI the e2e tests
# drive, and the demo. One compile of the workspace serves every phase: one cargo invocation,
# scripts/cargo-build.sh, because cargo unifies features per invocation and `-p X` alone would
# compile the workspace again with other features (docs/local-cluster.md, "Test budget").
export STARLING_CARGO_PROFILE ?= ci

.PHONY: demo demo-local test test-phases deps fmt-check lint build unit e2e manifests manifests-check chart-test promtool-check docs crds help

help:
	@echo "make demo       - local Kubernetes + operator + a BrokerCluster, pub/sub through it"
	@echo "make demo-local - a broker on this machine (no Kubernetes) and a pub/sub round trip"
	@echo "make test       - the whole suite: fmt, clippy, unit/integration, manifests, e2e"
	@echo "make deps       - install/build the tools the suite and the demo use (cached, idempotent)"
	@echo "make e2e        - only the end-to-end suite (starts and stops a local cluster)"
	@echo "make docs       - regenerate the generated parts of docs/"
	@echo "make crds       - regenerate crds/, the chart CRD copy and manifests/install.yaml"

## The demo: a local single-node Kubernetes with the operator and a BrokerCluster, and a
## pub/sub round trip through its Service. `demo-local` is the same round trip without Kubernetes.
demo: deps
	./scripts/demo-k8s.sh

demo-local:
	./scripts/demo-local.sh

## The whole test suite. .ci/run calls exactly this. Cheap phases first, so a fmt or clippy
## failure shows within minutes; `deps` (the first time on a machine: Kubernetes and helm built
## from the Go module proxy, about 8 minutes) runs before the first phase that uses its tools.
## scripts/test.sh runs them in this order, starts `deps` in the background at once, keeps the
## cargo build directory in ~/.cache/starling, and prints each phase's time at the end.
## scripts/fresh-check.sh runs it on a clean clone with an empty HOME.
TEST_PHASES := fmt-check lint build unit go-client bench-smoke deps promtool-check manifests-check e2e
test:
	./scripts/test.sh

test-phases:
	@echo $(TEST_PHASES)

## Every tool from outside the Rust and Go toolchains that the suite or the demo runs: Debian
## packages, Kubernetes, etcd, CoreDNS, local-path-provisioner and helm, cached under
## ~/.cache/starling by version. A second run checks markers and returns in seconds.
deps:
	./e2e/cluster/install.sh

fmt-check:
	$(CARGO) fmt --all --check

## clippy, and no module cycles in any workspace crate (scripts/module-cycles-all.sh).
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	./scripts/module-cycles-all.sh

## The suite's one cargo build (scripts/cargo-build.sh): every library, binary, test and example
## of the workspace, the e2e test binary included, in $(STARLING_CARGO_PROFILE). A phase of its own
## so the timing table shows the compile apart from the tests; every later phase finds it fresh.
build:
	CARGO=$(CARGO) ./scripts/cargo-build.sh

## Every unit, integration and doc test but e2e (scripts/unit-tests.sh: in $(STARLING_CARGO_PROFILE),
## the test binaries two at a time, a table of their times at the end), and the release script's test.
## Its build is scripts/cargo-build.sh, the suite's one cargo build: every later phase's binaries
## (bench, the Go client's broker and CLI, the images, the e2e test binary) come out of it.
unit:
	CARGO=$(CARGO) ./scripts/unit-tests.sh
	./scripts/release-test.sh

## The Go client (clients/go): gofmt, go vet, staticcheck, go test -race with the integration,
## cluster and cross-client tests against the broker and CLI of this build, the vectors drift check.
## Its cargo calls go through scripts/cargo-unified.sh, so they select packages as the suite's
## one build does and find the unit phase's build fresh instead of compiling the workspace again.
.PHONY: go-client
go-client:
	CARGO=$(CURDIR)/scripts/cargo-unified.sh STARLING_REAL_CARGO=$(CARGO) ./clients/go/test.sh

## End-to-end: local cluster, images, chart checks, helm install, the Rust e2e suite, teardown.
e2e: deps
	./e2e/run.sh

manifests-check: deps
	./scripts/render-manifests.sh --check

chart-test: deps
	./charts/test.sh $(KUBECONFIG)

## The chart's alert rules and dashboard, with promtool (Debian's prometheus package, from
## `deps`): check rules, the alerts' unit tests, and every dashboard query parsed as PromQL.
promtool-check: deps
	./charts/promtool-check.sh

## Generators (their outputs are committed; tests fail when they drift).
docs:
	UPDATE_DOCS=1 $(CARGO) test -p starling-config --test docs
	$(CARGO) run -q -p starling-operator --bin crdgen -- --write-docs docs/operator.md

crds: deps
	$(CARGO) run -q -p starling-operator --bin crdgen > crds/brokercluster.yaml
	$(CARGO) run -q -p starling-operator --bin crdgen -- --user > crds/brokeruser.yaml
	$(CARGO) run -q -p starling-operator --bin crdgen -- --topic > crds/brokertopic.yaml
	./scripts/render-manifests.sh

manifests: deps
	./scripts/render-manifests.sh

## Benchmark smoke run (seconds, tiny counts): an embedded broker under the lossless `block`
## policy, closed and open loop, plus the cache and raw-QUIC modes. Fails on any loss.
.PHONY: bench-smoke
# The bench binary of scripts/cargo-build.sh, the suite's one build (fresh after `make unit`);
# not `cargo run -p starling-bench`, whose features differ and would compile the workspace again.
STARLING_PROFILE_DIR = $(if $(filter dev,$(STARLING_CARGO_PROFILE)),debug,$(STARLING_CARGO_PROFILE))
STARLING_BENCH = $(or $(CARGO_TARGET_DIR),target)/$(STARLING_PROFILE_DIR)/starling-bench
bench-smoke:
	CARGO=$(CARGO) ./scripts/cargo-build.sh -q
	$(STARLING_BENCH) --embedded --policy block --no-progress --producers 2 --subscribers 2 --topics 2 --payload 128 --batch 4 --count 4000 --warmup 200ms
	$(STARLING_BENCH) --embedded --policy block --no-progress --payload 256 --rate 5000 --count 2000 --warmup 100ms
	$(STARLING_BENCH) cache --embedded --no-progress --concurrency 4 --keys 200 --duration 300ms --warmup 100ms
	$(STARLING_BENCH) quic-limit --duration 300ms --rtt-count 200
