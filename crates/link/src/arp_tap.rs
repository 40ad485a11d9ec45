//! An ARP tap: a packet socket on an interface that receives a copy of
//! every ARP frame and of every IPv6 neighbour discovery message, outside
//! any fanout group.  When several processes share an interface through
//! one AF_PACKET fanout group, the group's program hands each such frame
//! to one member only; each process reads its own tap so that every
//! neighbour table learns the replies to its requests.
//!
//! One socket takes both, so a process needs no more packet sockets than
//! it made before it dropped its privileges (`packet_socket`): it is bound
//! to every protocol, and a socket filter keeps ARP and the neighbour
//! discovery a node accepts (RFC 4861 sections 6.1 and 7.1: hop limit
//! 255, types 133 to 137, right after the fixed header), so the rest of
//! the traffic is not copied to the process.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::fanout::{insn, BpfInsn, SockFprog, ABS, B, H, JEQ, JGE, JGT, JMP, K, LD, RET};
use crate::ifreq::{cvt, CtlSocket};

const ETH_P_ALL: u16 = 0x0003;

/// The tap's filter, over the Ethernet frame (a packet socket's filter
/// sees the link header).
pub(crate) const TAP_FILTER: [BpfInsn; 12] = [
    /* 0 */ insn(LD | H | ABS, 0, 0, 12), // EtherType
    /* 1 */ insn(JMP | JEQ | K, 8, 0, 0x0806), // ARP: 10
    /* 2 */ insn(JMP | JEQ | K, 0, 8, 0x86dd), // not IPv6: 11
    /* 3 */ insn(LD | B | ABS, 0, 0, 14 + 6), // next header
    /* 4 */ insn(JMP | JEQ | K, 0, 6, 58), // not ICMPv6: 11
    /* 5 */ insn(LD | B | ABS, 0, 0, 14 + 7), // hop limit
    /* 6 */ insn(JMP | JEQ | K, 0, 4, 255), // forwarded: 11
    /* 7 */ insn(LD | B | ABS, 0, 0, 14 + 40), // ICMPv6 type
    /* 8 */ insn(JMP | JGE | K, 0, 2, 133), // below router solicitation: 11
    /* 9 */ insn(JMP | JGT | K, 1, 0, 137), // past redirect: 11
    /* 10 */ insn(RET | K, 0, 0, u32::MAX), // the whole frame
    /* 11 */ insn(RET | K, 0, 0, 0),
];

/// A non-blocking packet socket receiving the interface's ARP frames and
/// neighbour discovery messages.
#[derive(Debug)]
pub struct ArpTap {
    fd: OwnedFd,
}

