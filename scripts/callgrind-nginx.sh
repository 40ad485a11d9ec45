#!/usr/bin/env bash
# Instructions and syscalls per request of nginx under `ustack run`, the
# keep-alive workload of `make bench` (nginx_preload_keepalive_600b: the
# same nginx configuration, a 600-byte page, sendfile and tcp_nopush on,
# AF_PACKET, idle_sleep=0), counted by callgrind and strace: the evidence
# for the preload's fast paths (the machine's throughput figures are
# noisy; instruction counts are not).
#
#   sudo scripts/callgrind-nginx.sh callgrind|strace|perf|record [SECONDS] [BIN_DIR]
#
# nginx (master and one worker, as the bench) runs in the root namespace
# over a veth whose peer, in a namespace of its own (10.99.87.1), runs
# wrk -t1 -c20.  callgrind: the worker's counters are zeroed after a
# warm-up and dumped after SECONDS of load; prints, per request, the
# total, each object's part, the interposed calls' inclusive cost
# (epoll_pwait's includes the engine's turns, idle ones too, so it varies
# with the load; the rest does not) and the heaviest functions
# (scripts/callgrind-split.py).  strace: syscalls per request over the
# same load (strace -c on the worker, attached after the warm-up).  perf:
# the same count from the kernel's syscall tracepoints (`perf stat`), which
# slows the worker far less than strace (under strace a busy-polling
# worker finds less to do and spins more, so its idle syscalls dominate);
# it also gives the root namespace's IpInReceives and IpInAddrErrors per
# request (the kernel's IPv4 input handling ustack's frames, which
# `[port0] kernel_rx_drop` stops; USTACK_PORT_KEYS='kernel_rx_drop=0'
# compares).  record: `perf record` of the worker over wrk's window, its
# heaviest symbols by share of samples: what callgrind cannot weigh (a
# clock read is a ~55 ns vDSO call in this VM, which callgrind counts as a
# syscall of a few instructions).
set -euo pipefail
MODE=$1 SECS=${2:-10} BIN=${3:-target/release}
NS=ucn$$n A=ucn$$a B=ucn$$b
. "$(dirname "$0")/veth-peer.sh"
veth_peer_up 10.99.87.1 10.99.87.2
ethtool -K "$A" tso off gso off >/dev/null
ip netns exec "$NS" ethtool -K "$B" tso off gso off >/dev/null
# USTACK_PORT_KEYS: more [port0] lines (e.g. kernel_rx_drop=0).
printf '[dpdk]\nidle_sleep=0\n[port0]\nlink=af_packet:%s\naddr=10.99.87.2/24\n%b\n' "$A" \
    "${USTACK_PORT_KEYS:-}" >"$D/u.ini"
# The root namespace's IPv4 input counters (nginx's side): what the kernel
# does besides ustack with the frames ustack receives (kernel_rx_drop).
ip_mib() { awk -v k="$1" '/^Ip:/ { if (!n) { for (i = 1; i <= NF; i++) if ($i == k) c = i; n = 1 } else print $c }' /proc/net/snmp; }
. "$(dirname "$0")/bench-nginx-site.sh"
bench_nginx_site "$D"
case "$MODE" in
callgrind)
    TRACE=(valgrind --tool=callgrind --dump-instr=no --collect-jumps=no --trace-children=yes
        "--callgrind-out-file=$D/cg.out.%p")
    ;;
strace|perf|record) TRACE=() ;;
*)
    echo "mode: callgrind, strace, perf or record" >&2
    exit 2
    ;;
esac
"$BIN/ustack" run --config "$D/u.ini" -- "${TRACE[@]}" nginx -c "$D/nginx.conf" \
    >"$D/nginx.stdout" 2>&1 &
SRV=$!
for _ in $(seq 120); do
    ip netns exec "$NS" curl -s -m 2 -o "$D/got" http://10.99.87.2/index.html && break
    sleep 1
