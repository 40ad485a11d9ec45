"""IPv6 against the kernel: ping -6 at every size (neighbor discovery both
ways, fragments both ways), duplicate address detection against a kernel
that holds the address, and hostile IPv6 frames each counted once."""

import re

import harness as h
from cases import SUBNETS, test
from harness import check

SUBNETS.update({
    "ping6_af_packet": 190, "ping6_tap": 191, "dad_duplicate_af_packet": 192,
    "hostile6_af_packet": 193, "ping6_af_xdp_native": 194, "ping6_af_xdp_generic": 195,
})

PING_SIZES = (56, 1400, 4000, 8000)


def ping6(t, size, count=5):
    return h.nsx(t.ns_k, "ping", "-6", "-c", str(count), "-i", "0.05", "-s", str(size), "-W", "1",
                 "-w", str(max(5, count)), t.ustack_ip6, check_rc=False, timeout=20)


def ping6_sizes(t):
    for size in PING_SIZES:
        p = ping6(t, size)
        out = p.stdout + p.stderr
        check(p.returncode == 0 and " 0% packet loss" in out and "5 received" in out,
              f"ping -6 -s {size}: expected 5 of 5 answered:\n{out}")
        replies = re.findall(rf"^{size + 8} bytes from {re.escape(t.ustack_ip6)}: icmp_seq=\d+ ttl=\d+", out, re.M)
        check(len(replies) == 5, f"ping -6 -s {size}: expected 5 replies of {size + 8} bytes:\n{out}")
        check("DUP!" not in out and "wrong data" not in out, f"ping -6 -s {size}: bad replies:\n{out}")


def ping6_test(ctx, kind, name):
    t = ctx.topo(kind, SUBNETS[name], ipv6=True).start()
    t.wait_ready6()
    ping6_sizes(t)
    # The kernel learned ustack's MAC by neighbor discovery.
    neigh = h.sh(["ip", "-n", t.ns_k, "-6", "neigh", "show", t.ustack_ip6, "dev", t.if_k]).stdout
    check(f"lladdr {t.ustack_mac}" in neigh, f"the kernel's neighbor table has no {t.ustack_mac} for {t.ustack_ip6}: {neigh!r}")
    s = t.ustack.settled_stats()
    check(s.get("ndp_dad_completed", 0) == 2, f"ndp_dad_completed: {s.get('ndp_dad_completed')}, expected 2 (link-local and addr6)")
    check(s.get("rx_accept_ndp_neighbor_solicit", 0) >= 1, f"no neighbor solicitation answered: {h.nonzero(s)}")
    check(s.get("ipv6_reassembled", 0) >= 10, f"the 4000 and 8000-byte pings came in fragments: ipv6_reassembled={s.get('ipv6_reassembled')}")
    check(s.get("ipv6_fragments_sent", 0) >= 30, f"their replies left in fragments: ipv6_fragments_sent={s.get('ipv6_fragments_sent')}")
    check(s.get("icmpv6_echo_replies_sent", 0) >= 20, f"icmpv6_echo_replies_sent={s.get('icmpv6_echo_replies_sent')}")
    check(h.outcome_sum(s) == s.get("rx_frames"), f"outcome counters do not add up to rx_frames: {h.nonzero(s)}")
    # The IPv4 side is unchanged beside it.
    p = t.ping(1400, count=3)
    check(p.returncode == 0 and "3 received" in p.stdout, f"IPv4 ping beside IPv6:\n{p.stdout}")
    print(f"    ping -6 {', '.join(map(str, PING_SIZES))}: 5/5 each; {s.get('ipv6_reassembled')} reassembled, "
          f"{s.get('ipv6_fragments_sent')} fragments sent; kernel neighbor: {neigh.strip()}")
    t.ustack.stop()


@test("ping6_af_packet")
def _(ctx):
    ping6_test(ctx, "af_packet", "ping6_af_packet")


@test("ping6_tap")
def _(ctx):
    ping6_test(ctx, "tap", "ping6_tap")


def register_xdp(mode):
    @test(f"ping6_af_xdp_{mode}")
    def _(ctx):
        from cases_xdp import XdpCtx
        ping6_test(XdpCtx(ctx, mode), "af_xdp", f"ping6_af_xdp_{mode}")


for _mode in ("native", "generic"):
    register_xdp(_mode)


