"""AF_XDP on a shared host (`[port0] xdp_program=libxdp`): ustack's XDP
program (crates/link/bpf/ustack_xdp.c, loaded through libxdp) sends to the
socket only frames for ustack's addresses, less the `[kni]` ports, and
passes the rest to the kernel on the same interface, with no TAP and no
copy.

ustack's end of the veth (in ``ns_u``) also carries the kernel's own
address (.3/24, primary) and ustack's address as a /32, so the kernel can
serve `[kni] tcp_port=2222` on it; `arp_announce=2` makes the kernel ask
for neighbours from its own address (.3), whose ARP replies the program
passes to it. Checked in native and generic mode: the peer's TCP echo
reaches ustack; HTTP to the kernel's own address and to ustack's address on
the kni port is answered by the kernel; no exception TAP exists; an alias
added live with `ustack ifconfig` is answered by ustack at once and goes
back to the kernel when removed. Fragments: a 4,000-byte UDP datagram to
a `[kni]` UDP port reaches the kernel's listener whole (its later fragments
follow the first, which alone carries the port), while 3,000-byte pings
(fragmented) are still ustack's.

IPv6 (`xdp_shared_ipv6_*`): ustack's IPv6 addresses, and the neighbour
solicitations for them, go to ustack; every other IPv6 frame (the kernel's
own address, its neighbour discovery, router and multicast listener
traffic) to the kernel. The peer pings ustack's address (-6, also in
fragments), echoes TCP over IPv6 with ustack, and reaches an HTTP server of
the kernel on the kernel's own IPv6 address on the same interface; an
IPv6 alias added live with `ustack ifconfig` is ustack's at once.

Beside another XDP program (xdp_no_ping.c, loaded first with xdp-loader,
dropping ICMP echo requests to the kernel's own address): where the kernel
runs libxdp's dispatcher, ustack's program joins it; where it refuses the
dispatcher's freplace programs (EPERM on this machine), libxdp attaches
the other program alone and ustack chains its own in front of it
(crates/link/src/af_xdp/chained.rs). Either way ustack serves its address,
the other program still decides for the kernel's frames (its pings are
dropped, its HTTP served), and when ustack stops the other program keeps
the interface."""

import os
import re
import socket
import struct
import time

import harness as h
from cases import SUBNETS, no_tcp_trouble, tcp_echo_test, test
from cases_ctl import Cli
from cases_xdp import MODES, XdpCtx, no_copy
import tcp_tools as tt
from harness import check

SUBNETS.update({f"xdp_shared_kernel_{m}": 145 + j for j, m in enumerate(MODES)})
SUBNETS.update({f"xdp_shared_beside_{m}": 147 + j for j, m in enumerate(MODES)})
SUBNETS.update({f"xdp_shared_ipv6_{m}": 131 + j for j, m in enumerate(MODES)})

KNI_PORT = 2222
KNI_UDP_PORT = 5353


def kernel_get(t, url):
    p = h.nsx(t.ns_k, "curl", "-sS", "--max-time", "3", url, check_rc=False, timeout=10)
    return p.returncode == 0 and p.stdout == "kernel\n", f"{p.stdout}{p.stderr}"


def pings(t, addr):
    return h.nsx(t.ns_k, "ping", "-c", "1", "-W", "1", addr, check_rc=False, timeout=5).returncode == 0


