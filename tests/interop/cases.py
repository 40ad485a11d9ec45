"""The interop tests: ustack's programs (ustack-echo, ustack-http,
ustack-get) against the Linux kernel's own tools and sockets, over
AF_PACKET (a veth pair) and TAP."""

import contextlib
import os
import random
import re
import socket
import struct
import subprocess
import time

import harness as h
from harness import TestFailure, Topology, check

TESTS = []  # (name, function, budget in seconds)
# Tests that show a stack bug not fixed yet: run only with --known-bugs, so
# that `make test` stays green meanwhile.  Remove the name from here when
# the bug is fixed.
KNOWN_BUGS = {}


def test(name, budget=60, known_bug=None):
    def register(fn):
        TESTS.append((name, fn, budget))
        if known_bug:
            KNOWN_BUGS[name] = known_bug
        return fn

    return register


class Ctx:
    def __init__(self, binaries):
        self.binaries = binaries
        self.binary = binaries["ustack-echo"]
        self.http = binaries["ustack-http"]
        self.get = binaries["ustack-get"]
        self.connect = binaries["ustack-connect"]
        self.workdir = None

    def topo(self, kind, subnet, binary=None, **kw):
        """A topology running `binary` (ustack-echo unless given)."""
        return Topology(kind, subnet, binary or self.binary, self.workdir, **kw).create()


class Subnets(dict):
    """Test name -> the third octet of its 10.99.N.0/24.  A number given
    twice is refused when the case module loads: cases written side by side
    picked the same ones before."""

    def __setitem__(self, name, n):
        for other, m in self.items():
            if m == n and other != name:
                raise ValueError(f"subnet 10.99.{n}.0/24 of {name} is already {other}'s")
        super().__setitem__(name, n)

    def update(self, other=(), **kw):
        for name, n in dict(other, **kw).items():
            self[name] = n


# Each test has its own /24 inside 10.99.0.0/16 (the namespaces are private,
# but distinct subnets keep captures readable).
SUBNETS = Subnets()
SUBNETS.update({
    "ping_af_packet": 101, "ping_tap": 102,
    "udp_sizes_af_packet": 103, "udp_sizes_tap": 104,
    "hostile_af_packet": 105,
    "fault_loss_dup_reorder_af_packet": 106, "fault_corrupt_af_packet": 107,
    "arp_vip_af_packet": 108, "arp_vip_tap": 109,
    "config_ignored_fstack_key": 110,
    "http_curl_af_packet": 113, "http_wrk_af_packet": 114,
    "tcp_echo_af_packet": 115, "http_get_client_af_packet": 116,
    "tcp_echo_faults_af_packet": 117,
    "ping_af_packet_root": 118, "udp_sizes_af_packet_root": 119,
    "ping_dpdk": 140, "udp_sizes_dpdk": 141, "tcp_echo_dpdk": 142,
    "http_curl_dpdk": 143, "http_wrk_dpdk": 144,
})


# --------------------------------------------------------------------------
# 1. ping at several sizes

PING_SIZES = (56, 1400, 4000, 8000)


def ping_sizes(ctx, kind, name):
    t = ctx.topo(kind, SUBNETS[name]).start()
    for size in PING_SIZES:
        p = t.ping(size, count=5, interval="0.05")
        out = p.stdout + p.stderr
        check(p.returncode == 0 and " 0% packet loss" in out and "5 received" in out,
              f"ping -s {size}: expected 5 of 5 answered:\n{out}")
        replies = re.findall(rf"^{size + 8} bytes from {re.escape(t.ustack_ip)}: icmp_seq=\d+ ttl=\d+", out, re.M)
        check(len(replies) == 5, f"ping -s {size}: expected 5 replies of {size + 8} bytes:\n{out}")
        check("DUP!" not in out and "wrong data" not in out, f"ping -s {size}: bad replies:\n{out}")
    return t.ustack.stop()


@test("ping_af_packet")
def _(ctx):
    ping_sizes(ctx, "af_packet", "ping_af_packet")


@test("ping_af_packet_root")
def _(ctx):
    # ustack on the root side of the veth, as the foundation issue states it.
    ping_sizes(ctx, "af_packet_root", "ping_af_packet_root")


@test("ping_tap")
def _(ctx):
    ping_sizes(ctx, "tap", "ping_tap")


@test("ping_dpdk")
def _(ctx):
    # The vdev names no framesz: ustack gives one, and says so, so the
    # pings the kernel fragments (4000, 8000 bytes) come back whole.
    err = ping_sizes(ctx, "dpdk", "ping_dpdk")
    check("vdev net_af_packet0: no framesz given, so framesz=65408,blocksz=2093056,framecnt=128 is added"
          in err,
          f"ustack did not say what it added to the vdev: {err[-1500:]!r}")


# --------------------------------------------------------------------------
# 2. UDP echo of every size from 1 to 8000 bytes

def udp_every_size(ctx, kind, name, largest=8000):
    t = ctx.topo(kind, SUBNETS[name]).start()
    s = t.udp_socket()
    dest = (t.ustack_ip, 7)
    rnd = random.Random(7)
    block = rnd.randbytes(largest + 256)
    try:
        for size in range(1, largest + 1):
            # Different bytes for each size (a shifted window of one block).
            payload = block[size % 251: size % 251 + size]
            data, src = h.udp_echo(s, dest, payload, timeout=1.0)
            check(data is not None, f"UDP echo of {size} bytes: no reply within 1 s")
            check(src == dest, f"UDP echo of {size} bytes: reply from {src}, expected {dest}")
            check(data == payload, f"UDP echo of {size} bytes: reply differs ({len(data)} bytes back)")
    finally:
        s.close()
    st = t.ustack.settled_stats()
    check(st.get("udp_datagrams_received", 0) >= largest and st.get("udp_datagrams_sent", 0) >= largest,
          f"counters do not show {largest} datagrams each way: {h.nonzero(st)}")
    t.ustack.stop()


