"""Operating ustack, the rest of issue 22: policy rules by socket mark
(SO_MARK set by an unmodified program under `ustack run`, rules made with
`ustack rule add mark N fib M`).

Topology of `ctl_rule_mark_af_packet`: ustack's port (10.99.64.2) sits on a
kernel bridge with two gateways, A (10.99.64.1) and B (10.99.64.3), each
in its own namespace and each holding the same service address
10.99.66.1 on its loopback, where a TCP and a UDP server answer with the
gateway's letter.  The main FIB's default goes through A; FIB 1's, made
through the CLI, through B.  So the letter a connection gets back says
which gateway, and so which FIB, its packets took."""

import os
import socket
import subprocess
import threading
import time

import harness as h
from cases import test
from cases_ctl import Cli
from harness import check

# Subnets of this file (10.99.64.0 .. 10.99.68.0 are issue 22's second part).
MARK_LINK, MARK_SERVICE = 64, 66
SERVICE_IP = f"10.99.{MARK_SERVICE}.1"
MARK = 7

# Runs under `ustack run`: a TCP and a UDP exchange with and without
# SO_MARK each time a "goN" file appears, one line of results per round.
MARK_CLIENT = r"""
import os, socket, sys, time
dst, work, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
SO_MARK = 36

def tcp(mark):
    s = socket.socket()
    if mark:
        s.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
    got = s.getsockopt(socket.SOL_SOCKET, SO_MARK)
    s.settimeout(5)
    s.connect((dst, 80))
    data = s.recv(16).decode()
    src = s.getsockname()[0]
    s.close()
    return f"{data}/{got}/{src}"

def udp(mark):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if mark:
        s.setsockopt(socket.SOL_SOCKET, SO_MARK, mark)
    s.settimeout(1)
    for _ in range(5):
        s.sendto(b"?", (dst, 7))
        try:
            data = s.recv(16).decode()
            break
        except socket.timeout:
            data = "timeout"
    s.close()
    return data

# The engine (and its control socket) starts with the first socket.
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
print("ready", flush=True)
for n in range(rounds):
    go = os.path.join(work, f"go{n}")
    while not os.path.exists(go):
        time.sleep(0.02)
    mark = int(open(go).read())
    print("round", n, tcp(mark), tcp(0), udp(mark), udp(0), flush=True)
"""


class LetterServers:
    """A TCP server on SERVICE_IP:80 and a UDP one on SERVICE_IP:7 in a
    namespace, each answering `letter`."""

    def __init__(self, ns, letter):
        self.letter = letter.encode()
        self.tcp = h.netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((SERVICE_IP, 80))
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self.udp = h.netns_socket(ns, socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((SERVICE_IP, 7))
        self.udp.settimeout(0.2)
        self.stop = False
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._tcp, self._udp)]
        for t in self.threads:
            t.start()

    def _tcp(self):
        while not self.stop:
            try:
                c, _ = self.tcp.accept()
            except (socket.timeout, OSError):
                continue
            with c:
                c.sendall(self.letter)

    def _udp(self):
        while not self.stop:
            try:
                _, peer = self.udp.recvfrom(64)
            except (socket.timeout, OSError):
                continue
            self.udp.sendto(self.letter, peer)

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(2)
        self.tcp.close()
        self.udp.close()


def bridge_with_gateways(gateways):
    """A bridge namespace with ustack's veth end (returned: namespace and
    interface for ustack) and a namespace per gateway {letter: host}, each
    holding SERVICE_IP; returns (ns_u, if_u, {letter: namespace})."""
    ns_b, ns_u, if_u, peer = h.unique("b"), h.unique("u"), h.unique("u"), h.unique("p")
    h.add_netns(ns_b)
    h.add_netns(ns_u)
    h.sh(["ip", "-n", ns_b, "link", "add", "br0", "type", "bridge"])
    h.sh(["ip", "-n", ns_b, "link", "set", "br0", "up"])
    h.sh(["ip", "link", "add", if_u, "netns", ns_u, "type", "veth", "peer", "name", peer, "netns", ns_b])
    h.sh(["ip", "-n", ns_u, "link", "set", if_u, "up"])
    h.sh(["ip", "-n", ns_b, "link", "set", peer, "master", "br0", "up"])
    names = {}
    for letter, host in gateways.items():
        ns, a, b = h.unique("g"), h.unique("g"), h.unique("g")
        h.add_netns(ns)
        h.sh(["ip", "link", "add", a, "netns", ns, "type", "veth", "peer", "name", b, "netns", ns_b])
        h.sh(["ip", "-n", ns_b, "link", "set", b, "master", "br0", "up"])
        h.sh(["ip", "-n", ns, "addr", "add", f"10.99.{MARK_LINK}.{host}/24", "dev", a])
        h.sh(["ip", "-n", ns, "link", "set", a, "up"])
        h.sh(["ip", "-n", ns, "addr", "add", f"{SERVICE_IP}/32", "dev", "lo"])
        names[letter] = ns
    return ns_u, if_u, names


