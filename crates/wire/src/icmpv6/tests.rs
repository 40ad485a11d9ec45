use super::*;
use crate::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::ndp::{NdpOptionRepr, NdpOptions};
use std::vec::Vec;

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

const MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

#[test]
fn parse_linux_neighbor_solicit() {
    let frame = crate::ipv6::tests::LINUX_NS;
    let ip = Ipv6Packet::new_checked(&frame[..]).unwrap();
    let ipr = Ipv6Repr::parse(&ip).unwrap();
    assert_eq!(ipr.hop_limit, 255);
    let chain = ip.header_chain().unwrap();
    assert_eq!(chain.next_header, IpProtocol::Icmpv6);
    let p = Icmpv6Packet::new_checked(ip.into_payload()).unwrap();
    assert_eq!(p.msg_type(), Icmpv6Message::NeighborSolicit);
    assert!(p.verify_checksum(&ipr.src_addr, &ipr.dst_addr));
    let r = Icmpv6Repr::parse(&p, &ipr.src_addr, &ipr.dst_addr, ChecksumMode::Full).unwrap();
    let opt = crate::ndp::source_lladdr_option(MAC);
    assert_eq!(
        r,
        Icmpv6Repr::NeighborSolicit {
            target_addr: a("fe80::2"),
            options: &opt
        }
    );
    assert_eq!(r.lladdr(), Some(MAC));
    assert!(is_solicited_node(&ipr.dst_addr));
    assert_eq!(solicited_node(&a("fe80::2")), ipr.dst_addr);

    // emit gives back the same bytes
    let mut out = [0u8; 32];
    r.emit(
        &mut Icmpv6Packet::new_unchecked(&mut out[..]),
        &ipr.src_addr,
        &ipr.dst_addr,
    );
    assert_eq!(out, frame[40..]);
}

/// NA from fe80::2 to fe80::5054:ff:fe12:3456, S|O, target fe80::2, TLLA
/// 02:00:00:00:00:02.
const NA: [u8; 32] = [
    0x88, 0x00, 0x94, 0x5e, 0x60, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
];

#[test]
fn neighbor_advert_round_trip() {
    let src = a("fe80::2");
    let dst = a("fe80::5054:ff:fe12:3456");
    let mac = EthernetAddress([2, 0, 0, 0, 0, 2]);
    let opt = crate::ndp::target_lladdr_option(mac);
    let repr = Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_: true,
        target_addr: src,
        options: &opt,
    };
    assert_eq!(repr.buffer_len(), 32);
    let mut buf = [0u8; 32];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &src, &dst);
    assert_eq!(buf, NA);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &src, &dst, ChecksumMode::Full).unwrap(),
        repr
    );
    assert_eq!(repr.lladdr(), Some(mac));
}

#[test]
fn echo_round_trip() {
    let s = a("2001:db8::1");
    let d = a("2001:db8::2");
    let repr = Icmpv6Repr::EchoRequest {
        ident: 0x1234,
        seq_no: 1,
        data: b"abcd",
    };
    let mut buf = [0u8; 12];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &s, &d);
    assert_eq!(
        buf,
        [0x80, 0x00, 0x4d, 0x48, 0x12, 0x34, 0x00, 0x01, 0x61, 0x62, 0x63, 0x64]
    );
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap(),
        repr
    );
    // the checksum covers the pseudo header: other addresses fail
    assert_eq!(
        Icmpv6Repr::parse(&p, &a("2001:db8::3"), &d, ChecksumMode::Full).unwrap_err(),
        Error::BadChecksum
    );
    let reply = Icmpv6Repr::EchoReply {
        ident: 0x1234,
        seq_no: 1,
        data: b"abcd",
    };
    reply.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &d, &s);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &d, &s, ChecksumMode::Full).unwrap(),
        reply
    );
}

fn quoted_header() -> Ipv6Repr {
    Ipv6Repr {
        src_addr: a("2001:db8::1"),
        dst_addr: a("2001:db8::2"),
        next_header: IpProtocol::Udp,
        payload_len: 1400,
        hop_limit: 1,
        traffic_class: 0,
        flow_label: 0x12345,
    }
}

