//! The flow hash that spreads flows over engines (one stack per core), and
//! the source-port rule that brings a connection's replies back to the
//! engine that opened it.
//!
//! The hash is symmetric (both directions of a flow give the same value) and
//! simple enough to be computed by a classic BPF program in the kernel
//! (AF_PACKET fanout) and by the runtime's software steering alike:
//!
//! ```text
//! fold(x)  = (x >> 16) + (x & 0xffff)                      for a 32-bit x
//! hash     = fold(saddr ^ daddr) + (sport >> 1) + (dport >> 1)   TCP/UDP, not fragmented
//! hash     = fold(saddr ^ daddr)                            any other IPv4 packet
//! engine   = hash % engines
//! ```
//!
//! Over IPv6, `saddr ^ daddr` is the XOR of the eight 32-bit words of the
//! two addresses, and the ports count only when TCP or UDP follows the
//! fixed header: behind extension headers (a fragment header among them)
//! the steering reads addresses alone, since a classic BPF program cannot
//! walk the chain.  Connections this stack opens put nothing between the
//! header and TCP or UDP, so their replies carry ports in the hash.
//!
//! XOR and addition commute, so swapping source and destination leaves the
//! hash unchanged. The lowest bit of a port is left out because Linux
//! gives `connect()` even source ports only (and `bind()` odd ones): with it
//! in, every connection from a Linux client would have the same parity and,
//! with two engines, land on one.  Fragments carry no ports after the first, so every
//! fragment (and ICMP) is steered by addresses alone: a datagram is
//! reassembled on one engine.  Because the ports enter by a plain sum, an
//! engine that opens a connection can choose its local port by arithmetic:
//! `(lport >> 1) = engine - fold(laddr ^ raddr) - (rport >> 1) (mod engines)`
//! (see [`FlowSteering::port_residue`]).  The hash is not keyed: a peer that
//! chooses its ports can put its flows on one engine (as it can with a
//! symmetric Toeplitz key); it cannot reach a connection of another peer.

use core::net::IpAddr;
use std::sync::Arc;

pub mod rss;

pub use rss::{RssError, RssSteering, Toeplitz, SYMMETRIC_KEY};

/// Folds 32 bits into 17 by adding the halves.
pub const fn fold32(x: u32) -> u32 {
    (x >> 16) + (x & 0xffff)
}

/// The address part of the hash: `fold(a ^ b)`, for IPv6 the fold of the
/// XOR of the four 32-bit words of each address.
pub fn address_hash(a: IpAddr, b: IpAddr) -> u32 {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => fold32(u32::from(a) ^ u32::from(b)),
        (a, b) => {
            let words = |ip: IpAddr| -> u32 {
                match ip {
                    IpAddr::V4(v) => u32::from(v),
                    IpAddr::V6(v) => {
                        let o = v.octets();
                        (0..4).fold(0u32, |acc, i| {
                            acc ^ u32::from_be_bytes([
                                o[4 * i],
                                o[4 * i + 1],
                                o[4 * i + 2],
                                o[4 * i + 3],
                            ])
                        })
                    }
                }
            };
            fold32(words(a) ^ words(b))
        }
    }
}

/// The hash of a TCP or UDP flow (see the module's documentation).
pub fn flow_hash(a: IpAddr, pa: u16, b: IpAddr, pb: u16) -> u32 {
    address_hash(a, b) + port_hash(pa) + port_hash(pb)
}

/// A port's part of the hash: all but its lowest bit.
pub const fn port_hash(port: u16) -> u32 {
    (port >> 1) as u32
}

/// Which engine of how many this stack is, for choosing source ports whose
/// replies reach it.
#[derive(Debug, Clone)]
pub struct FlowSteering {
    /// Engines in all, at least 1.
    pub engines: u16,
    /// This stack's engine, below `engines`.
    pub engine: u16,
    /// The NIC's RSS, when its queues (one per engine) decide where a
    /// flow goes: replies must come back to this engine's queue.  `None`:
    /// ustack's own flow hash decides (AF_PACKET fanout, software
    /// steering).
    pub rss: Option<Arc<RssSteering>>,
}

