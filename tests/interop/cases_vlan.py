"""Interop test of VLAN interfaces, several FIBs and source policy (the
seed's multi-VLAN VIP setup, configured as F-Stack's current release does).

ustack-echo drives one veth end over AF_PACKET with three [vlanN] sections
(VLANs 10, 20, 30), each with an address, a gateway, a VIP and `ipfw_pr`
for the VIP; its port has no address.  The other veth end is the trunk of
an 802.1Q switch; behind the switch, each VLAN's gateway is a kernel in a
namespace of its own, holding its client's address (another subnet) and a
route to its VIP through ustack's address on its VLAN.  This kernel has no
802.1Q sub-interfaces nor VLAN-filtering bridges (CONFIG_VLAN_8021Q and
CONFIG_BRIDGE_VLAN_FILTERING are off), so the switch is a few lines of
Python over packet sockets: it tags what a gateway sends with its VLAN,
and untags what the trunk carries for it, keeping each frame's offload
marks (virtio_net_hdr: partial checksums, TSO super-frames), so that every
kernel keeps its default offloads.  A gateway drops what is not for it (no
forwarding), so an exchange works only if each VIP's replies leave on its
own VLAN; the switch's record of the trunk shows each reply on its VLAN, to
its gateway's MAC.  A VLAN ustack lacks (40) is dropped and counted."""

import os
import select
import socket
import struct
import threading
import time

import harness as h
from cases import test
from harness import check

# VLAN id -> (link subnet 10.99.S.0/24, VIP, client address behind its gateway)
VLANS = {
    10: (250, "10.99.253.10", "10.99.254.10"),
    20: (251, "10.99.253.20", "10.99.254.20"),
    30: (252, "10.99.253.30", "10.99.254.30"),
}
UNKNOWN_VLAN = 40
UNKNOWN_SUBNET = 249

SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
ETH_P_ALL = 0x0003


def gateway_mac(vid):
    return f"02:99:00:00:00:{vid:02x}"


def config(if_u, lcore_mask):
    text = f"[dpdk]\nlcore_mask={lcore_mask}\nidle_sleep=100\npkt_tx_delay=0\nvlan_filter=10,20,30\n"
    text += f"[port0]\nlink=af_packet:{if_u}\n"
    for vid, (subnet, vip, _) in VLANS.items():
        text += (f"[vlan{vid}]\nportid=0\naddr=10.99.{subnet}.2\nnetmask=255.255.255.0\n"
                 f"gateway=10.99.{subnet}.1\nvip_addr={vip}\nipfw_pr={vip} 255.255.255.255\n")
    return text


PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4
VNET_HDR = struct.Struct("=BBHHHH")  # flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
VNET_F_NEEDS_CSUM = 1


