//! What a received frame is, as far as choosing its engine and the exception
//! path needs: ARP and IPv6 neighbour discovery (for every engine, and for
//! the kernel too), IPv4 and IPv6 with their flow hash (`stack::steer`) and
//! destination port, or anything else.
//!
//! The hash is computed exactly as the AF_PACKET fanout program computes it
//! (`link::fanout`): a frame the kernel put on engine `i` is found to belong
//! to engine `i` here, and software steering only moves frames that came in
//! on a queue nobody steered by this hash (a TAP, a single-queue port).
//! So fields are read at the offsets that program reads, not through
//! `wire`'s checked views: a frame the views would refuse still gets the
//! program's answer.  Nothing here panics on any input: a frame too short
//! for a field gets hash 0, as the BPF program's out-of-bounds load does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use stack::steer::{fold32, port_hash, FlowSteering, RssSteering};
use wire::icmpv6::Icmpv6Message;

use crate::config::{KniAction, KniConfig, KniMethod};

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const VLAN_HLEN: usize = 4;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;
/// Offsets in the IPv6 fixed header.
const IPV6_NEXT_HEADER: usize = 6;
const IPV6_HOP_LIMIT: usize = 7;
const IPV6_SRC: usize = 8;
const IPV6_DST: usize = 24;
const IPV6_HLEN: usize = wire::ipv6::HEADER_LEN;
/// RFC 4861 section 6.1: a node drops neighbour discovery received with
/// another hop limit (it was forwarded, so it is not from the link).
const NDP_HOP_LIMIT: u8 = 255;

/// The transport of an IP packet that has ports (not a fragment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

/// What the dispatcher needs to know of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameClass {
    /// An ARP frame: every engine learns from it, the kernel too.
    Arp,
    /// IPv6 neighbour discovery (RFC 4861: router and neighbour
    /// solicitations and advertisements, redirects) right after the fixed
    /// header, with the hop limit and code the RFC requires: as ARP, for
    /// every engine (each keeps its own neighbour cache and default
    /// routers) and the kernel.  What fails those checks is dropped by the
    /// stack anyway, so it is left to one engine (as ICMPv6) to be counted
    /// once.
    Ndp,
    /// IPv4: the flow hash, and for TCP/UDP that is not a fragment the
    /// transport and destination port; `tuple` is what a NIC's RSS hashes.
    Ipv4 {
        hash: u32,
        ports: Option<(Transport, u16)>,
        tuple: RssTuple,
    },
    /// IPv6 (but neighbour discovery): as IPv4, with ports for TCP and UDP
    /// right after the fixed header.  To a multicast address the hash is 0
    /// (engine 0's): a group's traffic is no flow an engine opened.
    Ipv6 {
        hash: u32,
        ports: Option<(Transport, u16)>,
        tuple: RssTuple,
    },
    /// Anything else (VLAN-tagged, runts, other EtherTypes): engine 0's,
    /// as the fanout program returns 0 for it.
    Other,
}

/// The fields of an IP packet a NIC's RSS hashes: the addresses, and the
/// ports of TCP or UDP that is not a fragment (for IPv6: not behind an
/// extension header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RssTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// (source, destination).
    pub ports: Option<(u16, u16)>,
}

impl RssTuple {
    /// A packet too short for its addresses: all-zero ones, as the hash
    /// of nothing.
    const fn unknown(v6: bool) -> RssTuple {
        let (src, dst) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            )
        };
        RssTuple {
            src,
            dst,
            ports: None,
        }
    }
}

impl FrameClass {
    /// The engine that owns the frame among `engines`.
    pub fn engine(&self, engines: u16) -> u16 {
        match self {
            FrameClass::Ipv4 { hash, .. } | FrameClass::Ipv6 { hash, .. } => {
                FlowSteering::engine_of(*hash, engines)
            }
            FrameClass::Arp | FrameClass::Ndp | FrameClass::Other => 0,
        }
    }

