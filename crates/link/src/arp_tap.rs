//! An ARP tap: packet sockets on an interface that receive a copy of
//! every ARP frame and of every IPv6 neighbour discovery message, outside
//! any fanout group.  When several processes share an interface through
//! one AF_PACKET fanout group, the group's program hands each such frame
//! to one member only; each process reads its own tap so that every
//! neighbour table learns the replies to its requests.
//!
//! ARP has an EtherType of its own, which the socket binds to.  Neighbour
//! discovery is ICMPv6 inside IPv6: its socket binds to IPv6 and a socket
//! filter keeps the messages a node accepts (RFC 4861 section 6.1 and
//! 7.1: hop limit 255, types 133 to 137, right after the fixed header),
//! so the rest of the IPv6 traffic is not copied to the process.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::fanout::{insn, BpfInsn, SockFprog, ABS, B, JEQ, JGE, JGT, JMP, K, LD, RET};
use crate::ifreq::{cvt, CtlSocket};

const ETH_P_ARP: u16 = 0x0806;
const ETH_P_IPV6: u16 = 0x86dd;

/// The filter of the neighbour discovery socket, over the Ethernet frame
/// (a packet socket's filter sees the link header).
pub(crate) const NDP_FILTER: [BpfInsn; 9] = [
    /* 0 */ insn(LD | B | ABS, 0, 0, 14 + 6), // next header
    /* 1 */ insn(JMP | JEQ | K, 0, 6, 58), // not ICMPv6: 8
    /* 2 */ insn(LD | B | ABS, 0, 0, 14 + 7), // hop limit
    /* 3 */ insn(JMP | JEQ | K, 0, 4, 255), // forwarded: 8
    /* 4 */ insn(LD | B | ABS, 0, 0, 14 + 40), // ICMPv6 type
    /* 5 */ insn(JMP | JGE | K, 0, 2, 133), // below router solicitation: 8
    /* 6 */ insn(JMP | JGT | K, 1, 0, 137), // past redirect: 8
    /* 7 */ insn(RET | K, 0, 0, u32::MAX), // the whole frame
    /* 8 */ insn(RET | K, 0, 0, 0),
];

/// Non-blocking packet sockets receiving the interface's ARP frames and
/// neighbour discovery messages.
#[derive(Debug)]
pub struct ArpTap {
    fd: OwnedFd,
    ndp: OwnedFd,
}

/// A non-blocking packet socket on interface `index` receiving
/// `protocol`, not its own transmissions.
fn tap_socket(
    index: libc::c_int,
    protocol: u16,
    filter: Option<&[BpfInsn]>,
) -> io::Result<OwnedFd> {
    // Protocol 0 until the bind below names one: nothing arrives before
    // the filter is on.
    let fd = crate::packet_socket::packet_socket()?;
    if let Some(program) = filter {
        let prog = SockFprog::new(program)?;
        // SAFETY: `prog` points at `program`, live and of `len`
        // instructions, for the duration of the call; the kernel copies it.
        cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&prog as *const SockFprog).cast(),
                std::mem::size_of::<SockFprog>() as libc::socklen_t,
            )
        })?;
    }
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
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
    Ok(fd)
}

impl ArpTap {
    pub fn open(ifname: &str) -> io::Result<ArpTap> {
        let index = CtlSocket::new()?.index(ifname)?;
        Ok(ArpTap {
            fd: tap_socket(index, ETH_P_ARP, None)?,
            ndp: tap_socket(index, ETH_P_IPV6, Some(&NDP_FILTER))?,
        })
    }

    /// The next ARP frame or neighbour discovery message into `buf` (its
    /// length; a frame longer than `buf` is cut), `None` when there is
    /// none now.
    pub fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match recv_one(&self.fd, buf)? {
            Some(n) => Ok(Some(n)),
            None => recv_one(&self.ndp, buf),
        }
    }

    /// The sockets, for an idle wait.
    pub fn fds(&self) -> [RawFd; 2] {
        [self.fd.as_raw_fd(), self.ndp.as_raw_fd()]
    }
}

fn recv_one(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is writable for its length.
    let n = unsafe {
        libc::recv(
            fd.as_raw_fd(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::af_packet::{AfPacketLink, RingConfig};
    use crate::test_net::{arp_request, is_root, run, Cleanup};
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
        let pid = std::process::id();
        let (na, nb) = (format!("uvtA{pid}"), format!("uvtB{pid}"));
        let _cleanup = Cleanup::new(vec![vec![
            "ip".into(),
            "link".into(),
            "del".into(),
            na.clone(),
        ]]);
        run(&[
            "ip", "link", "add", &na, "type", "veth", "peer", "name", &nb,
        ]);
        for n in [&na, &nb] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6"), "1");
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
        assert_eq!(tap.fds().len(), 2);
    }
}
