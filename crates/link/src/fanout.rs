//! AF_PACKET fanout: several packet sockets on one interface, one per
//! engine, with the kernel choosing for each received frame the socket that
//! gets it. This is how one engine per core reads a (multi-queue) veth or a
//! NIC without AF_XDP or DPDK.
//!
//! Of the kernel's fanout modes, `PACKET_FANOUT_HASH` uses the kernel's own
//! flow hash, keyed with a per-boot random value user space cannot know: an
//! engine could then not choose a source port whose reply comes back to it.
//! `PACKET_FANOUT_QM` follows the receive queue, which on a veth is the
//! sender's transmit queue, picked by the sender's kernel. So ustack uses
//! `PACKET_FANOUT_CBPF` with a classic BPF program of its own that computes
//! ustack's flow hash (`stack::steer`):
//!
//! ```text
//! IPv4 TCP/UDP, not a fragment:  fold(saddr ^ daddr) + (sport >> 1) + (dport >> 1)
//! other IPv4 (ICMP, fragments):  fold(saddr ^ daddr)
//! IPv6 to a multicast address:   0
//! IPv6 TCP/UDP (next header of
//!   the fixed header):           fold(xor of the 8 address words) + (sport >> 1) + (dport >> 1)
//! other IPv6 (ICMPv6, extension
//!   headers, fragments):         fold(xor of the 8 address words)
//! neither (ARP...):              0
//! ```
//!
//! with `fold(x) = (x >> 16) + (x & 0xffff)`; the kernel takes the result
//! modulo the number of sockets in the group and delivers to the socket
//! that joined in that position, so engine `i` must join `i`-th. Frames the
//! program sends to socket 0 that belong elsewhere (ARP and NDP are for
//! every engine) are handed on by the runtime's software steering.
//!
//! IPv6 behind extension headers is steered by its addresses: walking the
//! chain needs a loop, which classic BPF has not, and every fragment of a
//! datagram must reach the engine that reassembles it, though only the
//! first carries ports. A multicast destination is no flow of one
//! engine's (neighbour discovery, which is for all engines, is the most of
//! it), so it goes where the runtime sends it anyway, without a hop.
//!
//! The group id is chosen by the kernel (`PACKET_FANOUT_FLAG_UNIQUEID`) when
//! the first socket joins, and read back for the others.

use std::io;
use std::os::fd::RawFd;

use crate::ifreq::cvt;

const SOL_PACKET: libc::c_int = 263;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_DATA: libc::c_int = 22;
const PACKET_FANOUT_CBPF: u32 = 6;
const PACKET_FANOUT_FLAG_UNIQUEID: u32 = 0x2000;

/// `struct sock_filter`: one classic BPF instruction.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfInsn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `struct sock_fprog`.
#[repr(C)]
pub(crate) struct SockFprog {
    len: u16,
    filter: *const BpfInsn,
}

impl SockFprog {
    /// Points at `program`, which must outlive every use of the result.
    pub(crate) fn new(program: &[BpfInsn]) -> io::Result<SockFprog> {
        Ok(SockFprog {
            len: u16::try_from(program.len())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?,
            filter: program.as_ptr(),
        })
    }
}

// Classic BPF opcodes (<linux/filter.h>, <linux/bpf_common.h>).
pub(crate) const LD: u16 = 0x00;
pub(crate) const LDX: u16 = 0x01;
pub(crate) const ST: u16 = 0x02;
pub(crate) const ALU: u16 = 0x04;
pub(crate) const JMP: u16 = 0x05;
pub(crate) const RET: u16 = 0x06;
pub(crate) const MISC: u16 = 0x07;
pub(crate) const W: u16 = 0x00;
pub(crate) const H: u16 = 0x08;
pub(crate) const B: u16 = 0x10;
pub(crate) const ABS: u16 = 0x20;
pub(crate) const IND: u16 = 0x40;
pub(crate) const MEM: u16 = 0x60;
pub(crate) const MSH: u16 = 0xa0;
pub(crate) const ADD: u16 = 0x00;
pub(crate) const AND: u16 = 0x50;
pub(crate) const RSH: u16 = 0x70;
pub(crate) const XOR: u16 = 0xa0;
pub(crate) const JEQ: u16 = 0x10;
pub(crate) const JSET: u16 = 0x40;
pub(crate) const JGT: u16 = 0x20;
pub(crate) const JGE: u16 = 0x30;
pub(crate) const K: u16 = 0x00;
pub(crate) const X: u16 = 0x08;
pub(crate) const RET_A: u16 = 0x10;
pub(crate) const TAX: u16 = 0x00;
pub(crate) const TXA: u16 = 0x80;
/// `SKF_AD_OFF + SKF_AD_PROTOCOL`: loads `skb->protocol` (the EtherType).
pub(crate) const AD_PROTOCOL: u32 = (-0x1000i32) as u32;