@test("dad_duplicate_af_packet")
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["dad_duplicate_af_packet"], ipv6=True)
    # The kernel holds ustack's address before ustack starts.
    h.sh(["ip", "-n", t.ns_k, "-6", "addr", "add", f"{t.ustack_ip6}/64", "dev", t.if_k, "nodad"])
    t.start()
    u = t.ustack
    u.wait_output(re.escape(t.ustack_ip6) + r" is held by another node", timeout=5)
    u.wait_stats(lambda s: s.get("ndp_dad_duplicates", 0) == 1, what="ndp_dad_duplicates")
    # The link-local address passes a second later.
    s = u.wait_stats(lambda s: s.get("ndp_dad_completed", 0) >= 1, what="ndp_dad_completed")
    check(s.get("ndp_dad_completed") == 1 and s.get("ndp_dad_duplicates") == 1,
          f"one address passes, one is a duplicate: {h.nonzero(s)}")
    # The address is not used: a solicitation for it (hop limit 255, to
    # ustack's MAC) is counted as not ours and not answered.
    from scapy.all import ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr, IPv6, Ether, raw
    k_mac = t.kernel_mac()
    ns = Ether(dst=t.ustack_mac, src=k_mac) / IPv6(src=t.kernel_ip6, dst=t.ustack_ip6, hlim=255) / \
        ICMPv6ND_NS(tgt=t.ustack_ip6) / ICMPv6NDOptSrcLLAddr(lladdr=k_mac)
    before = u.settled_stats()
    sock = t.raw_socket()
    try:
        h.send_frames(sock, [raw(ns)])
    finally:
        sock.close()
    # Not ours: dropped as a packet to another node's address.
    after = u.wait_stats(lambda s: s.get("rx_drop_ipv6_not_for_us", 0) > before.get("rx_drop_ipv6_not_for_us", 0),
                         what="rx_drop_ipv6_not_for_us")
    check(after.get("ndp_neighbor_adverts_sent", 0) == before.get("ndp_neighbor_adverts_sent", 0),
          f"ustack advertised an address it must not use: {h.nonzero(h.delta(after, before))}")
    check(u.running(), "ustack exited after the duplicate")
    t.wait_ready()  # IPv4 still answers
    print("    the duplicate said on stderr and counted; a solicitation for it goes unanswered; IPv4 still answers")
    t.ustack.stop()


