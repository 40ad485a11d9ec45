#!/usr/bin/env bash
# ustack talking to the Linux kernel, with the kernel's own tools.
#
#   sudo scripts/demo.sh   (USTACK_ECHO=path, USTACK_HTTP=path override the binaries)
#
# 1. AF_PACKET: a veth pair between two network namespaces; ustack-echo on
#    one end (10.99.50.2), the kernel on the other (10.99.50.1): ping, UDP
#    and TCP echo with socat.
# 2. TCP: ustack-http on the same veth, curl from the kernel's side.
# 3. TAP: ustack-echo creates a TAP device; the kernel's side of it gets
#    10.99.51.1, ustack is 10.99.51.2.
# Every command is printed with its output.  Nothing is built here, and the
# root namespace is not touched: everything lives in namespaces that are
# deleted on exit, Ctrl-C included.  Exit status: 0 when every step worked.

set -u
set -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
USTACK_ECHO=${USTACK_ECHO:-$ROOT/target/release/ustack-echo}
USTACK_HTTP=${USTACK_HTTP:-$(dirname "$USTACK_ECHO")/ustack-http}
TAG=usd$$                         # names of everything created here
NS_K=${TAG}k                      # the kernel's namespace
NS_U=${TAG}u                      # ustack's namespace (AF_PACKET part)
VETH_K=${TAG}k0                   # <= 15 characters
VETH_U=${TAG}u0
TAP=${TAG}t0
WORK=$(mktemp -d /tmp/ustack-demo.XXXXXX)
PIDS=()
FAILED=0

if [ -t 1 ]; then B=$'\e[1m'; G=$'\e[32m'; R=$'\e[31m'; D=$'\e[2m'; N=$'\e[0m'; else B= G= R= D= N=; fi

