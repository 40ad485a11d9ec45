# ustack: `make demo` and `make test` work on a fresh Debian 12 machine as root.

CARGO ?= cargo
PY ?= /usr/bin/python3
FUZZ_SECONDS ?= 30

.PHONY: all deps build demo test test-unit test-interop lint fuzz fuzz-short bench clean

all: build

deps:
	./scripts/install-deps.sh

# Every program has every backend, DPDK's too (--all-features: libdpdk-dev
# comes from install-deps); the default build needs no DPDK.
build: deps
	$(CARGO) build --release --workspace --all-features

demo: build
	USTACK_ECHO=target/release/ustack-echo USTACK_HTTP=target/release/ustack-http ./scripts/demo.sh

# Every test level: lint, unit and scripted tests (including the root-only
# link tests), a short fuzz run of the RX path, netns interop with Linux.
test: build lint test-unit fuzz-short test-interop

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

test-unit:
	$(CARGO) test --workspace --release --all-features
	@# Built without the dpdk feature, link=dpdk says what the build lacks.
	$(CARGO) test -p runtime --lib setup::tests::dpdk_link_without_the_feature_says_so
	@# Which TCP conformance scripts cover which RFC section (README table).
	$(CARGO) test --release -p stack --test conformance coverage_table -- --nocapture --quiet

test-interop: build
	$(PY) tests/interop/run.py --bin-dir target/release

# Fuzzing (cargo fuzz, nightly). `make fuzz` runs until stopped.
fuzz: deps
	cd fuzz && $(CARGO) +nightly fuzz run rx_path

fuzz-short: deps
	cd fuzz && $(CARGO) +nightly fuzz run rx_path -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048
	cd fuzz && $(CARGO) +nightly fuzz run wire_parsers -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048

# ustack beside the Linux kernel, same run, same cores (needs root for
# /proc/slabinfo, valgrind, ~140 MB in /dev/shm, and an otherwise idle
# machine): about 5 minutes on 2 cores.  Results in bench/results/.
bench:
	USTACK_NO_FUZZ=1 ./scripts/install-deps.sh
	$(CARGO) build --release -p bench
	$(CARGO) run --release -q -p bench --bin ustack-bench -- run --out bench/results

clean:
	$(CARGO) clean
	rm -rf fuzz/target