@test("ctl_rule_mark_af_packet", budget=60)
def _(ctx):
    ns_u, if_u, gws = bridge_with_gateways({"A": 1, "B": 3})
    for letter, ns in gws.items():
        servers = LetterServers(ns, letter)
        h.on_cleanup(f"servers {letter}", servers.close)

    bin_dir = os.path.dirname(ctx.binary)
    launcher = os.path.join(bin_dir, "ustack")
    check(os.path.isfile(os.path.join(bin_dir, "libustack_preload.so")),
          f"no libustack_preload.so in {bin_dir} (cargo build --release --workspace)")
    run_dir = os.path.join(ctx.workdir, "run")
    conf = os.path.join(ctx.workdir, "mark.ini")
    with open(conf, "w") as f:
        f.write(h.ustack_config(f"af_packet:{if_u}", f"10.99.{MARK_LINK}.2",
                                extra_port=f"gateway=10.99.{MARK_LINK}.1\n",
                                extra="lcore_mask=1\n")
                # Run to wait: the engine has a thread of its own, so it
                # answers the CLI while the program sleeps between rounds.
                + f"[control]\nenable=1\ndir={run_dir}\n[preload]\nmode=rtw\n")
    script = os.path.join(ctx.workdir, "mark_client.py")
    with open(script, "w") as f:
        f.write(MARK_CLIENT)
    out_path = os.path.join(ctx.workdir, "mark_client.out")
    rounds = 3
    with open(out_path, "w") as out:
        proc = subprocess.Popen(["ip", "netns", "exec", ns_u, launcher, "run", "--config", conf, "--",
                                 "python3", script, SERVICE_IP, ctx.workdir, str(rounds)],
                                stdout=out, stderr=subprocess.STDOUT)
    h.on_cleanup("mark client", lambda: proc.poll() is None and (proc.kill(), proc.wait()))

    def lines():
        with open(out_path) as f:
            return f.read().splitlines()

    def wait_line(prefix):
        deadline = time.monotonic() + 15
        while True:
            found = [ln for ln in lines() if ln.startswith(prefix)]
            if found:
                return found[0]
            check(proc.poll() is None, f"the client exited (rc={proc.returncode}): {lines()[-15:]}")
            check(time.monotonic() < deadline, f"no `{prefix}` from the client: {lines()[-15:]}")
            time.sleep(0.05)

    def round_(n, mark):
        with open(os.path.join(ctx.workdir, f"go{n}"), "w") as f:
            f.write(str(mark))
        return wait_line(f"round {n} ").split()[2:]

    wait_line("ready")
    cli = Cli(launcher, run_dir)
    src = f"10.99.{MARK_LINK}.2"
    # Round 0, no rule yet: the mark changes nothing, both go by A.
    check(round_(0, MARK) == [f"A/{MARK}/{src}", f"A/0/{src}", "A", "A"], f"round 0: {lines()[-3:]}")

    # FIB 1 through gateway B, and the rule by mark, through the CLI.
    cli.reply("route", "add", f"10.99.{MARK_LINK}.0/24", "-interface", "ustack0", "-fib", "1")
    cli.reply("route", "add", "default", f"10.99.{MARK_LINK}.3", "-fib", "1")
    said = cli.run("rule", "add", "10", "mark", str(MARK), "fib", "1", json_out=False).stdout
    check("10 setfib 1 mark 7" in said, f"rule add: {said}")
    rules = cli.reply("rule")
    check(rules["fibs"] == 2 and [(r["priority"], r.get("mark"), r["fib"]) for r in rules["rules"]]
          == [(10, MARK, 1)], f"rule --json: {rules}")
    text = cli.run("rule", json_out=False).stdout
    check("00010 setfib 1 mark 7" in text, f"rule show: {text}")
    p = cli.run("rule", "add", "mark", "0", "fib", "1", check_rc=False, json_out=False)
    check(p.returncode == 2 and "not a mark" in p.stderr, f"mark 0: rc={p.returncode} {p.stderr}")

    # Round 1: the marked TCP connection and UDP datagram go by B (FIB 1),
    # the unmarked ones by A (the main FIB).
    got = round_(1, MARK)
    check(got == [f"B/{MARK}/{src}", f"A/0/{src}", "B", "A"], f"round 1 (mark rule): {got}")

    # Round 2: the rule deleted, the mark routes nothing any more.
    cli.reply("rule", "delete", "10", "mark", str(MARK), "fib", "1")
    check(cli.reply("rule")["rules"] == [], "the rule is still listed")
    got = round_(2, MARK)
    check(got == [f"A/{MARK}/{src}", f"A/0/{src}", "A", "A"], f"round 2 (rule deleted): {got}")
    proc.wait(10)
    check(proc.returncode == 0, f"client rc={proc.returncode}: {lines()[-10:]}")
    print(f"    marked TCP and UDP went by gateway B (fib 1), unmarked by A; "
          f"rule deleted: both by A")


