"""Interop tests of transmit checksum offload: ustack leaves the TCP and UDP
checksums of what it sends partial (the pseudo-header's sum) and the kernel
finishes them.

- AF_PACKET (`vnet_hdr=1` and `tx_csum_offoad_skip=0`, both defaults): each
  frame's virtio_net_hdr says NEEDS_CSUM; a kernel peer over a veth with its
  default offloads takes the partial skb as it is.
- AF_XDP in copy mode: the same request in each frame's TX metadata
  (`XDP_TXMD_FLAGS_CHECKSUM`).
- Behind a kernel router whose egress veth has `tx-checksumming off`, the
  kernel must finish each checksum in software before the frame leaves: the
  receiver in a third namespace verifies real checksums (and tcpdump there
  says each is correct), and a fragmented UDP datagram (whose checksum ustack
  always computes itself) arrives intact.

Each case checks that the frames really left partial
(`port0_link_tx_csum_partial`), so a stack that computed every checksum
itself would fail it."""

import hashlib
import random
import re
import signal
import socket
import subprocess
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, no_tcp_trouble, test
from cases_xdp import XdpCtx
from harness import check

SUBNETS.update({"tx_csum_offload_af_packet": 35, "tx_csum_offload_af_xdp_generic": 36,
                "tx_csum_finished_by_router_af_packet": 37,
                "tx_csum_finished_by_router_far_side": 38})
# The router's far side (the receiver's subnet) of the router case.
ROUTER_FAR_SUBNET = SUBNETS["tx_csum_finished_by_router_far_side"]

BULK = 2 * 1024 * 1024


def tcp_small_and_bulk(ns, addr, seed):
    """Ten small echoes and one bulk echo over TCP to addr:7, from ns, each
    compared with what was sent."""
    rnd = random.Random(seed)
    small = [rnd.randbytes(rnd.randrange(1, 1400)) for _ in range(10)]
    bulk = rnd.randbytes(BULK)
    got = tt.echo_many(ns, (addr, 7), small + [bulk], timeout=60)
    for i, (sent, back) in enumerate(zip(small + [bulk], got)):
        check(back == sent, f"TCP echo {i} to {addr}: {len(back)} bytes back of {len(sent)}, "
                            f"sha256 {hashlib.sha256(back).hexdigest()[:12]} expected "
                            f"{hashlib.sha256(sent).hexdigest()[:12]}")


def udp_echoes(ns, family, src, addr, sizes):
    """UDP echoes of each size to addr:7 from ns, compared."""
    s = h.netns_socket(ns, family, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        rnd = random.Random(len(sizes))
        for size in sizes:
            payload = rnd.randbytes(size)
            back = None
            for _ in range(3):
                back, _ = h.udp_echo(s, (addr, 7), payload, timeout=1.0)
                if back is not None:
                    break
            check(back == payload, f"UDP echo of {size} bytes to {addr}: "
                                   f"{'no reply' if back is None else f'{len(back)} other bytes'}")
    finally:
        s.close()


def offloaded(st, what):
    """The frames left partial, nothing refused, nothing dropped as corrupt."""
    partial, frames = st.get("port0_link_tx_csum_partial", 0), st.get("port0_link_tx_frames", 0)
    check(partial > 0, f"{what}: no frame left with a partial checksum: {h.nonzero(st)}")
    check(st.get("port0_link_tx_csum_refused", 0) == 0, f"{what}: offload refused: {h.nonzero(st)}")
    check(st.get("port0_link_tx_dropped", 0) == 0, f"{what}: frames dropped on the way out: {h.nonzero(st)}")
    bad = {k: v for k, v in st.items() if "bad_checksum" in k and v}
    check(not bad, f"{what}: checksums found bad: {bad}")
    print(f"    {partial} of {frames} frames sent with a partial checksum")


@test("tx_csum_offload_af_packet", budget=90)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["tx_csum_offload_af_packet"], ipv6=True).start()
    t.wait_ready6()
    tcp_small_and_bulk(t.ns_k, t.ustack_ip, 1)
    tcp_small_and_bulk(t.ns_k, t.ustack_ip6, 2)
    udp_echoes(t.ns_k, socket.AF_INET, t.kernel_ip, t.ustack_ip, [1, 100, 1400])
    udp_echoes(t.ns_k, socket.AF_INET6, t.kernel_ip6, t.ustack_ip6, [1, 100, 1400])
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "echo")
    offloaded(st, "af_packet")
    t.ustack.stop()


@test("tx_csum_offload_af_xdp_generic", budget=90)
def _(ctx):
    t = XdpCtx(ctx, "generic").topo("af_xdp", SUBNETS["tx_csum_offload_af_xdp_generic"]).start()
    err = t.ustack.stderr()
    check("TX checksums finished by the kernel" in err,
          f"the link does not say it offloads transmit checksums: {err[-1500:]!r}")
    tcp_small_and_bulk(t.ns_k, t.ustack_ip, 3)
    udp_echoes(t.ns_k, socket.AF_INET, t.kernel_ip, t.ustack_ip, [1, 100, 1400])
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "echo")
    offloaded(st, "af_xdp")
    t.ustack.stop()