def register(mode):
    name = f"xdp_shared_kernel_{mode}"

    @test(name, budget=60)
    def _(ctx):
        subnet = SUBNETS[name]
        run_dir = os.path.join(ctx.workdir, "run")
        t = XdpCtx(ctx, mode).topo("af_xdp", subnet, sets=["port0.xdp_program=libxdp", f"control.dir={run_dir}"],
                                   extra=f"[kni]\nenable=1\nmethod=accept\ntcp_port={KNI_PORT}\n"
                                   f"udp_port={KNI_UDP_PORT}\n")
        own = f"{h.NET_PREFIX}.{subnet}.3"
        h.sh(["ip", "-n", t.ns_u, "addr", "add", f"{own}/24", "dev", t.if_u])
        h.sh(["ip", "-n", t.ns_u, "addr", "add", f"{t.ustack_ip}/32", "dev", t.if_u])
        for scope in ("all", t.if_u):
            h.nsx(t.ns_u, "sysctl", "-qw", f"net.ipv4.conf.{scope}.arp_announce=2")
        t.start()
        t.ustack.wait_output(r"ustack's XDP program .*\(libxdp, " + mode)

        srv = os.path.join(ctx.workdir, "srv")
        os.makedirs(srv, exist_ok=True)
        with open(os.path.join(srv, "f.txt"), "w") as f:
            f.write("kernel\n")
        tt.kernel_http_server(t.ns_u, own, 8080, srv, ctx.workdir)
        tt.kernel_http_server(t.ns_u, t.ustack_ip, KNI_PORT, srv, ctx.workdir)

        # ustack serves its own address.
        tcp_echo_test(t, 20, 20000, 19)
        # The kernel serves its own address on the same interface.
        check(pings(t, own), f"the kernel's own address {own} does not answer ping")
        ok, out = kernel_get(t, f"http://{own}:8080/f.txt")
        check(ok, f"HTTP to the kernel's own address {own}: {out}")
        # ...and the [kni] port on ustack's address, without a TAP.
        ok, out = kernel_get(t, f"http://{t.ustack_ip}:{KNI_PORT}/f.txt")
        check(ok, f"HTTP to the [kni] port {KNI_PORT} on ustack's address: {out}")
        links = h.sh(["ip", "-n", t.ns_u, "-o", "link", "show"]).stdout
        check("ustack-kni" not in links, f"an exception TAP was made:\n{links}")
        # A datagram in fragments to the [kni] UDP port: all of it reaches
        # the kernel (the later fragments carry no port).
        big = bytes(range(256)) * 16
        check(kernel_udp_receives(t, t.ustack_ip, KNI_UDP_PORT, big),
              f"a {len(big)}-byte UDP datagram to the [kni] port {KNI_UDP_PORT} did not reach the kernel whole")
        # ...and fragmented pings are still ustack's.
        p = t.ping(3000, count=3)
        check(p.returncode == 0 and "3 received" in p.stdout, f"3000-byte pings to ustack:\n{p.stdout}{p.stderr}")

        # An alias added live is ustack's at once, and the kernel's again
        # once removed (the kernel does not own it, so nothing answers).
        alias = f"{h.NET_PREFIX}.{subnet}.9"
        check(not pings(t, alias), f"{alias} answered before it was anyone's")
        cli = Cli(os.path.join(os.path.dirname(ctx.binary), "ustack"), run_dir)
        ifname = cli.reply("ifconfig")["interfaces"][0]["name"]
        cli.run("ifconfig", ifname, "inet", alias, "alias")
        check(pings(t, alias), f"the alias {alias} added live is not answered by ustack")
        cli.run("ifconfig", ifname, "inet", alias, "-alias")
        h.nsx(t.ns_k, "ip", "neigh", "flush", "dev", t.if_k)
        check(not pings(t, alias), f"the alias {alias} removed live still answers")

        st = t.ustack.settled_stats()
        no_tcp_trouble(st, "echo")
        no_copy(st, "echo")
        check(st.get("kni_drop", 0) == 0 and st.get("engine_served_addresses_failed", 0) == 0,
              f"frames for the kernel reached ustack, or the address maps failed: {h.nonzero(st)}")
        t.ustack.stop()
        p = h.sh(["ip", "-n", t.ns_u, "-d", "link", "show", t.if_u])
        check("prog/xdp" not in p.stdout, f"ustack's XDP program stayed after it stopped:\n{p.stdout}")


