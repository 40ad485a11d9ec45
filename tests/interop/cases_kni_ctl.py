"""`ustack kni`: the exception path's state shown and its action changed
live.  ustack-echo serves TCP and UDP 7 with `[kni] method=accept
tcp_port=8080`; the kernel behind the exception TAP (in a namespace of its
own, holding ustack's address) serves HTTP on 8080.  `default` sends 8080
to the kernel and the rest (UDP 7) to ustack; `alltoff` sends
8080 to ustack too (refused: nothing listens there); `alltokni` sends UDP
7 to the kernel (no echo); back to `default`, both work again."""

import os
import socket
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, test
from cases_ctl import Cli
from harness import check

SUBNETS.update({"ctl_kni_af_packet": 78})


@test("ctl_kni_af_packet", budget=60)
def _(ctx):
    run_dir = os.path.join(ctx.workdir, "run")
    kni = f"kc{os.getpid() % 100000}"
    t = ctx.topo("af_packet", SUBNETS["ctl_kni_af_packet"], sets=[f"control.dir={run_dir}"],
                 extra=f"[kni]\nenable=1\nmethod=accept\ntcp_port=8080\nifname={kni}\n").start()
    t.ustack.wait_output(r"exception path")
    cli = Cli(os.path.join(os.path.dirname(ctx.binary), "ustack"), run_dir)
    tap = f"{kni}0"
    deadline = time.monotonic() + 5
    while h.sh(["ip", "-n", t.ns_u, "link", "show", tap], check_rc=False).returncode != 0:
        check(time.monotonic() < deadline, f"the exception path's TAP {tap} did not appear")
        time.sleep(0.05)
    ns_x = h.unique("x")
    h.add_netns(ns_x)
    h.sh(["ip", "-n", t.ns_u, "link", "set", tap, "netns", ns_x])
    h.sh(["ip", "-n", ns_x, "addr", "add", f"{t.ustack_ip}/24", "dev", tap])
    h.sh(["ip", "-n", ns_x, "link", "set", tap, "up"])
    srv = os.path.join(ctx.workdir, "srv")
    os.mkdir(srv)
    with open(os.path.join(srv, "f.txt"), "w") as f:
        f.write("kernel\n")
    tt.kernel_http_server(ns_x, t.ustack_ip, 8080, srv, ctx.workdir)

    k = cli.reply("kni")
    check(k["kind"] == "kni" and k["enabled"] and k["method"] == "accept" and k["action"] == "default"
          and k["tcp_ports"] == "8080" and k["udp_ports"] == "" and k["tap_ports"] == [0], f"kni: {k}")

    def kernel_http():
        p = h.nsx(t.ns_k, "curl", "-sS", "--max-time", "3", f"http://{t.ustack_ip}:8080/f.txt",
                  check_rc=False, timeout=10)
        return p.returncode == 0 and p.stdout == "kernel\n"

    def ustack_udp_echo():
        s = h.netns_socket(t.ns_k, socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((t.kernel_ip, 0))
            for _ in range(3):
                reply, _ = h.udp_echo(s, (t.ustack_ip, 7), b"u" * 50, timeout=0.3)
                if reply == b"u" * 50:
                    return True
            return False
        finally:
            s.close()

    def action(a):
        out = cli.reply("kni", "-a", a)
        check(out["message"] == f"kni action {a}", f"kni -a {a}: {out}")
        check(cli.reply("kni")["action"] == a, f"kni -a {a} did not hold")

    check(kernel_http() and ustack_udp_echo(), "default: HTTP to the kernel and UDP echo on ustack")
    to_kernel = cli.reply("kni")["counters"]
    action("alltoff")
    check(not kernel_http(), "alltoff: HTTP on 8080 still reached the kernel")
    check(ustack_udp_echo(), "alltoff: UDP echo on ustack")
    action("alltokni")
    check(not ustack_udp_echo(), "alltokni: UDP 7 still reached ustack")
    action("default")
    check(kernel_http() and ustack_udp_echo(), "default again: HTTP to the kernel and UDP echo on ustack")
    after = dict(cli.reply("kni")["counters"])
    check(after["kni_to_kernel"] > dict(to_kernel)["kni_to_kernel"], f"kni counters: {to_kernel} -> {after}")
    p = cli.run("kni", "-a", "sideways", check_rc=False, json_out=False)
    check(p.returncode == 2 and "must be default, alltokni or alltoff" in p.stderr, f"a bad action: {p.stderr}")
    print(f"    kni actions default/alltoff/alltokni/default moved HTTP 8080 and UDP 7 as set; counters {after}")
    t.ustack.stop()
