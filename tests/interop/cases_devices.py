"""Devices as they come (issue 19): DPDK's software drivers with default
arguments, and links whose kernel peer keeps every default offload (TSO,
GSO, checksum offload), so TCP arrives in 64 KB super-frames with partial
checksums wherever the link lets the kernel make them.

- DPDK `net_tap` (`vdev=net_tap0,iface=IFACE`): the driver gives the
  kernel's TAP the port's address, so ustack answers with a neighbouring
  one.
- DPDK `net_af_xdp` (`vdev=net_af_xdp0,iface=IFACE`, nothing else): its
  queue setup takes 2048 mbufs for its fill ring, which ustack adds to the
  pool; its XDP program runs in the veth's driver, so the veth stops its
  peer's segmentation offload and frames come at most MTU-sized.
- `[fault] corrupt=0.001` over AF_XDP with the peer's defaults: TCP
  transfers whose content is checked end to end; the injector finishes a
  partial checksum before it flips a bit, so no flipped byte reaches the
  application."""

import harness as h
from cases import (ECHO_CONNS, ECHO_SIZE, SUBNETS, PING_SIZES, no_tcp_trouble, tcp_echo_test, test,
                   udp_every_size)
from cases_xdp import XdpCtx
from harness import check

SUBNETS.update({
    "ping_dpdk_af_xdp": 15, "udp_sizes_dpdk_af_xdp": 16, "tcp_echo_dpdk_af_xdp": 17,
    "tcp_corrupt_af_xdp_native": 18, "tcp_corrupt_af_xdp_generic": 19,
    "tcp_echo_peer_tso_af_xdp_generic": 20,
    "ping_dpdk_tap": 21, "udp_sizes_dpdk_tap": 22, "tcp_echo_dpdk_tap": 23,
})


class DpdkAfXdpTopology(h.Topology):
    """The "dpdk" topology with the `net_af_xdp` driver on ustack's end of
    the veth, with default arguments (iface only)."""

    def __init__(self, subnet, binary, workdir, **kw):
        super().__init__("dpdk", subnet, binary, workdir, **kw)

    def peer_segmentation_offload(self):
        # The driver's XDP program runs in the veth's driver, so the veth
        # stops its peer's TSO itself; nothing is turned off here.
        return True

    def config(self):
        dpdk = f"no_huge=1\nvdev=net_af_xdp0,iface={self.if_u}\nfile_prefix={self.ns_u}\n"
        return h.ustack_config("dpdk", self.ustack_ip, extra_port="memory=1024\n" + self.extra_port,
                               extra=dpdk + self.extra)


class DpdkTapTopology(h.Topology):
    """The "tap" topology with DPDK's `net_tap` driver making the TAP
    (`vdev=net_tap0,iface=IFACE`, nothing else) in the kernel's namespace;
    the kernel's side keeps its offloads."""

    def __init__(self, subnet, binary, workdir, **kw):
        super().__init__("tap", subnet, binary, workdir, **kw)

    def config(self):
        dpdk = f"no_huge=1\nvdev=net_tap0,iface={self.if_k}\nfile_prefix={self.ns_k}\n"
        return h.ustack_config("dpdk", self.ustack_ip, extra_port="memory=1024\n" + self.extra_port,
                               extra=dpdk + self.extra)


class DpdkTapCtx:
    """The suite's context, whose "dpdk" topologies use net_tap."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def topo(self, kind, subnet, binary=None, **kw):
        check(kind == "dpdk", kind)
        return DpdkTapTopology(subnet, binary or self._ctx.binary, self._ctx.workdir, **kw).create()


class DpdkAfXdpCtx:
    """The suite's context, whose "dpdk" topologies use net_af_xdp."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def topo(self, kind, subnet, binary=None, **kw):
        check(kind == "dpdk", kind)
        return DpdkAfXdpTopology(subnet, binary or self._ctx.binary, self._ctx.workdir, **kw).create()


def peer_keeps_offloads(t):
    """The kernel's end still has checksum offload and GSO, and TSO unless
    the kernel itself fixed it off (a veth whose other end runs a native
    XDP program loses TSO, "off [fixed]": its GSO then cuts segments in
    software before they cross)."""
    out = h.nsx(t.ns_k, "ethtool", "-k", t.if_k).stdout
    for feat in ("tx-checksumming", "generic-segmentation-offload"):
        check(f"{feat}: on" in out, f"the kernel's end has {feat} off:\n{out}")
    check("tcp-segmentation-offload: on" in out or "tx-tcp-segmentation: off [fixed]" in out,
          f"the kernel's end has TSO turned off:\n{out}")


@test("ping_dpdk_af_xdp")
def _(ctx):
    c = DpdkAfXdpCtx(ctx)
    t = c.topo("dpdk", SUBNETS["ping_dpdk_af_xdp"]).start()
    peer_keeps_offloads(t)
    for size in PING_SIZES:
        p = t.ping(size, count=5, interval="0.05")
        out = p.stdout + p.stderr
        check(p.returncode == 0 and " 0% packet loss" in out, f"ping -s {size}: expected 5 of 5 answered:\n{out}")
    err = t.ustack.stop()
    check("(net_af_xdp): " in err and "mbufs per queue instead of 1024" in err,
          f"ustack did not say it grew the pool for net_af_xdp: {err[-1500:]!r}")


