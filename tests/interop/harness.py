"""Infrastructure of the interop suite: network namespaces, veth pairs, TAP
devices, sockets inside a namespace, and ustack-echo processes.

Every resource is registered in a global cleanup stack the moment it exists,
so that success, failure, a timeout and Ctrl-C all tear it down.  Names carry
this process's PID (``usi<pid>...``), so parallel runs do not collide, and a
run removes what an earlier, killed run of the suite left behind.
"""

import contextlib
import ctypes
import errno
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

# All addresses of the suite live in 10.99.0.0/16; each test has its own /24.
NET_PREFIX = "10.99"
PREFIX = "usi"  # prefix of every namespace and interface name we create
CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)


# -v: tests print more of what they see.
VERBOSE = False


def log(msg):
    if VERBOSE:
        print(f"    {msg}", flush=True)


class TestFailure(AssertionError):
    """A test's expectation did not hold."""


class TestTimeout(Exception):
    """A test ran past its time budget."""


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


# --------------------------------------------------------------------------
# Cleanup registry

_cleanups = []  # (token, description, function), run LIFO


def on_cleanup(desc, fn):
    token = object()
    _cleanups.append((token, desc, fn))
    return token


def cancel_cleanup(token):
    for i, (t, _, _) in enumerate(_cleanups):
        if t is token:
            del _cleanups[i]
            return


def run_cleanups():
    """Runs every registered cleanup, newest first; never raises."""
    while _cleanups:
        _, desc, fn = _cleanups.pop()
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - cleanup must go on
            print(f"  cleanup of {desc} failed: {e!r}", flush=True)


# --------------------------------------------------------------------------
# Commands

def sh(args, timeout=10, check_rc=True, input=None):
    """Runs a command (a list), returns CompletedProcess with text output."""
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired as e:
        raise TestFailure(f"command timed out after {timeout}s: {' '.join(args)}") from e
    if check_rc and p.returncode != 0:
        raise TestFailure(
            f"command failed (rc={p.returncode}): {' '.join(args)}\n{p.stdout}{p.stderr}".rstrip()
        )
    return p


