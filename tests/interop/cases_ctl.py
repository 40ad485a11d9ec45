"""The control plane: every `ustack` subcommand against a ustack-http that
wrk keeps busy, over its control socket; ten CLIs at once; the figures
against the stats file; live changes (a route, a neighbour, a sysctl, an
alias the kernel then pings); the Prometheus endpoint scraped by curl."""

import json
import os
import re
import subprocess
import threading
import time

import harness as h
from cases import SUBNETS, test
from harness import check

SUBNETS.update({"ctl_http_wrk_af_packet": 251})

METRICS_PORT = 9100

# One sample of the text exposition format: name, optional labels, value.
PROM_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                         r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\})? (-?[0-9.eE+]+|NaN|[+-]Inf)$')
PROM_TYPE = re.compile(r"^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$")


def parse_prometheus(text):
    """Checks `text` is the text exposition format (every line a TYPE line,
    a HELP line or a sample; each family's TYPE before its samples, once);
    returns {(name, labels): value}."""
    samples, typed = {}, set()
    check(text.endswith("\n"), f"the exposition does not end with a newline: {text[-300:]!r}")
    for n, line in enumerate(text.splitlines(), 1):
        check(not line.startswith("# ustack: "), f"line {n}: an engine did not answer: {line}")
        if line.startswith("# HELP "):
            continue
        m = PROM_TYPE.match(line)
        if m:
            check(m.group(1) not in typed, f"line {n}: a second TYPE for {m.group(1)}")
            typed.add(m.group(1))
            continue
        m = PROM_SAMPLE.match(line)
        check(m is not None, f"line {n} is not a sample: {line!r}")
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        check(name in typed, f"line {n}: {name} has no TYPE line before it")
        check((name, labels) not in samples, f"line {n}: {name}{{{labels}}} twice")
        samples[(name, labels)] = float(value)
    return samples


class Cli:
    """Runs the `ustack` command against one run directory."""

    def __init__(self, binary, run_dir):
        self.binary, self.run_dir = binary, run_dir
        self.times = []

    def run(self, *args, check_rc=True, json_out=True):
        cmd = [self.binary, *args, "--run-dir", self.run_dir] + (["--json"] if json_out else [])
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        self.times.append(time.monotonic() - t0)
        if check_rc:
            check(p.returncode == 0, f"{' '.join(cmd)}: rc={p.returncode}\n{p.stdout}{p.stderr}")
        if json_out and p.returncode == 0:
            try:
                return json.loads(p.stdout)
            except json.JSONDecodeError as e:
                raise h.TestFailure(f"{' '.join(args)} --json: not JSON ({e}):\n{p.stdout[:500]}")
        return p

    def reply(self, *args):
        """The one engine's reply of a --json answer."""
        out = self.run(*args)
        check(isinstance(out, list) and len(out) == 1, f"{args}: expected one engine: {out}")
        check("reply" in out[0], f"{args}: {out[0]}")
        return out[0]["reply"]


def every_subcommand(cli, t):
    """Runs each read-only subcommand once and checks what it says."""
    st = cli.reply("stats")
    names = {n for n, _ in st["counters"]}
    check({"tcp_passive_opens", "port0_link_rx_frames", "engine_idle_us", "control_requests"} <= names,
          f"stats lacks counters: {sorted(names)[:20]}...")
    socks = cli.reply("netstat")["sockets"]
    check(any(s["state"] == "LISTEN" and s["local"] in ("0.0.0.0:80", "[::]:80") for s in socks), f"no listener on :80: {socks[:5]}")
    cli.reply("netstat", "-s")
    cli.reply("netstat", "-i")
    ifs = cli.reply("ifconfig")["interfaces"]
    check(len(ifs) == 1 and ifs[0]["inet"][0]["addr"] == t.ustack_ip and ifs[0]["mac"] == t.ustack_mac,
          f"ifconfig: {ifs}")
    routes = cli.reply("route")["routes"]
    check(any(r["dest"] == f"{h.NET_PREFIX}.{t.subnet}.0/24" for r in routes), f"no route to the subnet: {routes}")
    neigh = cli.reply("arp")["neighbors"]
    check(any(n["ip"] == t.kernel_ip for n in neigh), f"the kernel is not a neighbour: {neigh}")
    cli.reply("ndp")
    sysctls = cli.reply("sysctl")["sysctls"]
    check(any(s["name"] == "net.inet.ip.ttl" and s["live"] for s in sysctls), "no live net.inet.ip.ttl")
    return socks


