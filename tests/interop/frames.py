"""Hostile frames for the robustness test, built as bytes.

Each category is a list of frames with the stack counters they must end in
(ustack's RX path counts every frame in exactly one `rx_drop_*` or
`rx_accept_*` counter).  Frames are built by hand with struct (fast, and the
lies are exact); scapy's fuzz() adds a few hundred randomised frames.

Addresses: every IP address chosen as a host is in 10.99.0.0/16.  A few
deliberately invalid sources (0.0.0.0, 255.255.255.255, 127.0.0.1,
224.0.0.1) appear in frames that never leave the test's private veth.
"""

import random
import socket
import struct

ETH_P_IP = 0x0800
ETH_P_ARP = 0x0806
ETH_P_IPV6 = 0x86DD
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8
BROADCAST = b"\xff" * 6


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ip4(a):
    return socket.inet_aton(a)


def eth(dst, src, ethertype, payload):
    return dst + src + struct.pack("!H", ethertype) + payload


def ipv4(src, dst, proto, payload, *, ident=0, flags_frag=0, ttl=64, ihl=5, total_len=None,
         version=4, bad_checksum=False, options=b""):
    hl = 20 + len(options)
    tl = hl + len(payload) if total_len is None else total_len
    hdr = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, 0, tl, ident, flags_frag, ttl, proto, 0,
                      ip4(src), ip4(dst)) + options
    c = csum(hdr)
    if bad_checksum:
        c ^= 0x5A5A or 1
    hdr = hdr[:10] + struct.pack("!H", c) + hdr[12:]
    return hdr + payload


def udp(src, dst, sport, dport, data, *, length=None, checksum=True, bad_checksum=False):
    ln = 8 + len(data) if length is None else length
    hdr = struct.pack("!HHHH", sport, dport, ln, 0)
    c = 0
    if checksum:
        pseudo = ip4(src) + ip4(dst) + struct.pack("!BBH", 0, 17, 8 + len(data))
        c = csum(pseudo + hdr + data) or 0xFFFF
        if bad_checksum:
            c = (c + 0x1234) & 0xFFFF or 1
    return struct.pack("!HHHH", sport, dport, ln, c) + data


def tcp(src, dst, sport, dport, data, *, data_offset=5, flags=0x02, seq=1, options=b""):
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, (data_offset << 4), flags, 65535, 0, 0) + options
    pseudo = ip4(src) + ip4(dst) + struct.pack("!BBH", 0, 6, len(hdr) + len(data))
    c = csum(pseudo + hdr + data)
    return hdr[:16] + struct.pack("!H", c) + hdr[18:] + data


def icmp(type_, code, rest, data, *, bad_checksum=False):
    msg = struct.pack("!BBH", type_, code, 0) + rest + data
    c = csum(msg)
    if bad_checksum:
        c = (c + 0x0101) & 0xFFFF
    return msg[:2] + struct.pack("!H", c) + msg[4:]


def arp(op, sha, spa, tha, tpa, *, htype=1, ptype=ETH_P_IP, hlen=6, plen=4):
    return struct.pack("!HHBBH", htype, ptype, hlen, plen, op) + sha + ip4(spa) + tha + ip4(tpa)


class Category:
    def __init__(self, name, frames, expect, exact=True):
        self.name = name
        self.frames = frames
        # Counter names whose growth together must cover the frames.
        self.expect = expect
        # exact: those counters grow by at least len(frames) (other noise
        # can only add); otherwise only the aggregate checks apply.
        self.exact = exact


