"""RFC 9293 against the kernel: ICMP errors reach ustack's connections (a
connect to a port the kernel rejects with ICMP port unreachable fails at
once with ECONNREFUSED, over IPv4 and IPv6); SYNs with unknown or illegal
options; ECN (RFC 3168) with a kernel that asks for it."""

import os
import re
import time

import harness as h
from cases import SUBNETS, test
from harness import check

SUBNETS.update({
    "tcp_icmp_refused_af_packet": 253, "tcp_odd_options_af_packet": 254,
    "tcp_ecn_af_packet": 80, "preload_urgent_data": 81,
})

# The port the kernel's firewall rejects with port unreachable.
REJECTED_PORT = 8099


def nft_reject(t, port):
    """An nftables rule in the kernel's namespace: TCP to `port` is answered
    with ICMP (ICMPv6) port unreachable instead of the RST a closed port
    gets."""
    rules = (
        "table inet ustack_test {\n"
        "  chain input {\n"
        "    type filter hook input priority 0; policy accept;\n"
        f"    meta nfproto ipv4 tcp dport {port} reject with icmp type port-unreachable\n"
        f"    meta nfproto ipv6 tcp dport {port} reject with icmpv6 type port-unreachable\n"
        "  }\n"
        "}\n"
    )
    h.sh(["ip", "netns", "exec", t.ns_k, "nft", "-f", "-"], input=rules)


@test("tcp_icmp_refused_af_packet", budget=60)
def _(ctx):
    """ustack-get to a port the kernel rejects with port unreachable: refused
    (ECONNREFUSED), not "timed out" after its 5 s timeout as when the error
    was ignored, over IPv4 and IPv6."""
    # Addresses in use at once (no duplicate detection), so that the time
    # printed is start-up and refusal, not a second of waiting for DAD.
    t = ctx.topo("af_packet", SUBNETS["tcp_icmp_refused_af_packet"], ipv6=True,
                 extra="[freebsd.sysctl]\nnet.inet6.ip6.dad_count=0\n")
    nft_reject(t, REJECTED_PORT)
    # The kernel's link-local address is tentative for its first second
    # (its own duplicate detection), and until then it resolves no
    # neighbor, so the first error would wait for the SYN's retransmission.
    deadline = time.monotonic() + 5
    while h.sh(["ip", "-n", t.ns_k, "-6", "addr", "show", "dev", t.if_k, "tentative"]).stdout.strip():
        check(time.monotonic() < deadline, "the kernel's IPv6 addresses stayed tentative")
        time.sleep(0.1)
    cfg = os.path.join(ctx.workdir, "refused.ini")
    with open(cfg, "w") as f:
        f.write(t.config())
    for family, host in (("IPv6", f"[{t.kernel_ip6}]"), ("IPv4", t.kernel_ip)):
        out = os.path.join(ctx.workdir, "refused.out")
        t0 = time.monotonic()
        p = h.nsx(t.ns_u, ctx.get, "--config", cfg, "--timeout", "5", "-o", out,
                  f"http://{host}:{REJECTED_PORT}/", check_rc=False, timeout=30)
        dt = time.monotonic() - t0
        err = p.stderr.strip()
        check(p.returncode != 0, f"{family}: ustack-get to a rejected port exited 0: {err}")
        check("refused" in err, f"{family}: expected 'refused' (ECONNREFUSED from port unreachable), got: {err!r}")
        print(f"    {family}: port unreachable -> {err.splitlines()[-1] if err else ''!r} after {dt:.2f} s "
              "(process start included)")


