# Sourced by scripts/callgrind-*.sh (bash, set -euo pipefail): the
# measured program runs in the root namespace over AF_PACKET on veth end
# $A; its peer end $B is in namespace $NS.  Sets D (a scratch directory)
# and SRV (the caller's background program, empty until set), and on exit
# stops SRV (SIGTERM, SIGKILL after 0.5 s), deletes the namespace and the
# veth and removes D.  The caller sets NS, A and B first.
D=$(mktemp -d)
SRV=
veth_peer_cleanup() {
    if [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; then
        sleep 0.5
        kill -9 "$SRV" 2>/dev/null || true
    fi
    ip netns del "$NS" 2>/dev/null || true
    ip link del "$A" 2>/dev/null || true
    rm -rf "$D"
}
trap veth_peer_cleanup EXIT

# veth_peer_up PEER_IP LOCAL_IP: the pair up, PEER_IP/24 on $B, IPv6 off
# on $A (no router solicitations in the count), and LOCAL_IP (the
# measured program's address) known to the peer without ARP.
veth_peer_up() {
    ip netns add "$NS"
    ip link add "$A" type veth peer name "$B"
    ip link set "$B" netns "$NS"
    ip -n "$NS" addr add "$1/24" dev "$B"
    ip -n "$NS" link set "$B" up
    ip -n "$NS" link set lo up
    ip link set "$A" up
    echo 1 >"/proc/sys/net/ipv6/conf/$A/disable_ipv6"
    ip -n "$NS" neigh replace "$2" lladdr "$(cat "/sys/class/net/$A/address")" dev "$B" nud permanent
}
