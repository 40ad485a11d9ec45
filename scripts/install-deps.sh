#!/usr/bin/env bash
# Installs what building and testing ustack needs on Debian 12, as root.
# Safe to run again: it installs only what is missing.
set -euo pipefail

apt_packages=(
  build-essential pkg-config iproute2 iputils-ping ethtool socat netcat-openbsd procps
  tcpdump python3 python3-scapy valgrind curl wrk
  # nft: firewall rules in the kernel's namespace (ICMP rejects, interop).
  nftables
  # DPDK 22.11 for the dpdk feature (link=dpdk): libraries, PMDs, headers.
  dpdk dpdk-dev libdpdk-dev
  # Unmodified programs under `ustack run` (tests/interop/cases_preload.py):
  # servers, their load generators and clients, and strace for looking at
  # which calls they make.
  nginx redis-server redis-tools knot bind9-dnsutils dnsperf iperf3 strace
  # The libxdp feature (`[portN] xdp_program=libxdp`): clang builds the XDP
  # program (crates/link/bpf/ustack_xdp.c), libxdp loads it; xdp-tools'
  # xdp-loader puts another program beside it in the tests.
  clang libbpf-dev libxdp-dev xdp-tools
  # `ustack top` in a terminal (tests/interop/cases_ctl.py).
  tmux
)
# The services these packages install (nginx, redis-server, knot) and iperf3's
# optional one must not run: the tests start their own copies in network
# namespaces with configs of their own, and a system copy would hold port 80,
# 6379 and 53 on the host, spend CPU during benchmarks and keep files the
# tests' copies open (redis' dump, knot's database).  So the install runs with
# a policy-rc.d that forbids starting services (exit 101, the convention
# invoke-rc.d and deb-systemd-invoke honour; one that is there already, such
# as Docker's, is left alone), and afterwards each service is stopped and
# disabled, in case a policy that was already there let it start, and so that
# a reboot does not start it either.
services=(nginx redis-server knot iperf3)
# iperf3 asks with debconf whether to start its daemon: no.
debconf_preseed="iperf3 iperf3/start_daemon boolean false"

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: apt packages: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: must run as root to install packages" >&2
    exit 1
  fi
  apt-get update -qq
  echo "$debconf_preseed" | debconf-set-selections
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# install-deps.sh: no service starts while it installs\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  for svc in "${services[@]}"; do
    if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
      systemctl disable --now "$svc" >/dev/null 2>&1 || true
    else
      [ -x "/etc/init.d/$svc" ] && "/etc/init.d/$svc" stop >/dev/null 2>&1 || true
      update-rc.d "$svc" disable >/dev/null 2>&1 || true
    fi
  done
fi

if ! command -v cargo >/dev/null; then
  echo "install-deps: cargo (Rust stable) is required" >&2
  exit 1
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt

# Fuzzing needs a nightly toolchain (libFuzzer's sanitizer flags) and cargo-fuzz.
if [ "${USTACK_NO_FUZZ:-0}" != 1 ]; then
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "install-deps: cargo install cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
  fi
fi
echo "install-deps: ok"
