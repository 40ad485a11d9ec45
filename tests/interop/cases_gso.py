"""Interop tests of large receive over AF_PACKET: one TCP connection
carrying a stream each way (the kernel sends 16 MB, ustack-echo sends it
back), checked by SHA-256 on the kernel's side.

- With the kernel peer's default offloads (TSO, GSO, checksum offload), its
  writes reach the veth as TCP super-frames of up to 64 KB, which the link
  hands to the stack whole (`link::af_packet`): none is cut, none dropped.
  With the default TPACKET_V2 ring (2 KiB slots) each one is put in the
  ring truncated (`TP_STATUS_COPY`) and read whole from the socket's
  queue; with `rx_ring=v3` it lies whole in a block.
- With the peer's segmentation offload off, MTU-sized segments arrive and
  the link aggregates each flow's in-order segments per receive burst
  (`link::gro`).
- With `[dpdk] tso=1`, ustack sends its side as TCP super-frames after a
  virtio_net_hdr, which the veth hands to the kernel whole."""

import hashlib
import random

import harness as h
from cases import SUBNETS, no_tcp_trouble, test
from harness import check

SUBNETS.update({"tcp_stream_gso_af_packet": 30, "tcp_stream_gro_af_packet": 31, "tcp_stream_tso_af_packet": 32,
                "tcp_stream_gso_af_packet_v3": 33})

STREAM_SIZE = 16 * 1024 * 1024


def one_stream_each_way(t, seed):
    """16 MB to ustack-echo and back on one connection, compared by hash."""
    import tcp_tools as tt

    payload = random.Random(seed).randbytes(STREAM_SIZE)
    (got,) = tt.echo_many(t.ns_k, (t.ustack_ip, 7), [payload], timeout=60)
    want, back = hashlib.sha256(payload).hexdigest(), hashlib.sha256(got).hexdigest()
    check(len(got) == len(payload) and back == want,
          f"{len(got)} bytes back of {len(payload)}, sha256 {back[:16]}... expected {want[:16]}...")
    print(f"    {STREAM_SIZE} bytes each way, sha256 {want[:16]}... on both")
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "stream")
    link = {k[len("port0_link_"):]: v for k, v in st.items() if k.startswith("port0_link_rx_") and v}
    print(f"    link: {link}")
    check(st.get("port0_link_rx_oversize", 0) == 0 and st.get("port0_link_rx_super_bad_checksum", 0) == 0
          and st.get("rx_drop_tcp_bad_checksum", 0) == 0,
          f"frames dropped as too large or with a bad checksum: {h.nonzero(st)}")
    t.ustack.stop()
    return st


def super_frames_whole(st, ring):
    supers, cut = st.get("port0_link_rx_super_frames", 0), st.get("port0_link_rx_super_cut", 0)
    queued = st.get("port0_link_rx_queued_whole", 0)
    check(supers > 0, f"no super-frame arrived (is the kernel's TSO on?): {h.nonzero(st)}")
    gso, size = st.get("port0_link_rx_vnet_tcp_gso", 0), st.get("port0_link_rx_vnet_tcp_gso_size", 0)
    # (A super-frame joined to an aggregate of its burst is not counted a
    # super-frame of its own, so `gso` may be the larger.)
    check(gso >= supers and size == 1448,
          f"{gso} of {supers} super-frames with a segment size from their virtio_net_hdr ({size}, "
          f"expected the kernel's MSS 1448): {h.nonzero(st)}")
    check(cut == 0, f"{cut} of {supers} super-frames were cut, not handed over whole: {h.nonzero(st)}")
    if ring == "v2":
        # A super-frame longer than a 2 KiB slot came through the socket's
        # queue; one of two segments, one short, fits a slot (it is a
        # super-frame by its virtio_net_hdr).
        check(0 < queued <= supers, f"{queued} frames read whole from the queue for {supers} super-frames")
    else:
        check(queued == 0, f"{queued} frames from the socket's queue with a V3 ring")
    print(f"    {supers} super-frames whole, {queued} of them from the socket's queue")


@test("tcp_stream_gso_af_packet", budget=90)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["tcp_stream_gso_af_packet"]).start()
    super_frames_whole(one_stream_each_way(t, 30), "v2")


@test("tcp_stream_gso_af_packet_v3", budget=90)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["tcp_stream_gso_af_packet_v3"], extra_port="rx_ring=v3\n").start()
    super_frames_whole(one_stream_each_way(t, 33), "v3")