impl PartialEq for FlowSteering {
    fn eq(&self, other: &Self) -> bool {
        self.engines == other.engines
            && self.engine == other.engine
            && match (&self.rss, &other.rss) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for FlowSteering {}

impl FlowSteering {
    /// Engine `engine` of `engines`, steered by ustack's flow hash.
    pub fn new(engines: u16, engine: u16) -> FlowSteering {
        FlowSteering {
            engines,
            engine,
            rss: None,
        }
    }

    /// Whether a packet from `remote` to `local_ip:lport` reaches this
    /// engine (the reply of a connection this engine opens).
    pub fn reply_reaches_us(
        &self,
        local_ip: IpAddr,
        lport: u16,
        remote_ip: IpAddr,
        remote_port: u16,
    ) -> bool {
        match &self.rss {
            Some(r) => r.queue_of_flow(remote_ip, remote_port, local_ip, lport) == self.engine,
            None => {
                Self::engine_of(
                    flow_hash(remote_ip, remote_port, local_ip, lport),
                    self.engines,
                ) == self.engine
            }
        }
    }

    /// The engine of a flow hash.
    pub fn engine_of(hash: u32, engines: u16) -> u16 {
        (hash % u32::from(engines.max(1))) as u16
    }

    /// The residue modulo `engines` that a local port's [`port_hash`]
    /// (`lport >> 1`) must have so that the flow `local_ip:lport <-> remote`
    /// hashes to this engine.
    pub fn port_residue(&self, local_ip: IpAddr, remote_ip: IpAddr, remote_port: u16) -> u16 {
        let n = u32::from(self.engines.max(1));
        let fixed = (address_hash(local_ip, remote_ip) + port_hash(remote_port)) % n;
        ((u32::from(self.engine) % n + n - fixed) % n) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn v4(a: u8, b: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 99, a, b))
    }

    #[test]
    fn symmetric() {
        for (a, pa, b, pb) in [
            (v4(1, 2), 7u16, v4(1, 1), 40000u16),
            (v4(200, 3), 65535, v4(9, 250), 1),
            (
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
                80,
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 9, 2)),
                5555,
            ),
        ] {
            assert_eq!(flow_hash(a, pa, b, pb), flow_hash(b, pb, a, pa));
            assert_eq!(address_hash(a, b), address_hash(b, a));
        }
        // 10.99.1.2 ^ 10.99.1.1 = 0x00000003: fold 3; + 7/2 + 40000/2.
        assert_eq!(flow_hash(v4(1, 2), 7, v4(1, 1), 40000), 3 + 3 + 20000);
    }

    #[test]
    fn residue_brings_the_flow_home() {
        for engines in 1..=7u16 {
            for engine in 0..engines {
                let s = FlowSteering::new(engines, engine);
                for rport in [1u16, 80, 443, 8080, 65535] {
                    let r = s.port_residue(v4(1, 2), v4(7, 9), rport);
                    assert!(r < engines);
                    for lport in (10_000u16..10_100).filter(|p| (p >> 1) % engines == r) {
                        let h = flow_hash(v4(1, 2), lport, v4(7, 9), rport);
                        assert_eq!(FlowSteering::engine_of(h, engines), engine);
                        // The reply, as the peer sends it, hashes the same.
                        let back = flow_hash(v4(7, 9), rport, v4(1, 2), lport);
                        assert_eq!(FlowSteering::engine_of(back, engines), engine);
                    }
                }
            }
        }
    }

    #[test]
    fn residue_brings_ipv6_flows_home() {
        let local = IpAddr::V6(Ipv6Addr::new(0xfd00, 0x99, 0, 1, 0, 0, 0, 2));
        for engines in 1..=7u16 {
            for engine in 0..engines {
                let s = FlowSteering::new(engines, engine);
                for (remote, rport) in [
                    (Ipv6Addr::new(0xfd00, 0x99, 0, 1, 0, 0, 0, 1), 80u16),
                    (Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 1, 2, 3, 4, 5), 65535),
                    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0xff), 1),
                ] {
                    let remote = IpAddr::V6(remote);
                    let r = s.port_residue(local, remote, rport);
                    assert!(r < engines);
                    for lport in (40_000u16..40_100).filter(|p| (p >> 1) % engines == r) {
                        assert!(s.reply_reaches_us(local, lport, remote, rport));
                        let back = flow_hash(remote, rport, local, lport);
                        assert_eq!(FlowSteering::engine_of(back, engines), engine);
                    }
                }
            }
        }
        // The address part, by hand: the eight words XORed, folded.
        let a = IpAddr::V6(Ipv6Addr::new(0x0001, 0x0002, 0, 0, 0, 0, 0, 0x0010));
        let b = IpAddr::V6(Ipv6Addr::new(0, 0, 0x0100, 0x0200, 0, 0, 0, 0x0001));
        // Words: 0x00010002 ^ 0x01000200 ^ 0x00000011 = 0x01010213.
        assert_eq!(address_hash(a, b), 0x0101 + 0x0213);
    }

    #[test]
    fn sequential_client_ports_spread_evenly() {
        let mut per = [0u32; 3];
        for p in 30_000u16..30_300 {
            per[usize::from(FlowSteering::engine_of(
                flow_hash(v4(1, 1), p, v4(1, 2), 7),
                3,
            ))] += 1;
        }
        assert_eq!(per, [100, 100, 100]);
    }
}
