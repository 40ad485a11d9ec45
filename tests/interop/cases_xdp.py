"""Interop tests over AF_XDP (`link=af_xdp:IFACE`): ustack's programs on one
end of a veth pair, bound to it by an AF_XDP socket, with the XDP program in
the driver (native) and in the kernel's generic path, against the kernel's
own tools on the other end.

The kernel's side keeps its default offloads, as every container's veth
comes (TSO and GSO too: see XdpTopology.peer_segmentation_offload); with
its transmit checksum offload it hands over TCP and UDP with only the
pseudo-header sum in the checksum field and a "checksum not ready" mark on
the socket buffer, which AF_XDP does not pass on (no metadata for it). On a
veth the link recognises that form and marks the frame itself
(crates/link/src/partial_form.rs); the tests check that it did
(`port0_link_rx_csum_partial_form`) and, under `[fault] corrupt`, that no
corrupted byte is echoed."""

import os
import re

import harness as h
import tcp_tools as tt
from cases import (ECHO_CONNS, ECHO_SIZE, SUBNETS, curl, curl_50_mb, no_tcp_trouble, ping_sizes, tcp_echo_test,
                   test, udp_corrupt, udp_every_size, zero_copy_receive)
from harness import check

MODES = ("native", "generic")
NAMES = ("ping", "udp_sizes", "tcp_echo", "http_curl", "http_wrk")
SUBNETS.update({f"{n}_af_xdp_{m}": 150 + 2 * i + j for i, n in enumerate(NAMES) for j, m in enumerate(MODES)})
SUBNETS.update({f"udp_corrupt_af_xdp_{m}": 160 + j for j, m in enumerate(MODES)})


class XdpTopology(h.Topology):
    """The "af_packet" topology with ustack on AF_XDP: a veth pair with one
    queue each way (the one engine binds queue 0; a veth made with a queue
    per CPU would spread the kernel's frames over all of them), ustack in
    ``ns_u``, the kernel (10.99.N.1/24, its checksum offload on) in
    ``ns_k``."""

    def __init__(self, mode, subnet, binary, workdir, **kw):
        super().__init__("af_packet", subnet, binary, workdir, **kw)
        self.mode = mode
        self.sets.append(f"port0.xdp_mode={mode}")

    def create(self):
        h.add_netns(self.ns_k)
        self.ns_u = h.unique("u")
        self.if_u = h.unique("u")
        h.add_netns(self.ns_u)
        h.sh(["ip", "link", "add", self.if_u, "netns", self.ns_u, "numtxqueues", "1", "numrxqueues", "1",
              "type", "veth", "peer", "name", self.if_k, "netns", self.ns_k, "numtxqueues", "1", "numrxqueues", "1"])
        h.sh(["ip", "-n", self.ns_u, "link", "set", self.if_u, "up"])
        self._kernel_side_up()
        return self

    def peer_segmentation_offload(self):
        # The peer keeps TSO and GSO: in native mode the veth stops its
        # peer's TSO itself (an XDP program on this end); in generic mode
        # the socket takes 64 KB super-frames in pieces and the link cuts
        # them into segments (crates/link/src/af_xdp/gather.rs).
        return True

    def config(self):
        extra_port = self.extra_port + (f"addr6={self.ustack_ip6}/64\n" if self.ipv6 else "")
        return h.ustack_config(f"af_xdp:{self.if_u}", self.ustack_ip, extra_port=extra_port, extra=self.extra)

    def start(self, wait_ready=True):
        super().start(wait_ready)
        # The XDP program is on ustack's end in the mode asked for.
        p = h.sh(["ip", "-n", self.ns_u, "-d", "link", "show", self.if_u])
        want = "xdpgeneric" if self.mode == "generic" else "xdp "
        check(want in p.stdout and "prog/xdp" in p.stdout, f"no {self.mode} XDP program on {self.if_u}:\n{p.stdout}")
        return self


class XdpCtx:
    """The suite's context, whose topologies are AF_XDP ones in `mode`."""

    def __init__(self, ctx, mode):
        self._ctx = ctx
        self.mode = mode

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def topo(self, kind, subnet, binary=None, **kw):
        return XdpTopology(self.mode, subnet, binary or self._ctx.binary, self._ctx.workdir, **kw).create()