def syn_answers(t, raw, sport, options):
    """Sends a SYN from the kernel's address and port `sport` to ustack-echo's
    port 7 with `options` (raw bytes, padded to 4); returns the flags of
    ustack's answers within half a second (empty when none)."""
    import frames as fr

    options = options + b"\0" * (-len(options) % 4)
    seg = fr.tcp(t.kernel_ip, t.ustack_ip, sport, 7, b"", flags=0x02, seq=1000,
                 options=options, data_offset=5 + len(options) // 4)
    frame = fr.eth(h.mac_bytes(t.ustack_mac), h.mac_bytes(t.kernel_mac()), fr.ETH_P_IP,
                   fr.ipv4(t.kernel_ip, t.ustack_ip, 6, seg))
    raw.send(frame)
    answers = []
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        raw.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            f = raw.recv(2048)
        except OSError:
            break
        ip = f[14:]
        if len(ip) < 40 or ip[9] != 6 or ip[12:16] != fr.ip4(t.ustack_ip):
            continue
        tcp = ip[(ip[0] & 0xF) * 4:]
        if int.from_bytes(tcp[2:4], "big") == sport:
            answers.append(tcp[13])
    return answers


@test("tcp_odd_options_af_packet", budget=60)
def _(ctx):
    """RFC 9293 MUST-6, MUST-7 against the kernel's namespace: a SYN with
    options ustack does not know (experimental, MPTCP, Fast Open) is
    answered with a SYN-ACK; SYNs with a zero or overlong option length are
    dropped and counted; the kernel's own connections work after."""
    from cases import tcp_echo_test

    t = ctx.topo("af_packet", SUBNETS["tcp_odd_options_af_packet"]).start()
    raw = t.raw_socket(0x0800)
    before = t.ustack.settled_stats()
    try:
        unknown = bytes([254, 6, 0xF9, 0x89, 0, 0, 30, 4, 0x00, 0x81, 34, 2, 2, 4, 5, 180])
        got = syn_answers(t, raw, 41001, unknown)
        check(0x12 in got, f"a SYN with unknown options was not answered with a SYN-ACK: flags {got}")
        for sport, what, opts in ((41002, "zero-length", bytes([2, 4, 5, 180, 99, 0])),
                                  (41003, "overlong", bytes([2, 4, 5, 180, 99, 40])),
                                  (41004, "length-one", bytes([99, 1, 2, 4, 5, 180]))):
            got = syn_answers(t, raw, sport, opts)
            check(not got, f"a SYN with a {what} option was answered: flags {got}")
    finally:
        raw.close()
    after = t.ustack.settled_stats()
    d = h.delta(after, before)
    check(d.get("rx_drop_tcp_malformed", 0) == 3, f"three malformed SYNs counted: {h.nonzero(d)}")
    check(t.ustack.running(), "ustack-echo died")
    tcp_echo_test(t, 5, 3000, 24)
    print(f"    unknown options: SYN-ACK; zero, overlong and length-one options: dropped "
          f"(rx_drop_tcp_malformed +{d.get('rx_drop_tcp_malformed', 0)})")
    t.ustack.stop()


# Run in the kernel's namespace: one connection to ustack-echo, 200 KB
# echoed, then what `ss -tin` says of it while it is open.
ECN_CLIENT = """
import socket, subprocess, sys
host = sys.argv[1]
s = socket.create_connection((host, 7), timeout=10)
data = bytes(i * 7 % 251 for i in range(200_000))
s.sendall(data)
got = b""
while len(got) < len(data):
    b = s.recv(65536)
    if not b:
        break
    got += b
print("intact" if got == data else f"echoed {len(got)} of {len(data)} bytes")
print(subprocess.run(["ss", "-tin", "dst", host], capture_output=True, text=True).stdout)
s.close()
"""


@test("tcp_ecn_af_packet", budget=60)
def _(ctx):
    """RFC 3168 against the kernel with net.ipv4.tcp_ecn=1: its SYN asks for
    ECN and ustack (accept only, the default) agrees; ustack's data reaches
    the kernel ECT(0) (an nftables counter); the kernel's data, marked CE
    by an nftables rule on the way (one frame in four), is echoed with ECE
    (ustack counts the marks, the kernel's `delivered_ce` the echoes) until
    its CWR, and the data comes back intact."""
    t = ctx.topo("af_packet", SUBNETS["tcp_ecn_af_packet"]).start()
    h.nsx(t.ns_k, "sysctl", "-qw", "net.ipv4.tcp_ecn=1")
    rules = (
        "table inet ustack_ecn {\n"
        "  chain post {\n"
        "    type filter hook postrouting priority 0; policy accept;\n"
        "    meta nfproto ipv4 tcp dport 7 ip ecn ect0 numgen random mod 4 == 0 ip ecn set ce\n"
        "  }\n"
        "  chain in {\n"
        "    type filter hook input priority 0; policy accept;\n"
        "    meta nfproto ipv4 tcp sport 7 ip ecn ect0 counter\n"
        "  }\n"
        "}\n"
    )
    h.sh(["ip", "netns", "exec", t.ns_k, "nft", "-f", "-"], input=rules)
    before = t.ustack.settled_stats()
    p = h.nsx(t.ns_k, "python3", "-c", ECN_CLIENT, t.ustack_ip, timeout=30)
    out = p.stdout
    check(out.startswith("intact"), f"the echo: {out[:300]!r}")
    info = " ".join(out.split())
    m = re.search(r"delivered_ce:(\d+)", info)
    check(m and int(m.group(1)) > 0, f"the kernel took no ECN-Echo from ustack: {info}")
    listed = h.nsx(t.ns_k, "nft", "list", "chain", "inet", "ustack_ecn", "in").stdout
    ect = re.search(r"counter packets (\d+)", listed)
    check(ect and int(ect.group(1)) > 0, f"no ECT(0) segment from ustack reached the kernel: {listed}")
    after = t.ustack.settled_stats()
    d = h.delta(after, before)
    check(d.get("tcp_ecn_ce_received", 0) > 0, f"ustack took no CE mark: {h.nonzero(d)}")
    check(d.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(d)}")
    print(f"    kernel: {ect.group(1)} ECT(0) segments from ustack, {m.group(1)} delivered with CE echoed; "
          f"ustack: {d.get('tcp_ecn_ce_received', 0)} CE marks taken, "
          f"{d.get('tcp_ecn_reductions', 0)} window reductions")
    t.ustack.stop()


SIOCATMARK_HELPERS = """
import fcntl, select, socket, struct, sys
SIOCATMARK = 0x8905
def atmark(s):
    return struct.unpack("i", fcntl.ioctl(s, SIOCATMARK, bytes(4)))[0]
def read_to_mark(s):
    # Wait until the urgent byte is there (select's exceptional set), then
    # read up to the mark: reads stop there.
    _, _, x = select.select([], [], [s], 10)
    if not x:
        sys.exit("select: no exceptional condition (urgent data) in 10 s")
    got = b""
    while not atmark(s):
        got += s.recv(100)
    return got
"""

URGENT_SERVER = SIOCATMARK_HELPERS + """
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], 9000))
l.listen(1)
print("listening", flush=True)
c, _ = l.accept()
# Blocking: with a timeout Python waits for POLLIN before each recv, which
# a lone urgent byte at the mark never gives.
got = read_to_mark(c)
print(f"server: before the mark {got!r}, urgent {c.recv(1, socket.MSG_OOB)!r}", flush=True)
c.send(b"xyz", socket.MSG_OOB)
try:
    c.recv(100)
except OSError:
    pass  # a reset: the client closed with its urgent byte in the queue
"""

URGENT_CLIENT = SIOCATMARK_HELPERS + """
import errno, os, signal, time
urgs = []
signal.signal(signal.SIGURG, lambda *_: urgs.append(1))
s = socket.create_connection((sys.argv[1], 9000), timeout=10)
s.settimeout(None)
fcntl.fcntl(s, fcntl.F_SETOWN, os.getpid())
s.send(b"ab")
s.send(b"!", socket.MSG_OOB)
got = read_to_mark(s)
oob = s.recv(1, socket.MSG_OOB)
try:
    s.recv(1, socket.MSG_OOB)
    again = "a byte"
except OSError as e:
    again = errno.errorcode.get(e.errno, e.errno)
deadline = time.monotonic() + 2
while not urgs and time.monotonic() < deadline:
    time.sleep(0.01)
print(f"client: before the mark {got!r}, urgent {oob!r}, again {again}, SIGURG {bool(urgs)}", flush=True)
s.close()
"""


@test("preload_urgent_data", budget=60)
def _(ctx):
    """Urgent data through LD_PRELOAD against the kernel: a Python client
    under `ustack run` sends a byte with MSG_OOB (the kernel reads up to the
    mark, SIOCATMARK, then the byte with recv(MSG_OOB)), and takes the
    kernel's urgent byte: select's exceptional set, SIGURG to its F_SETOWN
    owner, SIOCATMARK, recv(MSG_OOB) once (EINVAL after)."""
    from cases_preload import Preload
    p = Preload(ctx, "preload_urgent_data")
    server = os.path.join(ctx.workdir, "urgent_server.py")
    client = os.path.join(ctx.workdir, "urgent_client.py")
    with open(server, "w") as f:
        f.write(URGENT_SERVER)
    with open(client, "w") as f:
        f.write(URGENT_CLIENT)
    srv = p.kernel_start(["/usr/bin/python3", server, p.kernel_ip], "urgent-server")
    srv.wait_line(r"^listening$", timeout=10)
    r = p.run(["/usr/bin/python3", client, p.kernel_ip], timeout=40, name="urgent-client")
    m = srv.wait_line(r"^server: .*$", timeout=10)
    line = m.group(0)
    print(f"    {line}\n    {r.stdout.strip()}")
    check(line == "server: before the mark b'ab', urgent b'!'", f"the kernel's view: {line!r}")
    check(r.returncode == 0 and
          "client: before the mark b'xy', urgent b'z', again EINVAL, SIGURG True" in r.stdout,
          f"rc={r.returncode}: {r.stdout} {r.stderr[-1500:]}")