    /// The queue a NIC with RSS `rss` (a queue per engine) puts the frame
    /// on: its owner.  Over IPv6 the NIC hashes the 16-byte addresses
    /// (and ports), as Microsoft's RSS specification has it for
    /// `NDIS_HASH_IPV6` and `NDIS_HASH_TCP_IPV6`.  ARP, neighbour discovery,
    /// IPv6 multicast and what is not IP are engine 0's, as for the flow
    /// hash.
    pub fn rss_queue(&self, rss: &RssSteering) -> u16 {
        let tuple = match self {
            FrameClass::Ipv4 { tuple, .. } => tuple,
            FrameClass::Ipv6 { tuple, .. } if !tuple.dst.is_multicast() => tuple,
            FrameClass::Ipv6 { .. } | FrameClass::Arp | FrameClass::Ndp | FrameClass::Other => {
                return 0
            }
        };
        match tuple.ports {
            Some((sport, dport)) => rss.queue_of_flow(tuple.src, sport, tuple.dst, dport),
            None => rss.queue_of_addresses(tuple.src, tuple.dst),
        }
    }

    /// Whether every engine (and the kernel) is to see the frame: ARP and
    /// neighbour discovery.
    pub fn is_neighbor_discovery(&self) -> bool {
        matches!(self, FrameClass::Arp | FrameClass::Ndp)
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}

fn addr16(b: &[u8], at: usize) -> Option<[u8; 16]> {
    b.get(at..at + 16)?.try_into().ok()
}

/// Classifies an Ethernet frame.
pub fn classify(frame: &[u8]) -> FrameClass {
    // Through one 802.1Q tag (a VLAN interface's frame), as the NIC's RSS
    // and the kernel's fanout program see past it: a VLAN's flows and
    // neighbour discovery are steered as a port's own.
    let (ethertype, l3) = match be16(frame, 12) {
        Some(ETHERTYPE_VLAN) => (be16(frame, 16), ETH_HLEN + VLAN_HLEN),
        other => (other, ETH_HLEN),
    };
    let ip = frame.get(l3..).unwrap_or_default();
    match ethertype {
        Some(ETHERTYPE_ARP) => FrameClass::Arp,
        Some(ETHERTYPE_IPV4) => classify_ipv4(ip).unwrap_or(FrameClass::Ipv4 {
            hash: 0,
            ports: None,
            tuple: RssTuple::unknown(false),
        }),
        Some(ETHERTYPE_IPV6) => classify_ipv6(ip).unwrap_or(FrameClass::Ipv6 {
            hash: 0,
            ports: None,
            tuple: RssTuple::unknown(true),
        }),
        _ => FrameClass::Other,
    }
}

fn classify_ipv4(ip: &[u8]) -> Option<FrameClass> {
    let src = be32(ip, 12)?;
    let dst = be32(ip, 16)?;
    let fold = fold32(src ^ dst);
    let mut tuple = RssTuple {
        src: IpAddr::V4(Ipv4Addr::from(src)),
        dst: IpAddr::V4(Ipv4Addr::from(dst)),
        ports: None,
    };
    let proto = *ip.get(9)?;
    let transport = match proto {
        PROTO_TCP => Transport::Tcp,
        PROTO_UDP => Transport::Udp,
        _ => {
            return Some(FrameClass::Ipv4 {
                hash: fold,
                ports: None,
                tuple,
            })
        }
    };
    // MF or a fragment offset: ports are in the first fragment only.
    if be16(ip, 6)? & 0x3fff != 0 {
        return Some(FrameClass::Ipv4 {
            hash: fold,
            ports: None,
            tuple,
        });
    }
    // The header length as written, whatever it is (as the BPF program).
    let hl = usize::from(ip.first()? & 0x0f) * 4;
    let sport = be16(ip, hl)?;
    let dport = be16(ip, hl + 2)?;
    tuple.ports = Some((sport, dport));
    Some(FrameClass::Ipv4 {
        hash: fold + port_hash(sport) + port_hash(dport),
        ports: Some((transport, dport)),
        tuple,
    })
}

/// Whether an ICMPv6 message type is neighbour discovery's.
fn is_ndp_type(t: u8) -> bool {
    matches!(
        Icmpv6Message::from(t),
        Icmpv6Message::RouterSolicit
            | Icmpv6Message::RouterAdvert
            | Icmpv6Message::NeighborSolicit
            | Icmpv6Message::NeighborAdvert
            | Icmpv6Message::Redirect
    )
}

fn classify_ipv6(ip: &[u8]) -> Option<FrameClass> {
    let src = addr16(ip, IPV6_SRC)?;
    let dst = addr16(ip, IPV6_DST)?;
    let next = *ip.get(IPV6_NEXT_HEADER)?;
    if next == PROTO_ICMPV6
        && ip.get(IPV6_HOP_LIMIT) == Some(&NDP_HOP_LIMIT)
        && ip.get(IPV6_HLEN).is_some_and(|&t| is_ndp_type(t))
        && ip.get(IPV6_HLEN + 1) == Some(&0)
    {
        return Some(FrameClass::Ndp);
    }
    let (src, dst) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
    let multicast = dst.is_multicast();
    let mut tuple = RssTuple {
        src: IpAddr::V6(src),
        dst: IpAddr::V6(dst),
        ports: None,
    };
    let transport = match next {
        PROTO_TCP => Some(Transport::Tcp),
        PROTO_UDP => Some(Transport::Udp),
        // Extension headers (fragments among them), ICMPv6, the rest: by
        // addresses, as the BPF program, which cannot walk a chain.
        _ => None,
    };
    let mut hash = stack::steer::address_hash(tuple.src, tuple.dst);
    let mut ports = None;
    if let Some(t) = transport {
        let sport = be16(ip, IPV6_HLEN);
        let dport = be16(ip, IPV6_HLEN + 2);
        match (sport, dport) {
            (Some(sport), Some(dport)) => {
                tuple.ports = Some((sport, dport));
                ports = Some((t, dport));
                hash += port_hash(sport) + port_hash(dport);
            }
            // The program's load past the end gives 0, but to a multicast
            // address it has answered 0 before it reads them.
            _ if !multicast => return None,
            _ => {}
        }
    }
    Some(FrameClass::Ipv6 {
        hash: if multicast { 0 } else { hash },
        ports,
        tuple,
    })
}

/// A set of ports, one bit each.
#[derive(Clone)]
pub struct PortSet {
    bits: Box<[u64; 1024]>,
}

impl PortSet {
    pub fn new(ports: &[u16]) -> Self {
        let mut bits = Box::new([0u64; 1024]);
        for &p in ports {
            bits[usize::from(p / 64)] |= 1 << (p % 64);
        }
        PortSet { bits }
    }

