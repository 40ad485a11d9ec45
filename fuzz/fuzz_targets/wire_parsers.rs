//! Every wire parser over arbitrary bytes: none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr};
use wire::ChecksumMode;

fuzz_target!(|data: &[u8]| {
    let a = IpAddr::V4(Ipv4Addr::new(10, 99, 1, 1));
    let b = IpAddr::V4(Ipv4Addr::new(10, 99, 1, 2));
    if let Ok(f) = wire::ethernet::EthernetFrame::new_checked(data) {
        let _ = wire::ethernet::EthernetRepr::parse(&f);
        let _ = f.payload();
    }
    if let Ok(p) = wire::arp::ArpPacket::new_checked(data) {
        let _ = wire::arp::ArpRepr::parse(&p);
    }
    if let Ok(p) = wire::ipv4::Ipv4Packet::new_checked(data) {
        let _ = wire::ipv4::Ipv4Repr::parse(&p, ChecksumMode::Full);
        let _ = (p.payload(), p.options(), p.verify_checksum());
    }
    let _ = wire::ipv4::Ipv4Repr::parse_quoted(data);
    if let Ok(p) = wire::icmpv4::Icmpv4Packet::new_checked(data) {
        let _ = wire::icmpv4::Icmpv4Repr::parse(&p, ChecksumMode::Full);
    }
    if let Ok(p) = wire::udp::UdpPacket::new_checked(data) {
        let _ = wire::udp::UdpRepr::parse(&p, &a, &b, ChecksumMode::Full);
    }
    if let Ok(p) = wire::vlan::VlanHeader::new_checked(data) {
        let _ = p.ethertype();
    }
});