@test("hostile6_af_packet", budget=90)
def _(ctx):
    from scapy.all import (ICMPv6EchoRequest, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr, IPv6, IPv6ExtHdrDestOpt,
                           IPv6ExtHdrFragment, IPv6ExtHdrRouting, UDP, Ether, raw)

    t = ctx.topo("af_packet", SUBNETS["hostile6_af_packet"], ipv6=True).start()
    t.wait_ready6()
    u = t.ustack
    m, p = t.ustack_mac, t.kernel_mac()
    src, dst = t.kernel_ip6, t.ustack_ip6
    base = lambda: Ether(dst=m, src=p) / IPv6(src=src, dst=dst)  # noqa: E731
    echo = ICMPv6EchoRequest(id=9, seq=1, data=b"x" * 24)
    # A lying length: the header says 1000 bytes, 32 follow.
    lying = raw(base() / echo)
    lying = lying[:18] + (1000).to_bytes(2, "big") + lying[20:]
    # A first fragment whose header chain does not reach the upper layer
    # (RFC 7112): a destination options header, then nothing.
    split = base() / IPv6ExtHdrFragment(id=77, offset=0, m=1, nh=60) / raw(IPv6ExtHdrDestOpt(nh=17))
    # Overlapping fragments (RFC 5722): 0..16 then 8..24.
    body = raw(UDP(sport=5, dport=9) / (b"y" * 40))
    over1 = base() / IPv6ExtHdrFragment(id=78, offset=0, m=1, nh=17) / body[:16]
    over2 = base() / IPv6ExtHdrFragment(id=78, offset=1, m=1, nh=17) / body[8:24]
    cats = [
        ("neighbor solicitation with hop limit 64", [Ether(dst=m, src=p) / IPv6(src=src, dst=dst, hlim=64) /
                                                     ICMPv6ND_NS(tgt=dst) / ICMPv6NDOptSrcLLAddr(lladdr=p)],
         "rx_drop_ndp_bad_hop_limit"),
        ("routing header type 0 with segments left", [base() / IPv6ExtHdrRouting(type=0, addresses=["fd99::9"], segleft=1) / echo],
         "rx_drop_ipv6_ext_unsupported"),
        ("nine destination options headers", [base() / (IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() /
                                                          IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() /
                                                          IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt() / IPv6ExtHdrDestOpt()) / echo],
         "rx_drop_ipv6_ext_unsupported"),
        ("a lying payload length", [Ether(lying)], "rx_drop_ipv6_truncated"),
        ("a header chain split across fragments", [split], "rx_drop_ipv6_frag_chain_split"),
        ("overlapping fragments (the second)", [over1, over2], "rx_drop_ipv6_frag_overlap"),
    ]
    raw_sock = t.raw_socket()
    problems = []
    try:
        for name, frames, counter in cats:
            before = u.settled_stats()
            sent, _ = h.send_frames(raw_sock, [raw(f) for f in frames])
            after = u.wait_stats(lambda s: s.get("rx_frames", 0) >= before.get("rx_frames", 0) + sent,
                                 timeout=5, what=f"rx_frames after '{name}'")
            after = u.settled_stats()
            d = h.delta(after, before)
            outcomes = {k: v for k, v in d.items() if v and k.startswith(("rx_drop_", "rx_accept_"))}
            h.log(f"{name}: {outcomes}")
            if d.get(counter, 0) != 1:
                problems.append(f"'{name}': {counter} grew by {d.get(counter, 0)}, not 1; outcomes {outcomes}")
    finally:
        raw_sock.close()
    check(not problems, "\n      ".join(problems))
    s = u.settled_stats()
    check(h.outcome_sum(s) == s.get("rx_frames"), f"outcome counters do not add up to rx_frames: {h.nonzero(s)}")
    ping6_sizes(t)
    import socket
    us = h.netns_socket(t.ns_k, socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        for size in (1, 1400, 4000):
            payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
            data, _ = h.udp_echo(us, (t.ustack_ip6, 7), payload, timeout=1.0)
            check(data == payload, f"UDP echo of {size} bytes over IPv6 after the hostile frames: {data and len(data)}")
    finally:
        us.close()
    print(f"    {len(cats)} kinds of hostile IPv6 frames, each counted once by its reason; ping -6 and UDP echo work after")
    t.ustack.stop()


SUBNETS.update({"pmtu6_router_af_packet": 196})


@test("pmtu6_router_af_packet", budget=120)
def _(ctx):
    """ustack - router - kernel client, the router's link toward the client
    1400 bytes while both hosts' links are 1500: ustack's full-sized
    segments make the router send packet too big, ustack's path MTU to the
    client goes down, and a 50 MB download completes intact."""
    import os

    import tcp_tools as tt
    from cases import curl

    n = SUBNETS["pmtu6_router_af_packet"]
    ns_u, ns_r, ns_k = h.unique("u"), h.unique("r"), h.unique("k")
    if_u, r_u, r_k, if_k = h.unique("u"), h.unique("ru"), h.unique("rk"), h.unique("k")
    for ns in (ns_u, ns_r, ns_k):
        h.add_netns(ns)
    h.sh(["ip", "link", "add", if_u, "netns", ns_u, "type", "veth", "peer", "name", r_u, "netns", ns_r])
    h.sh(["ip", "link", "add", r_k, "netns", ns_r, "type", "veth", "peer", "name", if_k, "netns", ns_k])
    u_net, k_net = f"fd99:{n}::", f"fd99:{n}:1::"
    # The router: IPv6 on, forwarding, the narrow link toward the client.
    h.nsx(ns_r, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0",
          "net.ipv6.conf.all.forwarding=1")
    h.nsx(ns_r, "sysctl", "-qw", f"net.ipv6.conf.{r_u}.disable_ipv6=0", f"net.ipv6.conf.{r_k}.disable_ipv6=0")
    h.sh(["ip", "-n", ns_r, "-6", "addr", "add", f"{u_net}1/64", "dev", r_u, "nodad"])
    h.sh(["ip", "-n", ns_r, "-6", "addr", "add", f"{k_net}1/64", "dev", r_k, "nodad"])
    h.sh(["ip", "-n", ns_r, "link", "set", r_k, "mtu", "1400"])
    for dev in (r_u, r_k):
        h.sh(["ip", "-n", ns_r, "link", "set", dev, "up"])
    # The client, its link at 1500 (it offers an MSS of 1440).
    h.nsx(ns_k, "sysctl", "-qw", f"net.ipv6.conf.{if_k}.disable_ipv6=0")
    h.sh(["ip", "-n", ns_k, "-6", "addr", "add", f"{k_net}2/64", "dev", if_k, "nodad"])
    h.sh(["ip", "-n", ns_k, "link", "set", if_k, "up"])
    h.sh(["ip", "-n", ns_k, "-6", "route", "add", "default", "via", f"{k_net}1"])
    h.sh(["ip", "-n", ns_u, "link", "set", if_u, "up"])
    config = h.ustack_config(f"af_packet:{if_u}", f"{h.NET_PREFIX}.{n}.2",
                             extra_port=f"addr6={u_net}2/64\ngateway6={u_net}1\n")
    u = h.Ustack(ctx.http, ctx.workdir, config, netns=ns_u).start()
    addr = f"{u_net}2"
    deadline = h.time.monotonic() + 10
    while h.nsx(ns_k, "ping", "-6", "-c", "1", "-W", "0.3", "-q", addr, check_rc=False).returncode != 0:
        check(u.running(), "ustack-http exited")
        check(h.time.monotonic() < deadline, f"{addr} did not answer ping -6 through the router")
    size = 50 * 1024 * 1024
    out = os.path.join(ctx.workdir, "bytes6.bin")
    t = type("T", (), {"ns_k": ns_k})
    code, got, speed = curl(t, f"http://[{addr}]/bytes/{size}", out, timeout=90)
    check(code == 200, f"/bytes/{size}: status {code}")
    bad = tt.check_pattern_file(out, size)
    check(bad is None, f"/bytes/{size}: {bad}")
    os.unlink(out)
    s = u.settled_stats()
    check(s.get("ipv6_path_mtu_lowered", 0) >= 1, f"no path MTU lowered: {h.nonzero(s)}")
    check(s.get("tcp_path_mtu_lowered", 0) >= 1, f"no connection's segments shrank: {h.nonzero(s)}")
    print(f"    50 MB through a 1400-byte hop at {speed / 1e6:.1f} MB/s; "
          f"path MTU lowered {s.get('ipv6_path_mtu_lowered')}x, connections shrunk {s.get('tcp_path_mtu_lowered')}")
    u.stop()


# --------------------------------------------------------------------------
# UDP and TCP over IPv6: ustack-echo and ustack-http listen on [::] (one
# dual-stack socket each), and the kernel reaches them by fd99:N::2.

SUBNETS.update({
    "udp6_sizes_af_packet": 197, "tcp6_echo_af_packet": 198, "tcp6_echo_faults_af_packet": 199,
    "http6_curl_wrk_af_packet": 189, "cores_tcp6_echo_af_packet": 188,
})


@test("udp6_sizes_af_packet", budget=120)
def _(ctx):
    import random
    import socket

    t = ctx.topo("af_packet", SUBNETS["udp6_sizes_af_packet"], ipv6=True).start()
    t.wait_ready6()
    s = h.netns_socket(t.ns_k, socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((t.kernel_ip6, 0))
    dest = (t.ustack_ip6, 7)
    block = random.Random(6).randbytes(8000 + 256)
    try:
        for size in range(1, 8001):
            payload = block[size % 251: size % 251 + size]
            data, src = h.udp_echo(s, dest, payload, timeout=1.0)
            check(data is not None, f"UDP echo of {size} bytes over IPv6: no reply within 1 s")
            check(src[:2] == dest, f"UDP echo of {size} bytes: reply from {src}, expected {dest}")
            check(data == payload, f"UDP echo of {size} bytes: reply differs ({len(data)} bytes back)")
    finally:
        s.close()
    # The same socket answers IPv4 (dual stack).
    s4 = t.udp_socket()
    try:
        data, _ = h.udp_echo(s4, (t.ustack_ip, 7), b"four", timeout=1.0)
        check(data == b"four", f"the dual-stack socket did not answer IPv4: {data!r}")
    finally:
        s4.close()
    st = t.ustack.settled_stats()
    check(st.get("udp_datagrams_received", 0) >= 8000, f"counters: {h.nonzero(st)}")
    check(st.get("ipv6_reassembled", 0) > 0 and st.get("ipv6_fragments_sent", 0) > 0,
          f"no fragments either way: {h.nonzero(st)}")
    print(f"    UDP echo of every size 1..8000 over IPv6, byte-identical; {st.get('ipv6_reassembled')} reassembled, "
          f"{st.get('ipv6_fragments_sent')} fragments sent; IPv4 to the same socket answered")
    t.ustack.stop()


def tcp6_echo(t, seed, size):
    import tcp_tools as tt
    from cases import ECHO_CONNS, echo_payloads

    payloads = echo_payloads(ECHO_CONNS, size, seed)
    t0 = h.time.monotonic()
    got = tt.echo_many(t.ns_k, (t.ustack_ip6, 7), payloads, timeout=60)
    dt = h.time.monotonic() - t0
    for i, (p, g) in enumerate(zip(payloads, got)):
        check(g == p, f"connection {i}: {len(g)} bytes back of {len(p)}, not the bytes sent")
    print(f"    {ECHO_CONNS} IPv6 connections x {size} bytes echoed intact with half-close in {dt:.2f} s")


@test("tcp6_echo_af_packet", budget=90)
def _(ctx):
    from cases import ECHO_SIZE, no_tcp_trouble

    t = ctx.topo("af_packet", SUBNETS["tcp6_echo_af_packet"], ipv6=True).start()
    t.wait_ready6()
    tcp6_echo(t, 61, ECHO_SIZE)
    st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5, what="every connection closed")
    no_tcp_trouble(st, "echo over IPv6")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    check(st.get("tcp_predicted_segments", 0) > 1000, f"header prediction took few segments: {h.nonzero(st)}")
    t.ustack.stop()


@test("tcp6_echo_faults_af_packet", budget=120)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["tcp6_echo_faults_af_packet"], ipv6=True,
                 sets=["fault.loss=0.02", "fault.duplicate=0.02", "fault.reorder=0.02",
                       "fault.corrupt=0.005"]).start()
    t.wait_ready6(timeout=20)
    tcp6_echo(t, 62, 2 * 1024 * 1024)
    st = t.ustack.settled_stats()
    for what in ("lost", "duplicated", "reordered", "corrupted"):
        check(st.get(f"port0_fault_rx_{what}", 0) + st.get(f"port0_fault_tx_{what}", 0) > 0,
              f"the fault layer {what} nothing: {h.nonzero(st)}")
    check(st.get("tx_drop_too_big", 0) == 0, f"segments over the MTU: {h.nonzero(st)}")
    print(f"    retransmitted {st.get('tcp_retransmitted_segments', 0)}, "
          f"bad checksums dropped {st.get('rx_drop_tcp_bad_checksum', 0) + st.get('rx_drop_icmpv6_bad_checksum', 0)}")
    t.ustack.stop()


