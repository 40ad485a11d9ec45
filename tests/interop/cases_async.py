"""Interop tests of the async Rust API (crates/rt): ustack-async-echo, an
echo server written as async tasks, serves a Linux peer over a veth (many
concurrent TCP connections and UDP datagrams at the same time), and
ustack-async-client's straight-line connect / timeout code meets a kernel
echo server, a closed port and an address nobody has."""

import os
import signal
import subprocess
import threading
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, no_tcp_trouble, tcp_echo_test, test
from harness import check

SUBNETS.update({"async_echo_af_packet": 230, "async_client_af_packet": 231, "async_cores_echo_af_packet": 232})
HERE = os.path.dirname(os.path.abspath(__file__))


def program(ctx, name):
    path = os.path.join(os.path.dirname(ctx.binary), name)
    check(os.path.isfile(path) and os.access(path, os.X_OK),
          f"no {name} at {path} (cargo build --release -p apps)")
    return path


def udp_echo_loop(sock, dest, sizes, rounds, out, stats):
    """Echoes datagrams of every size `rounds` times; records what failed.
    A datagram may be lost (the AF_PACKET ring overflows under the TCP
    load, for ustack-echo as well): each is sent up to 5 times, and must
    come back intact from the echo port."""
    for r in range(rounds):
        for size in sizes:
            payload = os.urandom(size)
            for attempt in range(5):
                reply, src = h.udp_echo(sock, dest, payload, timeout=0.5)
                if reply is not None:
                    break
                stats["resent"] += 1
            if reply != payload or src != dest:
                out.append(f"round {r}, {size} bytes: {len(reply or b'')} bytes back from {src}")
                return
            stats["echoed"] += 1


@test("async_echo_af_packet", budget=120)
def _(ctx):
    t = ctx.topo("af_packet", SUBNETS["async_echo_af_packet"], binary=program(ctx, "ustack-async-echo")).start()
    t.ustack.wait_output(r"serving echo on UDP port 7 and TCP port 7")
    # UDP in a thread while 50 TCP connections echo 256 KB each.
    sock = t.udp_socket()
    udp_failures, udp_stats = [], {"echoed": 0, "resent": 0}
    udp = threading.Thread(target=udp_echo_loop,
                           args=(sock, (t.ustack_ip, 7), (1, 100, 1472, 4000, 8000), 40, udp_failures, udp_stats))
    udp.start()
    try:
        tcp_echo_test(t, 50, 256 * 1024, 23)
    finally:
        udp.join(60)
    check(not udp.is_alive(), "the UDP echo loop did not finish")
    check(not udp_failures, f"UDP echo while TCP ran: {udp_failures}; {h.nonzero(t.ustack.settled_stats())}")
    st = t.ustack.settled_stats()
    print(f"    {udp_stats['echoed']} UDP datagrams of 1 to 8000 bytes echoed while TCP ran "
          f"({udp_stats['resent']} sent again; AF_PACKET ring drops: {st.get('port0_link_rx_dropped', 0)})")
    check(udp_stats["echoed"] == 200, f"UDP: {udp_stats}")
    # Every connection closed by the server after its echo, without resets.
    st = t.ustack.wait_stats(lambda s: s.get("tcp_passive_opens", 0) >= 50 and s.get("tcp_connections", 0) == 0,
                             timeout=5, what="every TCP connection accepted and closed")
    no_tcp_trouble(st, "async echo")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    check(st.get("tcp_passive_opens", 0) >= 50, f"passive opens: {h.nonzero(st)}")
    t.ustack.stop()


