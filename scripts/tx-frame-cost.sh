#!/usr/bin/env bash
# The kernel's cost per frame sent through ustack's kind of AF_PACKET TX
# ring to a veth, with the virtio_net_hdr's hdr_len 0 (the frame's bytes
# after the Ethernet header attached as ring pages, which the veth must
# copy into new pages) and the whole frame (copied into the socket
# buffer), in the sending thread's CPU time (scripts/tx-frame-cost.c).
# The placement is the nginx bench's: the sender on core 0, the peer's
# receive on core 1 (RPS).  Times are CPU time of the sender only, but a
# loaded machine still moves them: compare the two in the same run.
#
#   sudo scripts/tx-frame-cost.sh [BURSTS] [FRAME_BYTES...]
set -euo pipefail
BURSTS=${1:-5000}
shift || true
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(66 654 1514)
[ "$(id -u)" = 0 ] || { echo "$0: needs root (namespaces, packet sockets)" >&2; exit 1; }
NSS=txc$$s NSC=txc$$c D=$(mktemp -d)
cleanup() {
    ip netns del "$NSS" 2>/dev/null || true
    ip netns del "$NSC" 2>/dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT
cc -O2 -Wall -o "$D/tx-frame-cost" "$(dirname "$0")/tx-frame-cost.c"
for ns in "$NSS" "$NSC"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
done
# 10.99.150.0/24: the frames' addresses (scripts/tx-frame-cost.c).
ip link add "$NSS" netns "$NSS" type veth peer name "$NSC" netns "$NSC"
ip -n "$NSC" link set "$NSC" address 02:00:00:00:00:01
ip -n "$NSC" addr add 10.99.150.1/24 dev "$NSC"
for x in "$NSS 1" "$NSC 2"; do
    set -- $x
    ip netns exec "$1" ethtool -K "$1" tso off gso off >/dev/null
    ip netns exec "$1" sh -c "echo $2 > /sys/class/net/$1/queues/rx-0/rps_cpus"
    ip -n "$1" link set "$1" up
done
for size in "${SIZES[@]}"; do
    for round in 1 2; do
        for whole in 0 1; do
            ip netns exec "$NSS" taskset -c 0 "$D/tx-frame-cost" "$NSS" "$whole" "$size" "$BURSTS"
        done
    done
done