def no_copy(st, what):
    """Frames reached the stack from the UMEM: none was copied by ustack,
    no ring or UMEM error."""
    check(st.get("port0_link_rx_frames", 0) > 0, f"{what}: no frame received over AF_XDP: {h.nonzero(st)}")
    check(st.get("port0_link_rx_copied", -1) == 0,
          f"{what}: port0_link_rx_copied = {st.get('port0_link_rx_copied')}, expected 0")
    check(st.get("port0_link_ring_errors", -1) == 0, f"{what}: ring errors: {h.nonzero(st)}")


def register(mode):
    @test(f"ping_af_xdp_{mode}")
    def _(ctx):
        ping_sizes(XdpCtx(ctx, mode), "af_xdp", f"ping_af_xdp_{mode}")

    @test(f"udp_sizes_af_xdp_{mode}", budget=90)
    def _(ctx):
        udp_every_size(XdpCtx(ctx, mode), "af_xdp", f"udp_sizes_af_xdp_{mode}")

    @test(f"tcp_echo_af_xdp_{mode}", budget=90)
    def _(ctx):
        t = XdpCtx(ctx, mode).topo("af_xdp", SUBNETS[f"tcp_echo_af_xdp_{mode}"]).start()
        tcp_echo_test(t, ECHO_CONNS, ECHO_SIZE, 15)
        st = t.ustack.wait_stats(lambda s: s.get("tcp_connections", 0) == 0, timeout=5,
                                 what="every TCP connection closed")
        no_tcp_trouble(st, "echo")
        check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
        no_copy(st, "echo")
        zero_copy_receive(st, "echo")
        check(st.get("port0_link_rx_csum_partial_form", 0) > 0,
              f"the kernel's partial checksums were not recognised: {h.nonzero(st)}")
        print(f"    port0_link_rx_frames {st['port0_link_rx_frames']}, port0_link_rx_copied "
              f"{st['port0_link_rx_copied']}, port0_link_rx_dropped {st.get('port0_link_rx_dropped')}")
        t.ustack.stop()

    @test(f"http_curl_af_xdp_{mode}", budget=90)
    def _(ctx):
        t = XdpCtx(ctx, mode).topo("af_xdp", SUBNETS[f"http_curl_af_xdp_{mode}"], binary=ctx.http).start()
        out = os.path.join(ctx.workdir, "index.html")
        code, size, _ = curl(t, f"http://{t.ustack_ip}/", out)
        check(code == 200 and size == 600, f"GET /: {code}, {size} bytes (expected 200, 600)")
        st = curl_50_mb(ctx, t)
        no_copy(st, "curl")
        t.ustack.stop()

    @test(f"http_wrk_af_xdp_{mode}", budget=90)
    def _(ctx):
        t = XdpCtx(ctx, mode).topo("af_xdp", SUBNETS[f"http_wrk_af_xdp_{mode}"], binary=ctx.http).start()
        out, r = tt.run_wrk(t.ns_k, f"http://{t.ustack_ip}/", connections=200, seconds=5)
        h.log(out)
        print(f"    wrk -t2 -c200 -d5s: {r['rps']:.0f} requests/s, {r['requests']} requests, "
              f"socket errors {r['socket_errors']}, non-2xx {r['non_2xx']}")
        check(r["requests"] > 1000, f"only {r['requests']} requests:\n{out}")
        check(r["socket_errors"] == 0, f"socket errors:\n{out}")
        check(r["non_2xx"] == 0, f"non-2xx responses:\n{out}")
        st = t.ustack.settled_stats(quiet=0.2)
        no_tcp_trouble(st, "wrk")
        no_copy(st, "wrk")
        err = t.ustack.stop()
        check(re.search(r"af_xdp queue 0 %s XDP, (copy|zero-copy) mode" % mode, err),
              f"ustack did not say how the AF_XDP link runs: {err[:500]!r}")


    @test(f"udp_corrupt_af_xdp_{mode}", budget=60)
    def _(ctx):
        udp_corrupt(XdpCtx(ctx, mode).topo("af_xdp", SUBNETS[f"udp_corrupt_af_xdp_{mode}"],
                                           sets=["fault.corrupt=0.05"]).start())


for _mode in MODES:
    register(_mode)