@test("async_client_af_packet", budget=90)
def _(ctx):
    subnet = SUBNETS["async_client_af_packet"]
    t = ctx.topo("af_packet", subnet)
    client = program(ctx, "ustack-async-client")
    srv = subprocess.Popen(["ip", "netns", "exec", t.ns_k, "/usr/bin/python3",
                            os.path.join(HERE, "kernel_echo_server.py"), t.kernel_ip],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def stop():
        srv.send_signal(signal.SIGTERM)
        srv.wait(5)

    h.on_cleanup(f"echo server pid {srv.pid}", stop)
    deadline = time.monotonic() + 10
    while t.kernel_ip not in h.sh(["ip", "netns", "exec", t.ns_k, "ss", "-Hltn", "sport = :7"]).stdout:
        check(srv.poll() is None and time.monotonic() < deadline, "the kernel echo server did not listen")
        time.sleep(0.05)
    cfg = os.path.join(ctx.workdir, "client.ini")
    with open(cfg, "w") as f:
        f.write(t.config())

    def run(*args, timeout=60):
        t0 = time.monotonic()
        p = h.nsx(t.ns_u, client, "--config", cfg, *args, check_rc=False, timeout=timeout)
        return p, time.monotonic() - t0

    p, dt = run("--connections", "20", "--bytes", "200000", f"{t.kernel_ip}:7")
    check(p.returncode == 0 and "20 connections x 200000 bytes echoed intact" in p.stderr,
          f"echo through the kernel: rc={p.returncode}: {p.stderr.strip()[-2000:]}")
    print(f"    {p.stderr.strip().splitlines()[-1]}")
    # A closed port: the kernel's reset is ConnectionRefused, at once.
    p, dt = run("--connections", "3", f"{t.kernel_ip}:8", timeout=20)
    check(p.returncode != 0 and "3 of 3 connections" in p.stderr and "connection refused" in p.stderr,
          f"a closed port: rc={p.returncode}: {p.stderr.strip()[-2000:]}")
    check(dt < 5, f"refusal took {dt:.1f} s")
    print(f"    closed port in {dt:.1f} s: {p.stderr.strip().splitlines()[-1]}")
    # Nobody at the address: the connect timeout (1 s) fires.
    p, dt = run("--connections", "2", "--timeout", "1", f"{h.NET_PREFIX}.{subnet}.77:7", timeout=20)
    check(p.returncode != 0 and "2 of 2 connections" in p.stderr and "timed out" in p.stderr,
          f"an address nobody has: rc={p.returncode}: {p.stderr.strip()[-2000:]}")
    check(1.0 <= dt < 10, f"the 1 s timeout took {dt:.1f} s")
    print(f"    nobody there, --timeout 1, in {dt:.1f} s: {p.stderr.strip().splitlines()[-1]}")


@test("async_cores_echo_af_packet", budget=120)
def _(ctx):
    """One runtime per engine: with lcore_mask=3 each engine's thread runs
    its own executor and listener, and serves the flows that hash to it."""
    from cases_cores import TwoQueueVeth, engines_share

    v = TwoQueueVeth(SUBNETS["async_cores_echo_af_packet"])
    u = h.Ustack(program(ctx, "ustack-async-echo"), ctx.workdir, v.config(), netns=v.ns_u).start()
    for e in (0, 1):
        u.wait_output(rf"engine {e}: serving echo on UDP port 7 and TCP port 7")
    v.wait_ping(u)
    payloads = [os.urandom(1000 + 37 * i) for i in range(200)]
    got = tt.echo_many(v.ns_k, (v.ustack_ip, 7), payloads, timeout=90)
    bad = [i for i, (a, b) in enumerate(zip(got, payloads)) if a != b]
    check(not bad, f"{len(bad)} of {len(payloads)} connections not echoed intact (first: {bad[:5]})")
    st = u.wait_stats(lambda s: s.get("tcp_passive_opens", 0) == 200 and s.get("tcp_connections", 0) == 0,
                      timeout=5, what="200 connections accepted and closed")
    opens = engines_share(st, "tcp_passive_opens")
    print(f"    200 concurrent connections echoed; passive opens per engine {opens}")
    check(sum(opens) == 200 and all(n > 0.25 * 200 for n in opens), f"each engine serves its share: {opens}")
    check(engines_share(st, "steer_forwarded") == [0, 0], "frames handed between engines")
    u.stop()
