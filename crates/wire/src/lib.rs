//! Packet formats for ustack.
//!
//! Every protocol has two types: a zero-copy *view* over a byte buffer
//! (`XxxPacket<T: AsRef<[u8]>>`) and a plain *repr* struct (`XxxRepr`).
//!
//! # The no-panic contract
//!
//! Every byte from the wire is hostile. A view is built with
//! `new_checked(buf)`, which validates every length the accessors depend on
//! once; after it returns `Ok`, no accessor of the view can panic, whatever
//! the bytes are. `new_unchecked` exists for emitting into a buffer the caller
//! sized with `buffer_len()`; accessors on an unchecked view over a too-short
//! buffer may panic, so never use it on received bytes. `Repr::parse` never
//! panics either: it returns an [`Error`].
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

use core::fmt;

#[macro_use]
mod macros;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ndp;
pub mod partial_checksum;
pub mod tcp;
pub mod udp;
pub mod vlan;

#[cfg(test)]
mod test_util;

pub use arp::{ArpHardware, ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{
    Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, Icmpv4TimeExceeded,
};
pub use icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr,
    Icmpv6TimeExceeded,
};
pub use ip::IpProtocol;
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6FragmentHeader, Ipv6FragmentRepr, Ipv6HeaderChain, Ipv6Packet, Ipv6Repr};
pub use ndp::{NdpOption, NdpOptionRepr, NdpOptionType, NdpOptions, NdpPrefixInformation};
pub use tcp::{SeqNumber, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanHeader, VlanRepr};

/// Why a buffer could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than a length (fixed or from a header field) requires.
    Truncated,
    /// A field holds a value the format does not allow.
    Malformed,
    /// The checksum does not verify.
    BadChecksum,
    /// Valid, but a variant this crate does not handle.
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::BadChecksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
        };
        f.write_str(s)
    }
}

/// Result of parsing.
pub type Result<T> = core::result::Result<T, Error>;

/// Who handles an upper-layer (UDP, TCP, ICMP) checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChecksumMode {
    /// Software: `parse` verifies the checksum and rejects the packet with
    /// [`Error::BadChecksum`]; `emit` computes the full checksum.
    #[default]
    Full,
    /// Offloaded: `parse` does not verify (the NIC did, or the kernel left a
    /// `CHECKSUM_PARTIAL` frame on a veth/TAP); `emit` writes only the
    /// pseudo-header sum, not inverted, into the checksum field, which is what
    /// a NIC (or virtio-net `VIRTIO_NET_HDR_F_NEEDS_CSUM`) completes.
    Offload,
}

impl ChecksumMode {
    /// True for [`ChecksumMode::Full`].
    pub const fn is_full(self) -> bool {
        matches!(self, ChecksumMode::Full)
    }
}

#[cfg(test)]
mod tests {
    //! Whole-stack robustness: random frames through every parser, the way
    //! the receive path chains them.
    use super::*;
    use core::net::IpAddr;
    use std::vec::Vec;