@test("tcp_stream_gro_af_packet", budget=90)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["tcp_stream_gro_af_packet"])
    # MTU-sized segments from the kernel: what the link aggregates.
    h.nsx(t.ns_k, "ethtool", "-K", t.if_k, "tso", "off", "gso", "off")
    t.start()
    st = one_stream_each_way(t, 31)
    aggregates, joined = st.get("port0_link_rx_gro_aggregates", 0), st.get("port0_link_rx_gro_joined", 0)
    check(st.get("port0_link_rx_super_frames", 0) == 0, f"super-frames with TSO and GSO off: {h.nonzero(st)}")
    check(aggregates > 0 and joined > aggregates,
          f"no segments aggregated (aggregates {aggregates}, joined {joined}): {h.nonzero(st)}")


@test("tcp_stream_tso_af_packet", budget=90)
def _(ctx):
    # `[dpdk] tso=1`: ustack's echo leaves as TCP super-frames (a
    # virtio_net_hdr before each), which the veth hands to the kernel whole.
    t = ctx.topo("af_packet", SUBNETS["tcp_stream_tso_af_packet"], sets=["dpdk.tso=1"]).start()
    st = one_stream_each_way(t, 32)
    sent = st.get("port0_link_tx_super_frames", 0)
    check(sent > 0, f"no TCP super-frame left with tso=1: {h.nonzero(st)}")
    check(st.get("port0_link_tx_dropped", 0) == 0 and st.get("tx_drop_too_big", 0) == 0,
          f"frames dropped on the way out: {h.nonzero(st)}")
    print(f"    TCP super-frames sent: {sent}")


SUBNETS.update({"tcp6_stream_tso_af_packet": 84})


@test("tcp6_stream_tso_af_packet", budget=90)
def _(ctx):
    # TCP over IPv6 both ways with segmentation offload on both ends: the
    # kernel's TSO hands ustack IPv6 super-frames (taken whole), and with
    # `[dpdk] tso=1` ustack sends IPv6 super-frames after a virtio_net_hdr
    # (GSO_TCPV6), which the veth hands to the kernel whole.
    import tcp_tools as tt

    t = ctx.topo("af_packet", SUBNETS["tcp6_stream_tso_af_packet"], ipv6=True, sets=["dpdk.tso=1"]).start()
    t.wait_ready6()
    # Super-frames leave from the connection's template, built on a
    # neighbour known reachable. ustack learnt the kernel's address from
    # its solicitation (stale, RFC 4861 7.2.3); the kernel's ACKs of the
    # echoed data confirm it (TCP's hint, RFC 4861 7.3.1), with no wait
    # for a probe.
    payload = random.Random(84).randbytes(STREAM_SIZE)
    (got,) = tt.echo_many(t.ns_k, (t.ustack_ip6, 7), [payload], timeout=60)
    want, back = hashlib.sha256(payload).hexdigest(), hashlib.sha256(got).hexdigest()
    check(len(got) == len(payload) and back == want,
          f"{len(got)} bytes back of {len(payload)}, sha256 {back[:16]}... expected {want[:16]}...")
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "stream")
    sent, received = st.get("port0_link_tx_super_frames", 0), st.get("port0_link_rx_super_frames", 0)
    print(f"    {STREAM_SIZE} bytes each way over IPv6, sha256 {want[:16]}... on both; "
          f"super-frames sent {sent}, received {received}")
    check(st.get("ndp_reachable_by_upper_layer", 0) > 0,
          f"TCP never confirmed the kernel as ustack's neighbour: {h.nonzero(st)}")
    check(sent > 0, f"no IPv6 TCP super-frame left with tso=1: {h.nonzero(st)}")
    check(received > 0, f"no IPv6 super-frame arrived (is the kernel's TSO on?): {h.nonzero(st)}")
    for k in ("port0_link_tx_dropped", "tx_drop_too_big", "port0_link_rx_oversize",
              "port0_link_rx_super_bad_checksum", "ipv6_fragments_sent"):
        check(st.get(k, 0) == 0, f"{k} is {st.get(k)}: {h.nonzero(st)}")
    t.ustack.stop()


# --------------------------------------------------------------------------
# The virtio_net_hdr on receive: with PACKET_VNET_HDR (on by default) each
# super-frame comes with its segment size. A UDP_SEGMENT sender's
# super-frame is cut into the datagrams it sent; a TCP super-frame the link
# cuts (no large buffer: `gro=0`) is cut at the sender's MSS.

SUBNETS.update({"udp_gso_echo_af_packet": 56, "udp_gso_echo_af_packet_v3": 57, "tcp_stream_gso_cut_af_packet": 58})

SOL_UDP, UDP_SEGMENT = 17, 103