def build(seed, our_mac, peer_mac, our_ip, peer_ip, subnet_prefix, scapy_fuzz=True):
    """All categories, deterministic for a seed.

    our_*: ustack; peer_*: the kernel's side; subnet_prefix: "10.99.N".
    """
    rnd = random.Random(seed)
    me = our_mac
    pm = peer_mac
    other_ip = f"{subnet_prefix}.77"          # in the subnet, not ustack's
    bcast_ip = f"{subnet_prefix}.255"

    def rbytes(n):
        return bytes(rnd.getrandbits(8) for _ in range(n))

    def rhost():
        # A host of the subnet that is neither ustack nor the kernel, so no
        # frame here changes what ustack knows about the kernel.
        return f"{subnet_prefix}.{rnd.randint(100, 199)}"

    def ip_frame(payload_ip):
        return eth(me, pm, ETH_P_IP, payload_ip)

    cats = []

    # ---------------- Ethernet ------------------------------------------------
    # Random bytes after a header addressed to us: an unknown EtherType
    # (types ustack knows are avoided so the outcome is certain).
    known = {ETH_P_IP, ETH_P_ARP, ETH_P_IPV6, ETH_P_8021Q, ETH_P_8021AD}
    fr = []
    for _ in range(400):
        t = rnd.getrandbits(16)
        while t in known:
            t = rnd.getrandbits(16)
        fr.append(eth(me, pm, t, rbytes(rnd.randint(0, 1500))))
    cats.append(Category("random payload, unknown EtherType", fr, ["rx_drop_eth_unknown_type"]))

    # Wholly random frames (any destination, any type): no exact outcome.
    fr = [rbytes(rnd.randint(14, 1514)) for _ in range(300)]
    # Never from a multicast source? Random: half of them are; fine.
    cats.append(Category("random bytes", fr, [], exact=False))

    # Unicast to another MAC.
    fr = [eth(bytes([0x02]) + rbytes(5), pm, ETH_P_IP, rbytes(rnd.randint(20, 200))) for _ in range(200)]
    cats.append(Category("unicast to another MAC", fr, ["rx_drop_eth_not_for_us"]))

    # Multicast source address.
    fr = [eth(me, bytes([0x01 | (rnd.getrandbits(8) & 0xFE)]) + rbytes(5), ETH_P_IP,
              ipv4(peer_ip, our_ip, 17, udp(peer_ip, our_ip, 1234, 7, b"x"))) for _ in range(100)]
    cats.append(Category("multicast source MAC", fr, ["rx_drop_eth_src_multicast"]))

    # Truncated: a bare 14-byte header (the shortest frame a veth carries),
    # or a few bytes of payload, for each protocol.
    fr = []
    for _ in range(50):
        fr.append(eth(me, pm, ETH_P_IP, rbytes(rnd.randint(0, 19))))
    cats.append(Category("truncated IPv4 (<20 bytes)", fr, ["rx_drop_ipv4_truncated"]))
    fr = [eth(me, pm, ETH_P_ARP, rbytes(rnd.randint(0, 7))) for _ in range(50)]
    cats.append(Category("truncated ARP (<8 bytes)", fr, ["rx_drop_arp_malformed"]))
    # (No truncated VLAN tag: the receiving veth's kernel untags 802.1Q and
    # 802.1ad frames before AF_PACKET sees them and drops those too short
    # to hold a tag, so they never reach ustack.)

    # ---------------- VLAN ----------------------------------------------------
    fr = []
    for _ in range(150):
        inner = ipv4(peer_ip, our_ip, 1, icmp(8, 0, struct.pack("!HH", 1, 1), b"tagged"))
        tci = rnd.randint(1, 4094)
        fr.append(eth(me, pm, ETH_P_8021Q, struct.pack("!HH", tci, ETH_P_IP) + inner))
    cats.append(Category("802.1Q tagged IPv4 (no VLAN configured)", fr, ["rx_drop_vlan_unknown_id"]))
    fr = []
    for _ in range(150):
        outer = rnd.choice([ETH_P_8021Q, ETH_P_8021AD])
        inner_t = rnd.choice([ETH_P_8021Q, ETH_P_8021AD])
        body = struct.pack("!HH", rnd.randint(1, 4094), inner_t) + struct.pack("!HH", rnd.randint(1, 4094), ETH_P_IP)
        body += ipv4(peer_ip, our_ip, 17, udp(peer_ip, our_ip, 5000, 7, b"nested"))
        fr.append(eth(me, pm, outer, body))
    cats.append(Category("nested VLAN tags (802.1Q / QinQ 0x88a8)", fr, ["rx_drop_vlan_nested"]))

    # ---------------- ARP -----------------------------------------------------
    zero = b"\0" * 6
    fr = []
    for _ in range(60):
        hlen, plen = rnd.choice([(0, 4), (6, 0), (5, 4), (6, 16), (8, 4), (6, 3)])
        body = struct.pack("!HHBBH", 1, ETH_P_IP, hlen, plen, 1) + rbytes(2 * (hlen + plen))
        fr.append(eth(BROADCAST, pm, ETH_P_ARP, body))
    cats.append(Category("ARP with bad hardware/protocol lengths", fr, ["rx_drop_arp_malformed"]))
    fr = []
    for _ in range(60):
        # The lengths promise more than the frame has.
        hlen, plen = rnd.randint(7, 255), rnd.randint(5, 255)
        body = struct.pack("!HHBBH", 1, ETH_P_IP, hlen, plen, 1) + rbytes(rnd.randint(0, 20))
        fr.append(eth(BROADCAST, pm, ETH_P_ARP, body))
    cats.append(Category("ARP lengths past the frame", fr, ["rx_drop_arp_malformed"]))
    fr = []
    for _ in range(60):
        htype, ptype = rnd.choice([(6, ETH_P_IP), (1, ETH_P_IPV6), (0xFFFF, 0x1234), (32, ETH_P_IP)])
        fr.append(eth(BROADCAST, pm, ETH_P_ARP, arp(1, pm, rhost(), zero, our_ip, htype=htype, ptype=ptype)))
    cats.append(Category("ARP of another hardware/protocol type", fr, ["rx_drop_arp_unsupported"]))
    fr = []
    for _ in range(60):
        op = rnd.choice([0, 3, 4, 8, 9, 0xFFFF])
        fr.append(eth(BROADCAST, pm, ETH_P_ARP, arp(op, pm, rhost(), zero, our_ip)))
    cats.append(Category("ARP with unknown operation", fr, ["rx_drop_arp_unsupported"]))
    fr = []
    for i in range(80):
        kind = i % 4
        sha, spa = pm, rhost()
        if kind == 0:
            sha = bytes([0x01]) + rbytes(5)          # multicast sender MAC
        elif kind == 1:
            sha = BROADCAST
        elif kind == 2:
            spa = our_ip                                # claims our address
        else:
            spa = bcast_ip                              # subnet broadcast
        fr.append(eth(BROADCAST, pm, ETH_P_ARP, arp(1, sha, spa, zero, our_ip)))
    cats.append(Category("ARP with a bad sender", fr, ["rx_drop_arp_bad_sender"]))
    fr = [eth(BROADCAST, pm, ETH_P_ARP, arp(1, pm, rhost(), zero, f"{subnet_prefix}.{rnd.randint(3, 99)}"))
          for _ in range(60)]
    cats.append(Category("ARP request for another host", fr, ["rx_drop_arp_not_for_us"]))

    # ---------------- IPv4 header lies ------------------------------------------
    def some_l4():
        return udp(peer_ip, our_ip, 4000, 7, rbytes(rnd.randint(0, 64)))

    fr = []
    for _ in range(100):
        p = some_l4()
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 17, p, total_len=20 + len(p) + rnd.randint(1, 2000))))
    cats.append(Category("IPv4 total length past the frame", fr, ["rx_drop_ipv4_truncated"]))
    fr = []
    for _ in range(100):
        p = some_l4()
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 17, p, total_len=rnd.randint(0, 19))))
    cats.append(Category("IPv4 total length below the header", fr, ["rx_drop_ipv4_malformed"]))
    fr = []
    for _ in range(100):
        p = some_l4()
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 17, p, ihl=rnd.randint(0, 4))))
    cats.append(Category("IPv4 IHL below 5", fr, ["rx_drop_ipv4_malformed"]))
    fr = []
    for _ in range(100):
        p = rbytes(rnd.randint(0, 30))
        # IHL up to 60 bytes, more than total length.
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 17, p, ihl=15, total_len=20 + len(p) if len(p) < 40 else 30)))
    cats.append(Category("IPv4 IHL past the total length", fr, ["rx_drop_ipv4_malformed"]))
    fr = []
    for _ in range(100):
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 17, some_l4(), version=rnd.choice([0, 5, 6, 15]))))
    cats.append(Category("IPv4 EtherType, other IP version", fr, ["rx_drop_ipv4_malformed"]))
    fr = [ip_frame(ipv4(peer_ip, our_ip, 17, some_l4(), bad_checksum=True)) for _ in range(150)]
    cats.append(Category("IPv4 bad header checksum", fr, ["rx_drop_ipv4_bad_checksum"]))
    fr = []
    for _ in range(100):
        src = rnd.choice(["0.0.0.0", "255.255.255.255", "127.0.0.1", "224.0.0.1", bcast_ip])
        fr.append(ip_frame(ipv4(src, our_ip, 17, udp(src, our_ip, 53, 7, b"spoof"))))
    cats.append(Category("IPv4 from an invalid source", fr, ["rx_drop_ipv4_bad_src"]))
    fr = [ip_frame(ipv4(peer_ip, f"224.0.0.{rnd.randint(1, 250)}", 17, udp(peer_ip, "224.0.0.1", 9, 7, b"m")))
          for _ in range(60)]
    cats.append(Category("IPv4 to a multicast group", fr, ["rx_drop_ipv4_multicast"]))
    fr = [ip_frame(ipv4(peer_ip, f"{subnet_prefix}.{rnd.randint(3, 99)}", 17, some_l4())) for _ in range(100)]
    cats.append(Category("IPv4 to another host", fr, ["rx_drop_ipv4_not_for_us"]))
    fr = [ip_frame(ipv4(peer_ip, our_ip, rnd.choice([0, 2, 41, 47, 50, 132, 253, 255]), rbytes(rnd.randint(0, 100))))
          for _ in range(100)]
    cats.append(Category("IPv4 unknown protocol", fr, ["rx_drop_ipv4_unknown_protocol"]))

    # ---------------- TCP, UDP, ICMP lies ------------------------------------
    fr = []
    for _ in range(150):
        data = rbytes(rnd.randint(0, 40))
        off = rnd.choice([0, 1, 2, 3, 4, 15, 14]) if rnd.random() < 0.5 else 5 + (len(data) // 4) + rnd.randint(1, 5)
        off = min(off, 15)
        seg = tcp(peer_ip, our_ip, rnd.randint(1024, 65535), 80, data, data_offset=off)
        if off >= 5 and off * 4 <= len(seg):
            seg = seg[: max(13, off * 4 - 1)]   # make it lie whatever happens
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 6, seg)))
    fr += [ip_frame(ipv4(peer_ip, our_ip, 6, rbytes(rnd.randint(0, 12)))) for _ in range(30)]
    cats.append(Category("TCP with a lying data offset / truncated", fr, ["rx_drop_tcp_malformed"]))
    fr = [ip_frame(ipv4(peer_ip, our_ip, 6, tcp(peer_ip, our_ip, rnd.randint(1024, 65535), rnd.randint(1, 65535), b"")))
          for _ in range(50)]
    cats.append(Category("TCP SYN to a closed port", fr, ["rx_drop_tcp_no_socket"]))

    fr = []
    for _ in range(100):
        data = rbytes(rnd.randint(0, 100))
        ln = rnd.choice([rnd.randint(0, 7), 8 + len(data) + rnd.randint(1, 500)])
        fr.append(ip_frame(ipv4(peer_ip, our_ip, 17, udp(peer_ip, our_ip, 4000, 7, data, length=ln))))
    fr += [ip_frame(ipv4(peer_ip, our_ip, 17, rbytes(rnd.randint(0, 7)))) for _ in range(30)]
    fr += [ip_frame(ipv4(peer_ip, our_ip, 17, udp(peer_ip, our_ip, 4000, 0, b"port zero", checksum=False)))
           for _ in range(20)]
    cats.append(Category("UDP with a lying length / truncated / port 0", fr, ["rx_drop_udp_malformed"]))
    fr = [ip_frame(ipv4(peer_ip, our_ip, 17, udp(peer_ip, our_ip, 4000, 7, rbytes(rnd.randint(1, 300)), bad_checksum=True)))
          for _ in range(150)]
    cats.append(Category("UDP with a bad checksum", fr, ["rx_drop_udp_bad_checksum"]))
    fr = [ip_frame(ipv4(peer_ip, our_ip, 17, udp(peer_ip, our_ip, 4000, rnd.randint(8, 6000), b"closed")))
          for _ in range(60)]
    cats.append(Category("UDP to a closed port", fr, ["rx_drop_udp_no_socket"]))

    fr = [ip_frame(ipv4(peer_ip, our_ip, 1, rbytes(rnd.randint(0, 7)))) for _ in range(60)]
    fr += [ip_frame(ipv4(peer_ip, our_ip, 1, icmp(8, rnd.randint(1, 255), struct.pack("!HH", 7, 7), b"code")))
           for _ in range(40)]
    cats.append(Category("ICMP truncated / echo with a code", fr, ["rx_drop_icmp_malformed"]))
    fr = [ip_frame(ipv4(peer_ip, our_ip, 1, icmp(8, 0, struct.pack("!HH", 7, i), rbytes(rnd.randint(0, 200)), bad_checksum=True)))
          for i in range(100)]
    cats.append(Category("ICMP with a bad checksum", fr, ["rx_drop_icmp_bad_checksum"]))
    fr = [eth(BROADCAST, pm, ETH_P_IP, ipv4(peer_ip, bcast_ip, 1, icmp(8, 0, struct.pack("!HH", 9, i), b"smurf")))
          for i in range(60)]
    cats.append(Category("ICMP echo to the broadcast address", fr, ["rx_drop_icmp_to_broadcast"]))

    # ---------------- Fragments ---------------------------------------------
    # Fragments come from hosts other than the kernel, so they cannot mix
    # with the kernel's own datagrams.
    frag_keys = set()
    # Precise ones: not a multiple of 8 with more to come; past 65535.
    fr = []
    for i in range(40):
        src = rhost()
        frag_keys.add((src, 17, 0xA000 + i))
        fr.append(ip_frame(ipv4(src, our_ip, 17, rbytes(8 * rnd.randint(1, 20) + rnd.randint(1, 7)), ident=0xA000 + i,
                                flags_frag=0x2000 | rnd.randint(1, 100))))
    cats.append(Category("fragment not a multiple of 8", fr, ["rx_drop_ipv4_frag_malformed"]))
    fr = []
    for i in range(40):
        src = rhost()
        frag_keys.add((src, 17, 0xB000 + i))
        fr.append(ip_frame(ipv4(src, our_ip, 17, rbytes(8 * rnd.randint(2, 60)), ident=0xB000 + i,
                                flags_frag=0x2000 | 8190)))
    cats.append(Category("fragment past 65535 bytes", fr, ["rx_drop_ipv4_frag_too_big"]))
    fr = []
    for i in range(40):
        # Two fragments of one datagram that overlap with other bytes.
        src = rhost()
        ident = 0xC000 + i
        frag_keys.add((src, 17, ident))
        fr.append(ip_frame(ipv4(src, our_ip, 17, rbytes(64), ident=ident, flags_frag=0x2000 | 10)))
        fr.append(ip_frame(ipv4(src, our_ip, 17, rbytes(64), ident=ident, flags_frag=0x2000 | 12)))
    cats.append(Category("overlapping fragments", fr, ["rx_accept_ipv4_fragment", "rx_drop_ipv4_frag_overlap"]))
    fr = []
    src = f"{subnet_prefix}.200"
    frag_keys.add((src, 17, 0xD000))
    for k in range(70):
        # 70 fragments of one datagram, with gaps: more than the 64 allowed.
        fr.append(ip_frame(ipv4(src, our_ip, 17, rbytes(8), ident=0xD000, flags_frag=0x2000 | (2 * k + 1))))
    cats.append(Category("too many fragments in one datagram", fr,
                         ["rx_accept_ipv4_fragment", "rx_drop_ipv4_frag_too_many", "rx_drop_ipv4_frag_malformed",
                          "rx_drop_ipv4_frag_no_room"]))

    # Random fragments that never complete, with random ids and offsets,
    # last: they may fill the reassembly memory (no_room).  Held ones count
    # as rx_accept_ipv4_fragment; the rest are refused for a reason.
    fr = []
    for _ in range(400):
        src = rhost()
        proto = rnd.choice([17, 1, 6])
        ident = rnd.getrandbits(16)
        off8 = rnd.randint(1, 8191)  # never offset 0: no first fragment
        more = rnd.random() < 0.8
        n = rnd.randint(1, 100) * 8 if rnd.random() < 0.9 else rnd.randint(1, 800)
        frag_keys.add((src, proto, ident))
        fr.append(ip_frame(ipv4(src, our_ip, proto, rbytes(n), ident=ident, flags_frag=(0x2000 if more else 0) | off8)))
    cats.append(Category("random fragments, never completing", fr,
                         ["rx_accept_ipv4_fragment", "rx_drop_ipv4_frag_malformed", "rx_drop_ipv4_frag_overlap",
                          "rx_drop_ipv4_frag_too_big", "rx_drop_ipv4_frag_no_room", "rx_drop_ipv4_frag_too_many"]))

    # ---------------- IPv6 junk ---------------------------------------------
    fr = [eth(me, pm, ETH_P_IPV6, rbytes(rnd.randint(0, 39))) for _ in range(60)]
    cats.append(Category("IPv6 truncated", fr, ["rx_drop_ipv6_truncated"]))
    fr = []
    for _ in range(60):
        b = bytearray(rbytes(rnd.randint(40, 200)))
        b[0] = (rnd.choice([0, 4, 5, 7, 15]) << 4) | (b[0] & 0xF)
        fr.append(eth(me, pm, ETH_P_IPV6, bytes(b)))
    cats.append(Category("IPv6 EtherType, other version", fr, ["rx_drop_ipv6_malformed"]))

    # ---------------- scapy: fuzzed frames ---------------------------------
    if scapy_fuzz:
        cats += _scapy_categories(seed, me, pm, our_ip, peer_ip, subnet_prefix, rnd)

    return cats, frag_keys