def kernel_udp_receives(t, addr, port, payload):
    """Whether a kernel UDP socket bound to addr:port in ustack's namespace
    gets `payload` whole when the peer sends it (one try, then two more)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    rx = h.netns_socket(t.ns_u, family, socket.SOCK_DGRAM)
    tx = h.netns_socket(t.ns_k, family, socket.SOCK_DGRAM)
    try:
        rx.bind((addr, port))
        rx.settimeout(1.0)
        for _ in range(3):
            tx.sendto(payload, (addr, port))
            try:
                data = rx.recv(65535)
            except socket.timeout:
                continue
            return data == payload
        return False
    finally:
        rx.close()
        tx.close()


def register_ipv6(mode):
    name = f"xdp_shared_ipv6_{mode}"

    @test(name, budget=60)
    def _(ctx):
        subnet = SUBNETS[name]
        run_dir = os.path.join(ctx.workdir, "run")
        t = XdpCtx(ctx, mode).topo("af_xdp", subnet, ipv6=True,
                                   sets=["port0.xdp_program=libxdp", f"control.dir={run_dir}"])
        own6 = f"fd99:{subnet}::3"
        # The kernel's IPv6 on ustack's end, with its own address (its
        # link-local one is made from the same MAC as ustack's: ustack's).
        # (and on lo, which carries its traffic to its own addresses).
        h.nsx(t.ns_u, "sysctl", "-qw", f"net.ipv6.conf.{t.if_u}.disable_ipv6=0", "net.ipv6.conf.lo.disable_ipv6=0")
        h.sh(["ip", "-n", t.ns_u, "-6", "addr", "add", f"{own6}/64", "dev", t.if_u, "nodad"])
        t.start()
        t.ustack.wait_output(r"ustack's XDP program .*\(libxdp, " + mode)
        t.wait_ready6()

        srv = os.path.join(ctx.workdir, "srv")
        os.makedirs(srv, exist_ok=True)
        with open(os.path.join(srv, "f.txt"), "w") as f:
            f.write("kernel\n")
        tt.kernel_http_server(t.ns_u, own6, 8080, srv, ctx.workdir)

        # ustack: ping -6 (whole and in fragments) and TCP over IPv6.
        for size in (56, 3000):
            p = h.nsx(t.ns_k, "ping", "-6", "-c", "3", "-i", "0.1", "-W", "1", "-s", str(size), t.ustack_ip6,
                      check_rc=False, timeout=10)
            check(p.returncode == 0 and "3 received" in p.stdout, f"ping -6 -s {size} {t.ustack_ip6}:\n{p.stdout}")
        payloads = [bytes([i]) * 20000 for i in range(10)]
        got = tt.echo_many(t.ns_k, (t.ustack_ip6, 7), payloads, timeout=30)
        check(got == payloads, f"TCP echo over IPv6: {[len(g) for g in got]} bytes back of 20000 each")
        # The kernel: its own IPv6 address on the same interface.
        p = h.nsx(t.ns_k, "ping", "-6", "-c", "1", "-W", "1", own6, check_rc=False, timeout=5)
        check(p.returncode == 0, f"the kernel's own {own6} does not answer ping -6:\n{p.stdout}")
        ok, out = kernel_get(t, f"http://[{own6}]:8080/f.txt")
        check(ok, f"HTTP to the kernel's own address {own6}: {out}")
        neigh = h.sh(["ip", "-n", t.ns_k, "-6", "neigh", "show", own6, "dev", t.if_k]).stdout
        check("lladdr" in neigh, f"the peer did not learn {own6} by neighbour discovery: {neigh!r}")

        # An IPv6 alias added live is ustack's.
        alias6 = f"fd99:{subnet}::9"
        cli = Cli(os.path.join(os.path.dirname(ctx.binary), "ustack"), run_dir)
        ifname = cli.reply("ifconfig")["interfaces"][0]["name"]
        cli.run("ifconfig", ifname, "inet6", f"{alias6}/64", "alias")
        deadline = time.monotonic() + 5
        while h.nsx(t.ns_k, "ping", "-6", "-c", "1", "-W", "0.3", alias6, check_rc=False, timeout=5).returncode:
            check(time.monotonic() < deadline, f"the IPv6 alias {alias6} added live is not answered by ustack")

        st = t.ustack.settled_stats()
        no_tcp_trouble(st, "echo")
        no_copy(st, "echo")
        check(st.get("rx_accept_ndp_neighbor_solicit", 0) >= 1, f"no solicitation reached ustack: {h.nonzero(st)}")
        check(st.get("engine_served_addresses_failed", 0) == 0, f"the address maps failed: {h.nonzero(st)}")
        check(st.get("rx_drop_ipv6_not_for_us", 0) == 0, f"IPv6 frames not for ustack reached it: {h.nonzero(st)}")
        t.ustack.stop()


def xdp_prog_id(t):
    p = h.sh(["ip", "-n", t.ns_u, "-d", "link", "show", t.if_u])
    m = re.search(r"prog/xdp id (\d+)", p.stdout)
    return int(m.group(1)) if m else None


def load_no_ping(ctx, t, mode, own):
    """Loads xdp_no_ping.c (drops ICMP echo requests to `own`) on ustack's
    end with xdp-loader; returns its program id."""
    obj = os.path.join(ctx.workdir, "xdp_no_ping.o")
    addr = struct.unpack("=I", socket.inet_aton(own))[0]
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "xdp_no_ping.c")
    h.sh(["clang", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{os.uname().machine}-linux-gnu",
          f"-DDROP_ADDR={addr:#x}", "-c", src, "-o", obj], timeout=60)
    h.nsx(t.ns_u, "xdp-loader", "load", "-m", "skb" if mode == "generic" else "native", t.if_u, obj)
    h.on_cleanup(f"xdp-loader unload {t.if_u}",
                 lambda: h.nsx(t.ns_u, "xdp-loader", "unload", "--all", t.if_u, check_rc=False))
    other = xdp_prog_id(t)
    check(other is not None, "xdp-loader attached no program")
    return other


def register_beside(mode):
    name = f"xdp_shared_beside_{mode}"

    @test(name, budget=60)
    def _(ctx):
        subnet = SUBNETS[name]
        t = XdpCtx(ctx, mode).topo("af_xdp", subnet, sets=["port0.xdp_program=libxdp"])
        own = f"{h.NET_PREFIX}.{subnet}.3"
        h.sh(["ip", "-n", t.ns_u, "addr", "add", f"{own}/24", "dev", t.if_u])
        other = load_no_ping(ctx, t, mode, own)
        srv = os.path.join(ctx.workdir, "srv")
        os.makedirs(srv, exist_ok=True)
        with open(os.path.join(srv, "f.txt"), "w") as f:
            f.write("kernel\n")
        tt.kernel_http_server(t.ns_u, own, 8080, srv, ctx.workdir)
        check(not pings(t, own), f"the other program did not drop pings to {own}")

        t.start()
        m = t.ustack.wait_output(r"chained in front of XDP program (\d+)|runs in libxdp's dispatcher")
        if m.group(1):
            check(int(m.group(1)) == other, f"ustack chained to program {m.group(1)}, not {other}")
        # ustack serves its address; the other program still decides for
        # the kernel's frames.
        tcp_echo_test(t, 20, 20000, 23)
        check(pings(t, t.ustack_ip), "ustack's address does not answer ping")
        check(not pings(t, own), f"pings to {own} pass: the other program no longer runs")
        ok, out = kernel_get(t, f"http://{own}:8080/f.txt")
        check(ok, f"HTTP to the kernel's own address {own} beside both programs: {out}")
        st = t.ustack.settled_stats()
        no_tcp_trouble(st, "echo")
        no_copy(st, "echo")
        t.ustack.stop()
        # The other program keeps the interface after ustack.
        check(xdp_prog_id(t) == other, f"program {other} is not back on {t.if_u}: {xdp_prog_id(t)}")
        check(not pings(t, own), f"pings to {own} pass after ustack stopped: the other program is gone")
        h.nsx(t.ns_u, "xdp-loader", "unload", "--all", t.if_u)
        check(pings(t, own), f"{own} does not answer ping with no XDP program left")


for m in MODES:
    register(m)
    register_beside(m)
    register_ipv6(m)