@test("udp_sizes_af_packet", budget=90)
def _(ctx):
    udp_every_size(ctx, "af_packet", "udp_sizes_af_packet")


@test("udp_sizes_af_packet_root", budget=90)
def _(ctx):
    udp_every_size(ctx, "af_packet_root", "udp_sizes_af_packet_root")


@test("udp_sizes_tap", budget=90)
def _(ctx):
    udp_every_size(ctx, "tap", "udp_sizes_tap")


@test("udp_sizes_dpdk", budget=90)
def _(ctx):
    udp_every_size(ctx, "dpdk", "udp_sizes_dpdk")


# --------------------------------------------------------------------------
# 3. hostile frames

HOSTILE_SEED = 20240917


def still_works(t, sizes=(1, 1472, 4000)):
    for size in (56, 4000):
        p = t.ping(size, count=3, interval="0.05")
        check(p.returncode == 0 and "3 received" in p.stdout, f"ping -s {size} after: not 3 of 3 answered:\n{p.stdout}{p.stderr}")
    s = t.udp_socket()
    try:
        for size in sizes:
            payload = bytes((i * 7 + size) & 0xFF for i in range(size))
            data, src = h.udp_echo(s, (t.ustack_ip, 7), payload, timeout=1.0)
            check(data == payload, f"UDP echo of {size} bytes after: {'no reply' if data is None else 'reply differs'}")
            check(src == (t.ustack_ip, 7), f"UDP echo of {size} bytes after: reply from {src}")
    finally:
        s.close()


@test("hostile_af_packet", budget=120)
def _(ctx):
    import frames as fr

    t = ctx.topo("af_packet", SUBNETS["hostile_af_packet"]).start()
    our_mac = h.mac_bytes(t.ustack_mac)
    peer_mac = h.mac_bytes(t.kernel_mac())
    cats, frag_keys = fr.build(HOSTILE_SEED, our_mac, peer_mac, t.ustack_ip, t.kernel_ip, f"{h.NET_PREFIX}.{SUBNETS['hostile_af_packet']}")
    raw = t.raw_socket()
    u = t.ustack
    problems = []
    total_sent = total_refused = 0
    start = u.settled_stats()
    check(h.outcome_sum(start) == start.get("rx_frames"), f"outcome counters do not add up to rx_frames before: {h.nonzero(start)}")
    try:
        for cat in cats + [fr.Category("fragment clean-up (discards held datagrams)",
                                       fr.cleanup_fragments(frag_keys, our_mac, peer_mac, t.ustack_ip),
                                       ["rx_drop_ipv4_frag_malformed"])]:
            before = u.stats()
            sent, refused = h.send_frames(raw, cat.frames)
            total_sent += sent
            total_refused += refused
            after = u.wait_stats(lambda s: s.get("rx_frames", 0) >= before.get("rx_frames", 0) + sent,
                                 timeout=5, what=f"rx_frames after '{cat.name}'")
            d = h.delta(after, before)
            h.log(f"{cat.name}: {sent} sent -> "
                  f"{ {k: v for k, v in sorted(d.items()) if v and k.startswith(('rx_drop_', 'rx_accept_'))} }")
            if cat.exact:
                got = sum(d.get(k, 0) for k in cat.expect)
                if got < sent:
                    problems.append(f"'{cat.name}': {sent} sent, {' + '.join(cat.expect)} grew by {got}; "
                                    f"changed: { {k: v for k, v in sorted(d.items()) if v and not k.startswith(('engine_', 'port0_'))} }")
            check(u.running(), f"ustack-echo died during '{cat.name}' (rc={u.proc.returncode})")
    finally:
        raw.close()
    end = u.settled_stats()
    d = h.delta(end, start)
    drops = h.drop_sum(d)
    held = d.get("rx_accept_ipv4_fragment", 0)
    reasons = sorted(k for k, v in d.items() if k.startswith("rx_drop_") and v > 0)
    other_accepts = {k: v for k, v in d.items() if k.startswith("rx_accept_") and k != "rx_accept_ipv4_fragment" and v}
    print(f"    sent {total_sent} hostile frames ({total_refused} refused by the kernel); "
          f"rx_frames +{d.get('rx_frames', 0)}, drops +{drops}, held fragments +{held}, "
          f"other accepts {other_accepts}, {len(reasons)} drop reasons")
    check(u.running(), "ustack-echo is not running after the hostile frames")
    check(total_refused <= total_sent // 100, f"the kernel refused {total_refused} frames")
    check(d.get("rx_frames", 0) >= total_sent, f"rx_frames grew by {d.get('rx_frames', 0)}, fewer than the {total_sent} sent")
    check(d.get("port0_link_rx_frames", 0) >= total_sent,
          f"port0_link_rx_frames grew by {d.get('port0_link_rx_frames', 0)}, fewer than {total_sent}")
    check(h.outcome_sum(end) == end.get("rx_frames"),
          f"every frame must end in one outcome counter: rx_drop_* + rx_accept_* = {h.outcome_sum(end)}, rx_frames = {end.get('rx_frames')}")
    check(drops >= 0.9 * total_sent, f"drops grew by {drops}, less than 90% of {total_sent}")
    slack = 20 + total_sent // 100
    check(drops + held >= total_sent - slack, f"drops {drops} + held fragments {held} < {total_sent} sent - {slack}")
    check(len(reasons) >= 10, f"only {len(reasons)} distinct drop reasons: {reasons}")
    check(not problems, "categories not counted as expected:\n      " + "\n      ".join(problems))
    still_works(t)
    t.ustack.stop()


# --------------------------------------------------------------------------
# 4. fault injection

def udp_burst(t, count, make_payload, collect_s=2.0, pace_every=25):
    """Sends `count` datagrams (distinct payloads), collects replies until
    `collect_s` after the last send.  Returns (payloads, replies, wrong)."""
    s = t.udp_socket()
    s.setblocking(False)
    dest = (t.ustack_ip, 7)
    sent = [make_payload(i) for i in range(count)]
    replies = []
    wrong_src = []

    def drain():
        while True:
            try:
                data, src = s.recvfrom(65535)
            except BlockingIOError:
                return
            replies.append(data)
            if src != dest:
                wrong_src.append(src)

    try:
        for i, p in enumerate(sent):
            s.sendto(p, dest)
            if i % pace_every == pace_every - 1:
                time.sleep(0.005)
                drain()
        deadline = time.monotonic() + collect_s
        while time.monotonic() < deadline:
            drain()
            time.sleep(0.01)
        drain()
    finally:
        s.close()
    return sent, replies, wrong_src


@test("fault_loss_dup_reorder_af_packet", budget=60)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["fault_loss_dup_reorder_af_packet"],
                 sets=["fault.loss=0.02", "fault.duplicate=0.02", "fault.reorder=0.02"]).start()
    sent, replies, wrong_src = udp_burst(t, 500, lambda i: f"fault-{i:05d}-".encode().ljust(100, b"."))
    sent_set = set(sent)
    check(not wrong_src, f"replies from unexpected sources: {wrong_src[:5]}")
    alien = [r for r in replies if r not in sent_set]
    check(not alien, f"{len(alien)} replies are not datagrams we sent, e.g. {alien[:2]}")
    answered = len(set(replies))
    dups = len(replies) - answered
    print(f"    500 datagrams: {answered} answered, {dups} duplicate replies")
    check(0.85 * 500 <= answered <= 500, f"{answered} of 500 answered, expected 85%..100%")
    # Fragmented datagrams (3 fragments each way): reassembly under loss,
    # duplicates and reordering.
    sent, replies, wrong_src = udp_burst(t, 100, lambda i: f"big-{i:05d}-".encode().ljust(3000, b"#"),
                                         pace_every=5)
    sent_set = set(sent)
    check(not wrong_src, f"replies from unexpected sources: {wrong_src[:5]}")
    check(all(r in sent_set for r in replies), "a 3000-byte reply is not a datagram we sent")
    big = len(set(replies))
    print(f"    100 datagrams of 3000 bytes: {big} answered")
    check(big >= 70, f"only {big} of 100 fragmented datagrams answered (expected about 88)")
    st = t.ustack.settled_stats()
    faults = {k: v for k, v in st.items() if k.startswith("port0_fault_")}
    h.log({k: v for k, v in h.nonzero(st).items() if k.startswith(("rx_drop", "rx_accept"))})
    print(f"    {h.nonzero(faults)}")
    for what in ("lost", "duplicated", "reordered"):
        for d in ("rx", "tx"):
            check(st.get(f"port0_fault_{d}_{what}", 0) > 0, f"port0_fault_{d}_{what} is zero: {faults}")
    check(h.outcome_sum(st) == st.get("rx_frames"), f"outcome counters do not add up to rx_frames: {h.nonzero(st)}")
    t.ustack.stop()


