"""Interop tests of one engine per core over AF_XDP (`link=af_xdp`,
`lcore_mask=3`): engine i binds queue i of a two-queue veth with an AF_XDP
socket, the XDP program hands each queue's frames to its socket, and a
frame whose flow belongs to the other engine is handed to it over the
dispatcher's SPSC ring (``steer_forwarded``).

On a veth the receive queue of a frame is the transmit queue the kernel's
side picked for it (its own per-socket hash), not ustack's flow hash, so
about half the flows arrive on the other engine's queue; an XDP program
cannot send them to the right socket itself, because the kernel delivers to
an AF_XDP socket only frames that came in on the queue it is bound to.
Both tests count those hand-overs and check that nothing was lost or
copied on the way."""

import os
import re
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, test
from cases_cores import TwoQueueVeth, connect_from_both_engines, engines_share, exception_path_and_ustack_serve
from harness import check

MODES = ("native", "generic")
SUBNETS.update({f"cores_{n}_af_xdp_{m}": 170 + 2 * i + j
                for i, n in enumerate(("tcp_echo", "connect")) for j, m in enumerate(MODES)})


class TwoQueueXdpVeth(TwoQueueVeth):
    """The two-queue veth of the AF_PACKET cases with ustack's end on
    AF_XDP in `mode`, the kernel's side with its checksum offload on (the
    link recognises partial checksums on a veth, see cases_xdp.py).

    In generic mode the kernel's side gets three transmit queues: a veth
    records no receive queue on that path, so the queue the XDP program
    sees is the one the sender's transmit queue number leaves in the socket
    buffer, minus one (transmit queues 0 and 1 both show as receive queue
    0, 2 as 1); with two, engine 1's socket would never receive."""

    def __init__(self, subnet, mode):
        self.mode = mode
        self.kernel_ip = f"{h.NET_PREFIX}.{subnet}.1"
        self.ustack_ip = f"{h.NET_PREFIX}.{subnet}.2"
        self.ns_k, self.ns_u = h.unique("k"), h.unique("u")
        self.if_k, self.if_u = h.unique("k"), h.unique("u")
        h.add_netns(self.ns_k)
        h.add_netns(self.ns_u)
        k_queues = "3" if mode == "generic" else "2"
        h.sh(["ip", "link", "add", self.if_u, "netns", self.ns_u, "numtxqueues", "2", "numrxqueues", "2",
              "type", "veth", "peer", "name", self.if_k, "netns", self.ns_k,
              "numtxqueues", k_queues, "numrxqueues", k_queues])
        h.sh(["ip", "-n", self.ns_u, "link", "set", self.if_u, "up"])
        h.sh(["ip", "-n", self.ns_k, "addr", "add", f"{self.kernel_ip}/24", "dev", self.if_k])
        h.sh(["ip", "-n", self.ns_k, "link", "set", self.if_k, "up"])
        # The kernel's end keeps its default offloads (TSO, GSO, checksum):
        # see cases_xdp.XdpTopology.peer_segmentation_offload.

    def config(self, extra=""):
        return ("[dpdk]\nlcore_mask=3\nidle_sleep=100\npkt_tx_delay=0\n"
                f"[port0]\nlink=af_xdp:{self.if_u}\naddr={self.ustack_ip}/24\nxdp_mode={self.mode}\n{extra}")

    def check_program(self):
        p = h.sh(["ip", "-n", self.ns_u, "-d", "link", "show", self.if_u])
        want = "xdpgeneric" if self.mode == "generic" else "xdp "
        check(want in p.stdout and "prog/xdp" in p.stdout, f"no {self.mode} XDP program on {self.if_u}:\n{p.stdout}")


def no_loss_no_copy(st, what):
    """Every engine received over its own queue, nothing copied, no ring
    error, no frame dropped for a full ring between engines."""
    frames = engines_share(st, "port0_link_rx_frames")
    check(all(n > 0 for n in frames), f"{what}: each engine must receive on its own queue: {frames}")
    copied = engines_share(st, "port0_link_rx_copied")
    check(copied == [0, 0], f"{what}: frames copied by ustack per engine: {copied}")
    errs = engines_share(st, "port0_link_ring_errors")
    check(errs == [0, 0], f"{what}: AF_XDP ring errors per engine: {errs}")
    full = engines_share(st, "steer_drop_ring_full")
    check(full == [0, 0], f"{what}: frames dropped for a full ring between engines: {full}")