impl ArpTap {
    pub fn open(ifname: &str) -> io::Result<ArpTap> {
        let index = CtlSocket::new()?.index(ifname)?;
        // Protocol 0 until the bind below names one: nothing arrives
        // before the filter is on.
        let fd = crate::packet_socket::packet_socket()?;
        let prog = SockFprog::new(&TAP_FILTER)?;
        // SAFETY: `prog` points at `TAP_FILTER`, a static of `len`
        // instructions; the kernel copies it.
        cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&prog as *const SockFprog).cast(),
                std::mem::size_of::<SockFprog>() as libc::socklen_t,
            )
        })?;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = index;
        // SAFETY: `sll` is a live sockaddr_ll and its size is passed.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        // Our own transmissions are not news.
        let one: libc::c_int = 1;
        // SAFETY: an int option of its size.
        let _ = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                263, // SOL_PACKET
                23,  // PACKET_IGNORE_OUTGOING
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        Ok(ArpTap { fd })
    }

    /// The next ARP frame or neighbour discovery message into `buf` (its
    /// length; a frame longer than `buf` is cut), `None` when there is
    /// none now.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    /// The socket, for an idle wait.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::af_packet::{AfPacketLink, RingConfig};
    use crate::test_net::{arp_request, is_root, quiet_veth_pair, run};
    use crate::{Link, PacketPool};
    use std::time::{Duration, Instant};

    /// The tap gets ARP and the neighbour discovery a node accepts, whole,
    /// and none of the other IPv6 traffic.
    #[test]
    fn tap_receives_arp_and_neighbor_discovery_only() {
        if !is_root() {
            eprintln!("skipped: packet socket test needs root");
            return;
        }
        let (na, nb, _cleanup) = quiet_veth_pair("uvt");
        for n in [&na, &nb] {
            run(&["ip", "link", "set", n, "up"]);
        }
        let mut tap = ArpTap::open(&na).unwrap();
        let mut sender =
            AfPacketLink::open(&nb, PacketPool::new(2048, 64), &RingConfig::default()).unwrap();
        let mac = sender.info().mac;

        // (frame, whether the tap should get it); each carries its index
        // in its last byte.
        let ipv6 = |next: u8, hop: u8, icmp_type: u8, len: usize| {
            let mut f = vec![0x33, 0x33, 0, 0, 0, 1];
            f.extend_from_slice(&mac);
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&((len - 54) as u16).to_be_bytes());
            f.extend_from_slice(&[next, hop]);
            f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            f.push(icmp_type);
            f.resize(len, 0);
            f
        };
        // Another EtherType, with what would be an NDP header at the
        // offsets the filter reads.
        let other = |ethertype: u16| {
            let mut f = ipv6(58, 255, 135, 100);
            f[12..14].copy_from_slice(&ethertype.to_be_bytes());
            f
        };
        let frames = [
            (arp_request(mac, [10, 99, 9, 2], [10, 99, 9, 1]), true),
            (ipv6(58, 255, 135, 86), true),
            (ipv6(58, 255, 133, 70), true),
            (ipv6(58, 255, 137, 1294), true), // a redirect quoting a packet
            (ipv6(58, 255, 134, 1400), true),
            (ipv6(58, 64, 135, 86), false),   // forwarded
            (ipv6(58, 255, 128, 100), false), // echo
            (ipv6(58, 255, 138, 100), false),
            (ipv6(58, 255, 132, 100), false),
            (ipv6(0, 255, 135, 100), false), // behind hop-by-hop
            (ipv6(6, 255, 135, 100), false),
            (ipv6(17, 255, 136, 100), false),
            (other(0x0800), false),
            (other(0x88b5), false),
        ];
        let frames: Vec<(Vec<u8>, bool)> = frames
            .into_iter()
            .enumerate()
            .map(|(i, (mut f, keep))| {
                *f.last_mut().unwrap() = i as u8;
                (f, keep)
            })
            .collect();
        for (f, _) in &frames {
            let mut b = sender.alloc_tx().unwrap();
            assert!(b.fill_from(f));
            let mut v = vec![b];
            sender.tx_burst(&mut v).unwrap();
            assert!(v.is_empty());
        }
        let want: Vec<&Vec<u8>> = frames.iter().filter(|f| f.1).map(|f| &f.0).collect();
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        let deadline = Instant::now() + Duration::from_secs(5);
        // Until the last frame sent (not one for the tap) has surely come
        // by, then a little more.
        while Instant::now() < deadline && got.len() < want.len() {
            match tap.recv(&mut buf).unwrap() {
                Some(n) if buf[6..12] == mac => got.push(buf[..n].to_vec()),
                Some(_) => {}
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        while let Some(n) = tap.recv(&mut buf).unwrap() {
            if buf[6..12] == mac {
                got.push(buf[..n].to_vec());
            }
        }
        got.sort_by_key(|f| *f.last().unwrap());
        // Each whole, byte for byte, and nothing else.
        assert_eq!(
            got.len(),
            want.len(),
            "{:?}",
            got.iter().map(|f| f.len()).collect::<Vec<_>>()
        );
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g, w);
        }
    }
}