def udp_corrupt(t):
    """400 UDP datagrams and 200 pings through a started topology whose
    ustack has `fault.corrupt` set: no corrupted datagram is echoed, the
    injector corrupted both ways, a checksum counter caught some. The
    kernel's side keeps its transmit checksum offload (a veth's default),
    so its UDP arrives with partial checksums, which the injector finishes
    before it flips a bit, as a wire would carry them."""
    rnd = random.Random(11)
    sizes = [rnd.randint(16, 1400) for _ in range(400)]
    sent, replies, wrong_src = udp_burst(
        t, 400, lambda i: f"corrupt-{i:05d}-".encode() + rnd.randbytes(sizes[i]))
    p = t.ping(64, count=200, interval="0.005", timeout=30)
    sent_set = set(sent)
    check(not wrong_src, f"replies from unexpected sources: {wrong_src[:5]}")
    alien = [r for r in replies if r not in sent_set]
    check(not alien, f"{len(alien)} echoed datagrams differ from everything sent (corrupted payload echoed)")
    answered = len(set(replies))
    st = t.ustack.settled_stats()
    bad = {k: v for k, v in st.items() if k.startswith("rx_drop_") and "checksum" in k and v}
    m = re.search(r"\d+ packets transmitted, \d+ received", p.stdout)
    h.log({k: v for k, v in h.nonzero(st).items() if k.startswith(("rx_drop", "rx_accept"))})
    print(f"    400 datagrams: {answered} answered intact; ping: {m.group(0) if m else '?'}; "
          f"corrupted rx {st.get('port0_fault_rx_corrupted')} tx {st.get('port0_fault_tx_corrupted')} "
          f"(partial checksums finished first: rx {st.get('port0_fault_rx_completed_before_corrupt')}); {bad}")
    check(answered >= 0.75 * 400, f"only {answered} of 400 answered")
    check(st.get("port0_fault_rx_corrupted", 0) > 0 and st.get("port0_fault_tx_corrupted", 0) > 0,
          f"the injector corrupted nothing: {h.nonzero(st)}")
    check(st.get("port0_fault_rx_completed_before_corrupt", 0) > 0,
          f"no partial checksum was finished before a flip (is the peer's offload on?): {h.nonzero(st)}")
    check(sum(bad.values()) > 0, f"no rx_drop_*checksum* counter grew: {h.nonzero(st)}")
    check(h.outcome_sum(st) == st.get("rx_frames"), f"outcome counters do not add up to rx_frames: {h.nonzero(st)}")
    t.ustack.stop()


@test("fault_corrupt_af_packet", budget=60)
def _(ctx):
    udp_corrupt(ctx.topo("af_packet", SUBNETS["fault_corrupt_af_packet"], sets=["fault.corrupt=0.05"]).start())


