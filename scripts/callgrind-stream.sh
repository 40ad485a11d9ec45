#!/usr/bin/env bash
# Instructions per byte of one TCP stream through ustack over AF_PACKET,
# counted by callgrind: the evidence for large receive and send (the
# machine's throughput figures are noisy; instruction counts are not).
#
#   sudo scripts/callgrind-stream.sh recv|send BYTES PEER_TSO GRO TSO [BIN_DIR]
#
# recv: ustack-get fetches BYTES from python3's http.server in a namespace;
# send: curl in the namespace fetches /bytes/BYTES from ustack-http.
# PEER_TSO (on|off): the kernel peer's TSO and GSO; GRO ([port0] gro) and
# TSO ([dpdk] tso): 0 or 1.  Prints callgrind's total and its split: libc's
# memcpy/memset, the HTTP application, the rest (the stack, the link and
# the engine).  Run two sizes and subtract for a per-byte figure (the start
# and the handshake cancel out).  Note that callgrind counts glibc's
# `rep movsb` copies (used from about 2 KiB up) per iteration, so large
# copies weigh far more in its counts than on the CPU.
#
# Environment: LINK=af_xdp puts ustack on AF_XDP (native mode; the veth
# has one queue each way, which the one engine's socket binds) instead of
# AF_PACKET; GSO=0|1 sets `[port0] gso` (software GSO on send; unset: the
# default, off).
set -euo pipefail
MODE=$1 N=$2 PEER=$3 GRO=$4 TSO=$5 BIN=${6:-target/release}
T=ucg$$ NS=ucg$$n A=ucg$$a B=ucg$$b
. "$(dirname "$0")/veth-peer.sh"
veth_peer_up 10.99.33.1 10.99.33.2
ip netns exec "$NS" ethtool -K "$B" tso "$PEER" gso "$PEER" >/dev/null
LINK=${LINK:-af_packet}
GRO_LINE="gro=$GRO"
[ "$LINK" = af_xdp ] && GRO_LINE="xdp_mode=native"
printf '[dpdk]\nidle_sleep=100\ntso=%s\n[port0]\nlink=%s:%s\naddr=10.99.33.2/24\n%s\n' \
    "$TSO" "$LINK" "$A" "$GRO_LINE" >"$D/u.ini"
if [ -n "${GSO:-}" ]; then printf 'gso=%s\n' "$GSO" >>"$D/u.ini"; fi
CG=(valgrind --tool=callgrind --dump-instr=no --collect-jumps=no "--callgrind-out-file=$D/cg.out")
if [ "$MODE" = recv ]; then
    mkdir "$D/srv"
    head -c "$N" /dev/urandom >"$D/srv/big.bin"
    ip netns exec "$NS" python3 -m http.server 8080 --bind 10.99.33.1 --directory "$D/srv" >/dev/null 2>&1 &
    SRV=$!
    sleep 1
    "${CG[@]}" "$BIN/ustack-get" --config "$D/u.ini" -o "$D/got.bin" --timeout 120 \
        http://10.99.33.1:8080/big.bin 2>/dev/null
    cmp "$D/got.bin" "$D/srv/big.bin"
else
    "${CG[@]}" "$BIN/ustack-http" --config "$D/u.ini" >/dev/null 2>&1 &
    SRV=$!
    for _ in $(seq 60); do
        ip netns exec "$NS" curl -s -m 2 -o /dev/null http://10.99.33.2/ && break
        sleep 1
    done
    ip netns exec "$NS" curl -s -m 300 -o "$D/got.bin" "http://10.99.33.2/bytes/$N"
    [ "$(stat -c %s "$D/got.bin")" = "$N" ]
    kill -INT "$SRV"
    wait "$SRV" || true
    SRV=
fi
callgrind_annotate --auto=no --inclusive=no --threshold=100 "$D/cg.out" | python3 -c '
import re, sys
total = copy = app = 0
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+)\s+\(.*?\)\s+(.*)", line)
    if not m:
        continue
    v, name = int(m.group(1).replace(",", "")), m.group(2)
    if "PROGRAM TOTALS" in name:
        total = v
    elif "memmove" in name or "memcpy" in name or "memset" in name:
        copy += v
    elif "apps::http" in name:
        app += v
print(f"total {total} memcpy/memset {copy} application {app} rest {total - copy - app}")
'
