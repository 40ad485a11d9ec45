"""`[portN] kernel_rx_drop` (crates/link/src/kernel_rx_drop.rs): an
AF_PACKET port's frames stop at tc ingress after ustack's socket has its
copy, so the kernel's IPv4 input in ustack's namespace never counts them
(IpInReceives), and the tcx program goes with the process, also on kill -9.
With the key off, IpInReceives grows by about the frames ustack received:
the check can fail."""

import ctypes
import os
import socket
import struct

import harness as h
from harness import check
from cases import SUBNETS, tcp_echo_test, test

SUBNETS.update({"kernel_rx_drop_af_packet": 65, "kernel_rx_drop_off_af_packet": 67})

BPF_PROG_QUERY = 16
BPF_TCX_INGRESS = 46
SYS_BPF = 321  # x86_64


def ip_in_receives(ns):
    """IpInReceives of namespace `ns` (/proc/net/snmp)."""
    text = h.nsx(ns, "cat", "/proc/net/snmp").stdout
    lines = [ln.split() for ln in text.splitlines() if ln.startswith("Ip:")]
    check(len(lines) >= 2, f"no Ip lines in /proc/net/snmp: {text!r}")
    return int(lines[1][lines[0].index("InReceives")])


def tcx_ingress_programs(ns, ifname):
    """The ids of the tcx ingress programs on `ifname` in `ns`
    (BPF_PROG_QUERY, as bpftool net would list them)."""
    with h.in_netns(ns):
        ifindex = socket.if_nametoindex(ifname)
        ids = (ctypes.c_uint32 * 64)()
        attr = ctypes.create_string_buffer(struct.pack("=IIIIQII", ifindex, BPF_TCX_INGRESS, 0, 0,
                                                       ctypes.addressof(ids), 64, 0).ljust(64, b"\0"))
        r = h._libc.syscall(SYS_BPF, BPF_PROG_QUERY, attr, 64)
        e = ctypes.get_errno()
    check(r == 0, f"BPF_PROG_QUERY on {ifname}: {os.strerror(e)}")
    count = struct.unpack_from("=I", attr.raw, 24)[0]
    return list(ids[:min(count, 64)])


def echo_and_count(t):
    """TCP echo through ustack; the frames its link received and the
    growth of IpInReceives in its namespace meanwhile."""
    t.ustack.settled_stats()
    before_rx = t.ustack.stats().get("port0_link_rx_frames", 0)
    before_ip = ip_in_receives(t.ns_u)
    tcp_echo_test(t, 20, 50_000, 65)
    st = t.ustack.settled_stats()
    frames = st.get("port0_link_rx_frames", 0) - before_rx
    grew = ip_in_receives(t.ns_u) - before_ip
    print(f"    {frames} frames received by ustack; IpInReceives in its namespace +{grew}")
    check(frames >= 100, f"too few frames to judge ({frames}): {h.nonzero(st)}")
    return st, frames, grew


@test("kernel_rx_drop_af_packet", budget=60)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["kernel_rx_drop_af_packet"]).start()
    st, frames, grew = echo_and_count(t)
    check(st.get("port0_link_kernel_rx_drop_refused", 0) == 0,
          f"the kernel refused the tc program: {t.ustack.stderr()[-800:]}")
    # ARP and the like do not count; a frame or two before the addresses
    # reached the program may.
    check(grew <= 3 + frames // 100,
          f"the kernel's IPv4 input saw {grew} of ustack's {frames} frames")
    progs = tcx_ingress_programs(t.ns_u, t.if_u)
    check(len(progs) == 1, f"tcx ingress programs on {t.if_u}: {progs}, expected ustack's one")
    # kill -9: the BPF link goes with the process's descriptors.
    t.ustack.proc.kill()
    t.ustack.proc.wait(5)
    h.cancel_cleanup(t.ustack._token)
    check(tcx_ingress_programs(t.ns_u, t.if_u) == [],
          f"a tcx program is left on {t.if_u} after kill -9: {tcx_ingress_programs(t.ns_u, t.if_u)}")


@test("kernel_rx_drop_off_af_packet", budget=60)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["kernel_rx_drop_off_af_packet"], extra_port="kernel_rx_drop=0\n").start()
    _, frames, grew = echo_and_count(t)
    check(grew >= frames * 9 // 10,
          f"with kernel_rx_drop=0 the kernel's IPv4 input saw only {grew} of ustack's {frames} frames")
    check(tcx_ingress_programs(t.ns_u, t.if_u) == [], "a tcx program is attached with kernel_rx_drop=0")
    t.ustack.stop()