@test("fault_duplicate_keeps_partial_checksum_af_packet")
def _(ctx):
    # Kernel UDP over a veth with checksum offload on arrives csum_partial
    # (TP_STATUS_CSUMNOTREADY); nothing is corrupted here, so no checksum
    # can be bad and every duplicate must be echoed too.
    t = ctx.topo("af_packet", 111, sets=["fault.duplicate=0.1"]).start()
    sent, replies, _ = udp_burst(t, 300, lambda i: f"dup-{i:05d}-".encode().ljust(100, b"."))
    st = t.ustack.settled_stats()
    print(f"    300 datagrams: {len(set(replies))} answered, {len(replies) - len(set(replies))} duplicates; "
          f"rx duplicated {st.get('port0_fault_rx_duplicated')}, tx duplicated {st.get('port0_fault_tx_duplicated')}, "
          f"rx_drop_udp_bad_checksum {st.get('rx_drop_udp_bad_checksum')}")
    check(st.get("port0_fault_rx_duplicated", 0) > 0, "nothing was duplicated")
    check(st.get("rx_drop_udp_bad_checksum", 0) == 0,
          f"rx_drop_udp_bad_checksum = {st.get('rx_drop_udp_bad_checksum')} with no corruption configured "
          f"(port0_fault_rx_duplicated = {st.get('port0_fault_rx_duplicated')})")
    t.ustack.stop()


@test("reassembly_tiny_fragments_af_packet")
def _(ctx):
    import frames as fr

    subnet = 112
    t = ctx.topo("af_packet", subnet).start()
    raw = t.raw_socket()
    try:
        frames = [fr.eth(h.mac_bytes(t.ustack_mac), h.mac_bytes(t.kernel_mac()), fr.ETH_P_IP,
                         fr.ipv4(f"{h.NET_PREFIX}.{subnet}.150", t.ustack_ip, 17, b"\0" * 8, ident=i,
                                 flags_frag=0x2000 | 8000))
                 for i in range(300)]
        h.send_frames(raw, frames)
    finally:
        raw.close()
    t.ustack.settled_stats()
    s = t.udp_socket()
    try:
        for size in (4000, 8000):
            data, _ = h.udp_echo(s, (t.ustack_ip, 7), b"r" * size)
            st = t.ustack.stats()
            check(data == b"r" * size,
                  f"UDP echo of {size} bytes fails after 300 fragments of 8 bytes (12.6 KB of frames): "
                  f"rx_accept_ipv4_fragment {st.get('rx_accept_ipv4_fragment')}, "
                  f"rx_drop_ipv4_frag_no_room {st.get('rx_drop_ipv4_frag_no_room')}")
    finally:
        s.close()
    t.ustack.stop()


# --------------------------------------------------------------------------
# 5. ARP and extra addresses (vip_addr)

ETH_P_ARP = 0x0806


def parse_arp(frame):
    if len(frame) < 42 or struct.unpack("!H", frame[12:14])[0] != ETH_P_ARP:
        return None
    htype, ptype, hlen, plen, op = struct.unpack("!HHBBH", frame[14:22])
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4):
        return None
    return {
        "eth_dst": h.mac_str(frame[0:6]), "eth_src": h.mac_str(frame[6:12]), "op": op,
        "sha": h.mac_str(frame[22:28]), "spa": socket.inet_ntoa(frame[28:32]),
        "tha": h.mac_str(frame[32:38]), "tpa": socket.inet_ntoa(frame[38:42]),
    }