def _scapy_categories(seed, me, pm, our_ip, peer_ip, subnet_prefix, rnd):
    import random as pyrandom

    from scapy.all import ARP, ICMP, IP, TCP, UDP, Ether, IPv6, ICMPv6EchoRequest, IPv6ExtHdrFragment, fuzz
    from scapy.config import conf

    conf.verb = 0
    # scapy draws from the random module: seed it so the frames repeat.
    pyrandom.seed(seed)
    m = ":".join(f"{x:02x}" for x in me)
    p = ":".join(f"{x:02x}" for x in pm)
    src = f"{subnet_prefix}.150"
    out = []

    def many(n, make):
        fr = []
        for _ in range(n):
            b = bytes(make())
            if 14 <= len(b) <= 1514:
                fr.append(b)
        return fr

    # Fuzzed headers from a fixed, harmless source (never the kernel's
    # address, so ARP fuzz cannot rewrite what ustack knows of the kernel).
    out.append(Category("scapy fuzz(IP/UDP)", many(150, lambda: Ether(dst=m, src=p) / fuzz(IP(src=src, dst=our_ip, proto=17) / UDP(dport=7) / b"fuzz")), [], exact=False))
    out.append(Category("scapy fuzz(IP/ICMP)", many(150, lambda: Ether(dst=m, src=p) / fuzz(IP(src=src, dst=our_ip, proto=1) / ICMP())), [], exact=False))
    out.append(Category("scapy fuzz(IP/TCP)", many(150, lambda: Ether(dst=m, src=p) / fuzz(IP(src=src, dst=our_ip, proto=6) / TCP())), [], exact=False))
    out.append(Category("scapy fuzz(ARP)", many(150, lambda: Ether(dst="ff:ff:ff:ff:ff:ff", src=p) / fuzz(ARP(psrc=src))), [], exact=False))
    out.append(Category(
        "scapy IPv6 (ICMPv6 echo, fragment headers)",
        many(100, lambda: Ether(dst=m, src=p) / IPv6(src="fd00:99::1", dst="fd00:99::2") /
             (IPv6ExtHdrFragment(id=pyrandom.getrandbits(32), offset=pyrandom.randint(0, 8191), m=1) / (b"x" * 16)
              if pyrandom.random() < 0.5 else ICMPv6EchoRequest(data=b"junk"))),
        ["rx_drop_ipv6_disabled"]))
    return out


def cleanup_fragments(frag_keys, our_mac, peer_mac, our_ip):
    """One malformed fragment (7 bytes with more to come) per key used:
    ustack discards the datagram it holds for that key, if any, freeing
    its reassembly memory.  Each counts as rx_drop_ipv4_frag_malformed."""
    fr = []
    for src, proto, ident in sorted(frag_keys):
        fr.append(eth(our_mac, peer_mac, ETH_P_IP, ipv4(src, our_ip, proto, b"1234567", ident=ident, flags_frag=0x2000 | 1)))
    return fr