def register(mode):
    @test(f"cores_tcp_echo_af_xdp_{mode}", budget=120)
    def _(ctx):
        v = TwoQueueXdpVeth(SUBNETS[f"cores_tcp_echo_af_xdp_{mode}"], mode)
        u = h.Ustack(ctx.binary, ctx.workdir, v.config(), netns=v.ns_u).start()
        u.wait_output(r"2 engine\(s\) on cores 0,1")
        for q in (0, 1):
            u.wait_output(rf"af_xdp queue {q} {mode} XDP, (copy|zero-copy) mode")
        v.check_program()
        v.wait_ping(u)
        payloads = [os.urandom(1000 + 37 * i) for i in range(400)]
        got = tt.echo_many(v.ns_k, (v.ustack_ip, 7), payloads, timeout=90)
        bad = [i for i, (a, b) in enumerate(zip(got, payloads)) if a != b]
        check(not bad, f"{len(bad)} of {len(payloads)} connections not echoed intact (first: {bad[:5]})")
        st = u.settled_stats()
        tcp = engines_share(st, "rx_accept_tcp")
        frames = engines_share(st, "port0_link_rx_frames")
        fwd = engines_share(st, "steer_forwarded")
        print(f"    400 concurrent connections echoed; TCP segments per engine {tcp}; frames received per "
              f"engine's queue {frames}; handed to the other engine {fwd}")
        check(all(n > 0.25 * sum(tcp) for n in tcp), f"each engine must serve its share of the flows: {tcp}")
        no_loss_no_copy(st, "echo")
        check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
        u.stop()

    @test(f"cores_connect_af_xdp_{mode}", budget=120)
    def _(ctx):
        """Outgoing connections from both engines over AF_XDP: each picks
        source ports that hash back to it; replies that the veth puts on
        the other engine's queue are handed over."""
        v = TwoQueueXdpVeth(SUBNETS[f"cores_connect_af_xdp_{mode}"], mode)
        p, lines, st = connect_from_both_engines(ctx, v)
        check(re.search(rf"af_xdp queue 1 {mode} XDP", p.stderr), f"no AF_XDP socket on queue 1: {p.stderr[:800]}")
        opens = engines_share(st, "tcp_active_opens")
        fwd = engines_share(st, "steer_forwarded")
        print(f"    {lines[0].split(': ', 1)[1]}; {lines[1].split(': ', 1)[1]}; active opens per engine {opens}; "
              f"frames received per engine's queue {engines_share(st, 'port0_link_rx_frames')}; "
              f"handed to the other engine {fwd}")
        check(opens == [150, 150], f"active opens per engine: {opens}")
        no_loss_no_copy(st, "connect")


for _mode in MODES:
    register(_mode)


SUBNETS["cores_kni_af_xdp_native"] = 174


@test("cores_kni_af_xdp_native", budget=120)
def _(ctx):
    """The exception path over AF_XDP, with its TAP (default name) in the
    NIC's own namespace: the frames the XDP program hands to ustack never
    reach the kernel there, so unlike AF_PACKET the kernel may hold
    ustack's address on the TAP beside the NIC."""
    v = TwoQueueXdpVeth(SUBNETS["cores_kni_af_xdp_native"], "native")
    extra = "[kni]\nenable=1\nmethod=reject\ntcp_port=7\nudp_port=7\n"
    u = h.Ustack(ctx.binary, ctx.workdir, v.config(extra), netns=v.ns_u).start()
    u.wait_output(r"exception path on ustack-kniN")
    tap = "ustack-kni0"
    deadline = time.monotonic() + 5
    while h.sh(["ip", "-n", v.ns_u, "link", "show", tap], check_rc=False).returncode != 0:
        check(time.monotonic() < deadline, f"the exception path's TAP {tap} did not appear")
        time.sleep(0.05)
    h.sh(["ip", "-n", v.ns_u, "addr", "add", f"{v.ustack_ip}/24", "dev", tap])
    h.sh(["ip", "-n", v.ns_u, "link", "set", tap, "up"])
    st = exception_path_and_ustack_serve(ctx, v, u, v.ns_u, tap, " beside the NIC")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    u.stop()
