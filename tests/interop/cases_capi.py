"""The C API against the Linux kernel: the C examples (examples/c: echo and
HTTP servers on the native API and on the F-Stack ff_* API), the ABI test
(tests/c/abi_test.c), the test of F-Stack's calls beyond sockets
(tests/c/fstack_api_test.c) and a program in the shape of F-Stack's
examples (tests/c/fstack_example/helloworld.c), built by `make c-examples`
against an installed libustack with pkg-config into target/c-examples, each
serving a kernel peer over a veth (AF_PACKET)."""

import os
import re
import random
import socket
import subprocess
import threading
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, curl, tcp_echo_test, test
from harness import check

HERE = os.path.dirname(os.path.abspath(__file__))

SUBNETS.update({
    "capi_echo_native_af_packet": 210, "capi_http_native_af_packet": 211,
    "capi_echo_fstack_af_packet": 212, "capi_http_fstack_af_packet": 213,
    "capi_abi_af_packet": 214,
    "capi_fstack_api_af_packet": 215, "capi_fstack_example_af_packet": 216,
    "capi_fstack_example_inet6_af_packet": 218,
    "capi_fstack_multiproc_af_packet": 217,
})


def c_program(ctx, name):
    """A program of target/c-examples (beside --bin-dir), which must exist."""
    bin_dir = os.path.dirname(ctx.binaries["ustack-echo"])
    d = os.environ.get("USTACK_C_EXAMPLES", os.path.join(os.path.dirname(bin_dir), "c-examples"))
    path = os.path.join(d, name)
    check(os.access(path, os.X_OK), f"no {path}: build it with `make c-examples`")
    return path


def start(ctx, name, program, extra_args=()):
    """A veth topology with `program` (a C example) on ustack's side."""
    t = ctx.topo("af_packet", SUBNETS[name], binary=c_program(ctx, program))
    t.ustack = h.Ustack(t.binary, t.workdir, t.config(), netns=t.ns_u, extra_args=extra_args,
                        name=program).start()
    t.ustack_mac = t.ustack.mac()
    t.wait_ready()
    return t


@test("capi_echo_native_af_packet", budget=90)
def _(ctx):
    t = start(ctx, "capi_echo_native_af_packet", "echo_native", ("--answer-port", "9999"))
    tcp_echo_test(t, 4, 1024 * 1024, 21)
    s = t.udp_socket()
    try:
        rnd = random.Random(22)
        for size in (1, 100, 1472, 4000):
            payload = rnd.randbytes(size)
            data, src = h.udp_echo(s, (t.ustack_ip, 7), payload)
            check(data == payload and src == (t.ustack_ip, 7),
                  f"UDP echo of {size} bytes: {None if data is None else len(data)} bytes from {src}")
        # The dispatcher answers port 9999 itself: the stack never sees it.
        before = t.ustack.wait_stats(lambda x: x.get("udp_datagrams_received", 0) == 4,
                                     what="4 datagrams received")["udp_datagrams_received"]
        data, src = h.udp_echo(s, (t.ustack_ip, 9999), b"straight back")
        check(data == b"straight back" and src == (t.ustack_ip, 9999),
              f"the dispatcher's answer: {data!r} from {src}")
    finally:
        s.close()
    st = t.ustack.wait_stats(lambda x: x.get("hook_answered", 0) == 1, what="hook_answered = 1")
    check(st.get("udp_datagrams_received", 0) == before,
          f"the answered datagram reached the stack: {h.nonzero(st)}")
    err = t.ustack.stop()
    check("dispatcher answered 1 datagrams" in err, f"echo_native's last words: {err[-300:]}")