def arp_frames_from(sock, mac, timeout, until):
    """ARP frames with Ethernet source `mac` until until(list) or timeout."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not until(got):
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            f = sock.recv(2048)
        except socket.timeout:
            break
        a = parse_arp(f)
        if a and a["eth_src"] == mac:
            got.append(a)
    return got


def arp_vip(ctx, kind, name):
    subnet = SUBNETS[name]
    vip = f"{h.NET_PREFIX}.{subnet}.3"
    t = ctx.topo(kind, subnet, extra_port=f"vip_addr={vip}\n")
    sniff = None
    if kind == "af_packet":
        # Listen before ustack starts, to see its gratuitous ARP.
        sniff = t.raw_socket(ETH_P_ARP)
    try:
        t.start(wait_ready=False)
        mac = t.ustack_mac
        if sniff:
            grat = arp_frames_from(sniff, mac, 5, lambda g: {a["spa"] for a in g if a["spa"] == a["tpa"]} >= {t.ustack_ip, vip})
            announced = {a["spa"] for a in grat if a["spa"] == a["tpa"] and a["sha"] == mac and a["eth_dst"] == "ff:ff:ff:ff:ff:ff"}
            check(announced >= {t.ustack_ip, vip}, f"gratuitous ARP for {t.ustack_ip} and {vip} from {mac} expected, saw {grat}")
        t.wait_ready()
        n = t.neigh()
        check(f"lladdr {mac}" in n and re.search(r"\b(REACHABLE|STALE|DELAY|PROBE)\b", n),
              f"ip neigh for {t.ustack_ip}: expected lladdr {mac} REACHABLE/STALE, got {n!r}")
        # The extra address: ping, ARP, UDP echo from that address.
        t.wait_ready(addr=vip, timeout=5)
        p = t.ping(56, count=5, interval="0.05", addr=vip)
        check(p.returncode == 0 and "5 received" in p.stdout, f"ping {vip}: not 5 of 5:\n{p.stdout}{p.stderr}")
        n = t.neigh(vip)
        check(f"lladdr {mac}" in n, f"ip neigh for {vip}: expected lladdr {mac}, got {n!r}")
        s = t.udp_socket()
        try:
            for addr in (vip, t.ustack_ip):
                data, src = h.udp_echo(s, (addr, 7), b"which address " + addr.encode())
                check(data == b"which address " + addr.encode(), f"UDP echo to {addr}: {data!r}")
                check(src == (addr, 7), f"UDP echo to {addr} answered from {src}")
        finally:
            s.close()
        if sniff is None:
            sniff = t.raw_socket(ETH_P_ARP)
        # Direct ARP requests: answered for our addresses only.
        kmac = t.kernel_mac()
        u = t.ustack
        before = u.settled_stats()
        import frames as fr

        for target, answered in ((vip, True), (t.ustack_ip, True), (f"{h.NET_PREFIX}.{subnet}.77", False)):
            while arp_frames_from(sniff, mac, 0.05, lambda g: False):
                pass  # drain
            req = fr.eth(fr.BROADCAST, h.mac_bytes(kmac), fr.ETH_P_ARP,
                         fr.arp(1, h.mac_bytes(kmac), t.kernel_ip, b"\0" * 6, target))
            sniff.send(req)
            got = arp_frames_from(sniff, mac, 1.0 if answered else 0.5,
                                  lambda g: any(a["op"] == 2 for a in g))
            replies = [a for a in got if a["op"] == 2]
            if answered:
                check(replies and replies[0]["spa"] == target and replies[0]["sha"] == mac
                      and replies[0]["tpa"] == t.kernel_ip and replies[0]["tha"] == kmac and replies[0]["eth_dst"] == kmac,
                      f"ARP request for {target}: expected a reply from {mac}, got {got}")
            else:
                check(not replies, f"ARP request for {target} (not ustack's) was answered: {replies}")
        after = u.wait_stats(lambda s: s.get("rx_drop_arp_not_for_us", 0) > before.get("rx_drop_arp_not_for_us", 0),
                             what="rx_drop_arp_not_for_us")
        check(after.get("rx_accept_arp_request", 0) >= before.get("rx_accept_arp_request", 0) + 2,
              "rx_accept_arp_request did not count the two requests")
    finally:
        if sniff:
            sniff.close()
    err = t.ustack.stop()
    m = re.search(r"arp_gratuitous_sent=(\d+)", err)
    check(m and int(m.group(1)) >= 2, f"arp_gratuitous_sent should be >= 2 (two addresses): {err.splitlines()[-1]}")


@test("arp_vip_af_packet")
def _(ctx):
    arp_vip(ctx, "af_packet", "arp_vip_af_packet")


@test("arp_vip_tap")
def _(ctx):
    arp_vip(ctx, "tap", "arp_vip_tap")


# --------------------------------------------------------------------------
# 6. configuration errors

def run_config(ctx, text, *extra, name="cfg"):
    path = os.path.join(ctx.workdir, f"{name}.ini")
    with open(path, "w") as f:
        f.write(text)
    try:
        p = subprocess.run([ctx.binary, "--config", path, *extra], capture_output=True, text=True, timeout=5,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise TestFailure(f"ustack-echo with {name}.ini did not exit within 5 s (it should refuse the configuration)") from e
    return path, p


def line_of(text, needle):
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


# An interface that does not exist: should a bad configuration be accepted,
# opening the link fails (and nothing is created, as tap: would).
BAD_BASE = "[dpdk]\nidle_sleep=100\n\n[port0]\nlink=af_packet:usinever0\n"


@test("config_invalid_value")
def _(ctx):
    cases = [
        ("addr", BAD_BASE + "addr=10.99.1.300\nnetmask=255.255.255.0\n", "addr=10.99.1.300", ["[port0] addr", "10.99.1.300"]),
        ("idle_sleep", "[dpdk]\nidle_sleep=soon\n\n[port0]\nlink=af_packet:usinever0\naddr=10.99.1.2/24\n", "idle_sleep=soon",
         ["[dpdk] idle_sleep", "soon"]),
        ("netmask", BAD_BASE + "addr=10.99.1.2\nnetmask=255.0.255.0\n", "netmask=255.0.255.0", ["netmask", "255.0.255.0"]),
        ("fault", BAD_BASE + "addr=10.99.1.2/24\n[fault]\nloss=1.5\n", "loss=1.5", ["[fault] loss", "1.5"]),
    ]
    for name, text, line_text, needles in cases:
        path, p = run_config(ctx, text, name=f"bad-{name}")
        err = p.stderr
        line = line_of(text, line_text)
        check(p.returncode != 0, f"{name}: exit code 0 for an invalid value; stderr: {err!r}")
        check(f"{path}:{line}: " in err, f"{name}: stderr does not locate the error as '{path}:{line}: ': {err!r}")
        for n in needles:
            check(n in err, f"{name}: stderr does not mention {n!r}: {err!r}")
        check("serving" not in err, f"{name}: ustack started anyway: {err!r}")
    # The same through --set: located at "--set".
    path, p = run_config(ctx, BAD_BASE + "addr=10.99.1.2/24\n", "--set", "port0.addr=10.99.1.300", name="bad-set")
    check(p.returncode != 0 and "--set: " in p.stderr and "10.99.1.300" in p.stderr,
          f"--set port0.addr=10.99.1.300: expected a '--set: ...10.99.1.300...' error, got rc={p.returncode} {p.stderr!r}")


@test("config_unknown_key")
def _(ctx):
    for sect, key in (("port0", "adress"), ("dpdk", "idle_sleeep"), ("fault", "los")):
        if sect == "port0":
            text = BAD_BASE + "adress=10.99.1.2\naddr=10.99.1.2/24\n"
        elif sect == "dpdk":
            text = "[dpdk]\nidle_sleeep=100\n\n[port0]\nlink=af_packet:usinever0\naddr=10.99.1.2/24\n"
        else:
            text = BAD_BASE + "addr=10.99.1.2/24\n[fault]\nlos=0.1\n"
        path, p = run_config(ctx, text, name=f"unknown-{key}")
        line = line_of(text, key + "=")
        check(p.returncode != 0, f"unknown key {key}: exit code 0; stderr: {p.stderr!r}")
        check(f"{path}:{line}: " in p.stderr and key in p.stderr,
              f"unknown key {key}: expected '{path}:{line}: ...{key}...', got {p.stderr!r}")


@test("config_ignored_fstack_key")
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["config_ignored_fstack_key"],
                 extra="nb_vdev=0\nfstack_log_level=0\n", extra_port="vip_ifname=whatever\n").start()
    err = t.ustack.stderr()
    for key in ("nb_vdev", "fstack_log_level", "vip_ifname"):
        check(re.search(rf"warning: .*:\d+: .*{key}", err), f"no warning naming {key}: {err!r}")
    p = t.ping(56, count=3)
    check(p.returncode == 0, f"ping failed with ignored keys in the configuration:\n{p.stdout}")
    t.ustack.stop()


# --------------------------------------------------------------------------
# 7. TCP: ustack-http with curl and wrk, the TCP echo, ustack-get

def http_topo(ctx, name, **kw):
    return ctx.topo("af_packet", SUBNETS[name], binary=ctx.http, **kw).start()


def curl(t, url, out, timeout=60):
    """curl in the kernel's namespace; returns (status code, bytes)."""
    p = h.nsx(t.ns_k, "curl", "-sS", "--max-time", str(timeout), "-o", out,
              "-w", "%{http_code} %{size_download} %{speed_download}", url,
              check_rc=False, timeout=timeout + 5)
    check(p.returncode == 0, f"curl {url} failed (rc={p.returncode}): {p.stderr.strip()}")
    code, size, speed = p.stdout.split()
    return int(code), int(size), float(speed)


