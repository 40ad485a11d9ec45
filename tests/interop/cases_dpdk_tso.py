"""Interop tests of DPDK's TX TSO over `net_tap` (DPDK 22.11's driver
offers TCP segmentation offload; it cuts with DPDK's GSO library, which
takes TCP over IPv4 only).

With `[dpdk] tso=1` ustack hands the port TCP super-frames of up to 64 KB
from a pool of large mbufs: IPv4 ones go to the port whole
(`port0_link_tx_tso_frames`), IPv6 ones are cut by the link
(`port0_link_tx_super_frames_cut`). One stream of 16 MB each way, checked
by SHA-256 on the kernel's side."""

import hashlib
import random

import harness as h
from cases import SUBNETS, no_tcp_trouble, test
from cases_devices import DpdkTapTopology
from harness import check

SUBNETS.update({"tcp_stream_tso_dpdk_tap": 24, "tcp6_stream_tso_dpdk_tap": 25})

STREAM_SIZE = 16 * 1024 * 1024


class DpdkTapTsoTopology(DpdkTapTopology):
    """net_tap with `tso=1`, and ustack's IPv6 address with ipv6."""

    def config(self):
        if self.ipv6:
            self.extra_port += f"addr6={self.ustack_ip6}/64\n"
        return super().config()


def stream(t, addr, seed):
    import tcp_tools as tt

    payload = random.Random(seed).randbytes(STREAM_SIZE)
    (got,) = tt.echo_many(t.ns_k, (addr, 7), [payload], timeout=60)
    want, back = hashlib.sha256(payload).hexdigest(), hashlib.sha256(got).hexdigest()
    check(len(got) == len(payload) and back == want,
          f"{len(got)} bytes back of {len(payload)}, sha256 {back[:16]}... expected {want[:16]}...")
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "stream")
    for k in ("port0_link_tx_dropped", "tx_drop_too_big", "port0_link_pool_exhausted"):
        check(st.get(k, 0) == 0, f"{k} is {st.get(k)}: {h.nonzero(st)}")
    tso, cut = st.get("port0_link_tx_tso_frames", 0), st.get("port0_link_tx_super_frames_cut", 0)
    print(f"    {STREAM_SIZE} bytes each way, sha256 {want[:16]}... on both; super-frames to the "
          f"port's TSO {tso}, cut by the link {cut}")
    return st


def topo(ctx, name, ipv6=False):
    return DpdkTapTsoTopology(SUBNETS[name], ctx.binary, ctx.workdir, sets=["dpdk.tso=1"],
                              ipv6=ipv6).create().start()


@test("tcp_stream_tso_dpdk_tap", budget=90)
def _(ctx):
    t = topo(ctx, "tcp_stream_tso_dpdk_tap")
    st = stream(t, t.ustack_ip, 161)
    check(st.get("port0_link_tx_tso_frames", 0) > 0, f"no super-frame went to the port's TSO: {h.nonzero(st)}")
    check(st.get("port0_link_tx_super_frames_cut", 0) == 0, f"IPv4 super-frames cut by the link: {h.nonzero(st)}")
    t.ustack.stop()


@test("tcp6_stream_tso_dpdk_tap", budget=90)
def _(ctx):
    t = topo(ctx, "tcp6_stream_tso_dpdk_tap", ipv6=True)
    t.wait_ready6()
    st = stream(t, t.ustack_ip6, 162)
    check(st.get("port0_link_tx_super_frames_cut", 0) > 0, f"no IPv6 super-frame was cut: {h.nonzero(st)}")
    check(st.get("port0_link_tx_tso_frames", 0) == 0, f"IPv6 super-frames went to net_tap's TSO: {h.nonzero(st)}")
    t.ustack.stop()