def tcpdump_start(ns, ifname, path, src):
    """tcpdump -vv on ifname in ns, frames from src, its text in path; waits
    until it listens."""
    out = open(path, "w")
    err_path = path + ".err"
    err = open(err_path, "w")
    p = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", ifname, "-nn", "-vv", "-l", "-U",
                          "src", "host", src], stdout=out, stderr=err, start_new_session=True)

    def stop():
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(3)
        out.close()
        err.close()

    token = h.on_cleanup(f"tcpdump pid {p.pid}", stop)
    deadline = time.monotonic() + 10
    while "listening on" not in open(err_path).read():
        check(p.poll() is None, f"tcpdump exited: {open(err_path).read()}")
        check(time.monotonic() < deadline, "tcpdump did not start listening within 10 s")
        time.sleep(0.05)
    return stop, token


@test("tx_csum_finished_by_router_af_packet", budget=90)
def _(ctx):
    near, far = SUBNETS["tx_csum_finished_by_router_af_packet"], ROUTER_FAR_SUBNET
    ustack_ip, router_near = f"{h.NET_PREFIX}.{near}.2", f"{h.NET_PREFIX}.{near}.1"
    router_far, client_ip = f"{h.NET_PREFIX}.{far}.1", f"{h.NET_PREFIX}.{far}.2"
    ns_u, ns_r, ns_c = h.unique("u"), h.unique("r"), h.unique("c")
    if_u, if_r1, if_r2, if_c = h.unique("u"), h.unique("r"), h.unique("r"), h.unique("c")
    for ns in (ns_u, ns_r, ns_c):
        h.add_netns(ns)
    h.sh(["ip", "link", "add", if_u, "netns", ns_u, "type", "veth", "peer", "name", if_r1, "netns", ns_r])
    h.sh(["ip", "link", "add", if_r2, "netns", ns_r, "type", "veth", "peer", "name", if_c, "netns", ns_c])
    h.sh(["ip", "-n", ns_u, "link", "set", if_u, "up"])
    h.sh(["ip", "-n", ns_r, "addr", "add", f"{router_near}/24", "dev", if_r1])
    h.sh(["ip", "-n", ns_r, "addr", "add", f"{router_far}/24", "dev", if_r2])
    h.nsx(ns_r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    # The router's egress cannot finish checksums: the kernel does it in
    # software (skb_checksum_help) before the frame leaves.
    h.nsx(ns_r, "ethtool", "-K", if_r2, "tx", "off")
    feats = h.nsx(ns_r, "ethtool", "-k", if_r2).stdout
    check(re.search(r"^tx-checksumming: off", feats, re.M), f"tx-checksumming still on:\n{feats}")
    for ifname in (if_r1, if_r2):
        h.sh(["ip", "-n", ns_r, "link", "set", ifname, "up"])
    h.sh(["ip", "-n", ns_c, "addr", "add", f"{client_ip}/24", "dev", if_c])
    h.sh(["ip", "-n", ns_c, "link", "set", if_c, "up"])
    h.sh(["ip", "-n", ns_c, "route", "add", "default", "via", router_far])

    config = h.ustack_config(f"af_packet:{if_u}", ustack_ip, extra_port=f"gateway={router_near}\n")
    u = h.Ustack(ctx.binary, ctx.workdir, config, netns=ns_u).start()
    deadline = time.monotonic() + 10
    while h.nsx(ns_c, "ping", "-c", "1", "-W", "0.3", "-q", ustack_ip, check_rc=False).returncode != 0:
        check(u.running(), "ustack-echo exited before answering ping")
        check(time.monotonic() < deadline, f"{ustack_ip} did not answer ping through the router within 10 s")

    dump = f"{ctx.workdir}/client.tcpdump"
    stop_dump, token = tcpdump_start(ns_c, if_c, dump, ustack_ip)
    tcp_small_and_bulk(ns_c, ustack_ip, 4)
    # 3000 bytes: ustack sends the echo in two fragments, its checksum
    # whole (a partial one cannot be finished frame by frame).
    udp_echoes(ns_c, socket.AF_INET, client_ip, ustack_ip, [1, 100, 1400, 3000])
    time.sleep(0.3)
    stop_dump()
    h.cancel_cleanup(token)

    text = open(dump).read()
    tcp_ok = len(re.findall(r"cksum 0x[0-9a-f]+ \(correct\)", text))
    udp_ok = text.count("[udp sum ok]")
    wrong = [line for line in text.splitlines() if "incorrect" in line or "bad udp cksum" in line]
    print(f"    at the receiver: {tcp_ok} TCP and {udp_ok} UDP checksums correct, {len(wrong)} wrong")
    check(not wrong, f"{len(wrong)} frames with a wrong checksum at the receiver: {wrong[:3]}")
    check(tcp_ok > 100 and udp_ok >= 3, f"too few verified checksums (TCP {tcp_ok}, UDP {udp_ok}):\n{text[-2000:]}")
    check(re.search(r"flags \[\+\], proto UDP \(17\)", text),
          f"the 3000-byte echo did not arrive in fragments:\n{text[-2000:]}")

    st = u.settled_stats()
    no_tcp_trouble(st, "echo through the router")
    offloaded(st, "af_packet behind a router")
    u.stop()
