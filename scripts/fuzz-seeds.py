#!/usr/bin/python3
"""Writes the seed corpus of the fuzz targets (fuzz/seeds/<target>/):
well-formed frames of each protocol the stack takes, so a run starts from
inputs that reach deep into the RX path instead of finding them by chance.
`make fuzz-long` adds what libFuzzer finds to the same directories (they
are kept in the repository: each run starts where the last one stopped;
commit what a long run added); `make fuzz-short` reads them without
writing (its finds go to fuzz/corpus, not kept).

rx_path's input is a sequence of frames, each behind a 2-byte header:
flags (bits 0-2: length % 8, bit 3: partial checksum, bit 4: time passes,
bits 5-7: how much) and length / 8 (see fuzz/fuzz_targets/rx_path.rs)."""

import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "interop"))
import frames as fr  # noqa: E402

OUR_MAC = bytes([2, 0, 0, 0, 0, 2])
PEER_MAC = bytes([2, 0, 0, 0, 0, 1])
OUR_IP, PEER_IP = "10.99.1.2", "10.99.1.1"


def ipv4(proto, payload, ident=1):
    total = 20 + len(payload)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, ident, 0x4000, 64, proto, 0, fr.ip4(PEER_IP), fr.ip4(OUR_IP))
    h = h[:10] + struct.pack("!H", fr.csum(h)) + h[12:]
    return fr.eth(OUR_MAC, PEER_MAC, fr.ETH_P_IP, h + payload)


def l4_csum(proto, seg):
    pseudo = fr.ip4(PEER_IP) + fr.ip4(OUR_IP) + struct.pack("!BBH", 0, proto, len(seg))
    return fr.csum(pseudo + seg)


def tcp(sport, dport, seq, ack, flags, payload=b"", options=b""):
    off = (20 + len(options)) // 4
    seg = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, 65535, 0, 0) + options + payload
    seg = seg[:16] + struct.pack("!H", l4_csum(6, seg)) + seg[18:]
    return ipv4(6, seg)


def udp(sport, dport, payload):
    seg = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    seg = seg[:6] + struct.pack("!H", l4_csum(17, seg)) + seg[8:]
    return ipv4(17, seg)


def icmp_echo():
    m = struct.pack("!BBHHH", 8, 0, 0, 0x1234, 1) + b"ping" * 8
    m = m[:2] + struct.pack("!H", fr.csum(m)) + m[4:]
    return ipv4(1, m)


def arp_request():
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, PEER_MAC, fr.ip4(PEER_IP), b"\0" * 6, fr.ip4(OUR_IP))
    return fr.eth(fr.BROADCAST, PEER_MAC, fr.ETH_P_ARP, body)


def record(frame, passes=0):
    flags = (len(frame) % 8) | ((0x10 | (passes << 5)) if passes else 0)
    return bytes([flags, len(frame) // 8]) + frame


MSS = bytes([2, 4, 5, 0xB4])


def main():
    root = os.path.join(os.path.dirname(__file__), "..", "fuzz", "seeds")
    syn = tcp(40000, 80, 1000, 0, 0x02, options=MSS)
    seeds = {
        "rx_path": {
            "arp_request": record(arp_request()),
            "icmp_echo": record(icmp_echo()),
            "udp_echo": record(udp(40000, 7, b"hello")),
            "tcp_syn": record(syn),
            # A handshake whose ACK guesses the ISN, then data and a FIN:
            # the fuzzer's comparisons find the right number from here.
            "tcp_conversation": record(syn, 1) + record(tcp(40000, 80, 1001, 1, 0x10))
            + record(tcp(40000, 80, 1001, 1, 0x18, b"GET / HTTP/1.0\r\n\r\n"))
            + record(tcp(40000, 80, 1019, 1, 0x11), 2),
            "tcp_rst": record(syn) + record(tcp(40000, 80, 1001, 0, 0x04)),
        },
        "wire_parsers": {
            "arp_request": arp_request(),
            "icmp_echo": icmp_echo(),
            "udp": udp(40000, 7, b"hello"),
            "tcp_syn": syn,
        },
    }
    for target, files in seeds.items():
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, f"seed_{name}"), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
