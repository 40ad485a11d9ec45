# ustack: `make demo` and `make test` work on a fresh Debian 12 machine as root.

CARGO ?= cargo
PY ?= /usr/bin/python3
FUZZ_SECONDS ?= 30
FUZZ_LONG_SECONDS ?= 3600
FUZZ_TARGETS := rx_path wire_parsers link_rx_offload
# The differential API fuzzer (crates/apidiff): in fuzz-long and `make
# fuzz-api` (libFuzzer mutating the kept corpus: it still finds open
# differences, listed in crates/apidiff/src/lib.rs), and bounded and
# deterministic in fuzz-short: the kept corpus replayed under libFuzzer
# (AddressSanitizer), then API_FUZZ_SEQUENCES random sequences drawn from
# API_FUZZ_SEED (the same ones every run).  A difference from Linux fails
# it, both traces printed.  `cargo test -p apidiff` replays the kept
# corpus in test-unit too (stable Rust).  Root.
FUZZ_LONG_TARGETS := $(FUZZ_TARGETS) api_diff
API_FUZZ_SEED ?= 1
API_FUZZ_SEQUENCES ?= 20000
SOAK_SECONDS ?= 3600

.PHONY: all deps build demo test test-unit test-interop lint fuzz fuzz-short fuzz-long fuzz-api soak scale scale-kernel bench bench-c clean install install-files c-examples

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
# link tests), short fuzz runs of the RX path and of the API against
# Linux's, netns interop with Linux.
test: build lint test-unit fuzz-short test-interop

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

test-unit:
	$(CARGO) test --workspace --release --all-features
	@# Built without the dpdk feature, link=dpdk says what the build lacks.
	$(CARGO) test -p runtime --lib setup::tests::dpdk_link_without_the_feature_says_so
	@# RFC 9293 requirements and which conformance scripts cover which RFC
	@# section (docs/tcp-conformance.md; prints the counts).
	$(CARGO) test --release -p stack --test conformance coverage_table -- --nocapture --quiet
	@# Issue 23's scale point at CI size: 30,000 idle connections between two
	@# engines, memory per connection end within its budget (see `scale`).
	$(RELEASE_DIR)/ustack-bench scale --count $(SCALE_CI_CONNS) --ports 2 --budget-bytes $(SCALE_BUDGET_BYTES)

test-interop: build c-examples
	$(PY) tests/interop/run.py --bin-dir target/release

# The C library (crates/capi): `make install PREFIX=DIR` puts libustack.so,
# libustack.a, include/ustack.h, include/fstack/*.h and the pkg-config files
# ustack.pc and ustack-fstack.pc under DIR; and `ustack run` (crates/tools,
# bin/ustack) with its LD_PRELOAD library (crates/preload,
# lib/libustack_preload.so), which it finds in ../lib from itself.
PREFIX ?= /usr/local
# Where cargo put the release build (CARGO_TARGET_DIR when set).
RELEASE_DIR := $(or $(CARGO_TARGET_DIR),target)/release
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

install: build install-files