@test("http6_curl_wrk_af_packet", budget=120)
def _(ctx):
    import os

    import tcp_tools as tt
    from cases import curl, no_tcp_trouble

    t = ctx.topo("af_packet", SUBNETS["http6_curl_wrk_af_packet"], binary=ctx.http, ipv6=True).start()
    t.wait_ready6()
    base = f"http://[{t.ustack_ip6}]"
    out = os.path.join(ctx.workdir, "index6.html")
    code, size, _ = curl(t, base + "/", out)
    check(code == 200 and size == 600, f"curl -6 GET /: {code}, {size} bytes")
    n = 50 * 1024 * 1024
    out = os.path.join(ctx.workdir, "bytes6.bin")
    code, size, speed = curl(t, f"{base}/bytes/{n}", out)
    check(code == 200, f"/bytes/{n}: status {code}")
    bad = tt.check_pattern_file(out, n)
    check(bad is None, f"/bytes/{n} over IPv6: {bad}")
    os.unlink(out)
    print(f"    curl -6 /bytes/{n}: intact at {speed / 1e6:.1f} MB/s")
    for what, extra in (("keep-alive", ()), ("Connection: close", ("-H", "Connection: close"))):
        text, r = tt.run_wrk(t.ns_k, base + "/", connections=100, seconds=4, extra=extra)
        h.log(text)
        print(f"    wrk -c100 over IPv6 ({what}): {r['rps']:.0f} requests/s, "
              f"socket errors {r['socket_errors']}, non-2xx {r['non_2xx']}")
        check(r["requests"] > 1000, f"{what}: only {r['requests']} requests:\n{text}")
        check(r["socket_errors"] == 0 and r["non_2xx"] == 0, f"{what}: errors:\n{text}")
    no_tcp_trouble(t.ustack.settled_stats(), "HTTP over IPv6")
    t.ustack.stop()