pub(crate) const fn insn(code: u16, jt: u8, jf: u8, k: u32) -> BpfInsn {
    BpfInsn { code, jt, jf, k }
}

/// The flow-hash program. Offsets are from the network header, where the
/// receive path has `skb->data` when fanout runs. Classic BPF jumps only
/// forward, so each family has its own copy of the folding and port code.
pub const FLOW_HASH_PROGRAM: [BpfInsn; 82] = [
    /* 0 */ insn(LD | H | ABS, 0, 0, AD_PROTOCOL),
    /* 1 */ insn(JMP | JEQ | K, 2, 0, 0x0800),
    /* 2 */ insn(JMP | JEQ | K, 31, 0, 0x86dd), // IPv6: 34
    /* 3 */ insn(RET | K, 0, 0, 0),
    // IPv4.
    /* 4 */ insn(LD | W | ABS, 0, 0, 12), // saddr
    /* 5 */ insn(MISC | TAX, 0, 0, 0),
    /* 6 */ insn(LD | W | ABS, 0, 0, 16), // daddr
    /* 7 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 8 */ insn(MISC | TAX, 0, 0, 0),
    /* 9 */ insn(ALU | RSH | K, 0, 0, 16),
    /* 10 */ insn(ST, 0, 0, 0), // M[0] = high half
    /* 11 */ insn(MISC | TXA, 0, 0, 0),
    /* 12 */ insn(ALU | AND | K, 0, 0, 0xffff),
    /* 13 */ insn(LDX | MEM, 0, 0, 0),
    /* 14 */ insn(ALU | ADD | X, 0, 0, 0),
    /* 15 */ insn(ST, 0, 0, 1), // M[1] = fold(saddr ^ daddr)
    /* 16 */ insn(LD | B | ABS, 0, 0, 9), // protocol
    /* 17 */ insn(JMP | JEQ | K, 1, 0, 6),
    /* 18 */ insn(JMP | JEQ | K, 0, 13, 17), // neither TCP nor UDP: 32
    /* 19 */ insn(LD | H | ABS, 0, 0, 6), // flags and fragment offset
    /* 20 */ insn(JMP | JSET | K, 11, 0, 0x3fff), // MF or offset: 32
    /* 21 */ insn(LDX | B | MSH, 0, 0, 0), // X = header length
    /* 22 */ insn(LD | H | IND, 0, 0, 0), // sport
    /* 23 */ insn(ALU | RSH | K, 0, 0, 1),
    /* 24 */ insn(ST, 0, 0, 2),
    /* 25 */ insn(LD | H | IND, 0, 0, 2), // dport
    /* 26 */ insn(ALU | RSH | K, 0, 0, 1),
    /* 27 */ insn(LDX | MEM, 0, 0, 2),
    /* 28 */ insn(ALU | ADD | X, 0, 0, 0),
    /* 29 */ insn(LDX | MEM, 0, 0, 1),
    /* 30 */ insn(ALU | ADD | X, 0, 0, 0),
    /* 31 */ insn(RET | RET_A, 0, 0, 0),
    /* 32 */ insn(LD | MEM, 0, 0, 1),
    /* 33 */ insn(RET | RET_A, 0, 0, 0),
    // IPv6.
    /* 34 */ insn(LD | B | ABS, 0, 0, 24), // daddr's first byte
    /* 35 */ insn(JMP | JEQ | K, 0, 1, 0xff),
    /* 36 */ insn(RET | K, 0, 0, 0), // multicast: engine 0
    /* 37 */ insn(LD | W | ABS, 0, 0, 8), // saddr, 4 words
    /* 38 */ insn(MISC | TAX, 0, 0, 0),
    /* 39 */ insn(LD | W | ABS, 0, 0, 12),
    /* 40 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 41 */ insn(MISC | TAX, 0, 0, 0),
    /* 42 */ insn(LD | W | ABS, 0, 0, 16),
    /* 43 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 44 */ insn(MISC | TAX, 0, 0, 0),
    /* 45 */ insn(LD | W | ABS, 0, 0, 20),
    /* 46 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 47 */ insn(MISC | TAX, 0, 0, 0),
    /* 48 */ insn(LD | W | ABS, 0, 0, 24), // daddr, 4 words
    /* 49 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 50 */ insn(MISC | TAX, 0, 0, 0),
    /* 51 */ insn(LD | W | ABS, 0, 0, 28),
    /* 52 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 53 */ insn(MISC | TAX, 0, 0, 0),
    /* 54 */ insn(LD | W | ABS, 0, 0, 32),
    /* 55 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 56 */ insn(MISC | TAX, 0, 0, 0),
    /* 57 */ insn(LD | W | ABS, 0, 0, 36),
    /* 58 */ insn(ALU | XOR | X, 0, 0, 0),
    /* 59 */ insn(MISC | TAX, 0, 0, 0),
    /* 60 */ insn(ALU | RSH | K, 0, 0, 16),
    /* 61 */ insn(ST, 0, 0, 0), // M[0] = high half
    /* 62 */ insn(MISC | TXA, 0, 0, 0),
    /* 63 */ insn(ALU | AND | K, 0, 0, 0xffff),
    /* 64 */ insn(LDX | MEM, 0, 0, 0),
    /* 65 */ insn(ALU | ADD | X, 0, 0, 0),
    /* 66 */ insn(ST, 0, 0, 1), // M[1] = fold(xor of the 8 words)
    /* 67 */ insn(LD | B | ABS, 0, 0, 6), // next header
    /* 68 */ insn(JMP | JEQ | K, 1, 0, 6),
    /* 69 */ insn(JMP | JEQ | K, 0, 10, 17), // neither TCP nor UDP: 80
    /* 70 */ insn(LD | H | ABS, 0, 0, 40), // sport
    /* 71 */ insn(ALU | RSH | K, 0, 0, 1),
    /* 72 */ insn(ST, 0, 0, 2),
    /* 73 */ insn(LD | H | ABS, 0, 0, 42), // dport
    /* 74 */ insn(ALU | RSH | K, 0, 0, 1),
    /* 75 */ insn(LDX | MEM, 0, 0, 2),
    /* 76 */ insn(ALU | ADD | X, 0, 0, 0),
    /* 77 */ insn(LDX | MEM, 0, 0, 1),
    /* 78 */ insn(ALU | ADD | X, 0, 0, 0),
    /* 79 */ insn(RET | RET_A, 0, 0, 0),
    /* 80 */ insn(LD | MEM, 0, 0, 1),
    /* 81 */ insn(RET | RET_A, 0, 0, 0),
];

