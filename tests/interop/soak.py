"""`make soak` (not in `make test`): mixed load on two ustack processes
for USTACK_SOAK_SECONDS (default an hour), memory and counters sampled
every round: ustack-http under wrk with keep-alive and with a connection
per request (connection churn: millions over an hour), ustack-echo with
UDP echo and TCP echo over a link that loses, duplicates, reorders and
corrupts frames.  Pass: no client error, every echo whole, every frame in
one outcome counter, and each process's memory a flat line (the last
quarter's median within 8 MiB or 5 % of the first quarter's, after a
warm-up round).  The samples go to soak.csv in the test's directory."""

import os
import random
import socket
import statistics
import time

import harness as h
from cases import SUBNETS, test
from harness import check

SUBNETS.update({"soak_http_af_packet": 52, "soak_echo_af_packet": 53})

SOAK_SECONDS = int(os.environ.get("USTACK_SOAK_SECONDS", "3600"))
# Memory is sampled from here on: by then the connection churn's
# TIME-WAITs (2 MSL, 60 s) and every table and cache have reached their
# working level.
WARM_UP_SECONDS = 120
ROUND_WRK_SECONDS = 5


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def udp_round(t, count, rnd, first_id):
    """`count` datagrams, each tagged with its number, each waited for up
    to 0.2 s: late or duplicated replies of earlier ones (the link
    duplicates and reorders) are passed over; a reply with its number and
    other bytes is corruption.  Returns how many were answered."""
    s = h.netns_socket(t.ns_k, socket.AF_INET, socket.SOCK_DGRAM)
    answered = 0
    try:
        for i in range(first_id, first_id + count):
            payload = i.to_bytes(8, "big") + rnd.randbytes(rnd.randrange(1, 1400))
            s.sendto(payload, (t.ustack_ip, 7))
            deadline = time.monotonic() + 0.2
            while (left := deadline - time.monotonic()) > 0:
                s.settimeout(left)
                try:
                    got = s.recv(65535)
                except socket.timeout:
                    break
                if got[:8] == payload[:8]:
                    check(got == payload, f"UDP echo {i} came back changed")
                    answered += 1
                    break
    finally:
        s.close()
    return answered