    pub fn contains(&self, port: u16) -> bool {
        self.bits[usize::from(port / 64)] & (1 << (port % 64)) != 0
    }

    /// The ports as the configuration writes them: `80,443,8000-8010`.
    pub fn describe(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut run: Option<(u16, u16)> = None;
        let close = |r: (u16, u16), out: &mut Vec<String>| {
            out.push(if r.0 == r.1 {
                r.0.to_string()
            } else {
                format!("{}-{}", r.0, r.1)
            })
        };
        for p in 0..=u16::MAX {
            if self.contains(p) {
                run = match run {
                    Some((a, b)) if b + 1 == p => Some((a, p)),
                    Some(r) => {
                        close(r, &mut out);
                        Some((p, p))
                    }
                    None => Some((p, p)),
                };
            }
        }
        if let Some(r) = run {
            close(r, &mut out);
        }
        out.join(",")
    }
}

impl std::fmt::Debug for PortSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n: u32 = self.bits.iter().map(|w| w.count_ones()).sum();
        write!(f, "PortSet({n} ports)")
    }
}

/// Where a frame goes when the exception path is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KniVerdict {
    Stack,
    Kernel,
    /// ARP and neighbour discovery: both.
    Both,
}

/// The exception-path filter of `[kni]`.
#[derive(Debug, Clone)]
pub struct KniFilter {
    accept: bool,
    action: KniAction,
    tcp: PortSet,
    udp: PortSet,
}

impl KniFilter {
    /// `[kni] method=accept` (else reject).
    pub fn accepts(&self) -> bool {
        self.accept
    }

    pub fn action(&self) -> KniAction {
        self.action
    }

    /// Changes `kni_action` (`ustack kni -a`): the next frame follows it.
    pub fn set_action(&mut self, action: KniAction) {
        self.action = action;
    }

    /// The TCP and UDP ports the method names.
    pub fn ports(&self) -> (&PortSet, &PortSet) {
        (&self.tcp, &self.udp)
    }

    pub fn new(cfg: &KniConfig) -> Self {
        KniFilter {
            accept: cfg.method == KniMethod::Accept,
            action: cfg.kni_action,
            tcp: PortSet::new(&cfg.tcp_ports),
            udp: PortSet::new(&cfg.udp_ports),
        }
    }