def nsx(ns, *args, **kw):
    """Runs a command inside network namespace ns."""
    return sh(["ip", "netns", "exec", ns, *args], **kw)


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_stale_namespaces():
    """Deletes namespaces left by earlier runs of this suite that died
    (SIGKILL) before cleaning up: ours are named usi<pid>n<k>x, and the
    PID is no longer running.  Deleting a namespace deletes its veths and
    TAPs."""
    p = sh(["ip", "netns", "list"], check_rc=False)
    for line in p.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(PREFIX + r"(\d+)n\d+[a-z]", name)
        if m and int(m.group(1)) != os.getpid() and not pid_alive(int(m.group(1))):
            # Processes still inside (a ustack-echo of that run) go first.
            pids = sh(["ip", "netns", "pids", name], check_rc=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            sh(["ip", "netns", "del", name], check_rc=False)


_seq = 0


def unique(kind):
    """A fresh name: usi<pid>n<k><kind>, at most 15 bytes (interface names)."""
    global _seq
    _seq += 1
    name = f"{PREFIX}{os.getpid()}n{_seq}{kind}"
    assert len(name) <= 15, name
    return name


# --------------------------------------------------------------------------
# Namespaces and sockets inside them

def add_netns(name):
    sh(["ip", "netns", "add", name])
    on_cleanup(f"netns {name}", lambda: sh(["ip", "netns", "del", name], check_rc=False))
    # No IPv6 at all: no router solicitations, MLD or DAD on our links, so
    # the only frames are the ones the tests send.
    nsx(name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
    sh(["ip", "-n", name, "link", "set", "lo", "up"])


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"setns: {os.strerror(e)}")


@contextlib.contextmanager
def in_netns(name):
    """Runs the body with this thread in namespace `name`: sockets created
    inside stay in it for their whole life."""
    with open("/proc/thread-self/ns/net", "rb") as orig, open(f"/run/netns/{name}", "rb") as target:
        _setns(target.fileno())
        try:
            yield
        finally:
            try:
                _setns(orig.fileno())
            except OSError:
                # Never go on in the wrong namespace.
                os._exit(99)


def netns_socket(ns, family, type_, proto=0):
    with in_netns(ns):
        return socket.socket(family, type_, proto)


def mac_str(b):
    return ":".join(f"{x:02x}" for x in b)


def mac_bytes(s):
    return bytes(int(x, 16) for x in s.split(":"))


def link_mac(ns, ifname):
    p = sh(["ip", "-n", ns, "-o", "link", "show", ifname])
    m = re.search(r"link/ether ([0-9a-f:]{17})", p.stdout)
    check(m, f"no MAC for {ifname}: {p.stdout}")
    return m.group(1)


# --------------------------------------------------------------------------
# ustack-echo

class Ustack:
    """One ustack-echo process, its config, stats file and captured stderr."""

    def __init__(self, binary, workdir, config_text, netns=None, sets=(), extra_args=(), name="ustack"):
        self.binary = binary
        self.dir = workdir
        self.config_path = os.path.join(workdir, f"{name}.ini")
        self.stats_path = os.path.join(workdir, f"{name}.stats")
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        with open(self.config_path, "w") as f:
            f.write(config_text)
        self.args = [binary, "--config", self.config_path, "--stats", self.stats_path]
        for s in sets:
            self.args += ["--set", s]
        self.args += list(extra_args)
        if netns:
            self.args = ["ip", "netns", "exec", netns] + self.args
        self.proc = None
        self._errf = None
        self._token = None

    def start(self):
        self._errf = open(self.stderr_path, "wb")
        # A session of its own: a Ctrl-C at the terminal reaches only the
        # runner, which then stops this process itself.
        # PR_SET_PDEATHSIG: should the runner be killed outright, ustack-echo
        # gets SIGTERM instead of living on in a deleted namespace.
        self.proc = subprocess.Popen(
            self.args, stdin=subprocess.DEVNULL, stdout=self._errf, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: _libc.prctl(1, signal.SIGTERM, 0, 0, 0),
        )
        self._token = on_cleanup(f"ustack pid {self.proc.pid}", self._kill)
        register_output(self)
        return self

    def _kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(3)
        if self._errf:
            self._errf.close()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_output(self, pattern, timeout=5.0):
        """Waits for a regex in stderr; returns the match."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.stderr())
            if m:
                return m
            check(self.running(), f"ustack-echo exited (rc={self.proc.returncode}) before printing /{pattern}/")
            check(time.monotonic() < deadline, f"ustack-echo did not print /{pattern}/ within {timeout}s")
            time.sleep(0.01)

    def mac(self):
        return self.wait_output(r" mac ([0-9a-f]{2}(?::[0-9a-f]{2}){5}) ").group(1)

    def stats(self):
        """The counters of the latest snapshot (empty before the first)."""
        try:
            with open(self.stats_path) as f:
                text = f.read()
        except FileNotFoundError:
            return {}
        out = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = int(parts[1])
        return out

    def wait_stats(self, pred, timeout=3.0, what="counters"):
        """Polls the stats file until pred(stats) holds; returns the stats."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            if s and pred(s):
                return s
            check(self.running(), f"ustack-echo exited (rc={self.proc.returncode}) while waiting for {what}")
            if time.monotonic() >= deadline:
                raise TestFailure(f"{what}: not reached within {timeout}s; nonzero counters: {nonzero(s)}")
            time.sleep(0.02)

    def settled_stats(self, quiet=0.35, timeout=5.0):
        """Stats once they stopped changing for `quiet` seconds (the file is
        rewritten every 100 ms while anything changes) and every received
        frame has its outcome counter."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while True:
            check(self.running(), f"ustack-echo exited (rc={self.proc.returncode})")
            s = self.stats()
            key = {k: v for k, v in s.items() if not k.startswith("engine_")}
            if key != last:
                last, since = key, time.monotonic()
            elif s and time.monotonic() - since >= quiet:
                return s
            if time.monotonic() >= deadline:
                return s
            time.sleep(0.02)

    def stop(self, expect_rc=0):
        """SIGTERM, wait, check the exit code; returns stderr."""
        check(self.proc is not None, "ustack-echo was never started")
        rc = self.proc.poll()
        check(rc is None, f"ustack-echo died before SIGTERM (rc={rc})")
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(3)
            raise TestFailure("ustack-echo did not exit within 5s of SIGTERM")
        finally:
            if self._errf:
                self._errf.close()
                self._errf = None
            cancel_cleanup(self._token)
        check(rc == expect_rc, f"ustack-echo exited with {rc} after SIGTERM, expected {expect_rc}")
        err = self.stderr()
        check("stopped; counters:" in err, "ustack-echo did not print its counters on SIGTERM")
        return err


# Processes whose output a failing test prints.
_outputs = []


def register_output(u):
    _outputs.append(u)


def take_outputs():
    out = list(_outputs)
    _outputs.clear()
    return out


def nonzero(stats):
    return {k: v for k, v in sorted(stats.items()) if v}


def delta(after, before):
    keys = set(after) | set(before)
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


def outcome_sum(stats):
    return sum(v for k, v in stats.items() if k.startswith("rx_drop_") or k.startswith("rx_accept_"))


def drop_sum(stats):
    return sum(v for k, v in stats.items() if k.startswith("rx_drop_"))


# --------------------------------------------------------------------------
# Topologies

def ustack_config(link, addr, prefix=24, extra_port="", extra=""):
    return (
        "[dpdk]\n"
        "idle_sleep=100\n"
        "pkt_tx_delay=0\n"
        f"{extra}"
        "[port0]\n"
        f"link={link}\n"
        f"addr={addr}/{prefix}\n"
        f"{extra_port}"
    )


class Topology:
    """A kernel peer and a ustack-echo on one link.

    kind "af_packet": a veth pair between two namespaces: ustack-echo runs
    in ``ns_u`` on ``if_u`` over AF_PACKET; the kernel's side ``if_k``
    (10.99.N.1/24) is in ``ns_k``.  The root namespace is not touched.

    kind "af_packet_root": the same, but ustack-echo and its end of the veth
    are in the root namespace (IPv6 off on that end, so the root kernel sends
    nothing on it); deleting ``ns_k`` destroys the pair.

    kind "tap": ustack-echo runs in ``ns_k`` and creates the TAP device
    ``if_k`` there; the test gives the kernel's side of the TAP 10.99.N.1/24.

    kind "dpdk": the veth pair of "af_packet", with ustack-echo on DPDK
    (``link=dpdk``): the EAL without hugepages (``no_huge=1``) and a small
    mbuf pool (1024), port 0 an af_packet virtual device on ``if_u``.  DPDK's
    af_packet driver does not pass on the kernel's "checksum not ready"
    mark; the link recognises the partial form on a veth, so the kernel's
    side keeps its offload.
    """

    def __init__(self, kind, subnet, binary, workdir, sets=(), extra_port="", extra="", offload=True,
                 ipv6=False):
        check(kind in ("af_packet", "af_packet_root", "tap", "dpdk"), kind)
        self.kind = kind
        self.subnet = subnet
        self.kernel_ip = f"{NET_PREFIX}.{subnet}.1"
        self.ustack_ip = f"{NET_PREFIX}.{subnet}.2"
        # With ipv6: the kernel's side gets fd99:N::1/64 and ustack's port
        # addr6=fd99:N::2/64; IPv6 stays off on ustack's end of a veth, so
        # only ustack answers for its addresses there.
        self.ipv6 = ipv6
        self.kernel_ip6 = f"fd99:{subnet}::1"
        self.ustack_ip6 = f"fd99:{subnet}::2"
        self.binary = binary
        self.workdir = workdir
        self.sets = list(sets)
        self.extra_port = extra_port
        self.extra = extra
        self.offload = offload
        self.ns_k = unique("k")
        self.ns_u = None
        self.if_k = unique("t" if kind == "tap" else "k")
        self.if_u = None
        self.ustack = None
        self.ustack_mac = None

    # -- setup --------------------------------------------------------------

    def create(self):
        """The namespaces and links that exist before ustack starts."""
        add_netns(self.ns_k)
        if self.kind in ("af_packet", "dpdk"):
            self.ns_u = unique("u")
            self.if_u = unique("u")
            add_netns(self.ns_u)
            sh(["ip", "link", "add", self.if_u, "netns", self.ns_u, "type", "veth",
                "peer", "name", self.if_k, "netns", self.ns_k])
            sh(["ip", "-n", self.ns_u, "link", "set", self.if_u, "up"])
            self._kernel_side_up()
        elif self.kind == "af_packet_root":
            self.if_u = unique("u")
            sh(["ip", "link", "add", self.if_u, "type", "veth", "peer", "name", self.if_k, "netns", self.ns_k])
            if_u = self.if_u
            on_cleanup(f"veth {if_u}", lambda: sh(["ip", "link", "del", if_u], check_rc=False))
            sh(["sysctl", "-qw", f"net.ipv6.conf.{self.if_u}.disable_ipv6=1"])
            sh(["ip", "link", "set", self.if_u, "up"])
            self._kernel_side_up()
        return self

    def _kernel_side_up(self):
        if self.ipv6:
            nsx(self.ns_k, "sysctl", "-qw", f"net.ipv6.conf.{self.if_k}.disable_ipv6=0")
            # nodad: the address is usable at once (the kernel's own
            # detection is not under test).
            sh(["ip", "-n", self.ns_k, "-6", "addr", "add", f"{self.kernel_ip6}/64", "dev", self.if_k, "nodad"])
        sh(["ip", "-n", self.ns_k, "addr", "add", f"{self.kernel_ip}/24", "dev", self.if_k])
        sh(["ip", "-n", self.ns_k, "link", "set", self.if_k, "up"])
        # The kernel's end keeps its default offloads (TSO, GSO, checksum
        # offload) where ustack's link takes what they make: AF_PACKET takes
        # the TCP super-frames a veth hands over (whole, or cut), TAP gets
        # segments anyway, AF_XDP gathers them (cases_xdp.py), DPDK's
        # af_packet driver takes them whole in 64 KB slots when its vdev
        # names no framesz (ustack adds one, cases_devices.py).
        feats = [] if self.peer_segmentation_offload() else ["tso", "off", "gso", "off"]
        if not self.offload:
            feats += ["tx", "off"]
        if feats:
            nsx(self.ns_k, "ethtool", "-K", self.if_k, *feats)

    def peer_segmentation_offload(self):
        """Whether the kernel's end keeps TSO and GSO (see _kernel_side_up)."""
        return True

    def config(self):
        if self.kind == "dpdk":
            # The vdev as people write it: the af_packet driver hands over
            # fragmented datagrams reassembled (its fanout defragments) and
            # the peer's TCP super-frames whole, and ustack gives it 64 KB
            # frames when no framesz is named (it says so), received into
            # mbufs of that size.
            vdev = f"net_af_packet0,iface={self.if_u}"
            dpdk = f"no_huge=1\nvdev={vdev}\nfile_prefix={self.ns_u}\n"
            return ustack_config("dpdk", self.ustack_ip, extra_port="memory=1024\n" + self.extra_port,
                                 extra=dpdk + self.extra)
        link = f"tap:{self.if_k}" if self.kind == "tap" else f"af_packet:{self.if_u}"
        extra_port = self.extra_port + (f"addr6={self.ustack_ip6}/64\n" if self.ipv6 else "")
        return ustack_config(link, self.ustack_ip, extra_port=extra_port, extra=self.extra)

    def start(self, wait_ready=True):
        ns = self.ns_k if self.kind == "tap" else self.ns_u
        self.ustack = Ustack(self.binary, self.workdir, self.config(), netns=ns, sets=self.sets).start()
        if self.kind == "tap":
            self._wait_tap()
            self._kernel_side_up()
        self.ustack_mac = self.ustack.mac()
        if wait_ready:
            self.wait_ready()
        return self

    def _wait_tap(self):
        deadline = time.monotonic() + 5
        while True:
            if sh(["ip", "-n", self.ns_k, "link", "show", self.if_k], check_rc=False).returncode == 0:
                return
            check(self.ustack.running(), f"ustack-echo exited (rc={self.ustack.proc.returncode}) before creating the TAP")
            check(time.monotonic() < deadline, f"TAP {self.if_k} did not appear within 5s")
            time.sleep(0.01)

    def wait_ready(self, timeout=10.0, addr=None):
        """Polls with single pings until ustack answers (or the deadline)."""
        addr = addr or self.ustack_ip
        deadline = time.monotonic() + timeout
        while True:
            check(self.ustack.running(), f"ustack-echo exited (rc={self.ustack.proc.returncode}) before answering ping")
            p = nsx(self.ns_k, "ping", "-c", "1", "-W", "0.3", "-q", addr, check_rc=False, timeout=5)
            if p.returncode == 0:
                return
            check(time.monotonic() < deadline, f"{addr} did not answer ping within {timeout}s")

    # -- tools ----------------------------------------------------------------

    def ping(self, size, count=5, interval="0.05", addr=None, timeout=20):
        addr = addr or self.ustack_ip
        p = nsx(self.ns_k, "ping", "-c", str(count), "-i", interval, "-s", str(size), "-W", "1",
                "-w", str(max(5, count)), addr, check_rc=False, timeout=timeout)
        return p

    def wait_ready6(self, timeout=10.0):
        """Polls with single IPv6 pings until ustack answers: its address
        is usable once duplicate address detection ends (about 1 s)."""
        deadline = time.monotonic() + timeout
        while True:
            check(self.ustack.running(), f"ustack exited (rc={self.ustack.proc.returncode}) before answering ping -6")
            p = nsx(self.ns_k, "ping", "-6", "-c", "1", "-W", "0.3", "-q", self.ustack_ip6, check_rc=False, timeout=5)
            if p.returncode == 0:
                return
            check(time.monotonic() < deadline, f"{self.ustack_ip6} did not answer ping -6 within {timeout}s")

    def udp_socket(self):
        s = netns_socket(self.ns_k, socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((self.kernel_ip, 0))
        return s

    def raw_socket(self, proto=0):
        """An AF_PACKET socket on the kernel's side of the link."""
        s = netns_socket(self.ns_k, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
        s.bind((self.if_k, proto))
        return s

    def kernel_mac(self):
        return link_mac(self.ns_k, self.if_k)

    def neigh(self, addr=None):
        addr = addr or self.ustack_ip
        return sh(["ip", "-n", self.ns_k, "neigh", "show", addr, "dev", self.if_k]).stdout.strip()


def udp_echo(sock, dest, payload, timeout=1.0):
    """Sends one datagram and returns (reply, source address), or (None, None)."""
    sock.settimeout(timeout)
    sock.sendto(payload, dest)
    try:
        data, src = sock.recvfrom(65535)
    except socket.timeout:
        return None, None
    return data, src


def send_frames(sock, frames):
    """Sends raw frames; returns (sent, refused).  ENOBUFS is retried a few
    times; a frame the kernel refuses outright (EINVAL, EMSGSIZE) counts as
    refused."""
    sent = refused = 0
    for f in frames:
        for attempt in range(50):
            try:
                sock.send(f)
                sent += 1
                break
            except OSError as e:
                if e.errno in (errno.ENOBUFS, errno.EAGAIN) and attempt < 49:
                    time.sleep(0.001)
                    continue
                refused += 1
                break
    return sent, refused


def make_workdir():
    d = tempfile.mkdtemp(prefix="ustack-interop-")

    def rm():
        for name in os.listdir(d):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(d, name))
        with contextlib.suppress(OSError):
            os.rmdir(d)

    on_cleanup(f"workdir {d}", rm)
    return d
