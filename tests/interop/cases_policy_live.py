"""The multi-VLAN VIP setup made and changed live through the `ustack`
command: VIPs added with `ustack ifconfig`, a FIB per VLAN with `ustack
route -fib`, source rules with `ustack rule`; then, while a TCP connection
streams to a VIP, its rule and its FIB's route are changed and its replies
move from VLAN to VLAN with no reset and no byte lost.

The topology is cases_vlan's (ustack-echo on a veth whose other end is the
trunk of a Python 802.1Q switch; a kernel gateway per VLAN behind it), with
two more links: the gateways of VLANs 20 and 30 each reach VLAN 10's
gateway, which holds the streaming client, and forward to it.  So a reply
from VIP 10 reaches its client whichever VLAN it leaves on, and the
switch's record of the trunk tells which VLAN that was.  Then a fourth
VLAN's interface is made live (`ustack ifconfig ustack0.40 create`), and
given an IPv6 address, destroyed and made again with inet and inet6; one
VLAN is taken down and up alone, and the port down and up again."""

import os
import socket
import threading
import time

import harness as h
from cases import test
from cases_ctl import Cli
from cases_vlan import VlanSwitch, gateway_mac, ipv4_of, tcp_echo, udp_echo
from harness import check

# VLAN id -> (link subnet 10.99.S.0/24, VIP, client address behind its gateway)
VLANS = {
    10: (70, "10.99.75.10", "10.99.76.10"),
    20: (71, "10.99.75.20", "10.99.76.20"),
    30: (72, "10.99.75.30", "10.99.76.30"),
}
# The links from the gateways of VLANs 20 and 30 to VLAN 10's.
FORWARD_SUBNETS = {20: 73, 30: 74}
# A VLAN ustack has no interface for until `ustack ifconfig ... create`.
LIVE_VLAN, LIVE_SUBNET = 40, 79
# The live VLAN's IPv6 prefix (fd99:79::/64, beside its 10.99.79.0/24).
LIVE6 = "fd99:79::"


def config(if_u, run_dir):
    text = ("[dpdk]\nlcore_mask=1\nidle_sleep=100\npkt_tx_delay=0\nvlan_filter=10,20,30\n"
            f"[port0]\nlink=af_packet:{if_u}\n[control]\nenable=1\ndir={run_dir}\n")
    for vid, (subnet, _, _) in VLANS.items():
        text += (f"[vlan{vid}]\nportid=0\naddr=10.99.{subnet}.2\nnetmask=255.255.255.0\n"
                 f"gateway=10.99.{subnet}.1\n")
    return text


class Stream:
    """One TCP connection to an echo service, written and read in step:
    each chunk sent comes back whole before the next."""

    def __init__(self, ns, src, dst):
        self.sock = h.netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.bind((src, 0))
        self.sock.connect((dst, 7))
        self.chunks = 0
        self.error = None
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while not self.stop:
                data = os.urandom(4000)
                self.sock.sendall(data)
                got = bytearray()
                while len(got) < len(data):
                    chunk = self.sock.recv(len(data) - len(got))
                    if not chunk:
                        raise ConnectionError(f"closed after {self.chunks} chunks")
                    got += chunk
                if bytes(got) != data:
                    raise ValueError(f"chunk {self.chunks} came back changed")
                self.chunks += 1
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = f"{type(e).__name__}: {e}"

    def wait_chunks(self, n, what):
        deadline = time.monotonic() + 10
        target = self.chunks + n
        while self.chunks < target:
            check(self.error is None, f"{what}: the stream failed: {self.error}")
            check(time.monotonic() < deadline, f"{what}: the stream stalled at {self.chunks} chunks")
            time.sleep(0.02)

    def close(self):
        self.stop = True
        self.thread.join(5)
        self.sock.close()


def replies_from(switch, vip, start):
    """The VLANs that replies from `vip` took on the trunk since frame
    `start`, each with the destination MAC, in order."""
    out = []
    for vid, frame, way in switch.frames[start:]:
        ip = ipv4_of(frame) if way == "in" else None
        if ip and ip[0] == vip:
            out.append((vid, h.mac_str(frame[:6])))
    return out