@test("udp_sizes_dpdk_af_xdp", budget=90)
def _(ctx):
    udp_every_size(DpdkAfXdpCtx(ctx), "dpdk", "udp_sizes_dpdk_af_xdp")


@test("tcp_echo_dpdk_af_xdp", budget=90)
def _(ctx):
    t = DpdkAfXdpCtx(ctx).topo("dpdk", SUBNETS["tcp_echo_dpdk_af_xdp"]).start()
    peer_keeps_offloads(t)
    tcp_echo_test(t, ECHO_CONNS, ECHO_SIZE, 15)
    st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5,
                             what="every TCP connection closed")
    no_tcp_trouble(st, "echo")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    check(st.get("port0_link_rx_csum_partial_form", 0) > 0,
          f"the kernel's partial checksums were not recognised: {h.nonzero(st)}")
    t.ustack.stop()


@test("ping_dpdk_tap")
def _(ctx):
    t = DpdkTapCtx(ctx).topo("dpdk", SUBNETS["ping_dpdk_tap"]).start()
    for size in PING_SIZES:
        p = t.ping(size, count=5, interval="0.05")
        out = p.stdout + p.stderr
        check(p.returncode == 0 and " 0% packet loss" in out, f"ping -s {size}: expected 5 of 5 answered:\n{out}")
    err = t.ustack.stop()
    check("(net_tap): the kernel's TAP interface has the port's address" in err,
          f"ustack did not say which address it answers as: {err[-1500:]!r}")


@test("udp_sizes_dpdk_tap", budget=90)
def _(ctx):
    udp_every_size(DpdkTapCtx(ctx), "dpdk", "udp_sizes_dpdk_tap")


@test("tcp_echo_dpdk_tap", budget=90)
def _(ctx):
    t = DpdkTapCtx(ctx).topo("dpdk", SUBNETS["tcp_echo_dpdk_tap"]).start()
    tcp_echo_test(t, ECHO_CONNS, ECHO_SIZE, 15)
    st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5,
                             what="every TCP connection closed")
    no_tcp_trouble(st, "echo")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    # The driver reports checksum offload both ways, and the link uses it:
    # received frames carry its verdict, sent ones leave their checksum to it.
    rx_off, tx_off = st.get("port0_link_rx_l4_csum_offloaded", 0), st.get("port0_link_tx_csum_offloaded", 0)
    print(f"    checksums verified by the port {rx_off}, left to the port {tx_off}")
    check(rx_off > 0 and tx_off > 0 and st.get("port0_link_tx_csum_software", 0) == 0,
          f"the port's checksum offload was not used: {h.nonzero(st)}")
    t.ustack.stop()


@test("tcp_echo_peer_tso_af_xdp_generic", budget=90)
def _(ctx):
    # Generic XDP sees the peer's 64 KB super-frames: the socket takes them
    # in pieces (XDP_USE_SG) and the link cuts them into segments.
    t = XdpCtx(ctx, "generic").topo("af_xdp", SUBNETS["tcp_echo_peer_tso_af_xdp_generic"]).start()
    peer_keeps_offloads(t)
    dt = tcp_echo_test(t, ECHO_CONNS, ECHO_SIZE, 15)
    st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5,
                             what="every TCP connection closed")
    no_tcp_trouble(st, "echo")
    print(f"    port0_link_rx_super_frames {st.get('port0_link_rx_super_frames', 0)}, "
          f"port0_link_rx_oversize {st.get('port0_link_rx_oversize', 0)}, "
          f"port0_link_rx_dropped {st.get('port0_link_rx_dropped', 0)}")
    check(st.get("port0_link_rx_super_frames", 0) > 0, f"no super-frame was cut: {h.nonzero(st)}")
    check(st.get("port0_link_rx_super_bad_checksum", 0) == 0, f"super-frames failed: {h.nonzero(st)}")
    check(dt < 30, f"the echo took {dt:.1f} s: super-frames are being lost")
    err = t.ustack.stop()
    check("multi-buffer" in err, f"ustack did not say the socket takes frames in pieces: {err[-1500:]!r}")


def tcp_corrupt(t):
    """TCP echo of checked content under `fault.corrupt` with the peer's
    default offloads: every byte back as sent, the injector corrupted both
    ways and finished partial checksums first, the stack caught bad
    checksums."""
    tcp_echo_test(t, ECHO_CONNS, 2 * 1024 * 1024, 23)
    st = t.ustack.settled_stats()
    print(f"    corrupted rx {st.get('port0_fault_rx_corrupted')} tx {st.get('port0_fault_tx_corrupted')}, "
          f"partial checksums finished first rx {st.get('port0_fault_rx_completed_before_corrupt')}, "
          f"rx_drop_tcp_bad_checksum {st.get('rx_drop_tcp_bad_checksum', 0)}")
    check(st.get("port0_fault_rx_corrupted", 0) > 0, f"the injector corrupted nothing: {h.nonzero(st)}")
    check(st.get("port0_fault_rx_completed_before_corrupt", 0) > 0,
          f"no partial checksum was finished before a flip (is the peer's offload on?): {h.nonzero(st)}")
    check(st.get("rx_drop_tcp_bad_checksum", 0) > 0, f"no corrupted TCP segment was caught: {h.nonzero(st)}")
    t.ustack.stop()