class VlanSwitch:
    """An 802.1Q switch: `trunk` carries every VLAN tagged, each access
    port (vid -> interface) one VLAN untagged.  Records the trunk's frames
    as (vid, untagged frame, "in" from ustack / "out" to ustack)."""

    def __init__(self, ns, trunk, access):
        self.trunk = self._socket(ns, trunk, auxdata=True)
        self.access = {vid: self._socket(ns, ifname) for vid, ifname in access.items()}
        self.vid_of = {s.fileno(): vid for vid, s in self.access.items()}
        self.frames = []
        self.unknown = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _socket(ns, ifname, auxdata=False):
        s = h.netns_socket(ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
        if auxdata:
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        s.bind((ifname, ETH_P_ALL))
        return s

    def _run(self):
        socks = [self.trunk, *self.access.values()]
        while not self.stop:
            ready, _, _ = select.select(socks, [], [], 0.05)
            for s in ready:
                try:
                    data, anc, _, addr = s.recvmsg(70000, socket.CMSG_SPACE(20))
                except OSError:
                    return
                if addr[2] == PACKET_OUTGOING or len(data) < VNET_HDR.size + 14:
                    continue
                vnet, frame = data[:VNET_HDR.size], data[VNET_HDR.size:]
                if s is self.trunk:
                    self._from_trunk(vnet, frame, anc)
                else:
                    self._to_trunk(self.vid_of[s.fileno()], vnet, frame)

    def _from_trunk(self, vnet, frame, anc):
        vid = None
        for level, kind, blob in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(blob) >= 20:
                status, _, _, _, _, tci, _ = struct.unpack("IIIHHHH", blob[:20])
                if status & TP_STATUS_VLAN_VALID:
                    vid = tci & 0x0FFF
        if vid is None and frame[12:14] == b"\x81\x00":
            flags, gso, hdr_len, gso_size, cstart, coff = VNET_HDR.unpack(vnet)
            vid = int.from_bytes(frame[14:16], "big") & 0x0FFF
            frame = frame[:12] + frame[16:]
            vnet = VNET_HDR.pack(flags, gso, max(hdr_len - 4, 0), gso_size,
                                 cstart - 4 if flags & VNET_F_NEEDS_CSUM else cstart, coff)
        self.frames.append((vid, frame, "in"))
        out = self.access.get(vid)
        if out is None:
            self.unknown += 1
            return
        out.send(vnet + frame)

    def _to_trunk(self, vid, vnet, frame):
        flags, gso, hdr_len, gso_size, cstart, coff = VNET_HDR.unpack(vnet)
        if flags & VNET_F_NEEDS_CSUM:
            cstart += 4
        if gso:
            hdr_len += 4
        tagged = frame[:12] + struct.pack("!HH", 0x8100, vid) + frame[12:]
        self.frames.append((vid, frame, "out"))
        self.trunk.send(VNET_HDR.pack(flags, gso, hdr_len, gso_size, cstart, coff) + tagged)

    def close(self):
        self.stop = True
        self.thread.join(2)
        for s in [self.trunk, *self.access.values()]:
            s.close()


def ipv4_of(frame):
    """(src, dst, proto) of an IPv4 frame (tag already out), else None."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return None
    return socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34]), frame[23]


def tcp_echo(ns, src, dst, payload):
    s = h.netns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(10)
        s.bind((src, 0))
        s.connect((dst, 7))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        got = bytearray()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return bytes(got)
    finally:
        s.close()


def udp_echo(ns, src, dst, payload):
    s = h.netns_socket(ns, socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        for _ in range(5):
            reply, frm = h.udp_echo(s, (dst, 7), payload, timeout=0.5)
            if reply is not None:
                return reply, frm
        return None, None
    finally:
        s.close()


@test("vlan_vip_policy_af_packet", budget=60)
def _(ctx):
    vlan_vip_policy(ctx, "1")


# Two engines: a VLAN's flows and ARP are steered as the port's own (the
# kernel's fanout program looks past the tag; so must ustack's dispatcher).
@test("vlan_vip_policy_cores_af_packet", budget=60)
def _(ctx):
    vlan_vip_policy(ctx, "3")


def vlan_vip_policy(ctx, lcore_mask):
    ns_s, ns_u, if_u, trunk = h.unique("s"), h.unique("u"), h.unique("u"), h.unique("t")
    h.add_netns(ns_s)
    h.add_netns(ns_u)
    h.sh(["ip", "link", "add", if_u, "netns", ns_u, "type", "veth", "peer", "name", trunk, "netns", ns_s])
    h.sh(["ip", "-n", ns_u, "link", "set", if_u, "up"])
    h.sh(["ip", "-n", ns_s, "link", "set", trunk, "up"])
    gateways, access = {}, {}
    for vid, (subnet, vip, client) in list(VLANS.items()) + [(UNKNOWN_VLAN, (UNKNOWN_SUBNET, None, None))]:
        gw, port, gw_if = h.unique("g"), h.unique("a"), h.unique("g")
        h.add_netns(gw)
        h.sh(["ip", "link", "add", port, "netns", ns_s, "type", "veth", "peer", "name", gw_if, "netns", gw,
              "address", gateway_mac(vid)])
        h.sh(["ip", "-n", ns_s, "link", "set", port, "up"])
        h.sh(["ip", "-n", gw, "addr", "add", f"10.99.{subnet}.1/24", "dev", gw_if])
        h.sh(["ip", "-n", gw, "link", "set", gw_if, "up"])
        if vip:
            h.sh(["ip", "-n", gw, "addr", "add", f"{client}/32", "dev", "lo"])
            h.sh(["ip", "-n", gw, "route", "add", f"{vip}/32", "via", f"10.99.{subnet}.2", "dev", gw_if])
        gateways[vid] = gw
        access[vid] = port
    switch = VlanSwitch(ns_s, trunk, access)
    h.on_cleanup("vlan switch", switch.close)

    u = h.Ustack(ctx.binary, ctx.workdir, config(if_u, lcore_mask), netns=ns_u).start()
    u.wait_output(r"serving echo on UDP port 7")
    # Each VLAN interface is listed with its address.
    for vid, (subnet, _, _) in VLANS.items():
        u.wait_output(rf"ustack0\.{vid} 10\.99\.{subnet}\.2/24 vlan {vid} on if0 ")

    # Ping each VLAN address from its gateway until all answer.
    deadline = time.monotonic() + 10
    for vid, (subnet, _, _) in VLANS.items():
        while h.nsx(gateways[vid], "ping", "-c", "1", "-W", "0.3", "-q", f"10.99.{subnet}.2",
                    check_rc=False, timeout=5).returncode != 0:
            check(u.running() and time.monotonic() < deadline, f"vlan {vid}: 10.99.{subnet}.2 did not answer ping")

    for vid, (subnet, vip, client) in VLANS.items():
        gw = gateways[vid]
        # ICMP from the client's address to the VIP.
        p = h.nsx(gw, "ping", "-c", "2", "-i", "0.1", "-W", "1", "-I", client, vip, check_rc=False, timeout=10)
        check(p.returncode == 0, f"vlan {vid}: ping -I {client} {vip}: {p.stdout.strip()[-300:]}")
        payload = os.urandom(200_000 + vid)
        got = tcp_echo(gw, client, vip, payload)
        check(got == payload, f"vlan {vid}: TCP echo {client} -> {vip}: {len(got)} of {len(payload)} bytes back")
        for size in (1, 1400):
            data = os.urandom(size)
            reply, frm = udp_echo(gw, client, vip, data)
            check(reply == data and frm == (vip, 7), f"vlan {vid}: UDP echo {client} -> {vip}: {reply!r:.40} from {frm}")
        print(f"    vlan {vid}: ping, TCP (200 KB) and UDP from {client} to {vip} echoed")
        if lcore_mask != "1":
            # More connections, whose source ports spread them over the
            # engines.
            for i in range(8):
                data = os.urandom(3000 + i)
                check(tcp_echo(gw, client, vip, data) == data, f"vlan {vid}: short TCP echo {i}")

    # The unknown VLAN: ustack drops and counts what arrives on it.
    before = u.stats().get("rx_drop_vlan_unknown_id", 0)
    h.nsx(gateways[UNKNOWN_VLAN], "ping", "-c", "3", "-i", "0.1", "-W", "0.3", f"10.99.{UNKNOWN_SUBNET}.2",
          check_rc=False, timeout=10)
    st = u.wait_stats(lambda s: s.get("rx_drop_vlan_unknown_id", 0) >= before + 3, timeout=5,
                      what="frames of VLAN 40 dropped and counted")
    time.sleep(0.2)
    switch.close()

    ustack_mac = h.mac_bytes(u.mac())
    seen = {vid: {"tcp": 0, "udp": 0, "icmp": 0} for vid in VLANS}
    wrong, super_frames = [], 0
    vip_vlan = {vip: vid for vid, (_, vip, _) in VLANS.items()}
    for vid, frame, way in switch.frames:
        if way == "out" and len(frame) > 1514:
            super_frames += 1
        if way != "in" or frame[6:12] != ustack_mac:
            continue
        ip = ipv4_of(frame)
        if ip is None or ip[0] not in vip_vlan:
            continue
        want = vip_vlan[ip[0]]
        if vid != want or frame[:6] != h.mac_bytes(gateway_mac(want)):
            wrong.append((ip, vid, h.mac_str(frame[:6])))
            continue
        proto = {6: "tcp", 17: "udp", 1: "icmp"}.get(ip[2])
        if proto:
            seen[want][proto] += 1
    check(not wrong, f"replies from a VIP off its VLAN or gateway: {wrong[:5]}")
    for vid, counts in seen.items():
        check(all(counts.values()), f"vlan {vid}: replies seen on the trunk per protocol: {counts}")
    print(f"    replies on the trunk, each on its VIP's VLAN to its gateway's MAC: {seen}")
    # Each VLAN interface counted its own traffic, tags included.
    for vid, counts in seen.items():
        rx, tx = st.get(f"port0_vlan{vid}_rx_frames", 0), st.get(f"port0_vlan{vid}_tx_frames", 0)
        check(rx > 0 and tx >= sum(counts.values()) and st.get(f"port0_vlan{vid}_tx_bytes", 0) >= 64 * tx,
              f"vlan {vid}: counters rx {rx}, tx {tx} for {counts} replies seen: {h.nonzero(st)}")
    print(f"    tagged TCP super-frames to ustack (gateways' TSO): {super_frames}; "
          f"VLAN {UNKNOWN_VLAN} frames dropped: rx_drop_vlan_unknown_id={st['rx_drop_vlan_unknown_id']}")
    if lcore_mask != "1":
        st = u.wait_stats(lambda s: s.get("tcp_passive_opens", 0) >= 27, timeout=5, what="27 connections accepted")
        opens = [st.get(f"engine{e}.tcp_passive_opens", 0) for e in (0, 1)]
        print(f"    connections accepted per engine: {opens}")
        check(all(opens) and sum(opens) == 27, f"a VLAN's connections are spread over the engines: {opens}")
    check(st.get("rx_drop_untagged_no_address", 0) == 0, f"untagged frames reached ustack: {h.nonzero(st)}")
    check(st.get("tcp_resets_sent", 0) == 0, f"ustack sent resets: {h.nonzero(st)}")
    u.stop()