# A VLAN interface made live on a DPDK port (the net_af_packet vdev on a
# veth): ustack never turns the port's hardware VLAN filter on (it filters
# tags itself), so a VLAN id made live reaches it with no change to the
# port.  The kernel's end of the veth is the trunk of cases_vlan's Python
# 802.1Q switch (this kernel has no 8021q module), whose access port for
# the VLAN leads to a namespace holding the VLAN's peer address.
DPDK_UNTAGGED, DPDK_VLAN, DPDK_VID = 67, 68, 44


@test("vlan_live_dpdk", budget=60)
def _(ctx):
    from cases_vlan import VlanSwitch

    run_dir = os.path.join(ctx.workdir, "run")
    t = ctx.topo("dpdk", DPDK_UNTAGGED, sets=[f"control.dir={run_dir}"]).start()
    cli = Cli(os.path.join(os.path.dirname(ctx.binary), "ustack"), run_dir)
    peer, access, peer_if = h.unique("g"), h.unique("a"), h.unique("g")
    h.add_netns(peer)
    h.sh(["ip", "link", "add", access, "netns", t.ns_k, "type", "veth", "peer", "name", peer_if, "netns", peer])
    h.sh(["ip", "-n", t.ns_k, "link", "set", access, "up"])
    h.sh(["ip", "-n", peer, "addr", "add", f"10.99.{DPDK_VLAN}.1/24", "dev", peer_if])
    h.sh(["ip", "-n", peer, "link", "set", peer_if, "up"])
    switch = VlanSwitch(t.ns_k, t.if_k, {DPDK_VID: access})
    h.on_cleanup("vlan switch", switch.close)
    port = cli.reply("ifconfig")["interfaces"][0]["name"]
    addr = f"10.99.{DPDK_VLAN}.2"

    def pings(tries):
        return any(h.nsx(peer, "ping", "-c", "1", "-W", "0.3", "-q", addr, check_rc=False,
                         timeout=5).returncode == 0 for _ in range(tries))

    check(not pings(1), f"{addr} answered before its VLAN interface existed")
    cli.reply("ifconfig", f"{port}.{DPDK_VID}", "create", "inet", f"{addr}/24")
    check(pings(10), f"{addr} did not answer on VLAN {DPDK_VID} over DPDK once created")
    # The stats file is a periodic snapshot: wait for one taken after the ping.
    key = f"port0_vlan{DPDK_VID}_rx_frames"
    try:
        st = t.ustack.wait_stats(lambda s: s.get(key, 0) >= 1, what=key)
    except Exception:
        st = t.ustack.stats()
    check(st.get(key, 0) >= 1, f"no VLAN {DPDK_VID} frames counted: {h.nonzero(st)}")
    cli.reply("ifconfig", f"{port}.{DPDK_VID}", "destroy")
    check(not pings(2), f"{addr} answered after its VLAN interface was destroyed")
    print(f"    {port}.{DPDK_VID} made live on a DPDK port answers ping (port0_vlan{DPDK_VID}_rx_frames="
          f"{st[f'port0_vlan{DPDK_VID}_rx_frames']}); destroyed, it does not")