fn set_fanout(fd: RawFd, arg: u32) -> io::Result<()> {
    // SAFETY: PACKET_FANOUT reads one u32 through the pointer, which points
    // at a live local of that size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            SOL_PACKET,
            PACKET_FANOUT,
            (&arg as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Joins the bound packet socket `fd` to fanout group `group` of the CBPF
/// kind, or creates a new group with a kernel-chosen id when `group` is
/// `None`. Returns the group's id.
pub fn join(fd: RawFd, group: Option<u16>) -> io::Result<u16> {
    match group {
        Some(id) => {
            set_fanout(fd, u32::from(id) | (PACKET_FANOUT_CBPF << 16))?;
            Ok(id)
        }
        None => {
            set_fanout(fd, (PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_UNIQUEID) << 16)?;
            let mut val: u32 = 0;
            let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
            // SAFETY: the kernel writes at most `len` bytes into `val`, a
            // live u32, and updates `len`.
            cvt(unsafe {
                libc::getsockopt(
                    fd,
                    SOL_PACKET,
                    PACKET_FANOUT,
                    (&mut val as *mut u32).cast(),
                    &mut len,
                )
            })?;
            Ok((val & 0xffff) as u16)
        }
    }
}

/// A socket filter that takes no frame.
const TAKE_NOTHING: [BpfInsn; 1] = [insn(RET | K, 0, 0, 0)];

/// Stops (`on` false) or resumes the frames packet socket `fd` receives:
/// a socket filter that takes none, or none at all.  A socket bound to an
/// interface receives a copy of every frame until it joins a fanout
/// group; stopped, it receives none of them (see
/// `AfPacketLink::set_receiving`).
pub fn set_receiving(fd: RawFd, on: bool) -> io::Result<()> {
    if on {
        let none: libc::c_int = 0;
        // SAFETY: an int option of its size (the kernel ignores it).
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_DETACH_FILTER,
                (&none as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        // ENOENT: there was no filter.
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
            return Err(io::Error::last_os_error());
        }
        return Ok(());
    }
    let prog = SockFprog::new(&TAKE_NOTHING)?;
    // SAFETY: `prog` points at `TAKE_NOTHING`, a static of `len`
    // instructions; the kernel copies it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const SockFprog).cast(),
            std::mem::size_of::<SockFprog>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Installs `program` as the group's demultiplexer (through any member).
pub fn set_program(fd: RawFd, program: &[BpfInsn]) -> io::Result<()> {
    let prog = SockFprog::new(program)?;
    // SAFETY: `prog` points at `program`, live and of `len` instructions,
    // for the duration of the call; the kernel copies it.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            SOL_PACKET,
            PACKET_FANOUT_DATA,
            (&prog as *const SockFprog).cast(),
            std::mem::size_of::<SockFprog>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack::steer;
    use std::net::{IpAddr, Ipv6Addr};

    /// Runs a classic BPF program over `pkt` (network header first) with
    /// `proto` as `skb->protocol`: just the instructions used above, with
    /// the kernel's rule that a load out of bounds returns 0.
    fn run(prog: &[BpfInsn], pkt: &[u8], proto: u16) -> u32 {
        let (mut a, mut x, mut m) = (0u32, 0u32, [0u32; 16]);
        let load = |off: u32, size: u16| -> Option<u32> {
            let o = off as usize;
            let n = match size {
                W => 4,
                H => 2,
                _ => 1,
            };
            let b = pkt.get(o..o + n)?;
            Some(b.iter().fold(0u32, |v, &x| v << 8 | u32::from(x)))
        };
        let mut pc = 0;
        loop {
            let i = prog[pc];
            pc += 1;
            let class = i.code & 7;
            match class {
                LD | LDX => {
                    let mode = i.code & 0xe0;
                    let size = i.code & 0x18;
                    let v = match mode {
                        ABS if i.k == AD_PROTOCOL => Some(u32::from(proto)),
                        ABS => load(i.k, size),
                        IND => load(x.wrapping_add(i.k), size),
                        MEM => Some(m[i.k as usize]),
                        MSH => load(i.k, B).map(|b| (b & 0xf) * 4),
                        _ => panic!("mode {mode:#x}"),
                    };
                    let Some(v) = v else { return 0 };
                    if class == LD {
                        a = v
                    } else {
                        x = v
                    }
                }
                ST => m[i.k as usize] = a,
                ALU => {
                    let src = if i.code & X != 0 { x } else { i.k };
                    a = match i.code & 0xf0 {
                        ADD => a.wrapping_add(src),
                        AND => a & src,
                        RSH => a >> src,
                        XOR => a ^ src,
                        op => panic!("alu {op:#x}"),
                    };
                }
                JMP => {
                    let t = match i.code & 0xf0 {
                        JEQ => a == i.k,
                        JSET => a & i.k != 0,
                        op => panic!("jmp {op:#x}"),
                    };
                    pc += usize::from(if t { i.jt } else { i.jf });
                }
                RET => return if i.code & RET_A != 0 { a } else { i.k },
                MISC => {
                    if i.code & TXA != 0 {
                        a = x
                    } else {
                        x = a
                    }
                }
                _ => panic!("class {class}"),
            }
        }
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], frag: u16, ihl: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; usize::from(ihl) * 4];
        p[0] = 0x40 | ihl;
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p.extend_from_slice(l4);
        p
    }

    fn fold(x: u32) -> u32 {
        (x >> 16) + (x & 0xffff)
    }

    #[test]
    fn program_computes_the_flow_hash() {
        let (s, d) = ([10, 99, 1, 1], [10, 99, 200, 2]);
        let f = fold(u32::from_be_bytes(s) ^ u32::from_be_bytes(d));
        let ports = [0x9c, 0x40, 0x00, 0x07]; // 40000 -> 7
        for proto in [6u8, 17] {
            let p = ipv4(proto, s, d, 0x4000, 5, &ports);
            assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x0800), f + 20000 + 3);
            // Options: the ports follow the longer header.
            let p = ipv4(proto, s, d, 0, 7, &ports);
            assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x0800), f + 20000 + 3);
            // The reply hashes the same.
            let r = ipv4(proto, d, s, 0, 5, &[0x00, 0x07, 0x9c, 0x40]);
            assert_eq!(run(&FLOW_HASH_PROGRAM, &r, 0x0800), f + 20000 + 3);
            // Fragments, first or not: addresses only.
            for frag in [0x2000, 0x0001, 0x2010] {
                let p = ipv4(proto, s, d, frag, 5, &ports);
                assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x0800), f);
            }
        }
        // ICMP: addresses only. ARP: 0. A truncated header: 0.
        assert_eq!(
            run(&FLOW_HASH_PROGRAM, &ipv4(1, s, d, 0, 5, &ports), 0x0800),
            f
        );
        assert_eq!(run(&FLOW_HASH_PROGRAM, &[0u8; 28], 0x0806), 0);
        assert_eq!(
            run(&FLOW_HASH_PROGRAM, &ipv4(6, s, d, 0, 5, &[1]), 0x0800),
            0
        );
    }

    fn ipv6(next: u8, src: Ipv6Addr, dst: Ipv6Addr, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
        p[6] = next;
        p[7] = 64;
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        p.extend_from_slice(rest);
        p
    }

    #[test]
    fn program_computes_the_ipv6_flow_hash() {
        let pairs = [
            (
                Ipv6Addr::new(0xfd00, 0x99, 0, 2, 0, 0, 0, 1),
                Ipv6Addr::new(0xfd00, 0x99, 0, 2, 0, 0, 0, 2),
            ),
            (
                Ipv6Addr::new(
                    0x2001, 0xdb8, 0xffff, 0x1234, 0xabcd, 0xef01, 0x2345, 0x6789,
                ),
                Ipv6Addr::new(0xfe80, 0, 0, 0, 0x200, 0xff, 0xfe00, 0x202),
            ),
        ];
        for (s, d) in pairs {
            let (is, id) = (IpAddr::V6(s), IpAddr::V6(d));
            let addrs = steer::address_hash(is, id);
            for (sport, dport) in [(40000u16, 7u16), (1, 65535), (443, 51234)] {
                let want = steer::flow_hash(is, sport, id, dport);
                let mut ports = sport.to_be_bytes().to_vec();
                ports.extend_from_slice(&dport.to_be_bytes());
                for next in [6u8, 17] {
                    let p = ipv6(next, s, d, &ports);
                    assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x86dd), want);
                    // The reply hashes the same.
                    let mut back = dport.to_be_bytes().to_vec();
                    back.extend_from_slice(&sport.to_be_bytes());
                    let r = ipv6(next, d, s, &back);
                    assert_eq!(run(&FLOW_HASH_PROGRAM, &r, 0x86dd), want);
                }
                // Behind a fragment or hop-by-hop header, ICMPv6: addresses.
                for next in [44u8, 0, 58, 60] {
                    let mut rest = vec![6u8, 0, 0, 1, 0, 0, 0, 9];
                    rest.extend_from_slice(&ports);
                    let p = ipv6(next, s, d, &rest);
                    assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x86dd), addrs);
                }
            }
            // To a multicast address: 0, whatever it carries.
            let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            for next in [6u8, 17, 58] {
                let p = ipv6(next, s, all_nodes, &[0x9c, 0x40, 0x00, 0x07]);
                assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x86dd), 0);
            }
            // Truncated: 0, as for IPv4 (an out-of-bounds load ends the
            // program with 0).
            let full = ipv6(6, s, d, &[0x9c, 0x40, 0x00, 0x07]);
            for n in 0..full.len() {
                assert_eq!(run(&FLOW_HASH_PROGRAM, &full[..n], 0x86dd), 0, "{n}");
            }
            // ICMPv6 needs no ports: a bare header hashes by addresses.
            let p = ipv6(58, s, d, &[]);
            assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x86dd), addrs);
        }
        // Other EtherTypes (VLAN not taken off, ARP): 0.
        let p = ipv6(6, pairs[0].0, pairs[0].1, &[0, 1, 0, 2]);
        assert_eq!(run(&FLOW_HASH_PROGRAM, &p, 0x8100), 0);
    }

    /// What the kernel's checker (`bpf_check_classic`) insists on: every
    /// jump lands inside the program, memory cells exist, and the last
    /// instruction returns.
    #[test]
    fn program_is_well_formed() {
        let n = FLOW_HASH_PROGRAM.len();
        assert!(n <= 4096);
        for (pc, i) in FLOW_HASH_PROGRAM.iter().enumerate() {
            if i.code & 7 == JMP {
                assert!(pc + 1 + usize::from(i.jt) < n, "{pc}");
                assert!(pc + 1 + usize::from(i.jf) < n, "{pc}");
            }
            if matches!(i.code, c if c == ST || c == LD | MEM || c == LDX | MEM) {
                assert!(i.k < 16, "{pc}");
            }
        }
        assert_eq!(FLOW_HASH_PROGRAM[n - 1].code & 7, RET);
    }
}
