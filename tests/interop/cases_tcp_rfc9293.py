"""RFC 9293 against the kernel: ICMP errors reach ustack's connections (a
connect to a port the kernel rejects with ICMP port unreachable fails at
once with ECONNREFUSED, over IPv4 and IPv6)."""

import os
import time

import harness as h
from cases import SUBNETS, test
from harness import check

SUBNETS.update({
    "tcp_icmp_refused_af_packet": 196,
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