def udp_gso_echo(t, family, dest, src_ip):
    """Sends UDP_SEGMENT super-frames of several segment sizes (the last
    datagram of each shorter) to ustack's echo; returns how many datagrams
    were sent. Every one must come back, as it was."""
    import socket

    s = h.netns_socket(t.ns_k, family, socket.SOCK_DGRAM)
    s.bind((src_ip, 0))
    s.settimeout(2.0)
    sent, back = [], []
    try:
        for n, (seg, count) in enumerate([(1000, 10), (1400, 20), (500, 64), (1200, 7)]):
            s.setsockopt(SOL_UDP, UDP_SEGMENT, seg)
            dgrams = [f"gso{n}-{i:03d}-".encode().ljust(seg, bytes([65 + i % 26])) for i in range(count)]
            dgrams[-1] = dgrams[-1][: seg // 3]
            s.sendto(b"".join(dgrams), dest)
            sent += dgrams
            while len(back) < len(sent):
                try:
                    data, src = s.recvfrom(65535)
                except socket.timeout:
                    break
                check(src[:2] == dest[:2], f"a reply from {src}, expected {dest}")
                back.append(data)
    finally:
        s.close()
    missing = set(sent) - set(back)
    check(not missing, f"{len(missing)} of {len(sent)} datagrams not echoed, e.g. {sorted(missing)[:2]}")
    check(len(back) == len(sent), f"{len(back)} replies for {len(sent)} datagrams")
    return len(sent)


def udp_gso_counted(t, datagrams, supers):
    st = t.ustack.settled_stats()
    vnet = {k: v for k, v in st.items() if k.startswith("port0_link_rx_vnet_") and v}
    print(f"    {datagrams} datagrams echoed; {vnet}")
    check(st.get("port0_link_rx_vnet_udp_gso", 0) == supers,
          f"{st.get('port0_link_rx_vnet_udp_gso', 0)} UDP super-frames cut, {supers} sent "
          f"(does the veth pass UDP GSO on?): {h.nonzero(st)}")
    check(st.get("port0_link_rx_vnet_udp_datagrams", 0) == datagrams,
          f"{st.get('port0_link_rx_vnet_udp_datagrams', 0)} datagrams cut of {datagrams}: {h.nonzero(st)}")
    refused = {k: v for k, v in vnet.items() if "bad" in k or "mismatch" in k or "without" in k}
    check(not refused and st.get("port0_link_rx_oversize", 0) == 0
          and st.get("rx_drop_udp_bad_checksum", 0) == 0, f"frames refused or dropped: {h.nonzero(st)}")
    t.ustack.stop()


@test("udp_gso_echo_af_packet", budget=60)
def _(ctx):
    import socket

    t = ctx.topo("af_packet", SUBNETS["udp_gso_echo_af_packet"], ipv6=True).start()
    t.wait_ready6()
    n4 = udp_gso_echo(t, socket.AF_INET, (t.ustack_ip, 7), t.kernel_ip)
    n6 = udp_gso_echo(t, socket.AF_INET6, (t.ustack_ip6, 7), t.kernel_ip6)
    udp_gso_counted(t, n4 + n6, 8)


@test("udp_gso_echo_af_packet_v3", budget=60)
def _(ctx):
    import socket

    t = ctx.topo("af_packet", SUBNETS["udp_gso_echo_af_packet_v3"], extra_port="rx_ring=v3\n").start()
    udp_gso_counted(t, udp_gso_echo(t, socket.AF_INET, (t.ustack_ip, 7), t.kernel_ip), 4)


@test("tcp_stream_gso_cut_af_packet", budget=90)
def _(ctx):
    # No large buffer (`gro=0`): every TCP super-frame is cut, at the
    # segment size its virtio_net_hdr gives (the kernel's MSS, 1448 with
    # timestamps), each segment checked by the stack like any other.
    t = ctx.topo("af_packet", SUBNETS["tcp_stream_gso_cut_af_packet"], extra_port="gro=0\n").start()
    st = one_stream_each_way(t, 58)
    supers, cut = st.get("port0_link_rx_super_frames", 0), st.get("port0_link_rx_super_cut", 0)
    gso, size = st.get("port0_link_rx_vnet_tcp_gso", 0), st.get("port0_link_rx_vnet_tcp_gso_size", 0)
    print(f"    {supers} super-frames, {cut} cut, segment size from the header {size}")
    check(supers > 0 and cut == supers, f"super-frames not all cut with gro=0: {h.nonzero(st)}")
    check(gso == supers, f"{gso} TCP super-frames with a header's segment size of {supers}: {h.nonzero(st)}")
    check(size == 1448, f"segment size {size} from the header, expected the kernel's MSS 1448")