def no_tcp_trouble(st, what):
    """TCP counters that must stay zero on a clean link."""
    bad = {k: st.get(k, 0) for k in ("tx_drop_too_big", "rx_drop_tcp_bad_checksum", "rx_drop_tcp_malformed")}
    check(not any(bad.values()), f"{what}: {bad}")


def curl_50_mb(ctx, t):
    """curl downloads 50 MB of ustack-http's pattern, checked byte by
    byte; returns ustack's settled stats, checked for TCP trouble."""
    import tcp_tools as tt

    n = 50 * 1024 * 1024
    out = os.path.join(ctx.workdir, "bytes.bin")
    code, size, speed = curl(t, f"http://{t.ustack_ip}/bytes/{n}", out)
    print(f"    curl /bytes/{n}: {code}, {size} bytes at {speed / 1e6:.1f} MB/s")
    check(code == 200, f"/bytes/{n}: status {code}")
    bad = tt.check_pattern_file(out, n)
    check(bad is None, f"/bytes/{n}: {bad}")
    os.unlink(out)
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "curl")
    return st


@test("http_curl_af_packet", budget=90)
def _(ctx):
    import tcp_tools as tt

    t = http_topo(ctx, "http_curl_af_packet")
    base = f"http://{t.ustack_ip}"
    out = os.path.join(ctx.workdir, "index.html")
    code, size, _ = curl(t, base + "/", out)
    with open(out, "rb") as f:
        page = f.read()
    check(code == 200 and size == 600 and len(page) == 600, f"GET /: {code}, {size} bytes (expected 200, 600)")
    check(page.startswith(b"<!DOCTYPE html>") and page.endswith(b"</html>\n"), f"GET /: not the page: {page[:80]!r}")
    # Semantics, on raw connections.
    dest = (t.ustack_ip, 80)
    pipelined = (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"
                 b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n"
                 b"GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"
                 b"POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
                 b"GET /bytes/100 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    resp, eof = tt.http_exchange(t.ns_k, dest, pipelined, head_requests=(1,))
    got = [(r[0], len(r[2])) for r in resp]
    check([g[0] for g in got] == [200, 200, 404, 405, 200] and got[0][1] == 600 and got[4][1] == 100,
          f"5 pipelined requests: (status, body length) {got}")
    check(eof, "no close after Connection: close")
    check(resp[1][1].get("content-length") == "600", f"HEAD /: {resp[1][1]}")
    check(resp[3][1].get("allow") == "GET, HEAD", f"405 without Allow: {resp[3][1]}")
    check(resp[4][2] == tt.pattern(0, 100) and resp[4][1].get("connection") == "close",
          f"/bytes/100: {resp[4][2][:40]!r}, {resp[4][1]}")
    cases = [
        (b"GET / HTTP/1.0\r\n\r\n", 200, True, "HTTP/1.0 closes"),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, False, "HTTP/1.0 keep-alive stays open"),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200, False, "HTTP/1.1 stays open"),
        (b"BREW / HTTP/1.1\r\nHost: a\r\n\r\n", 501, False, "unknown method"),
        (b"GARBAGE\r\n\r\n", 400, True, "malformed request line"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, True, "HTTP/1.1 without Host"),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"x" * 9000 + b"\r\n\r\n", 431, True, "9 KB of header fields"),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413, True, "a 100 MB body announced"),
    ]
    for raw, status, closes, what in cases:
        resp, eof = tt.http_exchange(t.ns_k, dest, raw, timeout=0.5)
        check(len(resp) == 1 and resp[0][0] == status, f"{what}: expected one {status}, got {[r[0] for r in resp]}")
        check(eof == closes, f"{what}: connection {'not ' if closes else ''}closed after the response")
    curl_50_mb(ctx, t)
    t.ustack.stop()