    /// Parse `frame` as far as it goes, Ethernet to transport. Never panics.
    fn parse_frame(frame: &[u8]) -> usize {
        let mut layers = 0;
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return layers;
        };
        let _ = EthernetRepr::parse(&eth);
        layers += 1;
        let mut ethertype = eth.ethertype();
        let mut payload = eth.into_payload();
        for _ in 0..2 {
            if !matches!(ethertype, EtherType::Vlan | EtherType::QinQ) {
                break;
            }
            let Ok(tag) = VlanHeader::new_checked(payload) else {
                return layers;
            };
            let _ = VlanRepr::parse(&tag);
            ethertype = tag.ethertype();
            payload = tag.into_payload();
            layers += 1;
        }
        match ethertype {
            EtherType::Arp => {
                if let Ok(p) = ArpPacket::new_checked(payload) {
                    let _ = ArpRepr::parse(&p);
                    layers += 1;
                }
            }
            EtherType::Ipv4 => {
                let Ok(ip) = Ipv4Packet::new_checked(payload) else {
                    return layers;
                };
                let Ok(r) = Ipv4Repr::parse(&ip, ChecksumMode::Offload) else {
                    return layers;
                };
                layers += 1;
                let (s, d) = (IpAddr::V4(r.src_addr), IpAddr::V4(r.dst_addr));
                layers += transport(r.next_header, ip.into_payload(), &s, &d);
            }
            EtherType::Ipv6 => {
                let Ok(ip) = Ipv6Packet::new_checked(payload) else {
                    return layers;
                };
                let Ok(r) = Ipv6Repr::parse(&ip) else {
                    return layers;
                };
                layers += 1;
                let Ok(chain) = ip.header_chain() else {
                    return layers;
                };
                let rest = ip.into_payload().get(chain.offset..).unwrap_or(&[]);
                let (s, d) = (IpAddr::V6(r.src_addr), IpAddr::V6(r.dst_addr));
                layers += transport(chain.next_header, rest, &s, &d);
            }
            _ => {}
        }
        layers
    }

    fn transport(proto: IpProtocol, payload: &[u8], s: &IpAddr, d: &IpAddr) -> usize {
        let mut ok = 0;
        for mode in [ChecksumMode::Full, ChecksumMode::Offload] {
            let parsed = match proto {
                IpProtocol::Icmp => Icmpv4Packet::new_checked(payload)
                    .and_then(|p| Icmpv4Repr::parse(&p, mode))
                    .is_ok(),
                IpProtocol::Icmpv6 => match (s, d) {
                    (IpAddr::V6(s6), IpAddr::V6(d6)) => Icmpv6Packet::new_checked(payload)
                        .and_then(|p| Icmpv6Repr::parse(&p, s6, d6, mode))
                        .is_ok(),
                    _ => false,
                },
                IpProtocol::Udp => UdpPacket::new_checked(payload)
                    .and_then(|p| UdpRepr::parse(&p, s, d, mode))
                    .is_ok(),
                IpProtocol::Tcp => TcpPacket::new_checked(payload)
                    .and_then(|p| TcpRepr::parse(&p, s, d, mode))
                    .is_ok(),
                _ => false,
            };
            ok = ok.max(usize::from(parsed));
        }
        ok
    }

    /// Valid frames to mutate: the captured packets of the module tests,
    /// behind Ethernet (and one behind a VLAN tag).
    fn seeds() -> Vec<Vec<u8>> {
        let eth = |ty: u16, payload: &[u8]| {
            let mut f = std::vec![0x02, 0, 0, 0, 0, 1, 0x52, 0x54, 0, 0x12, 0x34, 0x56];
            f.extend_from_slice(&ty.to_be_bytes());
            f.extend_from_slice(payload);
            f
        };
        let ping = ipv4::tests::linux_ping();
        let ns = ipv6::tests::LINUX_NS;
        let mut tagged = std::vec![0x00, 0x64, 0x86, 0xdd];
        tagged.extend_from_slice(&ns);
        std::vec![
            eth(0x0800, &ping),
            eth(0x86dd, &ns),
            eth(0x8100, &tagged),
            eth(
                0x0806,
                &[
                    0, 1, 8, 0, 6, 4, 0, 1, 1, 2, 3, 4, 5, 6, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0,
                    0, 2
                ]
            ),
        ]
    }

    #[test]
    fn seeds_parse_fully() {
        let depth: Vec<usize> = seeds().iter().map(|f| parse_frame(f)).collect();
        assert_eq!(depth, [3, 3, 4, 2]);
    }

    #[test]
    fn random_frames_never_panic() {
        let seeds = seeds();
        let mut rng = test_util::XorShift::new(0x5eed_1234_abcd_ef01);
        for i in 0..20_000 {
            let mut f = if i % 4 == 0 {
                rng.buffer(200)
            } else {
                seeds[i % seeds.len()].clone()
            };
            // flip a few random bytes, sometimes cut the frame short
            if !f.is_empty() {
                for _ in 0..1 + rng.next_u64() % 4 {
                    let at = (rng.next_u64() as usize) % f.len();
                    f[at] = rng.next_u64() as u8;
                }
                if rng.next_u64() % 3 == 1 {
                    let len = (rng.next_u64() as usize) % (f.len() + 1);
                    f.truncate(len);
                }
            }
            let _ = parse_frame(&f);
        }
    }
}
