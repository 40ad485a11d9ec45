#!/usr/bin/env bash
# Installs what building and testing ustack needs on Debian 12, as root.
# Safe to run again: it installs only what is missing.
set -euo pipefail

apt_packages=(
  build-essential pkg-config iproute2 iputils-ping ethtool socat netcat-openbsd procps
  tcpdump python3 python3-scapy valgrind curl wrk
  # DPDK 22.11 for the dpdk feature (link=dpdk): libraries, PMDs, headers.
  dpdk dpdk-dev libdpdk-dev
)

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
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