@test("http_wrk_af_packet", budget=90)
def _(ctx):
    import tcp_tools as tt

    t = http_topo(ctx, "http_wrk_af_packet")
    url = f"http://{t.ustack_ip}/"
    for what, extra in (("keep-alive", ()), ("Connection: close", ("-H", "Connection: close"))):
        before = t.ustack.stats()
        out, r = tt.run_wrk(t.ns_k, url, connections=200, seconds=5, extra=extra)
        h.log(out)
        after = t.ustack.settled_stats(quiet=0.2)
        d = h.delta(after, before)
        oow = d.get("tcp_out_of_window", 0)
        print(f"    wrk -t2 -c200 -d5s {' '.join(extra)}: {r['rps']:.0f} requests/s, {r['requests']} requests, "
              f"socket errors {r['socket_errors']}, non-2xx {r['non_2xx']}; "
              f"ustack: {d.get('tcp_passive_opens', 0)} connections, {oow} segments out of window, "
              f"resets received {d.get('tcp_resets_received', 0)} (wrk resets what it has not read when it stops)")
        check(r["requests"] > 1000, f"{what}: only {r['requests']} requests:\n{out}")
        check(r["socket_errors"] == 0, f"{what}: socket errors:\n{out}")
        check(r["non_2xx"] == 0, f"{what}: non-2xx responses:\n{out}")
        # TIME-WAIT reuse: the kernel reconnecting from a port whose old
        # connection ustack holds in TIME-WAIT must get a new connection,
        # not a challenge ACK (out of window), its reset, and a SYN again.
        check(oow <= max(10, r["requests"] // 100), f"{what}: {oow} segments out of window")
        no_tcp_trouble(after, what)
    t.ustack.stop()


ECHO_CONNS = 8
ECHO_SIZE = 4 * 1024 * 1024


def echo_payloads(count, size, seed):
    rnd = random.Random(seed)
    block = rnd.randbytes(size + 4096)
    return [block[i * 509: i * 509 + size] for i in range(count)]


def tcp_echo_test(t, count, size, seed):
    import tcp_tools as tt

    payloads = echo_payloads(count, size, seed)
    t0 = time.monotonic()
    got = tt.echo_many(t.ns_k, (t.ustack_ip, 7), payloads, timeout=60)
    dt = time.monotonic() - t0
    for i, (p, g) in enumerate(zip(payloads, got)):
        if g != p:
            first = next((k for k, (a, b) in enumerate(zip(p, g)) if a != b), min(len(p), len(g)))
            raise TestFailure(f"connection {i}: {len(g)} bytes back of {len(p)}, first difference at {first}")
    print(f"    {count} connections x {size} bytes echoed intact in {dt:.2f} s "
          f"({2 * count * size / dt / 1e6:.1f} MB/s both ways)")
    return dt


def tcp_echo_closed(ctx, kind, name):
    t = ctx.topo(kind, SUBNETS[name]).start()
    tcp_echo_test(t, ECHO_CONNS, ECHO_SIZE, 15)
    # The server closed each connection after the echo.
    st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5,
                             what="every TCP connection closed")
    no_tcp_trouble(st, "echo")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    t.ustack.stop()
    return st


@test("tcp_echo_af_packet", budget=90)
def _(ctx):
    st = tcp_echo_closed(ctx, "af_packet", "tcp_echo_af_packet")
    # The kernel's end keeps TSO and GSO: its writes reach the veth as
    # super-frames of up to 64 KB, which the link hands over whole (or cuts
    # into segments when no large buffer is free).
    supers, oversize = st.get("port0_link_rx_super_frames", 0), st.get("port0_link_rx_oversize", 0)
    print(f"    TCP super-frames from the kernel: {supers} ({st.get('port0_link_rx_super_cut', 0)} cut into "
          f"segments); frames too large: {oversize}")
    check(supers > 0, f"no super-frame arrived (is the kernel's TSO on?): {h.nonzero(st)}")
    check(oversize == 0 and st.get("port0_link_rx_super_bad_checksum", 0) == 0,
          f"frames dropped as too large or with a bad checksum: {h.nonzero(st)}")


@test("tcp_echo_dpdk", budget=90)
def _(ctx):
    st = tcp_echo_closed(ctx, "dpdk", "tcp_echo_dpdk")
    # Every frame went through DPDK's port, none was lost for want of mbufs.
    check(st.get("port0_link_rx_frames", 0) > 2 * ECHO_CONNS and st.get("port0_link_pool_exhausted", 0) == 0,
          f"DPDK port counters: {h.nonzero(st)}")
    zero_copy_receive(st, "echo")
    # The kernel's side keeps its checksum offload; the af_packet driver
    # gives no checksum verdict, and the link recognised the partial form.
    check(st.get("port0_link_rx_csum_partial_form", 0) > 0,
          f"the kernel's partial checksums were not recognised: {h.nonzero(st)}")


@test("http_curl_dpdk", budget=90)
def _(ctx):
    t = ctx.topo("dpdk", SUBNETS["http_curl_dpdk"], binary=ctx.http).start()
    out = os.path.join(ctx.workdir, "index.html")
    code, size, _ = curl(t, f"http://{t.ustack_ip}/", out)
    check(code == 200 and size == 600, f"GET /: {code}, {size} bytes (expected 200, 600)")
    curl_50_mb(ctx, t)
    t.ustack.stop()


@test("http_wrk_dpdk", budget=90)
def _(ctx):
    import tcp_tools as tt

    t = ctx.topo("dpdk", SUBNETS["http_wrk_dpdk"], binary=ctx.http).start()
    out, r = tt.run_wrk(t.ns_k, f"http://{t.ustack_ip}/", connections=200, seconds=5)
    h.log(out)
    print(f"    wrk -t2 -c200 -d5s: {r['rps']:.0f} requests/s, {r['requests']} requests, "
          f"socket errors {r['socket_errors']}, non-2xx {r['non_2xx']}")
    check(r["requests"] > 1000, f"only {r['requests']} requests:\n{out}")
    check(r["socket_errors"] == 0, f"socket errors:\n{out}")
    check(r["non_2xx"] == 0, f"non-2xx responses:\n{out}")
    st = t.ustack.settled_stats(quiet=0.2)
    no_tcp_trouble(st, "wrk")
    t.ustack.stop()


def zero_copy_receive(st, what):
    """TCP payload stayed in the link's buffers (UMEM frames, mbufs) until
    the echo server read it, and every buffer went back once read."""
    held = st.get("tcp_rx_zero_copy_segments", 0)
    check(held > 0, f"{what}: no segment held in its buffer: {h.nonzero(st)}")
    check(st.get("tcp_rx_frames_held", -1) == 0, f"{what}: buffers still held: {h.nonzero(st)}")
    print(f"    tcp_rx_zero_copy_segments {held}, tcp_rx_copied_segments "
          f"{st.get('tcp_rx_copied_segments', 0)}, tcp_rx_hold_limited {st.get('tcp_rx_hold_limited', 0)}")


@test("tcp_echo_faults_af_packet", budget=120)
def _(ctx):
    # The kernel's side keeps its checksum offload: the injector finishes a
    # partial checksum before it corrupts the frame (see udp_corrupt).
    t = ctx.topo("af_packet", SUBNETS["tcp_echo_faults_af_packet"],
                 sets=["fault.loss=0.02", "fault.duplicate=0.02", "fault.reorder=0.02",
                       "fault.corrupt=0.005"]).start()
    tcp_echo_test(t, ECHO_CONNS, 2 * 1024 * 1024, 17)
    st = t.ustack.settled_stats()
    faults = {k: v for k, v in st.items() if k.startswith("port0_fault_") and v}
    tcp = {k: st.get(k, 0) for k in ("tcp_retransmitted_segments", "tcp_fast_retransmits", "tcp_rto_timeouts",
                                     "tcp_rx_out_of_order", "rx_drop_tcp_bad_checksum", "tx_drop_too_big")}
    print(f"    {faults}\n    {tcp}")
    for what in ("lost", "duplicated", "reordered", "corrupted"):
        check(st.get(f"port0_fault_rx_{what}", 0) + st.get(f"port0_fault_tx_{what}", 0) > 0,
              f"the fault layer {what} nothing: {faults}")
    check(st.get("tx_drop_too_big", 0) == 0, f"segments over the MTU: {tcp}")
    t.ustack.stop()


@test("http_get_client_af_packet", budget=90)
def _(ctx):
    import tcp_tools as tt

    t = ctx.topo("af_packet", SUBNETS["http_get_client_af_packet"])
    srv = os.path.join(ctx.workdir, "srv")
    os.mkdir(srv)
    n = 20 * 1024 * 1024
    with open(os.path.join(srv, "big.bin"), "wb") as f:
        f.write(random.Random(16).randbytes(n))
    want = tt.sha256_file(os.path.join(srv, "big.bin"))
    tt.kernel_http_server(t.ns_k, t.kernel_ip, 8080, srv, ctx.workdir)
    cfg = os.path.join(ctx.workdir, "get.ini")
    with open(cfg, "w") as f:
        f.write(t.config())

    def get(url, *extra, timeout=60):
        out = os.path.join(ctx.workdir, "got.bin")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(out)
        t0 = time.monotonic()
        p = h.nsx(t.ns_u, ctx.get, "--config", cfg, "-o", out, *extra, url, check_rc=False, timeout=timeout)
        return p, out, time.monotonic() - t0

    p, out, dt = get(f"http://{t.kernel_ip}:8080/big.bin")
    check(p.returncode == 0, f"ustack-get of 20 MB: rc={p.returncode}: {p.stderr.strip()}")
    got = tt.sha256_file(out)
    check(os.path.getsize(out) == n and got == want,
          f"ustack-get of 20 MB: {os.path.getsize(out)} bytes, sha256 {got[:16]}..., expected {want[:16]}...")
    print(f"    ustack-get 20 MB from python3 -m http.server: intact in {dt:.2f} s; {p.stderr.strip()}")
    for url, extra, needle, what in (
        (f"http://{t.kernel_ip}:8081/", (), "refused", "a closed port"),
        (f"http://{t.kernel_ip}:8080/missing", (), "404", "a missing file"),
        (f"http://{h.NET_PREFIX}.{SUBNETS['http_get_client_af_packet']}.77/", ("--timeout", "1"), "timed out",
         "an address nobody has"),
    ):
        p, out, dt = get(url, *extra, timeout=20)
        check(p.returncode != 0, f"ustack-get of {what} exited 0: {p.stderr.strip()}")
        check(needle in p.stderr, f"ustack-get of {what}: expected {needle!r} in the message: {p.stderr.strip()!r}")
        check(not os.path.exists(out), f"ustack-get of {what} left {out}")
        print(f"    {what}: rc={p.returncode} in {dt:.1f} s: {p.stderr.strip()}")


# One engine per core and the exception path (their own file).
import cases_cores  # noqa: E402,F401
import cases_xdp  # noqa: E402,F401
import cases_cores_xdp  # noqa: E402,F401
import cases_capi  # noqa: E402,F401
import cases_cores_dpdk  # noqa: E402,F401
import cases_async  # noqa: E402,F401
import cases_ipv6  # noqa: E402,F401
import cases_tcp_rfc9293  # noqa: E402,F401
import cases_vlan  # noqa: E402,F401
import cases_ctl  # noqa: E402,F401
import cases_devices  # noqa: E402,F401
import cases_gso  # noqa: E402,F401
import cases_dpdk_tso  # noqa: E402,F401
import cases_policy_live  # noqa: E402,F401
import cases_pcap_live  # noqa: E402,F401
import cases_kni_ctl  # noqa: E402,F401
import cases_hardening  # noqa: E402,F401
import cases_ops  # noqa: E402,F401
import cases_xdp_shared  # noqa: E402,F401
import cases_swgso  # noqa: E402,F401
import cases_xdp_stale  # noqa: E402,F401
import cases_kernel_rx_drop  # noqa: E402,F401
import cases_txcsum  # noqa: E402,F401
