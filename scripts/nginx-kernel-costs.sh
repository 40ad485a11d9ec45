#!/usr/bin/env bash
# What the kernel costs the nginx worker's core per request, on the kernel
# and under `ustack run`, in the placement of `make bench`'s
# nginx_preload_keepalive_600b row (crates/bench/src/nginx.rs): nginx
# (master and one worker) pinned to core 0 in a server namespace, wrk -t1
# -c100 pinned to core 1 in a client namespace, a veth between them with
# TSO/GSO off and RPS on both ends (each side's receive on its own core),
# ustack on AF_PACKET with idle_sleep=0 and the default pkt_tx_delay.
#
#   sudo scripts/nginx-kernel-costs.sh [SECONDS] [BIN_DIR] [kernel|ustack|both]
#
# Per request, over wrk's window (after a 2 s warm-up), for each stack:
# - core 0's time (/proc/stat) split into user, system, softirq and irq;
# - IPIs core 0 sent (tracepoints ipi:ipi_send_cpu/cpumask on core 0) and
#   received (/proc/interrupts CAL, RES, TLB, LOC, IWI);
# - softirqs run on core 0 by kind (/proc/softirqs);
# - the worker's page faults (/proc/PID/stat) and context switches
#   (/proc/PID/status), and core 0's as a whole (perf software events);
# - the worker's system calls by kind (syscall tracepoints, `perf stat -p`);
# - frames each way on the server's end of the veth, and under ustack its
#   transmit kicks (the worker's `sendto`s: AF_PACKET's TX ring is kicked
#   with a zero-length send) and frames per kick, and the engine's own
#   flush count (`tx_bursts`, from `ustack run --stats`).
# Then, over a second window, durations from tracepoints (robust to the
# load, unlike samples): core 0's NET_RX softirq time per request and per
# frame received, and the worker's time in each kind of system call per
# request (a softirq run inside a call is counted as softirq, not call).
# PERF_RECORD=PREFIX also records core 0 with the cpu-clock software event
# over a third window (PREFIX.kernel.data, PREFIX.ustack.data) and prints
# the top of `perf report` for each.
# USTACK_PORT_KEYS / USTACK_DPDK_KEYS: more [port0] / [dpdk] lines.
#
# The machine is shared: core-wide figures (core 0's time, IPIs,
# softirqs) include whatever else ran there; the worker's own figures
# (faults, switches, system calls) do not.  perf's counting slows both
# stacks a little; requests/s here is not the bench's figure.
set -euo pipefail
SECS=${1:-5} BIN=${2:-target/release} WHICH=${3:-both}
[ "$(id -u)" = 0 ] || { echo "$0: needs root (namespaces, perf on core 0)" >&2; exit 1; }
for t in nginx wrk curl taskset perf ethtool python3; do
    command -v "$t" >/dev/null || { echo "$0: $t not installed" >&2; exit 1; }
