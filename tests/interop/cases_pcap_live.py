"""`ustack pcap`: a live capture from a running ustack-http, through a
filter, to a pcap file tcpdump reads without a warning; ended by Ctrl-C
with its count of what the engine dropped; bad filters refused; a reader
too slow for wrk's load costs frames (dropped and counted), not requests."""

import json
import os
import re
import signal
import subprocess
import time

import harness as h
import tcp_tools as tt
from cases import SUBNETS, test
from cases_ctl import Cli, tt_curl
from harness import check

SUBNETS.update({"ctl_pcap_live_af_packet": 77})


@test("ctl_pcap_live_af_packet", budget=60)
def _(ctx):
    run_dir = os.path.join(ctx.workdir, "run")
    t = ctx.topo("af_packet", SUBNETS["ctl_pcap_live_af_packet"], binary=ctx.http,
                 sets=[f"control.dir={run_dir}"]).start()
    cli = Cli(os.path.join(os.path.dirname(ctx.http), "ustack"), run_dir)

    # Bad input: a usage error saying what is wrong, nothing started.
    for args, says in [(["tcp", "portt", "80"], "unknown word `portt`"),
                       (["(tcp", "or", "udp"], "never closed"),
                       (["-c", "0"], "not a frame count"),
                       (["-i", "eth9"], "no interface eth9")]:
        p = cli.run("pcap", *args, check_rc=False, json_out=False)
        check(p.returncode in (1, 2) and says in p.stderr, f"pcap {args}: rc={p.returncode} {p.stderr}")

    # The capture runs while curl fetches a page; Ctrl-C ends it.
    out = os.path.join(ctx.workdir, "live.pcap")
    proc = subprocess.Popen([cli.binary, "pcap", "--run-dir", run_dir, "-w", out, "tcp", "port", "80"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    h.on_cleanup("ustack pcap", proc.kill)
    first = proc.stderr.readline()
    check("capturing port 0 (tcp port 80)" in first, f"ustack pcap did not start: {first!r}")
    # A second capture of the same port is refused while this one runs.
    p = cli.run("pcap", "-c", "1", check_rc=False, json_out=False)
    check(p.returncode == 1 and "being captured already" in p.stderr, f"a second capture: {p.stderr}")
    code, size, _ = tt_curl(t, f"http://{t.ustack_ip}/", ctx.workdir)
    check(code == 200 and size == 600, f"GET /: {code}, {size}")
    h.nsx(t.ns_k, "ping", "-c", "1", "-W", "1", t.ustack_ip, check_rc=False, timeout=5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    check(proc.returncode == 0, f"ustack pcap: rc={proc.returncode}: {err}")
    m = re.search(r"(\d+) frame\(s\) written; the engines matched (\d+) and dropped (\d+)", err)
    check(m is not None, f"no summary: {err}")
    written, matched, dropped = map(int, m.groups())
    check(written == matched and dropped == 0 and written >= 8, f"summary: {err.strip()}")

    p = h.sh(["tcpdump", "-r", out, "-nn", "-A"], check_rc=False)
    check(p.returncode == 0, f"tcpdump -r: rc={p.returncode}: {p.stderr}")
    warnings = [line for line in p.stderr.splitlines() if not line.startswith("reading from file")]
    check(not warnings, f"tcpdump warns: {warnings}")
    text = p.stdout
    check(len(re.findall(r"^\d\d:\d\d:\d\d\.\d{6} ", text, re.M)) == written,
          f"tcpdump read another count than {written}:\n{text[:1500]}")
    syn = re.search(rf"IP {re.escape(t.kernel_ip)}\.\d+ > {re.escape(t.ustack_ip)}\.80: Flags \[S\]", text)
    synack = re.search(rf"IP {re.escape(t.ustack_ip)}\.80 > {re.escape(t.kernel_ip)}\.\d+: Flags \[S\.\]", text)
    check(syn and synack, f"no handshake in the capture:\n{text[:2000]}")
    check("GET / HTTP/1.1" in text and "HTTP/1.1 200" in text and "</html>" in text,
          f"the request and the page are not in the capture:\n{text[:2000]}")
    check("ICMP" not in text and "ARP" not in text, f"the filter let other frames through:\n{text[:2000]}")
    print(f"    {written} frames of a curl request captured live, read by tcpdump; none dropped")

    # --json: a line per frame, then the summary; -c ends it.
    proc = subprocess.Popen([cli.binary, "pcap", "--run-dir", run_dir, "--json", "-c", "2", "-s", "60", "icmp"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    h.on_cleanup("ustack pcap --json", proc.kill)
    time.sleep(0.5)
    h.nsx(t.ns_k, "ping", "-c", "1", "-W", "1", t.ustack_ip, check_rc=False, timeout=5)
    lines, err = proc.communicate(timeout=10)
    objs = [json.loads(line) for line in lines.splitlines()]
    check(len(objs) == 3, f"--json -c 2: {lines} {err}")
    check([o["outgoing"] for o in objs[:2]] == [False, True] and all("icmp" in o["summary"] for o in objs[:2]),
          f"the echo request in and its reply out: {objs}")
    check(objs[2]["written"] == 2 and objs[2]["dropped"] == 0, f"summary: {objs[2]}")

    # A reader too slow for wrk's load: the engine drops and counts what
    # does not fit its queue, wrk sees no error, the reader catches up.
    slow = subprocess.Popen(f"{cli.binary} pcap --run-dir {run_dir} --json -t 3 -w - 'tcp port 80' "
                            f"| (sleep 1.5; cat > /dev/null)", shell=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    h.on_cleanup("slow ustack pcap", slow.kill)
    out, r = tt.run_wrk(t.ns_k, f"http://{t.ustack_ip}/", connections=20, seconds=2)
    _, err = slow.communicate(timeout=15)
    check(slow.returncode == 0, f"the slow capture: rc={slow.returncode} {err}")
    summary = json.loads(err.strip().splitlines()[-1])
    check(r["socket_errors"] == 0 and r["non_2xx"] == 0 and r["requests"] > 1000,
          f"wrk under a slow capture: {r}\n{out}")
    check(summary["dropped"] > 0 and summary["written"] + summary["dropped"] == summary["matched"],
          f"the slow reader's summary: {summary}")
    print(f"    a reader asleep 1.5 s under wrk ({r['requests']} requests, 0 errors): "
          f"{summary['written']} frames written, {summary['dropped']} dropped and counted by the engine")
    t.ustack.stop()