#[test]
fn errors_round_trip() {
    let s = a("2001:db8::ff");
    let d = a("2001:db8::1");
    let data = [0x30, 0x39, 0x00, 0x35, 0x05, 0x78, 0xab, 0xcd];
    let header = quoted_header();
    let reprs = [
        Icmpv6Repr::DstUnreachable {
            reason: Icmpv6DstUnreachable::PortUnreachable,
            header,
            data: &data,
        },
        Icmpv6Repr::PktTooBig {
            mtu: 1280,
            header,
            data: &data,
        },
        Icmpv6Repr::TimeExceeded {
            reason: Icmpv6TimeExceeded::HopLimitExceeded,
            header,
            data: &data,
        },
        Icmpv6Repr::ParamProblem {
            reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
            pointer: 6,
            header,
            data: &data,
        },
    ];
    for repr in reprs {
        assert_eq!(repr.buffer_len(), 56);
        let mut buf = [0u8; 56];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &s, &d);
        assert_eq!(buf[8], 0x60);
        assert_eq!(buf[48..], data);
        let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
        assert!(p.msg_type().is_error());
        assert_eq!(
            Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap(),
            repr
        );
    }
    // the fixed part of Packet Too Big
    let mut buf = [0u8; 56];
    reprs[1].emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &s, &d);
    assert_eq!(buf[..2], [2, 0]);
    assert_eq!(buf[4..8], [0, 0, 5, 0]);
}

#[test]
fn router_messages_round_trip() {
    let router = a("fe80::1");
    let all_nodes = a("ff02::1");
    let mut opts = [0u8; 48];
    let mut at = NdpOptionRepr::SourceLinkLayerAddr(MAC)
        .emit(&mut opts)
        .unwrap();
    at += NdpOptionRepr::Mtu(1500).emit(&mut opts[at..]).unwrap();
    at += NdpOptionRepr::PrefixInformation(crate::ndp::NdpPrefixInformation {
        prefix_len: 64,
        on_link: true,
        autonomous: true,
        valid_lifetime: 86400,
        preferred_lifetime: 14400,
        prefix: a("2001:db8:1::"),
    })
    .emit(&mut opts[at..])
    .unwrap();
    assert_eq!(at, 48);
    let ra = Icmpv6Repr::RouterAdvert {
        hop_limit: 64,
        managed: false,
        other: true,
        router_lifetime: 1800,
        reachable_time: 0,
        retrans_time: 0,
        options: &opts,
    };
    assert_eq!(ra.buffer_len(), 64);
    let mut buf = [0u8; 64];
    ra.emit(
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &router,
        &all_nodes,
    );
    assert_eq!(buf[..8], [134, 0, buf[2], buf[3], 64, 0x40, 0x07, 0x08]);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    let parsed = Icmpv6Repr::parse(&p, &router, &all_nodes, ChecksumMode::Full).unwrap();
    assert_eq!(parsed, ra);
    assert_eq!(parsed.lladdr(), Some(MAC));
    if let Icmpv6Repr::RouterAdvert { options, .. } = parsed {
        let v: Vec<_> = NdpOptions::new(options).map(|o| o.unwrap()).collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1], NdpOptionRepr::Mtu(1500));
    }
    // RA from a global address is invalid (RFC 4861 section 6.1.2)
    let g = a("2001:db8::1");
    ra.emit(
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &g,
        &all_nodes,
    );
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &g, &all_nodes, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );

    let host = a("fe80::5054:ff:fe12:3456");
    let all_routers = a("ff02::2");
    let sllao = crate::ndp::source_lladdr_option(MAC);
    let rs = Icmpv6Repr::RouterSolicit { options: &sllao };
    let mut buf = [0u8; 16];
    rs.emit(
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &host,
        &all_routers,
    );
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &host, &all_routers, ChecksumMode::Full).unwrap(),
        rs
    );
    // from :: it must not carry a source link-layer address
    let u = Ipv6Addr::UNSPECIFIED;
    rs.emit(
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &u,
        &all_routers,
    );
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &u, &all_routers, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );

    let redirect = Icmpv6Repr::Redirect {
        target_addr: a("fe80::3"),
        dst_addr: a("2001:db8:5::1"),
        options: &[],
    };
    let mut buf = [0u8; 40];
    redirect.emit(
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        &router,
        &host,
    );
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &router, &host, ChecksumMode::Full).unwrap(),
        redirect
    );
}

