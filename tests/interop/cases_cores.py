"""Interop tests of one engine per core (`[dpdk] lcore_mask`) and of the
exception path (`[kni]`): ustack-echo on two engines over a two-queue veth
(AF_PACKET fanout steered by ustack's flow hash), against the kernel."""

import os
import signal
import socket
import subprocess
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, test
from harness import check

SUBNETS.update({"cores_tcp_echo_af_packet": 120, "cores_kni_af_packet": 121, "cores_kni6_af_packet": 126, "cores_connect_af_packet": 122,
                "cores_ping6_af_packet": 123})
HERE = os.path.dirname(os.path.abspath(__file__))


class TwoQueueVeth:
    """A veth pair with two queues each way: ustack's end in namespace
    ns_u, the kernel's (10.99.N.1/24) in ns_k."""

    def __init__(self, subnet):
        self.kernel_ip = f"{h.NET_PREFIX}.{subnet}.1"
        self.ustack_ip = f"{h.NET_PREFIX}.{subnet}.2"
        self.ns_k, self.ns_u = h.unique("k"), h.unique("u")
        self.if_k, self.if_u = h.unique("k"), h.unique("u")
        h.add_netns(self.ns_k)
        h.add_netns(self.ns_u)
        h.sh(["ip", "link", "add", self.if_u, "netns", self.ns_u, "numtxqueues", "2", "numrxqueues", "2",
              "type", "veth", "peer", "name", self.if_k, "netns", self.ns_k, "numtxqueues", "2", "numrxqueues", "2"])
        h.sh(["ip", "-n", self.ns_u, "link", "set", self.if_u, "up"])
        h.sh(["ip", "-n", self.ns_k, "addr", "add", f"{self.kernel_ip}/24", "dev", self.if_k])
        h.sh(["ip", "-n", self.ns_k, "link", "set", self.if_k, "up"])
        # The kernel's end keeps its default offloads: the AF_PACKET link
        # cuts TCP super-frames into segments before they are steered.

    def config(self, extra=""):
        return ("[dpdk]\nlcore_mask=3\nidle_sleep=100\npkt_tx_delay=0\n"
                f"[port0]\nlink=af_packet:{self.if_u}\naddr={self.ustack_ip}/24\n{extra}")

    def wait_ping(self, u, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            check(u.running(), f"ustack-echo exited (rc={u.proc.returncode})")
            p = h.nsx(self.ns_k, "ping", "-c", "1", "-W", "0.3", "-q", self.ustack_ip, check_rc=False, timeout=5)
            if p.returncode == 0:
                return
            check(time.monotonic() < deadline, f"{self.ustack_ip} did not answer ping within {timeout}s")


def engines_share(stats, counter):
    return [stats.get(f"engine{e}.{counter}", 0) for e in (0, 1)]


def connect_from_both_engines(ctx, v):
    """Runs ustack-connect on both engines of veth `v` (a TwoQueueVeth or
    one like it) against a kernel echo server on the kernel's end: 150
    connections of 3000 bytes from each engine, all of which must echo.
    Returns the run (for its stderr), the engines' two result lines and
    the settled stats."""
    srv = subprocess.Popen(["ip", "netns", "exec", v.ns_k, "/usr/bin/python3",
                            os.path.join(HERE, "kernel_echo_server.py"), v.kernel_ip],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop():
        srv.send_signal(signal.SIGTERM)
        srv.wait(5)

    h.on_cleanup(f"echo server pid {srv.pid}", stop)
    deadline = time.monotonic() + 10
    while "10.99" not in h.sh(["ip", "netns", "exec", v.ns_k, "ss", "-Hltn", "sport = :7"]).stdout:
        check(srv.poll() is None and time.monotonic() < deadline, "the kernel echo server did not listen")
        time.sleep(0.05)
    cfg = os.path.join(ctx.workdir, "connect.ini")
    stats = os.path.join(ctx.workdir, "connect.stats")
    with open(cfg, "w") as f:
        f.write(v.config())
    p = h.nsx(v.ns_u, ctx.connect, "--config", cfg, "--stats", stats, "--count", "150", "--size", "3000",
              f"{v.kernel_ip}:7", check_rc=False, timeout=90)
    lines = [ln for ln in p.stderr.splitlines() if "engine " in ln and "echoed" in ln]
    check(p.returncode == 0, f"ustack-connect rc={p.returncode}: {p.stderr.strip()[-2000:]}")
    check(len(lines) == 2 and all("150 connections echoed, 0 failed" in ln for ln in lines),
          f"each engine must complete its 150 connections: {lines}")
    return p, lines, h.Ustack.stats(type("S", (), {"stats_path": stats})())


def exception_path_and_ustack_serve(ctx, v, u, http_ns, tap, where=""):
    """With ustack's exception path on (its TAP `tap`, the kernel behind it
    in namespace `http_ns` holding ustack's address): curl from the peer
    gets 300 KB intact from a kernel HTTP server on port 8080 through the
    TAP, while ustack echoes TCP and UDP on port 7 on both engines.  Checks
    the exception path's counters; returns ustack's settled stats."""
    srv = os.path.join(ctx.workdir, "srv")
    os.mkdir(srv)
    body = os.urandom(300_000)
    with open(os.path.join(srv, "f.bin"), "wb") as f:
        f.write(body)
    tt.kernel_http_server(http_ns, v.ustack_ip, 8080, srv, ctx.workdir)
    # Ping goes to the kernel under method=reject (ICMP is not a listed port).
    v.wait_ping(u)
    out = os.path.join(ctx.workdir, "got.bin")
    p = h.nsx(v.ns_k, "curl", "-sS", "--max-time", "20", "-o", out, f"http://{v.ustack_ip}:8080/f.bin",
              check_rc=False, timeout=30)
    check(p.returncode == 0, f"curl to the kernel's HTTP server through the TAP: {p.stderr.strip()}")
    with open(out, "rb") as f:
        check(f.read() == body, "the kernel's HTTP server's file did not arrive intact")
    # Meanwhile ustack serves its own ports (TCP and UDP 7) on both engines.
    payloads = [os.urandom(2000 + i) for i in range(100)]
    got = tt.echo_many(v.ns_k, (v.ustack_ip, 7), payloads, timeout=60)
    check(got == payloads, "TCP echo on ustack with the exception path on")
    s = h.netns_socket(v.ns_k, socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((v.kernel_ip, 0))
    reply, _ = h.udp_echo(s, (v.ustack_ip, 7), b"x" * 100)
    s.close()
    check(reply == b"x" * 100, "UDP echo on ustack with the exception path on")
    st = u.settled_stats()
    print(f"    HTTP from the kernel through {tap}{where}: {len(body)} bytes intact; "
          f"kni_to_kernel={st.get('kni_to_kernel')} kni_from_kernel={st.get('kni_from_kernel')}; "
          f"TCP segments per engine {engines_share(st, 'rx_accept_tcp')}")
    check(st.get("kni_to_kernel", 0) > 20 and st.get("kni_from_kernel", 0) > 150,
          f"exception path counters: {h.nonzero({k: x for k, x in st.items() if k.startswith('kni')})}")
    check(all(n > 0 for n in engines_share(st, "rx_accept_tcp")), "both engines served echo")
    return st


@test("cores_tcp_echo_af_packet", budget=120)
def _(ctx):
    v = TwoQueueVeth(SUBNETS["cores_tcp_echo_af_packet"])
    u = h.Ustack(ctx.binary, ctx.workdir, v.config(), netns=v.ns_u).start()
    u.wait_output(r"2 engine\(s\) on cores 0,1")
    v.wait_ping(u)
    rnd = os.urandom
    payloads = [rnd(1000 + 37 * i) for i in range(400)]
    got = tt.echo_many(v.ns_k, (v.ustack_ip, 7), payloads, timeout=90)
    bad = [i for i, (a, b) in enumerate(zip(got, payloads)) if a != b]
    check(not bad, f"{len(bad)} of {len(payloads)} connections not echoed intact (first: {bad[:5]})")
    st = u.settled_stats()
    tcp = engines_share(st, "rx_accept_tcp")
    print(f"    400 concurrent connections echoed; TCP segments per engine {tcp}; "
          f"frames per engine {engines_share(st, 'port0_link_rx_frames')}")
    check(all(n > 0.25 * sum(tcp) for n in tcp), f"each engine must serve its share of the flows: {tcp}")
    # The kernel's fanout program and the engines' hash agree: no TCP
    # frame had to be handed to another engine.
    fwd = engines_share(st, "steer_forwarded")
    check(fwd == [0, 0], f"frames handed between engines (kernel and ustack hashes disagree): {fwd}")
    # UDP and ping still answered, whichever engine gets them.
    s = h.netns_socket(v.ns_k, socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((v.kernel_ip, 0))
    for size in (1, 1472, 4000):
        data = rnd(size)
        reply, src = h.udp_echo(s, (v.ustack_ip, 7), data)
        check(reply == data, f"UDP echo of {size} bytes: {reply and len(reply)}")
    s.close()
    u.stop()


@test("cores_kni_af_packet", budget=120)
def _(ctx):
    v = TwoQueueVeth(SUBNETS["cores_kni_af_packet"])
    kni = f"kn{os.getpid() % 100000}"
    extra = f"[kni]\nenable=1\nmethod=reject\ntcp_port=7\nudp_port=7\nifname={kni}\n"
    u = h.Ustack(ctx.binary, ctx.workdir, v.config(extra), netns=v.ns_u).start()
    u.wait_output(r"exception path")
    tap = f"{kni}0"
    deadline = time.monotonic() + 5
    while h.sh(["ip", "-n", v.ns_u, "link", "show", tap], check_rc=False).returncode != 0:
        check(time.monotonic() < deadline, f"the exception path's TAP {tap} did not appear")
        time.sleep(0.05)
    # The kernel gets ustack's address on the TAP, and serves HTTP there.
    # The TAP moves to a namespace of its own: in ns_u the kernel also sees
    # every frame of the veth (AF_PACKET takes copies), and with the address
    # there it would answer ustack's connections with resets (weak host).
    ns_x = h.unique("x")
    h.add_netns(ns_x)
    h.sh(["ip", "-n", v.ns_u, "link", "set", tap, "netns", ns_x])
    h.sh(["ip", "-n", ns_x, "addr", "add", f"{v.ustack_ip}/24", "dev", tap])
    h.sh(["ip", "-n", ns_x, "link", "set", tap, "up"])
    exception_path_and_ustack_serve(ctx, v, u, ns_x, tap)
    u.stop()


@test("cores_kni6_af_packet", budget=120)
def _(ctx):
    """The exception path over IPv6: the kernel behind the TAP holds
    ustack's IPv6 address too and serves HTTP on a port ustack does not
    take; curl -6 from the peer reaches it, while ustack's own ports answer
    over IPv6 on both engines.  Neighbour discovery goes to both sides."""
    subnet = SUBNETS["cores_kni6_af_packet"]
    v = TwoQueueVeth(subnet)
    kernel_ip6, ustack_ip6 = f"fd99:{subnet}::1", f"fd99:{subnet}::2"
    h.nsx(v.ns_k, "sysctl", "-qw", f"net.ipv6.conf.{v.if_k}.disable_ipv6=0")
    h.sh(["ip", "-n", v.ns_k, "-6", "addr", "add", f"{kernel_ip6}/64", "dev", v.if_k, "nodad"])
    kni = f"kn{os.getpid() % 100000}"
    extra = f"addr6={ustack_ip6}/64\n[kni]\nenable=1\nmethod=reject\ntcp_port=7\nudp_port=7\nifname={kni}\n"
    u = h.Ustack(ctx.binary, ctx.workdir, v.config(extra), netns=v.ns_u).start()
    u.wait_output(r"exception path")
    tap = f"{kni}0"
    deadline = time.monotonic() + 5
    while h.sh(["ip", "-n", v.ns_u, "link", "show", tap], check_rc=False).returncode != 0:
        check(time.monotonic() < deadline, f"the exception path's TAP {tap} did not appear")
        time.sleep(0.05)
    # As over IPv4 (cores_kni_af_packet), the TAP gets a namespace of its
    # own, and there the kernel speaks IPv6 with ustack's address (nodad:
    # ustack holds it too, by design).
    ns_x = h.unique("x")
    h.add_netns(ns_x)
    h.sh(["ip", "-n", v.ns_u, "link", "set", tap, "netns", ns_x])
    # IPv6 on lo as well: the kernel's own address is delivered there.
    h.nsx(ns_x, "sysctl", "-qw", f"net.ipv6.conf.{tap}.disable_ipv6=0", "net.ipv6.conf.lo.disable_ipv6=0")
    h.sh(["ip", "-n", ns_x, "link", "set", tap, "up"])
    h.sh(["ip", "-n", ns_x, "-6", "addr", "add", f"{ustack_ip6}/64", "dev", tap, "nodad"])
    srv = os.path.join(ctx.workdir, "srv6")
    os.mkdir(srv)
    body = os.urandom(300_000)
    with open(os.path.join(srv, "f.bin"), "wb") as f:
        f.write(body)
    tt.kernel_http_server(ns_x, ustack_ip6, 8080, srv, ctx.workdir)
    # ustack's own port first: its address is usable once its duplicate
    # detection ends (about a second).
    payloads = [os.urandom(1500 + i) for i in range(40)]
    deadline = time.monotonic() + 15
    while True:
        check(u.running(), f"ustack-echo exited (rc={u.proc.returncode})")
        s = h.netns_socket(v.ns_k, socket.AF_INET6, socket.SOCK_DGRAM)
        s.settimeout(0.3)
        s.bind((kernel_ip6, 0))
        s.sendto(b"up?", (ustack_ip6, 7))
        try:
            up = s.recv(100) == b"up?"
        except socket.timeout:
            up = False
        s.close()
        if up:
            break
        check(time.monotonic() < deadline, f"UDP echo on [{ustack_ip6}]:7 did not answer within 15s")
    got = tt.echo_many(v.ns_k, (ustack_ip6, 7), payloads, timeout=60)
    check(got == payloads, "TCP echo over IPv6 on ustack with the exception path on")
    out = os.path.join(ctx.workdir, "got6.bin")
    p = h.nsx(v.ns_k, "curl", "-6", "-sS", "--max-time", "20", "-o", out, f"http://[{ustack_ip6}]:8080/f.bin",
              check_rc=False, timeout=30)
    check(p.returncode == 0, f"curl -6 to the kernel's HTTP server through the TAP: {p.stderr.strip()}")
    with open(out, "rb") as f:
        check(f.read() == body, "the kernel's HTTP server's file did not arrive intact over IPv6")
    st = u.settled_stats()
    print(f"    HTTP over IPv6 from the kernel through {tap}: {len(body)} bytes intact; "
          f"kni_to_kernel={st.get('kni_to_kernel')} kni_from_kernel={st.get('kni_from_kernel')}; "
          f"TCP segments per engine {engines_share(st, 'rx_accept_tcp')}")
    check(st.get("kni_to_kernel", 0) > 20 and st.get("kni_from_kernel", 0) > 150,
          f"exception path counters: {h.nonzero({k: x for k, x in st.items() if k.startswith('kni')})}")
    u.stop()


@test("cores_connect_af_packet", budget=120)
def _(ctx):
    """Outgoing connections from both engines: each picks source ports
    whose replies the kernel's fanout hands back to it."""
    v = TwoQueueVeth(SUBNETS["cores_connect_af_packet"])
    _, lines, st = connect_from_both_engines(ctx, v)
    opens = engines_share(st, "tcp_active_opens")
    fwd = engines_share(st, "steer_forwarded")
    print(f"    {lines[0].split(': ', 1)[1]}; {lines[1].split(': ', 1)[1]}; active opens per engine {opens}; "
          f"frames handed between engines {fwd}")
    check(opens == [150, 150], f"active opens per engine: {opens}")
    check(fwd == [0, 0], f"replies reached another engine than the one that connected: {fwd}")


@test("cores_ping6_af_packet", budget=120)
def _(ctx):
    """IPv6 over two engines: the kernel's fanout program hashes IPv6 as the
    engines do (nothing handed over), neighbour discovery reaches both
    engines (the one that answers a ping learned the kernel's MAC from a
    copy), and each engine answers the pings its hash gives it, fragments
    reassembled on one engine."""
    subnet = SUBNETS["cores_ping6_af_packet"]
    v = TwoQueueVeth(subnet)
    ustack_ip6 = f"fd99:{subnet}::2"
    # By ustack's hash, fd99:N::1 <-> ::2 is engine 1's (fold(1 ^ 2) = 3)
    # and fd99:N::4 <-> ::2 engine 0's (fold(4 ^ 2) = 6).
    sources = {f"fd99:{subnet}::1": 1, f"fd99:{subnet}::4": 0}
    # The kernel's end speaks IPv6 (ustack's end stays without it, so only
    # ustack answers for its addresses there).
    h.nsx(v.ns_k, "sysctl", "-qw", f"net.ipv6.conf.{v.if_k}.disable_ipv6=0")
    for src in sources:
        h.sh(["ip", "-n", v.ns_k, "-6", "addr", "add", f"{src}/64", "dev", v.if_k, "nodad"])
    u = h.Ustack(ctx.binary, ctx.workdir, v.config(f"addr6={ustack_ip6}/64\n"), netns=v.ns_u).start()
    u.wait_output(r"2 engine\(s\) on cores 0,1")
    v.wait_ping(u)
    deadline = time.monotonic() + 10
    for src in sources:
        while True:
            check(u.running(), f"ustack-echo exited (rc={u.proc.returncode})")
            p = h.nsx(v.ns_k, "ping", "-6", "-c", "1", "-W", "0.3", "-q", "-I", src, ustack_ip6,
                      check_rc=False, timeout=5)
            if p.returncode == 0:
                break
            check(time.monotonic() < deadline, f"{ustack_ip6} did not answer ping -6 from {src} within 10s")
    before = u.settled_stats()
    for src in sources:
        for size in (56, 4000):
            p = h.nsx(v.ns_k, "ping", "-6", "-c", "5", "-i", "0.05", "-s", str(size), "-W", "1", "-w", "5",
                      "-I", src, ustack_ip6, check_rc=False, timeout=20)
            out = p.stdout + p.stderr
            check(p.returncode == 0 and " 0% packet loss" in out and "5 received" in out,
                  f"ping -6 -s {size} from {src}: expected 5 of 5 answered:\n{out}")
            check("DUP!" not in out, f"ping -6 -s {size} from {src}: answered twice:\n{out}")
    st = u.settled_stats()
    replies = [st.get(f"engine{e}.icmpv6_echo_replies_sent", 0) - before.get(f"engine{e}.icmpv6_echo_replies_sent", 0)
               for e in (0, 1)]
    copies = engines_share(st, "steer_ndp_copies")
    fwd = engines_share(st, "steer_forwarded")
    print(f"    ping -6 56 and 4000 bytes from 2 sources: echo replies per engine {replies}; "
          f"NDP copies per engine {copies}; frames handed between engines {fwd}")
    # 10 pings per source, each engine its source's.
    check(replies == [10, 10], f"each engine answers the pings of its source: {replies}")
    check(sum(copies) > 0, f"neighbour discovery was not copied between engines: {h.nonzero(st)}")
    check(engines_share(st, "steer_ndp_copy_drops") == [0, 0], "NDP copies dropped")
    check(fwd == [0, 0], f"frames handed between engines (kernel and ustack hashes disagree over IPv6): {fwd}")
    u.stop()
