"""A ustack killed with SIGKILL leaves its classifying XDP program
(`xdp_program=libxdp`, attached through netlink) on the interface, and,
chained, the program it displaced off it. Meanwhile the kernel's traffic
still reaches the kernel. The next ustack finds the program, sees from its
owner record (pid and start time, crates/link/src/af_xdp/stale.rs) that
its process is gone, and takes its place; `ustack xdp detach IFACE` removes
it, putting the displaced program back.

`xdp_stale_alone_native`: ustack's program alone on the interface.
`xdp_stale_beside_generic`: chained in front of another program
(xdp_no_ping.c, which drops pings to the kernel's own address); that
program still decides for the kernel's frames while the stale one stays,
and is back on the interface after a clean stop and after a detach. That
needs a bpffs, where ustack pins the program array that keeps the
displaced program (the kernel empties it when its last descriptor
closes): `ip netns exec` hides /sys/fs/bpf, so the test mounts one in its
work directory and names it in `LIBXDP_BPFFS`, as libxdp reads it."""

import os
import re

import harness as h
from cases import SUBNETS, no_tcp_trouble, tcp_echo_test, test
from cases_xdp import XdpCtx
from cases_xdp_shared import kernel_get, load_no_ping, pings, xdp_prog_id
import tcp_tools as tt
from harness import check

SUBNETS.update({"xdp_stale_alone_native": 133, "xdp_stale_beside_generic": 134})


def kernel_serves(t, own, what):
    ok, out = kernel_get(t, f"http://{own}:8080/f.txt")
    check(ok, f"HTTP to the kernel's own address {own} {what}: {out}")


def stale_case(ctx, mode, name, beside):
    subnet = SUBNETS[name]
    t = XdpCtx(ctx, mode).topo("af_xdp", subnet, sets=["port0.xdp_program=libxdp"])
    own = f"{h.NET_PREFIX}.{subnet}.3"
    h.sh(["ip", "-n", t.ns_u, "addr", "add", f"{own}/24", "dev", t.if_u])
    other = load_no_ping(ctx, t, mode, own) if beside else None
    srv = os.path.join(ctx.workdir, "srv")
    os.makedirs(srv, exist_ok=True)
    with open(os.path.join(srv, "f.txt"), "w") as f:
        f.write("kernel\n")
    tt.kernel_http_server(t.ns_u, own, 8080, srv, ctx.workdir)
    ustack_cli = os.path.join(os.path.dirname(ctx.binary), "ustack")
    bpffs = None
    if beside:
        bpffs = os.path.join(ctx.workdir, "bpffs")
        os.makedirs(bpffs, exist_ok=True)
        h.sh(["mount", "-t", "bpf", "bpf", bpffs])
        h.on_cleanup(f"umount {bpffs}", lambda: h.sh(["umount", bpffs], check_rc=False))

    def start():
        if bpffs:
            os.environ["LIBXDP_BPFFS"] = bpffs
        try:
            t.start()
        finally:
            os.environ.pop("LIBXDP_BPFFS", None)

    def crash():
        """Starts ustack, checks it serves, kills it with SIGKILL; returns
        the id of its program, left on the interface."""
        start()
        t.ustack.wait_output(r"ustack's XDP program .*\(libxdp, ")
        tcp_echo_test(t, 4, 20000, 29)
        ours = xdp_prog_id(t)
        check(ours is not None and ours != other, f"ustack's program is not on {t.if_u}: {ours}")
        t.ustack.proc.kill()
        t.ustack.proc.wait(5)
        check(xdp_prog_id(t) == ours, f"the killed ustack's program {ours} is not on {t.if_u} any more")
        # The kernel's traffic still reaches the kernel (and, beside the
        # other program, that program still decides for it).
        kernel_serves(t, own, "with the killed ustack's program left")
        if beside:
            check(not pings(t, own), f"pings to {own} pass: the displaced program no longer decides")
        else:
            check(pings(t, own), f"the kernel's own {own} does not answer ping with the stale program")
        return ours

    stale = crash()
    if bpffs:
        check(os.path.exists(os.path.join(bpffs, f"ustack_next_{stale}")),
              f"the killed ustack's program array is not pinned in {bpffs}: {os.listdir(bpffs)}")
    # The next ustack takes the stale program's place and works.
    start()
    m = t.ustack.wait_output(r"runs ustack's XDP program (\d+) left by process (\d+), which is gone: (\w+)")
    check(int(m.group(1)) == stale, f"ustack took over program {m.group(1)}, not the stale {stale}")
    check(m.group(3) == ("replacing" if beside else "removing"), f"unexpected takeover: {m.group(0)}")
    tcp_echo_test(t, 10, 20000, 31)
    kernel_serves(t, own, "after the takeover")
    st = t.ustack.settled_stats()
    no_tcp_trouble(st, "echo")
    now = xdp_prog_id(t)
    check(now not in (None, stale, other), f"{t.if_u} runs {now} after the takeover (stale {stale}, other {other})")
    t.ustack.stop()
    check(xdp_prog_id(t) == other, f"{t.if_u} runs {xdp_prog_id(t)} after a clean stop, expected {other}")

    # Killed again: `ustack xdp detach` removes what it left.
    stale = crash()
    # The bpffs named to the command as to ustack: the pin goes with it.
    env = ["env", f"LIBXDP_BPFFS={bpffs}"] if bpffs else []
    p = h.nsx(t.ns_u, *env, ustack_cli, "xdp", "detach", t.if_u, check_rc=False)
    check(p.returncode == 0 and re.search(rf"removed ustack's XDP program {stale}\b", p.stdout),
          f"ustack xdp detach {t.if_u}: rc {p.returncode}\n{p.stdout}{p.stderr}")
    check(xdp_prog_id(t) == other, f"{t.if_u} runs {xdp_prog_id(t)} after the detach, expected {other}")
    kernel_serves(t, own, "after the detach")
    # Nothing (or only the other program) left to detach: refused.
    p = h.nsx(t.ns_u, *env, ustack_cli, "xdp", "detach", t.if_u, check_rc=False)
    check(p.returncode != 0, f"a second detach succeeded:\n{p.stdout}")
    if bpffs:
        # (A bpffs comes with the kernel's maps.debug and progs.debug.)
        pins = [n for n in os.listdir(bpffs) if n.startswith("ustack")]
        check(pins == [], f"pins left in {bpffs}: {pins}")
    if beside:
        check(not pings(t, own), f"pings to {own} pass after the detach: the other program is gone")


@test("xdp_stale_alone_native", budget=90)
def _(ctx):
    stale_case(ctx, "native", "xdp_stale_alone_native", beside=False)


@test("xdp_stale_beside_generic", budget=90)
def _(ctx):
    stale_case(ctx, "generic", "xdp_stale_beside_generic", beside=True)
