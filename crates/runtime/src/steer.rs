//! What a received frame is, as far as choosing its engine and the exception
//! path needs: ARP (for every engine, and for the kernel too), IPv4 with its
//! flow hash (`stack::steer`) and destination port, or anything else.
//!
//! The hash is computed exactly as the AF_PACKET fanout program computes it
//! (`link::fanout`): a frame the kernel put on engine `i` is found to belong
//! to engine `i` here, and software steering only moves frames that came in
//! on a queue nobody steered by this hash (a TAP, a single-queue port).
//! Nothing here panics on any input: a frame too short for a field gets hash
//! 0, as the BPF program's out-of-bounds load does.

use std::net::{IpAddr, Ipv4Addr};

use stack::steer::{fold32, port_hash, FlowSteering, RssSteering};

use crate::config::{KniAction, KniConfig, KniMethod};

const ETH_HLEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// The transport of an IPv4 packet that has ports (not a fragment).
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
    /// IPv4: the flow hash, and for TCP/UDP that is not a fragment the
    /// transport and destination port; `tuple` is what a NIC's RSS hashes.
    Ipv4 {
        hash: u32,
        ports: Option<(Transport, u16)>,
        tuple: RssTuple,
    },
    /// Anything else (IPv6, VLAN-tagged, runts): engine 0's, as the fanout
    /// program returns 0 for it.
    Other,
}

/// The fields of an IPv4 packet a NIC's RSS hashes: the addresses, and
/// the ports of TCP or UDP that is not a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RssTuple {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    /// (source, destination).
    pub ports: Option<(u16, u16)>,
}

impl FrameClass {
    /// The engine that owns the frame among `engines`.
    pub fn engine(&self, engines: u16) -> u16 {
        match self {
            FrameClass::Ipv4 { hash, .. } => FlowSteering::engine_of(*hash, engines),
            FrameClass::Arp | FrameClass::Other => 0,
        }
    }

    /// The queue a NIC with RSS `rss` (a queue per engine) puts the frame
    /// on: its owner.  ARP and what is not IPv4 are engine 0's, as for the
    /// flow hash.
    pub fn rss_queue(&self, rss: &RssSteering) -> u16 {
        match self {
            FrameClass::Ipv4 { tuple, .. } => {
                let src = IpAddr::V4(Ipv4Addr::from(tuple.src));
                let dst = IpAddr::V4(Ipv4Addr::from(tuple.dst));
                match tuple.ports {
                    Some((sport, dport)) => rss.queue_of_flow(src, sport, dst, dport),
                    None => rss.queue_of_addresses(src, dst),
                }
            }
            FrameClass::Arp | FrameClass::Other => 0,
        }
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

/// Classifies an Ethernet frame.
pub fn classify(frame: &[u8]) -> FrameClass {
    match be16(frame, 12) {
        Some(ETHERTYPE_ARP) => FrameClass::Arp,
        Some(ETHERTYPE_IPV4) => {
            let ip = frame.get(ETH_HLEN..).unwrap_or_default();
            classify_ipv4(ip).unwrap_or(FrameClass::Ipv4 {
                hash: 0,
                ports: None,
                tuple: RssTuple::default(),
            })
        }
        _ => FrameClass::Other,
    }
}

fn classify_ipv4(ip: &[u8]) -> Option<FrameClass> {
    let src = be32(ip, 12)?;
    let dst = be32(ip, 16)?;
    let fold = fold32(src ^ dst);
    let mut tuple = RssTuple {
        src: src.to_be_bytes(),
        dst: dst.to_be_bytes(),
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
    /// ARP: both.
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
    /// else to ustack. ARP goes to both. `kni_action=alltokni` or `alltoff`
    /// send everything (but ARP) one way.
    pub fn verdict(&self, class: &FrameClass) -> KniVerdict {
        let r = self;
        if *class == FrameClass::Arp {
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
            } => r.tcp.contains(*p),
            FrameClass::Ipv4 {
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
    use std::net::{IpAddr, Ipv4Addr};

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
                if hash == want && tuple == RssTuple { src: a, dst: b, ports: Some((40001, 7)) }),
            "{c:?}"
        );
        let back = classify(&frame(0x0800, &ipv4(6, b, a, 0, &[0, 7, 0x9c, 0x41])));
        assert_eq!(back.engine(2), c.engine(2));
        assert_eq!(back.engine(3), c.engine(3));
        // A fragment and ICMP: addresses only.
        let f = classify(&frame(0x0800, &ipv4(17, a, b, 0x2000, &ports)));
        assert!(
            matches!(f, FrameClass::Ipv4 { hash: 3, ports: None, tuple }
                if tuple == RssTuple { src: a, dst: b, ports: None }),
            "{f:?}"
        );
        assert_eq!(classify(&frame(0x0806, &[0; 28])), FrameClass::Arp);
        assert_eq!(classify(&frame(0x86dd, &[0; 40])), FrameClass::Other);
        assert_eq!(classify(&frame(0x8100, &[0; 40])), FrameClass::Other);
    }

    #[test]
    fn rss_queue_is_the_nics_choice() {
        use stack::steer::SYMMETRIC_KEY;
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