for _mode in ("native", "generic"):
    def _register(mode):
        @test(f"tcp_corrupt_af_xdp_{mode}", budget=90)
        def _(ctx):
            t = XdpCtx(ctx, mode).topo("af_xdp", SUBNETS[f"tcp_corrupt_af_xdp_{mode}"],
                                       sets=["fault.corrupt=0.001"]).start()
            peer_keeps_offloads(t)
            tcp_corrupt(t)

    _register(_mode)


SUBNETS.update({"tcp_stream_peer_tso_dpdk_af_packet": 82, "ping_jumbo_dpdk_tap_chained": 83})


@test("tcp_stream_peer_tso_dpdk_af_packet", budget=90)
def _(ctx):
    # `vdev=net_af_packet0,iface=IFACE` as people write it, the kernel's
    # end with every default offload: its TCP arrives in super-frames of up
    # to 64 KB, which the driver's ring slots (ustack adds 64 KB ones)
    # hand over whole; a 3000-byte ping arrives reassembled by the
    # driver's fanout.
    from cases_gso import STREAM_SIZE
    import hashlib
    import random
    import tcp_tools as tt

    t = ctx.topo("dpdk", SUBNETS["tcp_stream_peer_tso_dpdk_af_packet"]).start()
    peer_keeps_offloads(t)
    p = t.ping(3000, count=5, interval="0.05")
    out = p.stdout + p.stderr
    check(p.returncode == 0 and " 0% packet loss" in out, f"ping -s 3000: expected 5 of 5 answered:\n{out}")
    payload = random.Random(82).randbytes(STREAM_SIZE)
    (got,) = tt.echo_many(t.ns_k, (t.ustack_ip, 7), [payload], timeout=60)
    want, back = hashlib.sha256(payload).hexdigest(), hashlib.sha256(got).hexdigest()
    check(len(got) == len(payload) and back == want,
          f"{len(got)} bytes back of {len(payload)}, sha256 {back[:16]}... expected {want[:16]}...")
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "stream")
    above = st.get("port0_link_rx_above_mtu", 0)
    print(f"    {STREAM_SIZE} bytes each way, sha256 {want[:16]}... on both; frames above the MTU received "
          f"whole: {above}, tcp retransmitted segments {st.get('tcp_retransmitted_segments', 0)}")
    check(above > 0, f"no frame above the MTU arrived (is the kernel's TSO on?): {h.nonzero(st)}")
    for k in ("rx_drop_ipv4_truncated", "rx_drop_eth_truncated", "port0_link_rx_oversize",
              "port0_link_rx_chained_no_buffer", "rx_drop_tcp_bad_checksum"):
        check(st.get(k, 0) == 0, f"{k} is {st.get(k)}: frames were cut or dropped: {h.nonzero(st)}")
    err = t.ustack.stop()
    check("no framesz given, so framesz=65408,blocksz=2093056,framecnt=128 is added" in err,
          f"ustack did not say what it added to the vdev: {err[-1500:]!r}")


@test("ping_jumbo_dpdk_tap_chained")
def _(ctx):
    # DPDK's tap driver reads what the kernel sends into its TAP at the
    # TAP's MTU, whatever the port was set up with: with the kernel's end
    # raised to 9000 bytes, a 6000-byte ping leaves the kernel in one frame
    # longer than an mbuf. The driver chains it (scatter, which ustack
    # turns on) and the link gathers it; without, it was cut to 2 KB.
    t = DpdkTapCtx(ctx).topo("dpdk", SUBNETS["ping_jumbo_dpdk_tap_chained"]).start()
    h.nsx(t.ns_k, "ip", "link", "set", t.if_k, "mtu", "9000")
    p = t.ping(6000, count=5, interval="0.05")
    out = p.stdout + p.stderr
    check(p.returncode == 0 and " 0% packet loss" in out, f"ping -s 6000: expected 5 of 5 answered:\n{out}")
    st = t.ustack.settled_stats()
    gathered = st.get("port0_link_rx_chained_gathered", 0)
    print(f"    chained frames gathered: {gathered}")
    check(gathered >= 5, f"the pings did not arrive chained: {h.nonzero(st)}")
    for k in ("rx_drop_ipv4_truncated", "port0_link_rx_oversize", "port0_link_rx_chained_no_buffer"):
        check(st.get(k, 0) == 0, f"{k} is {st.get(k)}: frames were cut or dropped: {h.nonzero(st)}")
    t.ustack.stop()
