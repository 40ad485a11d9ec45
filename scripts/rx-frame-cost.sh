#!/usr/bin/env bash
# The kernel's receive softirq time per frame for an AF_PACKET V2 RX ring
# of ustack's kind, by slot size: a reader busy-polling the ring on core 0
# (scripts/rx-frame-cost.c, RPS puts the veth's receive there), a sender
# on core 1 (scripts/tx-frame-cost.c, 150-byte frames, bursts of 32 every
# 0.3 ms); NET_RX time on core 0 from the irq:softirq_entry/exit
# tracepoints over 2 s, divided by the frames the veth received.  The
# frames are for no address of the reader's namespace, so the kernel's
# IPv4 input drops each after the ring's copy: the same for every size.
#
#   sudo scripts/rx-frame-cost.sh [SLOT_BYTES...]     (default 2048 2112)
set -euo pipefail
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(2048 2112)
[ "$(id -u)" = 0 ] || { echo "$0: needs root (namespaces, packet sockets, perf)" >&2; exit 1; }
R=rxc$$r S=rxc$$s D=$(mktemp -d)
cleanup() {
    ip netns del "$R" 2>/dev/null || true
    ip netns del "$S" 2>/dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT
cc -O2 -Wall -o "$D/rx" "$(dirname "$0")/rx-frame-cost.c"
cc -O2 -Wall -o "$D/tx" "$(dirname "$0")/tx-frame-cost.c"
ip netns add "$R"
ip netns add "$S"
ip link add "$R" netns "$R" type veth peer name "$S" netns "$S"
# The sender's frames are for 02:00:00:00:00:01.
ip -n "$R" link set "$R" address 02:00:00:00:00:01
ip netns exec "$R" sh -c "echo 1 > /sys/class/net/$R/queues/rx-0/rps_cpus"
ip netns exec "$S" sh -c "echo 2 > /sys/class/net/$S/queues/rx-0/rps_cpus"
ip -n "$R" link set "$R" up
ip -n "$S" link set "$S" up
rx_packets() { ip netns exec "$R" cat "/sys/class/net/$R/statistics/rx_packets"; }
for round in 1 2; do
    for size in "${SIZES[@]}"; do
        ip netns exec "$R" taskset -c 0 "$D/rx" "$R" "$size" 2048 4 >"$D/rx.out" &
        RX=$!
        sleep 0.5
        ip netns exec "$S" taskset -c 1 "$D/tx" "$S" 1 150 12000 >/dev/null &
        TX=$!
        sleep 0.5
        P0=$(rx_packets)
        perf record -q -C 0 -o "$D/rx.data" -e irq:softirq_entry --filter 'vec == 3' \
            -e irq:softirq_exit --filter 'vec == 3' -- sleep 2 >/dev/null 2>&1
        P1=$(rx_packets)
        wait "$RX"
        kill "$TX" 2>/dev/null || true
        wait "$TX" 2>/dev/null || true
        perf script -i "$D/rx.data" -F time,event 2>/dev/null | awk -v f=$((P1 - P0)) -v s="$size" '
            { t = $1; sub(":", "", t) }
            $2 ~ /softirq_entry/ { at = t }
            $2 ~ /softirq_exit/ && at { sum += t - at; n++; at = 0 }
            END { printf "slot %d: %d NET_RX softirqs, %d frames, %.0f ns per frame", s, n, f, sum * 1e9 / f }'
        read -r _ _ read_n _ _ dropped _ <"$D/rx.out"
        if [ $((dropped * 100)) -gt "$read_n" ]; then
            echo " ($(cat "$D/rx.out"); over 1% dropped: the reader fell behind, not comparable)"
        else
            echo " ($(cat "$D/rx.out"))"
        fi
    done
done
