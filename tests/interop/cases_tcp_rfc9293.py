"""RFC 9293 against the kernel: ICMP errors reach ustack's connections (a
connect to a port the kernel rejects with ICMP port unreachable fails at
once with ECONNREFUSED, over IPv4 and IPv6); SYNs with unknown or illegal
options."""

import os
import time

import harness as h
from cases import SUBNETS, test
from harness import check

SUBNETS.update({
    "tcp_icmp_refused_af_packet": 253, "tcp_odd_options_af_packet": 254,
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