done
cmp "$D/got" "$D/www/index.html"
WRK=(ip netns exec "$NS" wrk -t1 -c20)
"${WRK[@]}" -d2s http://10.99.87.2/index.html >"$D/warm.out"
MASTER=$(cat "$D/nginx.pid")
WORKER=$(pgrep -P "$MASTER" | head -1)
if [ "$MODE" = callgrind ]; then
    callgrind_control -z "$WORKER" >/dev/null
    "${WRK[@]}" "-d${SECS}s" http://10.99.87.2/index.html | tee "$D/wrk.out"
    callgrind_control -d "$WORKER" >/dev/null
    sleep 1
    DUMP=$(ls -t "$D"/cg.out."$WORKER"* | head -1)
    # CALLGRIND_KEEP=FILE keeps the dump for callgrind_annotate.
    [ -n "${CALLGRIND_KEEP:-}" ] && cp "$DUMP" "$CALLGRIND_KEEP"
elif [ "$MODE" = record ]; then
    perf record -F 2999 -p "$WORKER" -o "$D/perf.data" -- sleep "$SECS" 2>/dev/null &
    ST=$!
    "${WRK[@]}" "-d${SECS}s" http://10.99.87.2/index.html | tee "$D/wrk.out"
    wait "$ST"
elif [ "$MODE" = perf ]; then
    EV=$(perf list --raw-dump tracepoint 2>/dev/null | tr ' ' '\n' | grep '^syscalls:sys_enter_' | paste -sd,)
    # Counted over wrk's window only: an idle worker spins too.
    perf stat -x, -e "$EV" -p "$WORKER" -o "$D/perf.out" -- sleep "$SECS" &
    ST=$!
    IN0=$(ip_mib InReceives) AE0=$(ip_mib InAddrErrors)
    "${WRK[@]}" "-d${SECS}s" http://10.99.87.2/index.html | tee "$D/wrk.out"
    IN1=$(ip_mib InReceives) AE1=$(ip_mib InAddrErrors)
    wait "$ST"
else
    strace -c -p "$WORKER" -o "$D/strace.out" &
    ST=$!
    sleep 0.3
    "${WRK[@]}" "-d${SECS}s" http://10.99.87.2/index.html | tee "$D/wrk.out"
    kill -INT "$ST"
    wait "$ST" || true
fi
REQS=$(awk '/requests in/ {print $1}' "$D/wrk.out")
grep -q "Socket errors" "$D/wrk.out" && { echo "wrk saw socket errors" >&2; exit 1; }
if [ "$MODE" = callgrind ]; then
    # The total, each object's part, the interposed calls (inclusive) and
    # the heaviest functions, per request.
    python3 "$(dirname "$0")/callgrind-split.py" "$DUMP" "$REQS" \
        epoll_pwait recv writev sendfile64 setsockopt close
elif [ "$MODE" = record ]; then
    echo "requests $REQS; the worker's heaviest symbols (share of its samples):"
    perf report -i "$D/perf.data" --no-children --sort sym,dso --stdio 2>/dev/null |
        grep -v '^#' | grep -v '^$' | head -30
elif [ "$MODE" = perf ]; then
    echo "requests $REQS"
    awk -v r="$REQS" -v i="$((IN1 - IN0))" -v a="$((AE1 - AE0))" 'BEGIN {
        printf "  IpInReceives  %10d  %.3f per request (root namespace)\n", i, i / r
        printf "  IpInAddrErrors %9d  %.3f per request\n", a, a / r }'
    awk -F, -v r="$REQS" '$3 ~ /sys_enter_/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
        sub(/.*sys_enter_/, "", $3)
        t += $1
        printf "  %-16s %10d calls  %.3f per request\n", $3, $1, $1 / r }
        END { printf "  %-16s %10d calls  %.3f per request\n", "total", t, t / r }' "$D/perf.out"
else
    echo "requests $REQS"
    awk -v r="$REQS" '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {
        c = $4
        printf "  %-16s %10d calls  %.3f per request\n", $NF, c, c / r }' "$D/strace.out"
fi