done
case "$WHICH" in kernel | ustack | both) ;; *) echo "$0: kernel, ustack or both" >&2; exit 2 ;; esac
# 10.99.148.0/24: this script's subnet (the interop suite's are unique).
SIP=10.99.148.2 CIP=10.99.148.1
NSS=nkc$$s NSC=nkc$$c IS=nkc$$s IC=nkc$$c
D=$(mktemp -d)
NGINX_PID=
cleanup() {
    if [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null; then
        sleep 0.5
        kill -9 -- "-$NGINX_PID" 2>/dev/null || true
    fi
    ip netns del "$NSS" 2>/dev/null || true
    ip netns del "$NSC" 2>/dev/null || true
    rm -rf "$D"
}
trap cleanup EXIT

for ns in "$NSS" "$NSC"; do
    ip netns add "$ns"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$ns" link set lo up
done
ip link add "$IS" netns "$NSS" type veth peer name "$IC" netns "$NSC"
ip -n "$NSC" addr add "$CIP/24" dev "$IC"
for x in "$NSS $IS 1" "$NSC $IC 2"; do
    set -- $x
    ip netns exec "$1" ethtool -K "$2" tso off gso off >/dev/null
    ip netns exec "$1" sh -c "echo $3 > /sys/class/net/$2/queues/rx-0/rps_cpus"
    ip -n "$1" link set "$2" up
done

. "$(dirname "$0")/bench-nginx-site.sh"
bench_nginx_site "$D"
printf '[dpdk]\nidle_sleep=0\n%b\n[port0]\nlink=af_packet:%s\naddr=%s/24\n%b\n' \
    "${USTACK_DPDK_KEYS:-}" "$IS" "$SIP" "${USTACK_PORT_KEYS:-}" >"$D/u.ini"

URL=http://$SIP/index.html
SYSCALLS=$(perf list --raw-dump tracepoint 2>/dev/null | tr ' ' '\n' | grep '^syscalls:sys_enter_' | paste -sd,)
wrk_for() { ip netns exec "$NSC" taskset -c 1 wrk -t1 -c100 "-d${1}s" "$URL"; }
# The core-wide and per-worker counters, one "key value" a line.
snapshot() {
    local w=$1
    awk '$1 == "cpu0" { printf "cpu_user %d\ncpu_nice %d\ncpu_sys %d\ncpu_idle %d\ncpu_iowait %d\ncpu_irq %d\ncpu_softirq %d\ncpu_steal %d\n", $2, $3, $4, $5, $6, $7, $8, $9 }' /proc/stat
    awk '$1 ~ /^(CAL|RES|TLB|LOC|IWI|CAL):$/ { k = $1; sub(":", "", k); printf "irq_%s_cpu0 %d\nirq_%s_cpu1 %d\n", k, $2, k, $3 }' /proc/interrupts
    awk 'NR > 1 { k = $1; sub(":", "", k); printf "softirq_%s %d\n", k, $2 }' /proc/softirqs
    # minflt (10), majflt (12), after the command's closing parenthesis.
    sed 's/.*) //' "/proc/$w/stat" | awk '{ printf "worker_minflt %d\nworker_majflt %d\nworker_utime %d\nworker_stime %d\n", $8, $10, $12, $13 }'
    awk '/^voluntary_ctxt_switches/ { print "worker_vcsw", $2 } /^nonvoluntary_ctxt_switches/ { print "worker_ivcsw", $2 }' "/proc/$w/status"
    for d in rx_packets tx_packets; do
        echo "veth_$d $(ip netns exec "$NSS" cat "/sys/class/net/$IS/statistics/$d")"
    done
    if [ -f "$D/stats.$w" ]; then
        grep -E '^(engine_(tx_bursts|loops|idle_us)|port0_link_(tx_frames|rx_frames|tx_kick_short)) ' "$D/stats.$w" | sed 's/^/ustack_/'
    fi
}

# run STACK: a fresh nginx on STACK, warmed up, measured; writes
# $D/STACK.{before,after,cpu0,worker,wrk}.
run() {
    local stack=$1 launch=()
    ip -n "$NSS" addr flush dev "$IS"
    ip -n "$NSC" neigh flush dev "$IC"
    rm -f "$D/nginx.pid" "$D"/stats.*
    if [ "$stack" = kernel ]; then
        ip -n "$NSS" addr add "$SIP/24" dev "$IS"
    else
        launch=("$BIN/ustack" run --config "$D/u.ini" --stats "$D/stats" --)
    fi
    setsid ip netns exec "$NSS" taskset -c 0 "${launch[@]}" nginx -c "$D/nginx.conf" \
        >"$D/$stack.nginx.out" 2>&1 &
    NGINX_PID=$!
    for _ in $(seq 100); do
        ip netns exec "$NSC" curl -s -m 2 -o "$D/got" "$URL" && break
        sleep 0.2
    done
    cmp -s "$D/got" "$D/www/index.html" || { echo "$stack: nginx did not serve the page" >&2; cat "$D/$stack.nginx.out" >&2; exit 1; }
    local master worker
    master=$(cat "$D/nginx.pid")
    worker=$(pgrep -P "$master" | head -1)
    wrk_for 2 >/dev/null
    perf stat -x, -C 0 -e cpu-clock,page-faults,context-switches,cpu-migrations,ipi:ipi_send_cpu,ipi:ipi_send_cpumask,irq:softirq_raise \
        -o "$D/$stack.cpu0" -- sleep "$SECS" 2>/dev/null &
    local p1=$!
    perf stat -x, -p "$worker" -e "page-faults,context-switches,$SYSCALLS" -o "$D/$stack.worker" -- sleep "$SECS" 2>/dev/null &
    local p2=$!
    snapshot "$worker" >"$D/$stack.before"
    wrk_for "$SECS" >"$D/$stack.wrk"
    snapshot "$worker" >"$D/$stack.after"
    wait "$p1" "$p2"
    # The timing window: core 0's NET_RX softirqs and the worker's system
    # calls, each from its entry to its exit (durations, not samples).
    perf record -q -C 0 -o "$D/$stack.trace" \
        -e irq:softirq_entry --filter 'vec == 3' -e irq:softirq_exit --filter 'vec == 3' \
        -e raw_syscalls:sys_enter --filter "common_pid == $worker" \
        -e raw_syscalls:sys_exit --filter "common_pid == $worker" \
        -- sleep "$SECS" >/dev/null 2>&1 &
    local p3=$!
    snapshot "$worker" >"$D/$stack.tbefore"
    wrk_for "$SECS" >"$D/$stack.twrk"
    snapshot "$worker" >"$D/$stack.tafter"
    wait "$p3"
    perf script -i "$D/$stack.trace" -F time,event,trace >"$D/$stack.events" 2>/dev/null
    if [ -n "${PERF_RECORD:-}" ]; then
        perf record -q -e cpu-clock -C 0 -g -o "$PERF_RECORD.$stack.data" -- sleep "$SECS" >/dev/null 2>&1 &
        local p4=$!
        wrk_for "$SECS" >"$D/$stack.wrk2"
        wait "$p4"
    fi
    grep -q "Socket errors" "$D/$stack.wrk" && { echo "$stack: wrk saw socket errors" >&2; cat "$D/$stack.wrk" >&2; exit 1; }
    kill -TERM "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=
}

STACKS=()
case "$WHICH" in both) STACKS=(kernel ustack) ;; *) STACKS=("$WHICH") ;; esac
for s in "${STACKS[@]}"; do
    run "$s"
done
python3 "$(dirname "$0")/nginx-kernel-costs.py" "$D" "${STACKS[@]}"
if [ -n "${PERF_RECORD:-}" ]; then
    for s in "${STACKS[@]}"; do
        echo "== perf record -e cpu-clock -C 0, $s: the top of core 0 by object and symbol"
        perf report -i "$PERF_RECORD.$s.data" --no-children --sort dso,sym --stdio 2>/dev/null |
            grep -E '^ +[0-9]' | head -40
    done
fi