@test("capi_http_native_af_packet", budget=60)
def _(ctx):
    t = start(ctx, "capi_http_native_af_packet", "http_native")
    out = os.path.join(ctx.workdir, "page.html")
    code, size, _ = curl(t, f"http://{t.ustack_ip}/", out)
    with open(out, "rb") as f:
        page = f.read()
    check(code == 200 and size == len(page) and b"Hello from ustack's C API" in page,
          f"GET /: {code}, {size} bytes: {page[:80]!r}")
    raw = (b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n" b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    resp, eof = tt.http_exchange(t.ns_k, (t.ustack_ip, 80), raw)
    check([r[0] for r in resp] == [200, 200, 200] and all(r[2] == page for r in resp),
          f"3 pipelined requests: {[(r[0], len(r[2])) for r in resp]}")
    check(eof, "no close after Connection: close")
    t.ustack.stop()


@test("capi_echo_fstack_af_packet", budget=90)
def _(ctx):
    t = start(ctx, "capi_echo_fstack_af_packet", "echo_fstack", ("--proc-type", "primary", "--proc-id", "0"))
    tcp_echo_test(t, 4, 1024 * 1024, 23)
    st = t.ustack.wait_stats(lambda s: s.get("tcp_passive_opens", 0) == 4 and s.get("tcp_connections", 0) == 0,
                             timeout=5, what="4 connections, every one closed")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    # An F-Stack program runs until it is killed (ff_run never returns).
    check(t.ustack.running(), "echo_fstack exited")


@test("capi_http_fstack_af_packet", budget=60)
def _(ctx):
    t = start(ctx, "capi_http_fstack_af_packet", "http_fstack")
    out = os.path.join(ctx.workdir, "page.html")
    code, size, _ = curl(t, f"http://{t.ustack_ip}/", out)
    with open(out, "rb") as f:
        page = f.read()
    check(code == 200 and size == 66 and b"Hello, ff_* API" in page, f"GET /: {code}, {size} bytes: {page!r}")
    # Several requests on one kept-alive connection (curl reuses it).
    urls = [f"http://{t.ustack_ip}/{i}" for i in range(5)]
    p = h.nsx(t.ns_k, "curl", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\n",
              *[a for u in urls for a in (u, "-o", "/dev/null")], check_rc=False, timeout=15)
    lines = p.stdout.split("\n")[:5]
    check(p.returncode == 0 and [ln.split()[0] for ln in lines] == ["200"] * 5,
          f"5 requests: rc={p.returncode} {p.stdout!r} {p.stderr!r}")
    check(sum(int(ln.split()[1]) for ln in lines) == 1, f"5 requests on one connection: {p.stdout!r}")
    check(t.ustack.running(), "http_fstack exited")


@test("capi_abi_af_packet", budget=60)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["capi_abi_af_packet"])
    # The kernel's side: TCP echo (kernel_echo_server.py) and UDP echo on 7.
    log = open(os.path.join(ctx.workdir, "kernel-echo.log"), "wb")
    p = subprocess.Popen(["ip", "netns", "exec", t.ns_k, "/usr/bin/python3",
                          os.path.join(HERE, "kernel_echo_server.py"), t.kernel_ip],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop_server():
        p.terminate()
        p.wait(5)
        log.close()

    h.on_cleanup("kernel echo server", stop_server)
    udp = h.netns_socket(t.ns_k, socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((t.kernel_ip, 7))
    udp.settimeout(0.2)
    done = threading.Event()

    def udp_echo():
        while not done.is_set():
            try:
                data, src = udp.recvfrom(65535)
            except (socket.timeout, OSError):
                continue
            udp.sendto(data, src)

    th = threading.Thread(target=udp_echo, daemon=True)
    th.start()

    def stop_udp():
        done.set()
        th.join(2)
        udp.close()

    h.on_cleanup("UDP echo", stop_udp)
    cfg = os.path.join(ctx.workdir, "abi.ini")
    with open(cfg, "w") as f:
        f.write(t.config())
    # The kernel's TCP server must be listening before the test connects.
    for _ in range(100):
        if h.nsx(t.ns_k, "ss", "-ltn", "sport = :7", check_rc=False).stdout.count("LISTEN"):
            break
        threading.Event().wait(0.05)
    r = h.nsx(t.ns_u, c_program(ctx, "abi_test"), "--conf", cfg, "--peer", t.kernel_ip,
              check_rc=False, timeout=30)
    print(f"    {r.stdout.strip()}")
    check(r.returncode == 0 and "checks passed" in r.stdout,
          f"abi_test: rc={r.returncode}\n{r.stdout}{r.stderr}")


def kernel_tcp_echo(ctx, t, addr, name):
    """kernel_echo_server.py on addr:7 in the kernel's namespace, listening
    before this returns; stopped at cleanup."""
    log = open(os.path.join(ctx.workdir, f"{name}.log"), "wb")
    p = subprocess.Popen(["ip", "netns", "exec", t.ns_k, "/usr/bin/python3",
                          os.path.join(HERE, "kernel_echo_server.py"), addr],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop():
        p.terminate()
        p.wait(5)
        log.close()

    h.on_cleanup(name, stop)
    for _ in range(100):
        if f"{addr}:7" in h.nsx(t.ns_k, "ss", "-ltn", "sport = :7", check_rc=False).stdout:
            return
        threading.Event().wait(0.05)
    check(False, f"{name}: nothing listens on {addr}:7")


@test("capi_fstack_api_af_packet", budget=60)
def _(ctx):
    subnet = SUBNETS["capi_fstack_api_af_packet"]
    t = ctx.topo("af_packet", subnet,
                 extra="[freebsd.sysctl]\nnet.inet.ip.ttl=33\nnet.inet.tcp.cc.algorithm=newreno\n")
    # An address of the kernel's outside ustack's subnet: only a route
    # (through the kernel, or a host route on the link) reaches it.
    far = f"10.250.{subnet}.1"
    h.sh(["ip", "-n", t.ns_k, "addr", "add", f"{far}/32", "dev", t.if_k])
    kernel_tcp_echo(ctx, t, t.kernel_ip, "kernel echo")
    kernel_tcp_echo(ctx, t, far, "far echo")
    cfg = os.path.join(ctx.workdir, "fstack_api.ini")
    with open(cfg, "w") as f:
        f.write(t.config())
    r = h.nsx(t.ns_u, c_program(ctx, "fstack_api_test"), "--conf", cfg, "--peer", t.kernel_ip, "--far", far,
              check_rc=False, timeout=60)
    print(f"    {r.stdout.strip()}")
    check(r.returncode == 0 and "checks passed" in r.stdout,
          f"fstack_api_test: rc={r.returncode}\n{r.stdout}{r.stderr}")


@test("capi_fstack_example_af_packet", budget=60)
def _(ctx):
    log_path = os.path.join(ctx.workdir, "helloworld.log")
    t = start(ctx, "capi_fstack_example_af_packet", "helloworld", ("--log", log_path))
    out = os.path.join(ctx.workdir, "page.html")
    for i in range(3):
        code, size, _ = curl(t, f"http://{t.ustack_ip}/{i}", out)
        with open(out, "rb") as f:
            page = f.read()
        check(code == 200 and size == 54 and b"Hello from ff_*" in page, f"GET /{i}: {code}, {size} bytes: {page!r}")
    check(t.ustack.running(), "helloworld exited")
    with open(log_path) as f:
        text = f.read()
    check("listening on port 80" in text, f"helloworld's log (ff_log to its own file): {text!r}")


@test("capi_fstack_example_inet6_af_packet", budget=60)
def _(ctx):
    """F-Stack's example built with -DINET6: an IPv4 listener on 0.0.0.0:80
    and an IPv6 one on [::]:80 (ff_socket(AF_INET6) is v6-only, as
    FreeBSD's), each serving the kernel's curl."""
    log_path = os.path.join(ctx.workdir, "helloworld6.log")
    name = "capi_fstack_example_inet6_af_packet"
    t = ctx.topo("af_packet", SUBNETS[name], binary=c_program(ctx, "helloworld6"), ipv6=True)
    t.ustack = h.Ustack(t.binary, t.workdir, t.config(), netns=t.ns_u, extra_args=("--log", log_path),
                        name="helloworld6").start()
    t.ustack_mac = t.ustack.mac()
    t.wait_ready()
    t.wait_ready6()
    out = os.path.join(ctx.workdir, "page6.html")
    for url in (f"http://{t.ustack_ip}/", f"http://[{t.ustack_ip6}]/"):
        for i in range(2):
            code, size, _ = curl(t, f"{url}{i}", out)
            with open(out, "rb") as f:
                page = f.read()
            check(code == 200 and size == 54 and b"Hello from ff_*" in page, f"GET {url}{i}: {code}, {size}: {page!r}")
    check(t.ustack.running(), "helloworld6 exited")
    with open(log_path) as f:
        text = f.read()
    check("listening on [::]:80 too" in text, f"helloworld6's log: {text!r}")
    print("    one F-Stack program, IPv4 and IPv6 listeners on port 80: both served")


def fetch_proc(ns, addr, timeout=3.0):
    """Connects to addr:80 and reads to the end: "proc N" from whichever
    process took the connection (None if it failed)."""
    s = h.netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect((addr, 80))
        data = b""
        while True:
            chunk = s.recv(64)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        s.close()


@test("capi_fstack_multiproc_af_packet", budget=90)
def _(ctx):
    """F-Stack's multi-process mode: two processes from one configuration
    (lcore_mask=3, --proc-id 0 and 1) serve one port, each its share, and
    the outgoing connections of both complete (their replies come back to
    the process that opened them)."""
    name = "capi_fstack_multiproc_af_packet"
    t = ctx.topo("af_packet", SUBNETS[name], binary=c_program(ctx, "fstack_multiproc"),
                 extra=f"lcore_mask=3\nfile_prefix={name}\n")
    multiproc_test(ctx, t, t.config())


SUBNETS["capi_fstack_multiproc_af_xdp"] = 5


class XdpMultiprocTopology:
    """The two-queue veth of cases_cores_xdp (native XDP) in the shape
    multiproc_test wants."""

    def __init__(self, ctx, name):
        from cases_cores_xdp import TwoQueueXdpVeth
        self.v = TwoQueueXdpVeth(SUBNETS[name], "native")
        self.ns_k, self.ns_u = self.v.ns_k, self.v.ns_u
        self.kernel_ip, self.ustack_ip = self.v.kernel_ip, self.v.ustack_ip
        self.binary, self.workdir = c_program(ctx, "fstack_multiproc"), ctx.workdir
        self.ustack = None

    def wait_ready(self):
        self.v.wait_ping(self.ustack)


@test("capi_fstack_multiproc_af_xdp", budget=90)
def _(ctx):
    """F-Stack's multi-process mode over AF_XDP: process N binds queue N
    of a two-queue veth, under the one XDP program process 0 attached and
    process 1 joined.  The veth puts flows on queues by the kernel's own
    hash, so about half reach the other process: it hands their frames
    over (link::handoff) and copies the ARP it receives to the other, so
    connections both ways complete in the process that has them."""
    name = "capi_fstack_multiproc_af_xdp"
    t = XdpMultiprocTopology(ctx, name)
    cfg = t.v.config().replace("[dpdk]\n", f"[dpdk]\nfile_prefix={name}\n", 1)
    procs = multiproc_test(ctx, t, cfg)
    t.v.check_program()
    for pid, u in enumerate(procs):
        check(re.search(rf"af_xdp queue {pid} native XDP", open(u.stderr_path, errors="replace").read()),
              f"process {pid} did not bind queue {pid}")
    stats = [u.stats() for u in procs]
    shared = [st.get("handoff_neighbors_shared", 0) + st.get("handoff_neighbors_received", 0) for st in stats]
    print(f"    neighbour frames shared+received per process {shared}; handed over and claimed "
          f"{[st.get('handoff_claimed', 0) for st in stats]}")
    check(sum(st.get("handoff_neighbors_received", 0) for st in stats) > 0,
          "no ARP frame was copied between the processes")


SUBNETS["capi_fstack_multiproc_dpdk"] = 7


@test("capi_fstack_multiproc_dpdk", budget=90)
def _(ctx):
    """F-Stack's multi-process mode over DPDK (a net_af_packet vdev, the
    EAL without hugepages).  DPDK's secondary processes map the primary's
    hugepage memory, which an EAL with no_huge does not have, so each
    process runs an EAL of its own (file_prefix PREFIX-procN) with its own
    vdev; DPDK 22.11's af_packet driver puts each in a fanout group of its
    own (keyed by its pid), so both receive every frame, and each keeps the
    flows whose hash is its own (steer_other_members counts the others')."""
    name = "capi_fstack_multiproc_dpdk"
    t = ctx.topo("dpdk", SUBNETS[name], binary=c_program(ctx, "fstack_multiproc"), extra="lcore_mask=3\n")
    procs = multiproc_test(ctx, t, t.config())
    left = []
    for pid, u in enumerate(procs):
        text = open(u.stderr_path, errors="replace").read()
        check(f"file_prefix {t.ns_u}-proc{pid}" in text, f"process {pid} did not run an EAL of its own: {text[-1500:]}")
        left.append(u.stats().get("steer_other_members", 0))
    print(f"    frames of the other process's flows left to it, per process: {left}")
    check(all(n > 0 for n in left), f"each process must receive the other's frames and leave them: {left}")


def multiproc_test(ctx, t, config_text):
    """Two processes of fstack_multiproc (--proc-id 0 and 1) on topology
    `t`: each answers its share of 60 connections to port 80 and completes
    its 40 outgoing connections to the kernel's echo server.  Returns the
    two processes."""
    kernel_tcp_echo(ctx, t, t.kernel_ip, "kernel-echo")
    count = 40
    procs = []
    for pid, ptype in ((0, "primary"), (1, "secondary")):
        u = h.Ustack(t.binary, t.workdir, config_text, netns=t.ns_u, name=f"fstack_multiproc{pid}",
                     extra_args=("--proc-type", ptype, "--proc-id", str(pid),
                                 "--connect", f"{t.kernel_ip}:7", "--count", str(count))).start()
        procs.append(u)
        # --proc-id order: the secondary joins the port's group second.
        deadline = time.monotonic() + 10
        while "serving port 80" not in open(u.stderr_path, errors="replace").read():
            check(u.running(), f"process {pid} exited: {open(u.stderr_path, errors='replace').read()[-2000:]}")
            check(time.monotonic() < deadline, f"process {pid} did not start")
            time.sleep(0.05)
    t.ustack = procs[0]
    t.wait_ready()
    # Outgoing: each process's connections were echoed.
    for pid, u in enumerate(procs):
        deadline = time.monotonic() + 20
        while True:
            text = open(u.stderr_path, errors="replace").read()
            m = re.search(r"outgoing: (\d+) of (\d+) echoed", text)
            if m:
                break
            check(u.running(), f"process {pid} exited: {text[-2000:]}")
            check(time.monotonic() < deadline, f"process {pid}: its outgoing connections did not finish: "
                                               f"{text[-2000:]}")
            time.sleep(0.05)
        print(f"    process {pid}: outgoing {m.group(1)} of {m.group(2)} echoed")
        check(int(m.group(1)) == count, f"process {pid}: {m.group(0)}")
    # Incoming: connections spread over both processes.
    seen = {}
    for _ in range(60):
        r = fetch_proc(t.ns_k, t.ustack_ip)
        seen[r] = seen.get(r, 0) + 1
    print(f"    60 connections to port 80 answered by {seen}")
    check(set(seen) == {"proc 0", "proc 1"}, f"answers {seen}: both processes, and only they, must answer")
    check(min(seen.values()) >= 10, f"each process must take its share of 60 connections: {seen}")
    for pid, u in enumerate(procs):
        st = u.wait_stats(lambda x: x.get("tcp_passive_opens", 0) >= 10 and x.get("tcp_active_opens", 0) == count,
                          what=f"process {pid}'s connections", timeout=5)
        print(f"    process {pid}: tcp_passive_opens {st.get('tcp_passive_opens')}, tcp_active_opens "
              f"{st.get('tcp_active_opens')}, handoff_claimed {st.get('handoff_claimed', 0)}, "
              f"arp_tap_frames {st.get('arp_tap_frames', 0)}")
    return procs