    /// F-Stack's meaning: with `method=reject` the listed TCP/UDP
    /// destination ports go to ustack and everything else to the kernel;
    /// with `method=accept` the listed ports go to the kernel and everything
    /// else to ustack, over IPv4 and IPv6 alike. ARP and IPv6 neighbour
    /// discovery go to both: the kernel behind the TAP shares the port's
    /// MAC and must resolve its neighbours as ustack does.
    /// `kni_action=alltokni` or `alltoff` send everything (but those) one
    /// way.
    pub fn verdict(&self, class: &FrameClass) -> KniVerdict {
        let r = self;
        if class.is_neighbor_discovery() {
            return KniVerdict::Both;
        }
        match r.action {
            KniAction::AllToKni => return KniVerdict::Kernel,
            KniAction::AllToFf => return KniVerdict::Stack,
            KniAction::Default => {}
        }
        let listed = match class {
            FrameClass::Ipv4 {
                ports: Some((Transport::Tcp, p)),
                ..
            }
            | FrameClass::Ipv6 {
                ports: Some((Transport::Tcp, p)),
                ..
            } => r.tcp.contains(*p),
            FrameClass::Ipv4 {
                ports: Some((Transport::Udp, p)),
                ..
            }
            | FrameClass::Ipv6 {
                ports: Some((Transport::Udp, p)),
                ..
            } => r.udp.contains(*p),
            _ => false,
        };
        if listed == r.accept {
            KniVerdict::Kernel
        } else {
            KniVerdict::Stack
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_sets_describe_themselves_as_the_configuration_writes_them() {
        assert_eq!(PortSet::new(&[]).describe(), "");
        assert_eq!(
            PortSet::new(&[443, 80, 8000, 8001, 8002, 65535]).describe(),
            "80,443,8000-8002,65535"
        );
        assert_eq!(PortSet::new(&[0, 1]).describe(), "0-1");
    }
    use stack::steer::{address_hash, flow_hash, SYMMETRIC_KEY};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    fn v4(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 1, 0, 0, 0, 1);
    const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x99, 0, 1, 0x1234, 0, 0xabcd, 2);
    const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

    fn ipv6(next: u8, hop_limit: u8, src: Ipv6Addr, dst: Ipv6Addr, rest: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(rest.len() as u16).to_be_bytes());
        p[6] = next;
        p[7] = hop_limit;
        p[8..24].copy_from_slice(&src.octets());
        p[24..40].copy_from_slice(&dst.octets());
        p.extend_from_slice(rest);
        p
    }

    fn ports(sport: u16, dport: u16) -> [u8; 4] {
        let (s, d) = (sport.to_be_bytes(), dport.to_be_bytes());
        [s[0], s[1], d[0], d[1]]
    }

    /// An ICMPv6 message of `kind` and `code` (checksum and body left 0).
    fn icmpv6(kind: u8, code: u8) -> [u8; 24] {
        let mut m = [0u8; 24];
        m[0] = kind;
        m[1] = code;
        m
    }