#[test]
fn ndp_validity() {
    let host = a("fe80::5054:ff:fe12:3456");
    let u = Ipv6Addr::UNSPECIFIED;
    let snm = solicited_node(&a("fe80::2"));
    // DAD probe: from ::, to the solicited-node group, no SLLAO: fine.
    let dad = Icmpv6Repr::NeighborSolicit {
        target_addr: a("fe80::2"),
        options: &[],
    };
    let mut buf = [0u8; 24];
    dad.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &u, &snm);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &u, &snm, ChecksumMode::Full).unwrap(),
        dad
    );
    // from :: to a unicast address: invalid
    dad.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &u, &host);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &u, &host, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
    // multicast target
    let bad = Icmpv6Repr::NeighborSolicit {
        target_addr: a("ff02::1"),
        options: &[],
    };
    bad.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &host, &snm);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &host, &snm, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
    // solicited NA to a multicast destination
    let na = Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_: false,
        target_addr: host,
        options: &[],
    };
    let all = a("ff02::1");
    na.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), &host, &all);
    let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &host, &all, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
    // non-zero code
    let mut ns = crate::ipv6::tests::LINUX_NS;
    ns[41] = 1;
    let (s, d) = (a("fe80::5054:ff:fe12:3456"), a("ff02::1:ff00:2"));
    Icmpv6Packet::new_unchecked(&mut ns[40..]).fill_checksum(&s, &d);
    let p = Icmpv6Packet::new_checked(&ns[40..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn ndp_option_length_zero_and_overrun() {
    let (s, d) = (a("fe80::5054:ff:fe12:3456"), a("ff02::1:ff00:2"));
    let mut ns = crate::ipv6::tests::LINUX_NS;
    ns[65] = 0; // option length 0
    Icmpv6Packet::new_unchecked(&mut ns[40..]).fill_checksum(&s, &d);
    let p = Icmpv6Packet::new_checked(&ns[40..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
    let mut ns = crate::ipv6::tests::LINUX_NS;
    ns[65] = 2; // 16 bytes, only 8 present
    Icmpv6Packet::new_unchecked(&mut ns[40..]).fill_checksum(&s, &d);
    let p = Icmpv6Packet::new_checked(&ns[40..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::Truncated
    );
}

#[test]
fn truncated_at_every_length() {
    let (s, d) = (a("fe80::5054:ff:fe12:3456"), a("ff02::1:ff00:2"));
    let ns = &crate::ipv6::tests::LINUX_NS[40..];
    for len in 0..HEADER_LEN {
        assert_eq!(
            Icmpv6Packet::new_checked(&ns[..len]).unwrap_err(),
            Error::Truncated
        );
    }
    // shorter than the NS fixed part (24): the message is rejected
    for len in HEADER_LEN..24 {
        let mut b = ns[..len].to_vec();
        Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&s, &d);
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
            Error::Truncated,
            "{len}"
        );
        assert_eq!(p.target_addr().octets().len(), 16);
    }
    // a quoted header shorter than 40 bytes
    let mut b = [0u8; 30];
    b[0] = 1;
    b[8] = 0x60;
    Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&s, &d);
    let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::Truncated
    );
}

#[test]
fn bad_checksum() {
    let (s, d) = (a("fe80::5054:ff:fe12:3456"), a("ff02::1:ff00:2"));
    let mut ns = crate::ipv6::tests::LINUX_NS;
    ns[71] ^= 0xff;
    let p = Icmpv6Packet::new_checked(&ns[40..]).unwrap();
    assert!(!p.verify_checksum(&s, &d));
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::BadChecksum
    );
    assert!(Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Offload).is_ok());
}

#[test]
fn unsupported_types() {
    let (s, d) = (a("fe80::1"), a("ff02::1"));
    let mut b = [130u8, 0, 0, 0, 0, 0, 0, 0];
    Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&s, &d);
    let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
    assert_eq!(
        Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::Unsupported
    );
}

#[test]
fn fuzz_no_panic() {
    let (s, d) = (a("fe80::5054:ff:fe12:3456"), a("ff02::1:ff00:2"));
    let ns = &crate::ipv6::tests::LINUX_NS[40..];
    crate::test_util::fuzz(12, 5000, ns, |b| {
        if b.len() >= 8 && b[3] & 1 == 0 {
            Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&s, &d);
        }
        // make the type an interesting one most of the time
        if b.len() >= 8 && b[2] & 1 == 0 {
            const TYPES: [u8; 11] = [1, 2, 3, 4, 128, 129, 133, 134, 135, 136, 137];
            b[0] = TYPES[usize::from(b[4]) % TYPES.len()];
            b[1] = 0;
            Icmpv6Packet::new_unchecked(&mut b[..]).fill_checksum(&s, &d);
        }
        if let Ok(p) = Icmpv6Packet::new_checked(&b[..]) {
            let _ = Icmpv6Repr::parse(&p, &s, &d, ChecksumMode::Full).map(|r| r.lladdr());
            let _ = Icmpv6Repr::parse(&p, &Ipv6Addr::UNSPECIFIED, &d, ChecksumMode::Offload);
            let _ = (
                p.ndp_options(),
                p.target_addr(),
                p.redirect_dst_addr(),
                p.retrans_time(),
            );
        }
    });
}