install-files:
	install -d $(PREFIX)/lib/pkgconfig $(PREFIX)/include/fstack $(PREFIX)/bin
	install -m 0755 $(RELEASE_DIR)/libustack.so $(PREFIX)/lib/
	install -m 0755 $(RELEASE_DIR)/libustack_preload.so $(PREFIX)/lib/
	install -m 0755 $(RELEASE_DIR)/ustack $(PREFIX)/bin/
	install -m 0644 $(RELEASE_DIR)/libustack.a $(PREFIX)/lib/
	install -m 0644 include/ustack.h $(PREFIX)/include/
	install -m 0644 include/fstack/*.h $(PREFIX)/include/fstack/
	for pc in ustack ustack-fstack; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' crates/capi/pkgconfig/$$pc.pc.in \
	    > $(PREFIX)/lib/pkgconfig/$$pc.pc; \
	done

# The C examples and the ABI test, built against an installed copy of the
# library with pkg-config (warnings are errors), into target/c-examples
# (the interop suite runs them from there).
CAPI_PREFIX := $(CURDIR)/target/capi-prefix
C_EXAMPLES := $(CURDIR)/target/c-examples
C_FLAGS := -O2 -g -Wall -Wextra -Werror

c-examples: build
	rm -rf $(CAPI_PREFIX) $(C_EXAMPLES)
	$(MAKE) --no-print-directory install-files PREFIX=$(CAPI_PREFIX)
	mkdir -p $(C_EXAMPLES)
	@# F-Stack's calls beyond sockets (fstack_api_test), a program in the
	@# shape of F-Stack's examples (helloworld), and one process of its
	@# multi-process mode (fstack_multiproc), on the F-Stack headers alone.
	set -e; export PKG_CONFIG_PATH=$(CAPI_PREFIX)/lib/pkgconfig; rpath=-Wl,-rpath,$(CAPI_PREFIX)/lib; \
	cc $(C_FLAGS) -o $(C_EXAMPLES)/fstack_api_test tests/c/fstack_api_test.c $$(pkg-config --cflags --libs ustack-fstack) -lpthread $$rpath; \
	cc $(C_FLAGS) -o $(C_EXAMPLES)/helloworld tests/c/fstack_example/helloworld.c $$(pkg-config --cflags --libs ustack-fstack) $$rpath; \
	cc $(C_FLAGS) -DINET6 -o $(C_EXAMPLES)/helloworld6 tests/c/fstack_example/helloworld.c $$(pkg-config --cflags --libs ustack-fstack) $$rpath; \
	cc $(C_FLAGS) -o $(C_EXAMPLES)/fstack_multiproc tests/c/fstack_multiproc.c $$(pkg-config --cflags --libs ustack-fstack) $$rpath
	set -e; export PKG_CONFIG_PATH=$(CAPI_PREFIX)/lib/pkgconfig; rpath=-Wl,-rpath,$(CAPI_PREFIX)/lib; \
	for ex in echo_native http_native; do \
	  cc $(C_FLAGS) -o $(C_EXAMPLES)/$$ex examples/c/$$ex.c $$(pkg-config --cflags --libs ustack) $$rpath; \
	done; \
	for ex in echo_fstack http_fstack; do \
	  cc $(C_FLAGS) -o $(C_EXAMPLES)/$$ex examples/c/$$ex.c $$(pkg-config --cflags --libs ustack-fstack) $$rpath; \
	done; \
	cc $(C_FLAGS) -o $(C_EXAMPLES)/abi_test tests/c/abi_test.c $$(pkg-config --cflags --libs ustack) -lpthread $$rpath
	@# A plain Linux program (no ustack header) that cases_preload.py runs under `ustack run`.
	cc $(C_FLAGS) -o $(C_EXAMPLES)/mixed_wait tests/c/mixed_wait.c -lpthread
	cc $(C_FLAGS) -o $(C_EXAMPLES)/refused_child tests/c/refused_child.c
	@# Fortified, so that it calls the __*_chk forms glibc's headers choose.
	cc $(C_FLAGS) -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 -o $(C_EXAMPLES)/fortified_calls tests/c/fortified_calls.c

# Fuzzing (cargo fuzz, nightly). `make fuzz` runs until stopped.
fuzz: deps
	cd fuzz && $(CARGO) +nightly fuzz run rx_path

# The kept corpus (fuzz/seeds, made by scripts/fuzz-seeds.py, api_diff's by
# crates/apidiff/src/seeds.rs, and grown by
# fuzz-long) is read; a short run's finds go to fuzz/corpus (not kept).
fuzz-short: deps
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/corpus/$$t && \
	  (cd fuzz && $(CARGO) +nightly fuzz run $$t corpus/$$t seeds/$$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048) || exit 1; \
	done
	rm -rf fuzz/corpus/api_diff_short && mkdir -p fuzz/corpus/api_diff_short
	cd fuzz && $(CARGO) +nightly fuzz run api_diff corpus/api_diff_short seeds/api_diff -- -runs=0 -rss_limit_mb=2048
	APIDIFF_RANDOM=$(API_FUZZ_SEQUENCES) APIDIFF_SEED=$(API_FUZZ_SEED) \
	  $(CARGO) test --release -p apidiff --test corpus random_sequences -- --ignored --nocapture

# The API fuzzer alone for FUZZ_SECONDS, its finds in fuzz/corpus (root).
fuzz-api: deps
	mkdir -p fuzz/corpus/api_diff
	cd fuzz && $(CARGO) +nightly fuzz run api_diff corpus/api_diff seeds/api_diff -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048

# Not in `make test`: each target for FUZZ_LONG_SECONDS (default an hour),
# what it finds added to the kept corpus fuzz/seeds/<target> (commit it).
fuzz-long: deps
	for t in $(FUZZ_LONG_TARGETS); do \
	  (cd fuzz && $(CARGO) +nightly fuzz run $$t seeds/$$t -- -max_total_time=$(FUZZ_LONG_SECONDS) -rss_limit_mb=2048) || exit 1; \
	done

# Not in `make test`: ten million connections through one stack (churn:
# TIME-WAIT recycled, nothing left behind), then an hour (SOAK_SECONDS) of
# mixed load on ustack-http and ustack-echo (tests/interop/soak.py); memory
# and counters sampled, a flat line is the pass.
soak: build c-examples
	$(CARGO) test --release -p stack --test churn -- --ignored --nocapture
	USTACK_SOAK=1 USTACK_SOAK_SECONDS=$(SOAK_SECONDS) $(PY) tests/interop/run.py --bin-dir target/release -k soak_

# One engine holding SCALE_CONNS established idle connections (from a second
# engine in the same thread, over the shared-memory link, spread over
# SCALE_PORTS server ports), then idle for 3 s: prints the time to establish
# them and the memory per connection end (anonymous RSS growth plus the
# kernel's socket caches), and fails over SCALE_BUDGET_BYTES. A million
# takes about 4 GB and a few minutes here.
SCALE_CONNS ?= 1000000
SCALE_PORTS ?= 40
SCALE_CI_CONNS ?= 30000
SCALE_BUDGET_BYTES ?= 2000
scale: build
	$(RELEASE_DIR)/ustack-bench scale --count $(SCALE_CONNS) --ports $(SCALE_PORTS) --budget-bytes $(SCALE_BUDGET_BYTES)

# The same from the kernel's side: one ustack-echo (AF_PACKET on a veth)
# holding SCALE_KERNEL_CLIENTS x SCALE_KERNEL_PER_CLIENT established idle
# connections from that many kernel client processes in the peer namespace
# (each under the 20,000 open files a process may have, on an address of
# its own), then idle for 3 s: prints the time to establish them, each
# client's count, ustack's RSS growth per connection (its kernel objects,
# one AF_PACKET socket and ring, do not grow with connections) beside the
# kernel clients' slab growth per socket, and fails over
# SCALE_KERNEL_BUDGET_BYTES, when a client fails, past SCALE_KERNEL_TIMEOUT
# seconds (saying where each client was), or with under 4 GiB of the
# machine's memory available.  A million takes about 6 GB (most of it the
# kernel's sockets) and a few minutes here.  The 30,000-connection size of
# the same case runs in test-interop.
SCALE_KERNEL_CLIENTS ?= 60
SCALE_KERNEL_PER_CLIENT ?= 16667
SCALE_KERNEL_TIMEOUT ?= 900
SCALE_KERNEL_BUDGET_BYTES ?= 2000
# The engine's own TCP memory budget (net.inet.tcp.memory_budget_mb): the
# million must fit in it with no handshake refused.
SCALE_KERNEL_ENGINE_BUDGET_MB ?= 2048
scale-kernel: build
	USTACK_SCALE_KERNEL_CLIENTS=$(SCALE_KERNEL_CLIENTS) USTACK_SCALE_KERNEL_PER_CLIENT=$(SCALE_KERNEL_PER_CLIENT) \
	USTACK_SCALE_KERNEL_TIMEOUT=$(SCALE_KERNEL_TIMEOUT) USTACK_SCALE_KERNEL_BUDGET_BYTES=$(SCALE_KERNEL_BUDGET_BYTES) \
	USTACK_SCALE_KERNEL_ENGINE_BUDGET_MB=$(SCALE_KERNEL_ENGINE_BUDGET_MB) \
	$(PY) tests/interop/run.py --bin-dir $(RELEASE_DIR) -k scale_kernel_clients_af_packet

# ustack beside the Linux kernel, same run, same cores (needs root for
# /proc/slabinfo, valgrind, ~140 MB in /dev/shm, and an otherwise idle
# machine): under 15 minutes on 2 cores.  Results in bench/results/.
# The nginx workload runs nginx under `ustack run`: the launcher (tools) and
# libustack_preload.so (preload) beside ustack-bench.
# The rows through the C ABI and `ustack run` run crates/bench/c/pingpong.c,
# built by bench-c against an installed copy of the library (pkg-config), as a
# user builds: pingpong (Linux sockets: the kernel's side, and the program
# `ustack run` launches), pingpong_capi (ustack.h) and pingpong_ff (ff_api.h
# with kqueue).  The rust_async rows run ustack-bench's own server and client
# written on the async Rust API (crates/bench/src/rust_async.rs).  The chart is
# bench/results/latest.svg.
BENCH_ARGS ?=
bench:
	USTACK_NO_FUZZ=1 ./scripts/install-deps.sh
	$(CARGO) build --release -p bench -p tools -p preload -p capi
	$(MAKE) --no-print-directory bench-c
	$(CARGO) run --release -q -p bench --bin ustack-bench -- run --out bench/results $(BENCH_ARGS)

BENCH_PREFIX := $(CURDIR)/target/bench-prefix
C_BENCH := $(CURDIR)/target/c-bench

bench-c:
	rm -rf $(BENCH_PREFIX) $(C_BENCH)
	$(MAKE) --no-print-directory install-files PREFIX=$(BENCH_PREFIX)
	mkdir -p $(C_BENCH)
	set -e; export PKG_CONFIG_PATH=$(BENCH_PREFIX)/lib/pkgconfig; rpath=-Wl,-rpath,$(BENCH_PREFIX)/lib; \
	cc $(C_FLAGS) -o $(C_BENCH)/pingpong crates/bench/c/pingpong.c; \
	cc $(C_FLAGS) -DUSE_USTACK -o $(C_BENCH)/pingpong_capi crates/bench/c/pingpong.c $$(pkg-config --cflags --libs ustack) $$rpath; \
	cc $(C_FLAGS) -DUSE_FF -o $(C_BENCH)/pingpong_ff crates/bench/c/pingpong.c $$(pkg-config --cflags --libs ustack-fstack) $$rpath

clean:
	$(CARGO) clean
	rm -rf fuzz/target