@test("vlan_cli_policy_live_af_packet", budget=60)
def _(ctx):
    ns_s, ns_u, if_u, trunk = h.unique("s"), h.unique("u"), h.unique("u"), h.unique("t")
    h.add_netns(ns_s)
    h.add_netns(ns_u)
    h.sh(["ip", "link", "add", if_u, "netns", ns_u, "type", "veth", "peer", "name", trunk, "netns", ns_s])
    h.sh(["ip", "-n", ns_u, "link", "set", if_u, "up"])
    h.sh(["ip", "-n", ns_s, "link", "set", trunk, "up"])
    gateways, access, gw_ifs = {}, {}, {}
    for vid, (subnet, vip, client) in list(VLANS.items()) + [(LIVE_VLAN, (LIVE_SUBNET, None, None))]:
        gw, port, gw_if = h.unique("g"), h.unique("a"), h.unique("g")
        h.add_netns(gw)
        h.sh(["ip", "link", "add", port, "netns", ns_s, "type", "veth", "peer", "name", gw_if, "netns", gw,
              "address", gateway_mac(vid)])
        h.sh(["ip", "-n", ns_s, "link", "set", port, "up"])
        h.sh(["ip", "-n", gw, "addr", "add", f"10.99.{subnet}.1/24", "dev", gw_if])
        h.sh(["ip", "-n", gw, "link", "set", gw_if, "up"])
        gateways[vid] = gw
        gw_ifs[vid] = gw_if
        access[vid] = port
        if vip is None:
            continue
        h.sh(["ip", "-n", gw, "addr", "add", f"{client}/32", "dev", "lo"])
        h.sh(["ip", "-n", gw, "route", "add", f"{vip}/32", "via", f"10.99.{subnet}.2", "dev", gw_if])
        for key in ("all", "default", gw_if):
            h.nsx(gw, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0")
    # VLAN 20's and 30's gateways forward to VLAN 10's client.
    client10 = VLANS[10][2]
    for vid, subnet in FORWARD_SUBNETS.items():
        a, b = h.unique("f"), h.unique("f")
        h.sh(["ip", "link", "add", a, "netns", gateways[10], "type", "veth", "peer", "name", b,
              "netns", gateways[vid]])
        h.sh(["ip", "-n", gateways[10], "addr", "add", f"10.99.{subnet}.1/24", "dev", a])
        h.sh(["ip", "-n", gateways[vid], "addr", "add", f"10.99.{subnet}.2/24", "dev", b])
        h.sh(["ip", "-n", gateways[10], "link", "set", a, "up"])
        h.sh(["ip", "-n", gateways[vid], "link", "set", b, "up"])
        h.nsx(gateways[10], "sysctl", "-qw", f"net.ipv4.conf.{a}.rp_filter=0")
        h.nsx(gateways[vid], "sysctl", "-qw", "net.ipv4.ip_forward=1")
        h.sh(["ip", "-n", gateways[vid], "route", "add", f"{client10}/32", "via", f"10.99.{subnet}.1"])
    switch = VlanSwitch(ns_s, trunk, access)
    h.on_cleanup("vlan switch", switch.close)

    run_dir = os.path.join(ctx.workdir, "run")
    u = h.Ustack(ctx.binary, ctx.workdir, config(if_u, run_dir), netns=ns_u).start()
    u.wait_output(r"serving echo on UDP port 7")
    cli = Cli(os.path.join(os.path.dirname(ctx.binary), "ustack"), run_dir)
    names = {vid: f"ustack0.{vid}" for vid in VLANS}

    # The VIPs, the FIBs and the rules, through the CLI.
    for fib, (vid, (subnet, vip, _)) in enumerate(VLANS.items(), 1):
        cli.reply("ifconfig", names[vid], "inet", vip, "alias")
        cli.reply("route", "add", f"10.99.{subnet}.0/24", "-interface", names[vid], "-fib", str(fib))
        cli.reply("route", "add", "default", f"10.99.{subnet}.1", "-fib", str(fib))
        cli.reply("rule", "add", "100", "from", f"{vip}/32", "fib", str(fib))
    interfaces = {i["name"]: i for i in cli.reply("ifconfig")["interfaces"]}
    for vid, (_, vip, _) in VLANS.items():
        check(interfaces[names[vid]]["vips"] == [vip], f"{names[vid]}: VIPs {interfaces[names[vid]]['vips']}")
    rules = cli.reply("rule")
    check(rules["fibs"] == 4 and [(r["from"], r["fib"]) for r in rules["rules"]]
          == [(f"{vip}/32", fib) for fib, (_, vip, _) in enumerate(VLANS.values(), 1)],
          f"rules: {rules}")
    # Bad input is refused with its reason, nothing changed.
    p = cli.run("rule", "add", "from", "10.99.75.0/24", check_rc=False, json_out=False)
    check(p.returncode == 2 and "needs `fib N`" in p.stderr, f"a rule without a FIB: {p.stderr}")
    p = cli.run("route", "add", "default", "10.99.99.1", "-fib", "2", check_rc=False, json_out=False)
    check(p.returncode == 1 and "on no interface's link" in p.stderr, f"an off-link gateway: {p.stderr}")

    deadline = time.monotonic() + 10
    for vid, (subnet, _, _) in VLANS.items():
        while h.nsx(gateways[vid], "ping", "-c", "1", "-W", "0.3", "-q", f"10.99.{subnet}.2",
                    check_rc=False, timeout=5).returncode != 0:
            check(u.running() and time.monotonic() < deadline, f"vlan {vid}: 10.99.{subnet}.2 did not answer")

    # Each VIP answers its own VLAN's client, TCP and UDP, its replies on
    # its VLAN to its gateway.
    start = len(switch.frames)
    for vid, (_, vip, client) in VLANS.items():
        data = os.urandom(30_000 + vid)
        got = tcp_echo(gateways[vid], client, vip, data)
        check(got == data, f"vlan {vid}: TCP echo {client} -> {vip}: {len(got)} of {len(data)} bytes")
        reply, frm = udp_echo(gateways[vid], client, vip, b"x" * 100)
        check(reply == b"x" * 100 and frm == (vip, 7), f"vlan {vid}: UDP echo: {reply!r:.40} from {frm}")
        took = set(replies_from(switch, vip, start))
        check(took == {(vid, gateway_mac(vid))}, f"vlan {vid}: replies from {vip} took {took}")
    print("    VIPs, FIBs and rules set by the CLI: each VIP's TCP and UDP replies on its own VLAN")

    # A connection streams to VIP 10 while its rule, then its FIB's route,
    # change under it.
    vip10 = VLANS[10][1]
    stream = Stream(gateways[10], client10, vip10)
    h.on_cleanup("stream", stream.close)
    stream.wait_chunks(20, "before any change")
    resets_before = u.stats().get("tcp_resets_sent", 0)
    steps = [
        # The rule: VIP 10's packets now use FIB 2 (VLAN 20's gateway).
        ((["rule", "add", "50", "from", f"{vip10}/32", "fib", "2"],
          ["rule", "delete", "100", "from", f"{vip10}/32", "fib", "1"]), 20),
        # FIB 2's default route: through VLAN 30's gateway.
        ((["route", "change", "default", f"10.99.{VLANS[30][0]}.1", "-fib", "2"],), 30),
    ]
    for commands, vid in steps:
        start = len(switch.frames)
        for cmd in commands:
            cli.reply(*cmd)
        stream.wait_chunks(20, f"after {commands}")
        took = replies_from(switch, vip10, start)
        # Replies sent before the change may still be in the record's
        # front; every one after the first on the new VLAN is on it.
        first = next((i for i, (v, _) in enumerate(took) if v == vid), None)
        check(first is not None, f"{commands}: no reply from {vip10} on vlan {vid}: {sorted(set(took))}")
        check(set(took[first:]) == {(vid, gateway_mac(vid))},
              f"{commands}: replies after the move: {sorted(set(took[first:]))}")
        print(f"    {' / '.join(' '.join(c) for c in commands)}: the stream's replies moved to vlan {vid} "
              f"({len(took) - first} frames), {stream.chunks} chunks echoed")
    stream.close()
    check(stream.error is None, f"the stream failed: {stream.error}")
    st = u.stats()
    check(st.get("tcp_resets_sent", 0) == resets_before, f"ustack sent resets: {h.nonzero(st)}")
    routes = cli.reply("route", "-fib", "2")["routes"]
    check(any(r["dest"] == "default" and r["gateway"] == f"10.99.{VLANS[30][0]}.1" for r in routes),
          f"fib 2: {routes}")

    def pings(vid, addr, tries=1):
        family = ["-6"] if ":" in addr else []
        return any(h.nsx(gateways[vid], "ping", *family, "-c", "1", "-W", "0.3", "-q", addr, check_rc=False,
                         timeout=5).returncode == 0 for _ in range(tries))

    # VLAN 40 made live: dropped as unknown before, answered after.
    live = f"10.99.{LIVE_SUBNET}.2"
    check(not pings(LIVE_VLAN, live), f"{live} answered before its VLAN interface existed")
    cli.reply("ifconfig", f"ustack0.{LIVE_VLAN}", "create", "inet", f"{live}/24")
    check(pings(LIVE_VLAN, live, tries=10), f"{live} did not answer on VLAN {LIVE_VLAN} once created")
    made = {i["name"]: i for i in cli.reply("ifconfig")["interfaces"]}[f"ustack0.{LIVE_VLAN}"]
    check(made["vlan"] == {"vid": LIVE_VLAN, "port": "ustack0"} and made["inet"][0]["addr"] == live,
          f"the VLAN interface made live: {made}")
    # IPv6 on the live VLAN: its first inet6 address turns IPv6 on there.
    gw40 = gateways[LIVE_VLAN]
    gw40_if = gw_ifs[LIVE_VLAN]
    h.nsx(gw40, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0", f"net.ipv6.conf.{gw40_if}.disable_ipv6=0")
    h.sh(["ip", "-n", gw40, "-6", "addr", "add", f"{LIVE6}1/64", "dev", gw40_if, "nodad"])
    cli.reply("ifconfig", f"ustack0.{LIVE_VLAN}", "inet6", f"{LIVE6}2/64", "alias")
    check(pings(LIVE_VLAN, f"{LIVE6}2", tries=15), f"{LIVE6}2 did not answer on VLAN {LIVE_VLAN}")

    # Destroyed live: nothing answers, its tag is unknown again; made again
    # with inet and inet6 on `create`, it answers both.
    unknown = u.stats().get("rx_drop_vlan_unknown_id", 0)
    said = cli.run("ifconfig", f"ustack0.{LIVE_VLAN}", "destroy", json_out=False).stdout
    check("destroyed" in said, f"destroy: {said}")
    check(f"ustack0.{LIVE_VLAN}" not in {i["name"] for i in cli.reply("ifconfig")["interfaces"]},
          "the destroyed interface is still listed")
    check(not pings(LIVE_VLAN, live), f"{live} answered after its VLAN interface was destroyed")
    u.wait_stats(lambda st: st.get("rx_drop_vlan_unknown_id", 0) > unknown, timeout=3,
                 what="VLAN 40's frames counted as unknown once destroyed")
    p = cli.run("ifconfig", "ustack0", "destroy", check_rc=False, json_out=False)
    check(p.returncode == 1 and "only a VLAN interface" in p.stderr, f"a port destroyed: {p.stderr}")
    cli.reply("ifconfig", f"ustack0.{LIVE_VLAN}", "create", "inet", f"{live}/24", "inet6", f"{LIVE6}2/64")
    check(pings(LIVE_VLAN, live, tries=10), f"{live} did not answer once made again")
    check(pings(LIVE_VLAN, f"{LIVE6}2", tries=15), f"{LIVE6}2 did not answer once made again")

    # One VLAN down alone: it drops both ways, the others carry on; up again.
    vlan10, vlan20 = f"10.99.{VLANS[10][0]}.2", f"10.99.{VLANS[20][0]}.2"
    said = cli.run("ifconfig", "ustack0.10", "down", json_out=False).stdout
    check("down" in said, f"ustack0.10 down: {said}")
    check(not pings(10, vlan10, tries=2), f"{vlan10} answered with its VLAN down")
    check(pings(20, vlan20, tries=3), f"{vlan20} did not answer with VLAN 10 down")
    iface10 = {i["name"]: i for i in cli.reply("ifconfig")["interfaces"]}["ustack0.10"]
    check(not iface10["up"], f"ustack0.10 down: {iface10}")
    st = u.wait_stats(lambda s: s.get("port0_vlan10_rx_drop_down", 0) >= 2, timeout=3,
                      what="VLAN 10's frames dropped while it was down")
    cli.reply("ifconfig", "ustack0.10", "up")
    check(pings(10, vlan10, tries=10), f"{vlan10} did not answer once its VLAN was up")
    print(f"    vlan {LIVE_VLAN}: inet6 added live answers ping -6; destroyed (nothing answers, its frames "
          f"unknown), made again with inet and inet6; ustack0.10 down alone "
          f"(port0_vlan10_rx_drop_down={st['port0_vlan10_rx_drop_down']}), VLAN 20 unaffected, up again")

    # The port down: nothing answers, what arrives is counted; up again.
    cli.reply("ifconfig", "ustack0", "down")
    check(not pings(10, vlan10, tries=2), f"{vlan10} answered with its port down")
    port = {i["name"]: i for i in cli.reply("ifconfig")["interfaces"]}["ustack0"]
    check(not port["up"] and "UP" not in port["flags"], f"ustack0 down: {port}")
    cli.reply("ifconfig", "ustack0", "up")
    check(pings(10, vlan10, tries=10), f"{vlan10} did not answer once its port was up")
    st = u.wait_stats(lambda s: s.get("engine_rx_drop_port_down", 0) >= 2, timeout=3,
                      what="frames dropped while the port was down")
    print(f"    vlan {LIVE_VLAN} made live answers ping; port down: "
          f"engine_rx_drop_port_down={st['engine_rx_drop_port_down']}, up: answers again")
    u.stop()