@test("cores_tcp6_echo_af_packet", budget=120)
def _(ctx):
    """Two engines split IPv6 TCP flows as the kernel's fanout program does:
    400 concurrent connections from two source addresses echoed intact,
    each engine serving its share, nothing handed between them."""
    import os

    import tcp_tools as tt
    from cases_cores import TwoQueueVeth, engines_share

    subnet = SUBNETS["cores_tcp6_echo_af_packet"]
    v = TwoQueueVeth(subnet)
    ustack_ip6 = f"fd99:{subnet}::2"
    h.nsx(v.ns_k, "sysctl", "-qw", f"net.ipv6.conf.{v.if_k}.disable_ipv6=0")
    h.sh(["ip", "-n", v.ns_k, "-6", "addr", "add", f"fd99:{subnet}::1/64", "dev", v.if_k, "nodad"])
    u = h.Ustack(ctx.binary, ctx.workdir, v.config(f"addr6={ustack_ip6}/64\n"), netns=v.ns_u).start()
    u.wait_output(r"2 engine\(s\) on cores 0,1")
    v.wait_ping(u)
    deadline = h.time.monotonic() + 10
    while h.nsx(v.ns_k, "ping", "-6", "-c", "1", "-W", "0.3", "-q", ustack_ip6, check_rc=False).returncode != 0:
        check(h.time.monotonic() < deadline, f"{ustack_ip6} did not answer ping -6")
    payloads = [os.urandom(1000 + 37 * i) for i in range(400)]
    got = tt.echo_many(v.ns_k, (ustack_ip6, 7), payloads, timeout=90)
    bad = [i for i, (a, b) in enumerate(zip(got, payloads)) if a != b]
    check(not bad, f"{len(bad)} of {len(payloads)} IPv6 connections not echoed intact (first: {bad[:5]})")
    st = u.settled_stats()
    tcp = engines_share(st, "rx_accept_tcp")
    fwd = engines_share(st, "steer_forwarded")
    print(f"    400 concurrent IPv6 connections echoed; TCP segments per engine {tcp}; handed over {fwd}")
    check(all(n > 0.25 * sum(tcp) for n in tcp), f"each engine must serve its share of the IPv6 flows: {tcp}")
    check(fwd == [0, 0], f"IPv6 frames handed between engines: {fwd}")
    u.stop()