@test("ctl_http_wrk_af_packet", budget=150)
def _(ctx):
    import tcp_tools as tt

    run_dir = os.path.join(ctx.workdir, "run")
    t = ctx.topo("af_packet", SUBNETS["ctl_http_wrk_af_packet"], binary=ctx.http,
                 sets=[f"control.dir={run_dir}", f"metrics.listen=127.0.0.1:{METRICS_PORT}"]).start()
    cli = Cli(os.path.join(os.path.dirname(ctx.http), "ustack"), run_dir)
    sock = os.path.join(run_dir, "ustack", "0.0.sock")
    check(os.path.exists(sock), f"no control socket at {sock}")
    every_subcommand(cli, t)

    # `ustack top` in a terminal, shown before the load and during it.
    tmux = h.unique("top")
    h.sh(["tmux", "new-session", "-d", "-s", tmux, "-x", "120", "-y", "20",
          f"{cli.binary} top --run-dir {run_dir}"])
    h.on_cleanup(f"tmux session {tmux}", lambda: h.sh(["tmux", "kill-session", "-t", tmux], check_rc=False))

    def top_screen():
        screen = h.sh(["tmux", "capture-pane", "-p", "-t", tmux]).stdout
        m = re.search(r"^0/0\s+([\d.]+)\s+(\S+)\s+\S+\s+(\S+)", screen, re.M)
        check(m is not None, f"ustack top shows no engine:\n{screen}")
        return screen, m

    time.sleep(2.2)
    idle_screen, idle = top_screen()

    # Under load: every subcommand, then ten CLIs at once, then `top`.
    url = f"http://{t.ustack_ip}/"
    result = {}
    wrk = threading.Thread(target=lambda: result.update(zip(("out", "r"), tt.run_wrk(t.ns_k, url, connections=100,
                                                                                    seconds=8))))
    wrk.start()
    time.sleep(2.2)
    busy_screen, busy = top_screen()
    h.log(f"ustack top, idle:\n{idle_screen}\nunder load:\n{busy_screen}")
    check(busy.group(2) != idle.group(2) and busy.group(2)[-1:] in "kMG",
          f"ustack top's rx pkt/s does not move with the load: idle {idle.group(2)}, "
          f"loaded {busy.group(2)}:\n{busy_screen}")
    cli.times.clear()
    socks = every_subcommand(cli, t)
    check(sum(1 for s in socks if s["state"] == "ESTABLISHED") > 10,
          f"netstat under load shows few connections: {len(socks)} sockets")
    loaded = list(cli.times)
    crowd, errors = [], []

    def one():
        p = Cli(cli.binary, run_dir)
        try:
            p.run("stats")
            crowd.append(p.times[0])
        except h.TestFailure as e:
            errors.append(str(e))

    threads = [threading.Thread(target=one) for _ in range(10)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check(not errors and len(crowd) == 10, f"ten CLIs at once: {errors}")
    frames = [json.loads(line) for line in cli.run("top", "-n", "1", "--json", json_out=False).stdout.splitlines()]
    check(len(frames) == 1 and frames[0][0]["rx_pps"] > 100 and frames[0][0]["tx_pps"] > 100,
          f"top under load: {frames}")
    traffic = cli.run("traffic", "-n", "1", json_out=False).stdout
    check("rx pkt/s" in traffic, f"traffic: {traffic}")
    wrk.join()
    r = result["r"]
    print(f"    wrk -c100 -d8s: {r['rps']:.0f} requests/s, socket errors {r['socket_errors']}; CLI answers "
          f"under load: median {sorted(loaded)[len(loaded) // 2] * 1000:.0f} ms, max {max(loaded) * 1000:.0f} ms; "
          f"ten at once: max {max(crowd) * 1000:.0f} ms; top: {frames[0][0]['rx_pps']:.0f} rx pkt/s, "
          f"busy {frames[0][0]['busy_pct']:.0f}%")
    check(r["socket_errors"] == 0 and r["non_2xx"] == 0, f"wrk saw errors with the CLIs running:\n{result['out']}")
    check(r["requests"] > 1000, f"wrk: only {r['requests']} requests")
    # A stall, not a speed: an engine that answered only between loads.
    check(max(loaded + crowd) < 2.0, f"a CLI took {max(loaded + crowd):.2f}s under load")

    # The figures agree with the stats file once the load is over.
    file_stats = t.ustack.settled_stats()
    cli_stats = dict(cli.reply("stats")["counters"])
    differ = {k: (v, cli_stats.get(k)) for k, v in file_stats.items()
              if not k.startswith(("engine_", "control_")) and cli_stats.get(k) != v}
    check(not differ, f"stats file and `ustack stats` differ: {differ}")

    # Prometheus: the endpoint (scraped by curl in ustack's namespace) and
    # the CLI's rendering both parse, and agree with the stats file.
    p = h.nsx(t.ns_u, "curl", "-sS", "--max-time", "5", "-D", "-", f"http://127.0.0.1:{METRICS_PORT}/metrics")
    # (Text mode: the head's CRLFs read as newlines.)
    head, _, body = p.stdout.partition("\n\n")
    check(head.startswith("HTTP/1.0 200") and "text/plain; version=0.0.4" in head, f"metrics head: {head}")
    for text, what in ((body, "endpoint"), (cli.run("stats", "--prometheus", json_out=False).stdout, "CLI")):
        samples = parse_prometheus(text)
        key = ("ustack_tcp_passive_opens_total", 'proc="0",engine="0"')
        check(samples.get(key) == file_stats["tcp_passive_opens"],
              f"{what}: {key} = {samples.get(key)}, stats file {file_stats['tcp_passive_opens']}")
        rx = samples.get(("ustack_link_rx_frames_total", 'proc="0",engine="0",port="0"'), 0)
        check(rx >= file_stats["port0_link_rx_frames"] > 0, f"{what}: rx frames {rx}")

    # Live changes.
    cli.run("route", "add", "192.0.2.0/24", t.kernel_ip)
    routes = cli.reply("route")["routes"]
    check(any(r["dest"] == "192.0.2.0/24" and r["gateway"] == t.kernel_ip for r in routes), f"route add: {routes}")
    p = cli.run("route", "add", "192.0.2.0/24", t.kernel_ip, check_rc=False, json_out=False)
    check(p.returncode == 1 and "exists" in p.stderr, f"a second add: rc={p.returncode} {p.stderr}")
    cli.run("route", "delete", "192.0.2.0/24")
    cli.run("arp", "-s", f"{h.NET_PREFIX}.{t.subnet}.77", "02:00:00:00:00:77")
    neigh = cli.reply("arp")["neighbors"]
    check(any(n["ip"].endswith(".77") and n["state"] == "permanent" for n in neigh), f"arp -s: {neigh}")
    cli.run("arp", "-d", f"{h.NET_PREFIX}.{t.subnet}.77")
    cli.run("sysctl", "net.inet.ip.ttl=63")
    check(cli.reply("sysctl", "net.inet.ip.ttl")["sysctls"][0]["value"] == "63", "sysctl set")
    ping = h.nsx(t.ns_k, "ping", "-c", "1", "-W", "2", t.ustack_ip, check_rc=False)
    check("ttl=63" in ping.stdout, f"replies after net.inet.ip.ttl=63:\n{ping.stdout}")
    p = cli.run("sysctl", "net.inet.ip.portrange.first=2000", check_rc=False, json_out=False)
    check(p.returncode == 1 and "[freebsd.sysctl]" in p.stderr, f"a config-only sysctl: {p.stderr}")
    alias = f"{h.NET_PREFIX}.{t.subnet}.99"
    ifname = cli.reply("ifconfig")["interfaces"][0]["name"]
    cli.run("ifconfig", ifname, "inet", alias, "alias")
    ping = h.nsx(t.ns_k, "ping", "-c", "1", "-W", "2", alias, check_rc=False)
    check(ping.returncode == 0, f"the alias added live does not answer:\n{ping.stdout}{ping.stderr}")
    code, size, _ = tt_curl(t, f"http://{alias}/", ctx.workdir)
    check(code == 200 and size == 600, f"GET / on the alias: {code}, {size}")
    cli.run("ifconfig", ifname, "inet", alias, "-alias")
    p = cli.run("route", "add", check_rc=False, json_out=False)
    check(p.returncode == 2 and "usage" in p.stderr, f"a bad command line: rc={p.returncode} {p.stderr}")
    p = cli.run("stats", "-p", "7", check_rc=False, json_out=False)
    check(p.returncode == 1 and "no running engine of process 7" in p.stderr, f"-p 7: {p.stderr}")
    t.ustack.stop()
    check(not os.path.exists(sock), "the control socket outlived its engine")


def tt_curl(t, url, workdir):
    out = os.path.join(workdir, "alias.html")
    p = h.nsx(t.ns_k, "curl", "-sS", "--max-time", "10", "-o", out, "-w", "%{http_code} %{size_download} x", url,
              check_rc=False, timeout=15)
    check(p.returncode == 0, f"curl {url}: {p.stderr}")
    code, size, _ = p.stdout.split()
    return int(code), int(size), None


SUBNETS.update({"pcap_from_start_af_packet": 252})


@test("pcap_from_start_af_packet", budget=60)
def _(ctx):
    """`[pcap] enable=1`: a curl request to ustack-http captured from the
    start, handshake and data, in files tcpdump reads without a warning."""
    pcap_dir = os.path.join(ctx.workdir, "pcap")
    t = ctx.topo("af_packet", SUBNETS["pcap_from_start_af_packet"], binary=ctx.http,
                 sets=["pcap.enable=1", f"pcap.savepath={pcap_dir}", "pcap.snaplen=65535"]).start()
    t.ustack.wait_output(r"\[pcap\] capturing every frame of port 0")
    code, size, _ = tt_curl(t, f"http://{t.ustack_ip}/", ctx.workdir)
    check(code == 200 and size == 600, f"GET /: {code}, {size}")
    t.ustack.stop()
    files = sorted(os.listdir(pcap_dir))
    check(len(files) == 1 and re.fullmatch(r"cap-\d+-e0-port0-0\.pcap", files[0]), f"capture files: {files}")
    p = h.sh(["tcpdump", "-r", os.path.join(pcap_dir, files[0]), "-nn", "-A"], check_rc=False)
    check(p.returncode == 0, f"tcpdump -r: rc={p.returncode}: {p.stderr}")
    warnings = [line for line in p.stderr.splitlines() if not line.startswith("reading from file")]
    check(not warnings, f"tcpdump warns: {warnings}")
    out = p.stdout
    syn = re.search(rf"IP {re.escape(t.kernel_ip)}\.\d+ > {re.escape(t.ustack_ip)}\.80: Flags \[S\]", out)
    synack = re.search(rf"IP {re.escape(t.ustack_ip)}\.80 > {re.escape(t.kernel_ip)}\.\d+: Flags \[S\.\]", out)
    check(syn and synack, f"no handshake in the capture:\n{out[:2000]}")
    check("GET / HTTP/1.1" in out and "HTTP/1.1 200" in out and "</html>" in out,
          f"the request and the page are not in the capture:\n{out[:2000]}")
    check("ARP" in out, "the ARP exchange before the connection is not in the capture")