def flat(samples, what):
    """The last quarter's median within 8 MiB or 5 % of the first's
    (samples: RSS less the TCP connections' own memory)."""
    q = max(1, len(samples) // 4)
    first, last = statistics.median(samples[:q]), statistics.median(samples[-q:])
    allowed = max(8 * 1024, first * 0.05)
    print(f"    {what}: RSS less TCP connections, median {first:.0f} KiB (first quarter) -> {last:.0f} KiB (last quarter), "
          f"allowed growth {allowed:.0f} KiB")
    check(last - first <= allowed, f"{what}: memory grew from {first:.0f} to {last:.0f} KiB")


@test("soak_mixed_af_packet", budget=SOAK_SECONDS + 600)
def _(ctx):
    import tcp_tools as tt

    # Two processes: a directory each for their config and counters.
    dirs = [os.path.join(ctx.workdir, d) for d in ("web", "echo")]
    for d in dirs:
        os.makedirs(d)
    web = h.Topology("af_packet", SUBNETS["soak_http_af_packet"], ctx.http, dirs[0]).create().start()
    echo = h.Topology("af_packet", SUBNETS["soak_echo_af_packet"], ctx.binary, dirs[1],
                      sets=["fault.loss=0.01", "fault.duplicate=0.01", "fault.reorder=0.01",
                            "fault.corrupt=0.002"]).create().start()
    url = f"http://{web.ustack_ip}/"
    rnd = random.Random(23)
    csv = open(os.path.join(ctx.workdir, "soak.csv"), "w")
    csv.write("seconds,http_rss_kib,http_tcp_kib,http_tcp_connections,echo_rss_kib,echo_tcp_kib,"
              "http_passive_opens,echo_rx_frames,requests,http_timer_entries,http_timer_kib\n")
    rss_web, rss_echo = [], []
    totals = {"requests": 0, "udp_sent": 0, "udp_answered": 0, "echoes": 0}
    start = time.monotonic()
    rounds = 0
    while rounds < 2 or time.monotonic() - start < SOAK_SECONDS:
        for extra in ((), ("-H", "Connection: close")):
            out, r = tt.run_wrk(web.ns_k, url, connections=50, seconds=ROUND_WRK_SECONDS, extra=extra)
            check(r["socket_errors"] == 0 and r["non_2xx"] == 0, f"wrk {extra}: errors:\n{out}")
            totals["requests"] += r["requests"]
        totals["udp_answered"] += udp_round(echo, 200, rnd, totals["udp_sent"])
        totals["udp_sent"] += 200
        payloads = [rnd.randbytes(256 * 1024) for _ in range(4)]
        got = tt.echo_many(echo.ns_k, (echo.ustack_ip, 7), payloads, timeout=120)
        check(got == payloads, "a TCP echo over the faulty link came back changed")
        totals["echoes"] += len(payloads)
        rounds += 1
        ws, es = web.ustack.stats(), echo.ustack.stats()
        rw, re_ = rss_kib(web.ustack.proc.pid), rss_kib(echo.ustack.proc.pid)
        elapsed = time.monotonic() - start
        csv.write(f"{elapsed:.0f},{rw},{ws.get('tcp_memory_bytes', 0) // 1024},{ws.get('tcp_connections', 0)},"
                  f"{re_},{es.get('tcp_memory_bytes', 0) // 1024},{ws.get('tcp_passive_opens', 0)},"
                  f"{es.get('rx_frames', 0)},{totals['requests']},{ws.get('tcp_timer_entries', 0)},"
                  f"{ws.get('tcp_timer_bytes', 0) // 1024}\n")
        csv.flush()
        print(f"    {elapsed:5.0f} s: ustack-http RSS {rw} KiB, TCP {ws.get('tcp_memory_bytes', 0) // 1024} KiB in "
              f"{ws.get('tcp_connections', 0)} connections, {ws.get('tcp_passive_opens', 0)} accepted, timer wheel "
              f"{ws.get('tcp_timer_entries', 0)} entries in {ws.get('tcp_timer_bytes', 0) // 1024} KiB; "
              f"ustack-echo RSS {re_} KiB", flush=True)
        if elapsed >= WARM_UP_SECONDS:
            # Less what the TCP connections hold: the connection-per-request
            # load keeps 2 MSL of them in TIME-WAIT, which rises for the
            # first minute and then stays (the counters show it).
            rss_web.append(rw - ws.get("tcp_memory_bytes", 0) // 1024)
            rss_echo.append(re_ - es.get("tcp_memory_bytes", 0) // 1024)
        check(web.ustack.running() and echo.ustack.running(), "a ustack process died")
    csv.close()
    ws, es = web.ustack.settled_stats(), echo.ustack.settled_stats()
    print(f"    {rounds} rounds in {time.monotonic() - start:.0f} s: {totals['requests']} HTTP requests, "
          f"{ws.get('tcp_passive_opens', 0)} connections accepted, UDP {totals['udp_answered']}/"
          f"{totals['udp_sent']} answered (1 % loss each way), {totals['echoes']} TCP echoes whole")
    for st, what in ((ws, "ustack-http"), (es, "ustack-echo")):
        check(h.outcome_sum(st) == st.get("rx_frames"), f"{what}: frames without an outcome counter")
    check(len(rss_web) >= 8, f"only {len(rss_web)} samples after the {WARM_UP_SECONDS} s warm-up: "
          f"USTACK_SOAK_SECONDS={SOAK_SECONDS} is too short to call memory flat (300 or more)")
    flat(rss_web, "ustack-http")
    flat(rss_echo, "ustack-echo")
    web.ustack.stop()
    echo.ustack.stop()