    fn frame(ethertype: u16, ip: &[u8]) -> Vec<u8> {
        let mut f = vec![0xffu8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(ip);
        f
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        p.extend_from_slice(l4);
        p
    }

    #[test]
    fn hash_matches_the_stack_and_is_symmetric() {
        let (a, b) = ([10, 99, 1, 1], [10, 99, 1, 2]);
        let ports = [0x9c, 0x41, 0x00, 0x07]; // 40001 -> 7
        let c = classify(&frame(0x0800, &ipv4(6, a, b, 0x4000, &ports)));
        let want = stack::steer::flow_hash(
            IpAddr::V4(Ipv4Addr::from(a)),
            40001,
            IpAddr::V4(Ipv4Addr::from(b)),
            7,
        );
        assert!(
            matches!(c, FrameClass::Ipv4 { hash, ports: Some((Transport::Tcp, 7)), tuple }
                if hash == want && tuple == RssTuple { src: v4(a), dst: v4(b), ports: Some((40001, 7)) }),
            "{c:?}"
        );
        let back = classify(&frame(0x0800, &ipv4(6, b, a, 0, &[0, 7, 0x9c, 0x41])));
        assert_eq!(back.engine(2), c.engine(2));
        assert_eq!(back.engine(3), c.engine(3));
        // A fragment and ICMP: addresses only.
        let f = classify(&frame(0x0800, &ipv4(17, a, b, 0x2000, &ports)));
        assert!(
            matches!(f, FrameClass::Ipv4 { hash: 3, ports: None, tuple }
                if tuple == RssTuple { src: v4(a), dst: v4(b), ports: None }),
            "{f:?}"
        );
        assert_eq!(classify(&frame(0x0806, &[0; 28])), FrameClass::Arp);
        assert_eq!(classify(&frame(0x8100, &[0; 40])), FrameClass::Other);
        // A tagged frame is classified by what the tag carries.
        let mut tagged_arp = vec![0u8, 10, 0x08, 0x06];
        tagged_arp.extend_from_slice(&[0; 28]);
        assert_eq!(classify(&frame(0x8100, &tagged_arp)), FrameClass::Arp);
        let mut tagged_tcp = vec![0u8, 10, 0x08, 0x00];
        tagged_tcp.extend_from_slice(&ipv4(6, a, b, 0x4000, &ports));
        let t = classify(&frame(0x8100, &tagged_tcp));
        assert_eq!(t, c, "a VLAN's flow is steered as the port's own");
    }

    #[test]
    fn rss_queue_is_the_nics_choice() {
        let rss = RssSteering::round_robin(&SYMMETRIC_KEY, 128, 4).unwrap();
        let (a, b) = ([10, 99, 1, 1], [10, 99, 1, 2]);
        let (ia, ib) = (IpAddr::V4(Ipv4Addr::from(a)), IpAddr::V4(Ipv4Addr::from(b)));
        let mut seen = [0u32; 4];
        for sport in 40_000u16..40_064 {
            let l4 = [(sport >> 8) as u8, sport as u8, 0, 80];
            let c = classify(&frame(0x0800, &ipv4(6, a, b, 0, &l4)));
            let q = c.rss_queue(&rss);
            assert_eq!(q, rss.queue_of_flow(ia, sport, ib, 80));
            seen[usize::from(q)] += 1;
            // The reply: the symmetric key puts it on the same queue.
            let back = [0, 80, (sport >> 8) as u8, sport as u8];
            assert_eq!(
                classify(&frame(0x0800, &ipv4(6, b, a, 0, &back))).rss_queue(&rss),
                q
            );
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
        // A fragment: by addresses.
        let f = classify(&frame(0x0800, &ipv4(17, a, b, 0x2000, &[1, 2, 3, 4])));
        assert_eq!(f.rss_queue(&rss), rss.queue_of_addresses(ia, ib));
        assert_eq!(classify(&frame(0x0806, &[0; 28])).rss_queue(&rss), 0);
    }

    #[test]
    fn short_frames_never_panic() {
        let full = frame(
            0x0800,
            &ipv4(6, [1, 2, 3, 4], [5, 6, 7, 8], 0, &[1, 2, 3, 4]),
        );
        for n in 0..full.len() {
            let c = classify(&full[..n]);
            if n < full.len() {
                assert!(matches!(
                    c,
                    FrameClass::Other
                        | FrameClass::Ipv4 { hash: 0, .. }
                        | FrameClass::Ipv4 { ports: None, .. }
                ));
            }
        }
        // A header length of 0 reads the ports from the header itself, as
        // the BPF program does.
        let mut odd = ipv4(6, [1, 2, 3, 4], [5, 6, 7, 8], 0, &[]);
        odd[0] = 0x40;
        let _ = classify(&frame(0x0800, &odd));
    }

    #[test]
    fn ipv6_hash_matches_the_stack_and_is_symmetric() {
        let (a, b) = (IpAddr::V6(A6), IpAddr::V6(B6));
        for (next, t) in [(6u8, Transport::Tcp), (17, Transport::Udp)] {
            for (sport, dport) in [(40_001u16, 80u16), (1, 65_535), (51_000, 443)] {
                let c = classify(&frame(
                    0x86dd,
                    &ipv6(next, 64, A6, B6, &ports(sport, dport)),
                ));
                let want = flow_hash(a, sport, b, dport);
                assert_eq!(
                    c,
                    FrameClass::Ipv6 {
                        hash: want,
                        ports: Some((t, dport)),
                        tuple: RssTuple {
                            src: a,
                            dst: b,
                            ports: Some((sport, dport))
                        }
                    }
                );
                let back = classify(&frame(
                    0x86dd,
                    &ipv6(next, 64, B6, A6, &ports(dport, sport)),
                ));
                for n in 2..=5 {
                    assert_eq!(back.engine(n), c.engine(n));
                }
            }
        }
        // Behind extension headers (hop-by-hop, a fragment, destination
        // options, routing) and ICMPv6: addresses only, no ports.
        let addrs = address_hash(a, b);
        for next in [0u8, 44, 60, 43, 58, 59] {
            let mut rest = vec![6u8, 0, 0, 0, 0, 0, 0, 0];
            rest.extend_from_slice(&ports(40_000, 80));
            let c = classify(&frame(0x86dd, &ipv6(next, 64, A6, B6, &rest)));
            assert_eq!(
                c,
                FrameClass::Ipv6 {
                    hash: addrs,
                    ports: None,
                    tuple: RssTuple {
                        src: a,
                        dst: b,
                        ports: None
                    }
                },
                "next header {next}"
            );
        }
        // To a multicast group: engine 0, ports kept for the exception path.
        let c = classify(&frame(
            0x86dd,
            &ipv6(17, 1, A6, ALL_NODES, &ports(5353, 5353)),
        ));
        assert!(
            matches!(
                c,
                FrameClass::Ipv6 {
                    hash: 0,
                    ports: Some((Transport::Udp, 5353)),
                    ..
                }
            ),
            "{c:?}"
        );
        assert_eq!(c.engine(3), 0);
        // All zeros: hop-by-hop between unspecified addresses, by them.
        let z = classify(&frame(0x86dd, &[0; 40]));
        assert!(
            matches!(
                z,
                FrameClass::Ipv6 {
                    hash: 0,
                    ports: None,
                    ..
                }
            ),
            "{z:?}"
        );
    }

    #[test]
    fn neighbor_discovery_is_for_every_engine() {
        let solicited = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 2);
        for kind in 133..=137u8 {
            for dst in [B6, ALL_NODES, solicited] {
                let f = frame(0x86dd, &ipv6(58, 255, A6, dst, &icmpv6(kind, 0)));
                assert_eq!(classify(&f), FrameClass::Ndp, "type {kind}");
                assert!(classify(&f).is_neighbor_discovery());
            }
            // What the stack drops anyway (RFC 4861 section 6.1: a hop
            // limit other than 255, a code other than 0) goes to one
            // engine, to be counted once.
            for (hop, code) in [(254u8, 0u8), (64, 0), (255, 1)] {
                let f = frame(0x86dd, &ipv6(58, hop, A6, B6, &icmpv6(kind, code)));
                let c = classify(&f);
                assert!(
                    matches!(c, FrameClass::Ipv6 { ports: None, hash, .. }
                        if hash == address_hash(IpAddr::V6(A6), IpAddr::V6(B6))),
                    "{c:?}"
                );
                assert!(!c.is_neighbor_discovery());
            }
            // Behind an extension header: not recognised, one engine.
            let mut rest = vec![58u8, 0, 1, 4, 0, 0, 0, 0];
            rest.extend_from_slice(&icmpv6(kind, 0));
            let c = classify(&frame(0x86dd, &ipv6(0, 255, A6, B6, &rest)));
            assert!(matches!(c, FrameClass::Ipv6 { .. }), "{c:?}");
        }
        // Echo, MLD: not neighbour discovery.
        for kind in [128u8, 129, 130, 131, 143, 132, 138] {
            let c = classify(&frame(0x86dd, &ipv6(58, 255, A6, B6, &icmpv6(kind, 0))));
            assert!(matches!(c, FrameClass::Ipv6 { .. }), "type {kind}: {c:?}");
        }
        // Neighbour discovery cut short of its type: plain ICMPv6.
        let c = classify(&frame(0x86dd, &ipv6(58, 255, A6, B6, &[])));
        assert!(matches!(c, FrameClass::Ipv6 { .. }), "{c:?}");
    }

    #[test]
    fn ipv6_rss_queue_hashes_sixteen_byte_addresses() {
        let rss = RssSteering::round_robin(&SYMMETRIC_KEY, 128, 4).unwrap();
        let (a, b) = (IpAddr::V6(A6), IpAddr::V6(B6));
        let mut seen = [0u32; 4];
        for sport in 40_000u16..40_064 {
            for next in [6u8, 17] {
                let c = classify(&frame(0x86dd, &ipv6(next, 64, A6, B6, &ports(sport, 443))));
                let q = c.rss_queue(&rss);
                assert_eq!(q, rss.queue_of_flow(a, sport, b, 443));
                assert_eq!(q, rss.queue_of_hash(rss.toeplitz().flow(a, sport, b, 443)));
                seen[usize::from(q)] += 1;
                let back = classify(&frame(0x86dd, &ipv6(next, 64, B6, A6, &ports(443, sport))));
                assert_eq!(back.rss_queue(&rss), q);
            }
        }
        assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
        // By addresses: a fragment, ICMPv6.
        let mut rest = vec![6u8, 0, 0, 1, 0, 0, 0, 9];
        rest.extend_from_slice(&ports(1, 2));
        let f = classify(&frame(0x86dd, &ipv6(44, 64, A6, B6, &rest)));
        assert_eq!(f.rss_queue(&rss), rss.queue_of_addresses(a, b));
        let e = classify(&frame(0x86dd, &ipv6(58, 64, A6, B6, &icmpv6(128, 0))));
        assert_eq!(e.rss_queue(&rss), rss.queue_of_addresses(a, b));
        // Multicast and neighbour discovery: engine 0.
        for sport in 0..64u16 {
            let m = classify(&frame(
                0x86dd,
                &ipv6(17, 1, A6, ALL_NODES, &ports(sport, 9)),
            ));
            assert_eq!(m.rss_queue(&rss), 0);
        }
        let ns = classify(&frame(0x86dd, &ipv6(58, 255, A6, B6, &icmpv6(135, 0))));
        assert_eq!(ns.rss_queue(&rss), 0);
    }

    /// Every prefix of every kind of frame, and random bytes under each
    /// EtherType: no panic, and a frame cut short of what its hash needs
    /// hashes to 0 as the fanout program's out-of-bounds load gives.
    #[test]
    fn hostile_frames_never_panic() {
        let frames = [
            frame(0x86dd, &ipv6(6, 64, A6, B6, &ports(1, 2))),
            frame(0x86dd, &ipv6(17, 64, A6, ALL_NODES, &ports(1, 2))),
            frame(
                0x86dd,
                &ipv6(44, 64, A6, B6, &[6, 0, 0, 1, 0, 0, 0, 9, 1, 2, 3, 4]),
            ),
            frame(0x86dd, &ipv6(58, 255, A6, B6, &icmpv6(136, 0))),
            frame(
                0x0800,
                &ipv4(17, [1, 2, 3, 4], [5, 6, 7, 8], 0, &[1, 2, 3, 4]),
            ),
            frame(0x0806, &[0; 28]),
        ];
        let rss = RssSteering::round_robin(&SYMMETRIC_KEY, 128, 3).unwrap();
        let filter = kni(KniMethod::Reject, KniAction::Default);
        let check = |f: &[u8]| {
            let c = classify(f);
            assert!(c.engine(3) < 3);
            assert!(c.rss_queue(&rss) < 3);
            let _ = filter.verdict(&c);
            c
        };
        for f in &frames {
            for n in 0..f.len() {
                let c = check(&f[..n]);
                // Short of the ports of unicast TCP: hash 0; short of the
                // EtherType: not IP.
                if f[12..14] == [0x86, 0xdd] && f[14 + 6] == 6 {
                    if n < 14 {
                        assert_eq!(c, FrameClass::Other);
                    } else if n < 14 + 44 {
                        assert!(matches!(c, FrameClass::Ipv6 { hash: 0, .. }), "{n}: {c:?}");
                    }
                }
            }
        }
        let mut rng = stack::rand::Rng::new(21);
        for round in 0..20_000 {
            let ethertype: u16 = [0x86dd, 0x0800, 0x0806, 0x8100][round % 4];
            let len = (rng.next_u32() % 120) as usize;
            let mut ip: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
            // Often NDP-shaped, so the deeper branches are reached.
            if ethertype == 0x86dd && ip.len() > 41 && round % 3 == 0 {
                ip[6] = 58;
                ip[7] = 255;
                ip[40] = 133 + (rng.next_u32() % 5) as u8;
            }
            check(&frame(ethertype, &ip));
        }
    }

    #[test]
    fn kni_rules_over_ipv6() {
        let r = kni(KniMethod::Reject, KniAction::Default);
        let tcp = |port: u16| classify(&frame(0x86dd, &ipv6(6, 64, A6, B6, &ports(40_000, port))));
        let udp = |port: u16| classify(&frame(0x86dd, &ipv6(17, 64, A6, B6, &ports(40_000, port))));
        let ns = classify(&frame(0x86dd, &ipv6(58, 255, A6, B6, &icmpv6(135, 0))));
        let echo = classify(&frame(0x86dd, &ipv6(58, 64, A6, B6, &icmpv6(128, 0))));
        assert_eq!(r.verdict(&tcp(80)), KniVerdict::Stack);
        assert_eq!(r.verdict(&tcp(8000)), KniVerdict::Kernel);
        assert_eq!(r.verdict(&udp(7)), KniVerdict::Stack);
        assert_eq!(r.verdict(&udp(80)), KniVerdict::Kernel);
        assert_eq!(r.verdict(&echo), KniVerdict::Kernel);
        assert_eq!(r.verdict(&ns), KniVerdict::Both);
        let acc = kni(KniMethod::Accept, KniAction::Default);
        assert_eq!(acc.verdict(&tcp(80)), KniVerdict::Kernel);
        assert_eq!(acc.verdict(&echo), KniVerdict::Stack);
        assert_eq!(acc.verdict(&ns), KniVerdict::Both);
        assert_eq!(
            kni(KniMethod::Accept, KniAction::AllToKni).verdict(&ns),
            KniVerdict::Both
        );
        assert_eq!(
            kni(KniMethod::Reject, KniAction::AllToFf).verdict(&ns),
            KniVerdict::Both
        );
    }

    fn kni(method: KniMethod, action: KniAction) -> KniFilter {
        KniFilter::new(&KniConfig {
            enable: true,
            method,
            tcp_ports: vec![7, 80],
            udp_ports: vec![7],
            kni_action: action,
            ..KniConfig::default()
        })
    }

    #[test]
    fn kni_rules_as_fstack() {
        let (a, b) = ([10, 99, 1, 1], [10, 99, 1, 2]);
        let tcp = |port: u16| {
            classify(&frame(
                0x0800,
                &ipv4(6, a, b, 0, &[0x9c, 0x40, (port >> 8) as u8, port as u8]),
            ))
        };
        let udp = |port: u16| {
            classify(&frame(
                0x0800,
                &ipv4(17, a, b, 0, &[0x9c, 0x40, (port >> 8) as u8, port as u8]),
            ))
        };
        let icmp = classify(&frame(0x0800, &ipv4(1, a, b, 0, &[8, 0, 0, 0])));
        let arp = classify(&frame(0x0806, &[0; 28]));
        let r = kni(KniMethod::Reject, KniAction::Default);
        assert_eq!(r.verdict(&tcp(80)), KniVerdict::Stack);
        assert_eq!(r.verdict(&tcp(8000)), KniVerdict::Kernel);
        assert_eq!(r.verdict(&udp(7)), KniVerdict::Stack);
        assert_eq!(r.verdict(&udp(80)), KniVerdict::Kernel);
        assert_eq!(r.verdict(&icmp), KniVerdict::Kernel);
        assert_eq!(r.verdict(&arp), KniVerdict::Both);
        let acc = kni(KniMethod::Accept, KniAction::Default);
        assert_eq!(acc.verdict(&tcp(80)), KniVerdict::Kernel);
        assert_eq!(acc.verdict(&tcp(8000)), KniVerdict::Stack);
        assert_eq!(acc.verdict(&icmp), KniVerdict::Stack);
        assert_eq!(acc.verdict(&arp), KniVerdict::Both);
        let all = kni(KniMethod::Accept, KniAction::AllToKni);
        assert_eq!(all.verdict(&tcp(8000)), KniVerdict::Kernel);
        assert_eq!(all.verdict(&arp), KniVerdict::Both);
        let none = kni(KniMethod::Reject, KniAction::AllToFf);
        assert_eq!(none.verdict(&tcp(8000)), KniVerdict::Stack);
    }
}