cleanup() {
    trap - EXIT INT TERM
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do
        for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
    done
    ip netns del "$NS_U" 2>/dev/null
    ip netns del "$NS_K" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo; echo "${R}interrupted${N}"; exit 130' INT TERM

title() { printf '\n%s== %s ==%s\n' "$B" "$*" "$N"; }
note() { printf '%s# %s%s\n' "$D" "$*" "$N"; }

# run CMD...: prints the command, runs it (10 s at most), indents its output.
run() {
    printf '%s$ %s%s\n' "$B" "$*" "$N"
    local out rc
    out=$(timeout 10 "$@" 2>&1); rc=$?
    [ -n "$out" ] && printf '%s\n' "$out" | sed 's/^/    /'
    if [ $rc -ne 0 ]; then printf '    %s(failed, exit %d)%s\n' "$R" "$rc" "$N"; FAILED=1; fi
    return $rc
}

# setup CMD...: a quiet setup step; any failure ends the demo.
setup() {
    local out
    if ! out=$(timeout 10 "$@" 2>&1); then
        printf '%ssetup failed: %s%s\n%s\n' "$R" "$*" "$N" "$out"
        exit 1
    fi
}

# udp_echo NS ADDR TEXT [SHOWN]: sends TEXT to ADDR:7 with socat, checks
# the echo; SHOWN is how the command line shows TEXT.
udp_echo() {
    local ns=$1 addr=$2 text=$3 shown=${4:-"'$3'"} got
    printf '%s$ echo %s | ip netns exec %s socat -t 1 - UDP:%s:7%s\n' "$B" "$shown" "$ns" "$addr" "$N"
    got=$(echo "$text" | timeout 5 ip netns exec "$ns" socat -t 1 - "UDP:$addr:7" 2>&1)
    if [ ${#got} -gt 100 ]; then
        printf '    %s... (%d bytes)\n' "${got:0:60}" "${#got}"
    else
        printf '    %s\n' "$got"
    fi
    if [ "$got" != "$text" ]; then printf '    %s(expected the same line back)%s\n' "$R" "$N"; FAILED=1; fi
}

# tcp_echo NS ADDR TEXT: sends TEXT to ADDR:7 over TCP with socat, which
# shuts its write side at the end of its input and prints the echo until
# the server closes.
tcp_echo() {
    local ns=$1 addr=$2 text=$3 got
    printf '%s$ echo %s | ip netns exec %s socat -t 2 - TCP:%s:7%s\n' "$B" "'$text'" "$ns" "$addr" "$N"
    got=$(echo "$text" | timeout 5 ip netns exec "$ns" socat -t 2 - "TCP:$addr:7" 2>&1)
    printf '    %s\n' "$got"
    if [ "$got" != "$text" ]; then printf '    %s(expected the same line back)%s\n' "$R" "$N"; FAILED=1; fi
}

# wait_ping NS ADDR: until ADDR answers (10 s at most).
wait_ping() {
    for _ in $(seq 40); do
        ip netns exec "$1" ping -c 1 -W 0.25 -q "$2" >/dev/null 2>&1 && return 0
    done
    printf '%s%s did not answer ping within 10 s%s\n' "$R" "$2" "$N"
    FAILED=1
    return 1
}

# stop_ustack PID LOG [NAME]: SIGTERM, checks the exit code, prints the
# counters.
stop_ustack() {
    local pid=$1 log=$2 name=${3:-ustack-echo} rc
    printf '%s$ kill -TERM %s%s   %s(%s)%s\n' "$B" "$pid" "$N" "$D" "$name" "$N"
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    wait "$pid"; rc=$?
    if [ $rc -ne 0 ]; then printf '    %s%s exited with %d%s\n' "$R" "$name" "$rc" "$N"; FAILED=1; fi
    note "$name's counters (nonzero), printed on exit:"
    grep -o 'counters: .*' "$log" | sed 's/^counters: //' | tr ' ' '\n' | sed 's/=/ /' |
        awk '{ printf "    %-32s %s\n", $1, $2 }'
    PIDS=()
}

# ---------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || { echo "${R}run as root (network namespaces, veth, TAP)${N}"; exit 1; }
[ -x "$USTACK_ECHO" ] || { echo "${R}no ustack-echo at $USTACK_ECHO (cargo build --release -p apps, or set USTACK_ECHO)${N}"; exit 1; }
[ -x "$USTACK_HTTP" ] || { echo "${R}no ustack-http at $USTACK_HTTP (cargo build --release -p apps, or set USTACK_HTTP)${N}"; exit 1; }
for t in ip ping socat ethtool curl; do
    command -v "$t" >/dev/null || { echo "${R}'$t' is missing (apt-get install iproute2 iputils-ping socat ethtool curl)${N}"; exit 1; }
done

title "1. ustack over AF_PACKET, on a veth pair"
note "two namespaces: $NS_K (the kernel, 10.99.50.1) and $NS_U (ustack's end)"
for ns in "$NS_K" "$NS_U"; do
    setup ip netns add "$ns"
    setup ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
run ip link add "$VETH_U" netns "$NS_U" type veth peer name "$VETH_K" netns "$NS_K" || exit 1
run ip -n "$NS_U" link set "$VETH_U" up || exit 1
run ip -n "$NS_K" addr add 10.99.50.1/24 dev "$VETH_K" || exit 1
run ip -n "$NS_K" link set "$VETH_K" up || exit 1
run ip netns exec "$NS_K" ethtool -K "$VETH_K" tso off gso off || exit 1

cat >"$WORK/af_packet.ini" <<EOF
[dpdk]
idle_sleep=100
pkt_tx_delay=0

[port0]
link=af_packet:$VETH_U
addr=10.99.50.2
netmask=255.255.255.0
EOF
note "the configuration ($WORK/af_packet.ini):"
sed 's/^/    /' "$WORK/af_packet.ini"
printf '%s$ ip netns exec %s %s --config af_packet.ini &%s\n' "$B" "$NS_U" "$USTACK_ECHO" "$N"
ip netns exec "$NS_U" "$USTACK_ECHO" --config "$WORK/af_packet.ini" >"$WORK/af_packet.log" 2>&1 &
PID=$!
PIDS+=("$PID")
wait_ping "$NS_K" 10.99.50.2
sed 's/^/    /' "$WORK/af_packet.log"
MAC=$(grep -o 'mac [0-9a-f:]\{17\}' "$WORK/af_packet.log" | head -1 | cut -d' ' -f2)

note "the kernel learned ustack's MAC ($MAC) by ARP:"
run ip -n "$NS_K" neigh show dev "$VETH_K"
if ! ip -n "$NS_K" neigh show 10.99.50.2 dev "$VETH_K" | grep -q "lladdr $MAC"; then
    printf '    %s(expected lladdr %s)%s\n' "$R" "$MAC" "$N"; FAILED=1
fi
run ip netns exec "$NS_K" ping -c 3 -i 0.2 -W 1 10.99.50.2
note "4000 bytes: the request and the reply cross in 3 fragments each"
run ip netns exec "$NS_K" ping -c 2 -i 0.2 -W 1 -s 4000 10.99.50.2
udp_echo "$NS_K" 10.99.50.2 "hello ustack"
note "3000 bytes: fragmented both ways"
udp_echo "$NS_K" 10.99.50.2 "$(printf 'x%.0s' $(seq 3000))" '"$(printf '"'"'x%.0s'"'"' {1..3000})"' 
note "the same service over TCP: socat shuts its write side after the line;"
note "ustack echoes what is pending, then closes"
tcp_echo "$NS_K" 10.99.50.2 "hello ustack over TCP"
stop_ustack "$PID" "$WORK/af_packet.log"

# ---------------------------------------------------------------------------
title "2. TCP: ustack-http on the same veth"
printf '%s$ ip netns exec %s %s --config af_packet.ini &%s\n' "$B" "$NS_U" "$USTACK_HTTP" "$N"
ip netns exec "$NS_U" "$USTACK_HTTP" --config "$WORK/af_packet.ini" >"$WORK/http.log" 2>&1 &
PID=$!
PIDS+=("$PID")
wait_ping "$NS_K" 10.99.50.2
sed 's/^/    /' "$WORK/http.log"
note "the index page (600 bytes), headers first:"
run ip netns exec "$NS_K" curl -sS -i http://10.99.50.2/
note "/bytes/N: N bytes of 16-byte records, each the offset where it starts"
run ip netns exec "$NS_K" curl -sS http://10.99.50.2/bytes/48
printf '%s$ ip netns exec %s curl -sS -o /dev/null -w ... http://10.99.50.2/bytes/20000000%s\n' "$B" "$NS_K" "$N"
got=$(timeout 20 ip netns exec "$NS_K" curl -sS -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' \
    http://10.99.50.2/bytes/20000000 2>&1)
read -r code size speed <<<"$got"
printf '    status %s, %s bytes, %s MB/s\n' "$code" "$size" "$(awk "BEGIN { printf \"%.1f\", ${speed:-0} / 1e6 }")"
if [ "$code" != 200 ] || [ "$size" != 20000000 ]; then printf '    %s(expected 200 and 20000000 bytes)%s\n' "$R" "$N"; FAILED=1; fi
note "a path that does not exist:"
run ip netns exec "$NS_K" curl -sS -o /dev/null -w '%{http_code}\n' http://10.99.50.2/nothing
stop_ustack "$PID" "$WORK/http.log" ustack-http
grep '^ustack-http: accepted=' "$WORK/http.log" | sed 's/^/    /'
ip netns del "$NS_U"

# ---------------------------------------------------------------------------
title "3. ustack over TAP"
note "ustack-echo runs in $NS_K and creates the TAP device $TAP there;"
note "the kernel's side of the TAP gets 10.99.51.1"
cat >"$WORK/tap.ini" <<EOF
[dpdk]
idle_sleep=100

[port0]
link=tap:$TAP
addr=10.99.51.2/24
EOF
sed 's/^/    /' "$WORK/tap.ini"
printf '%s$ ip netns exec %s %s --config tap.ini &%s\n' "$B" "$NS_K" "$USTACK_ECHO" "$N"
ip netns exec "$NS_K" "$USTACK_ECHO" --config "$WORK/tap.ini" >"$WORK/tap.log" 2>&1 &
PID=$!
PIDS+=("$PID")
for _ in $(seq 50); do ip -n "$NS_K" link show "$TAP" >/dev/null 2>&1 && break; sleep 0.1; done
run ip -n "$NS_K" addr add 10.99.51.1/24 dev "$TAP" || exit 1
run ip -n "$NS_K" link set "$TAP" up || exit 1
wait_ping "$NS_K" 10.99.51.2
sed 's/^/    /' "$WORK/tap.log"
run ip -n "$NS_K" neigh show dev "$TAP"
run ip netns exec "$NS_K" ping -c 2 -i 0.2 -W 1 -s 8000 10.99.51.2
udp_echo "$NS_K" 10.99.51.2 "hello over TAP"
stop_ustack "$PID" "$WORK/tap.log"

echo
if [ $FAILED -eq 0 ]; then echo "${G}demo: every step worked${N}"; else echo "${R}demo: some steps failed${N}"; fi
exit $FAILED