SUBNETS.update({"http6_get_client_af_packet": 187})


@test("http6_get_client_af_packet", budget=90)
def _(ctx):
    """ustack-get fetches over IPv6 from the kernel's python3 -m http.server
    (http://[fd99:N::1]:8080/), 20 MB intact."""
    import os
    import random

    import tcp_tools as tt

    t = ctx.topo("af_packet", SUBNETS["http6_get_client_af_packet"], ipv6=True)
    srv = os.path.join(ctx.workdir, "srv6")
    os.mkdir(srv)
    n = 20 * 1024 * 1024
    with open(os.path.join(srv, "big.bin"), "wb") as f:
        f.write(random.Random(61).randbytes(n))
    want = tt.sha256_file(os.path.join(srv, "big.bin"))
    # The readiness check connects from the server's own namespace: its
    # own IPv6 address is reached through loopback, which needs IPv6 on.
    h.nsx(t.ns_k, "sysctl", "-qw", "net.ipv6.conf.lo.disable_ipv6=0")
    tt.kernel_http_server(t.ns_k, t.kernel_ip6, 8080, srv, ctx.workdir)
    cfg = os.path.join(ctx.workdir, "get6.ini")
    with open(cfg, "w") as f:
        f.write(t.config())
    out = os.path.join(ctx.workdir, "got6.bin")
    t0 = h.time.monotonic()
    p = h.nsx(t.ns_u, ctx.get, "--config", cfg, "-o", out, f"http://[{t.kernel_ip6}]:8080/big.bin",
              check_rc=False, timeout=60)
    dt = h.time.monotonic() - t0
    check(p.returncode == 0, f"ustack-get over IPv6: rc={p.returncode}: {p.stderr.strip()}")
    got = tt.sha256_file(out)
    check(os.path.getsize(out) == n and got == want, f"ustack-get over IPv6: {os.path.getsize(out)} bytes, sha256 differs")
    print(f"    ustack-get 20 MB over IPv6 (duplicate detection, then neighbor discovery first): intact in {dt:.2f} s")
