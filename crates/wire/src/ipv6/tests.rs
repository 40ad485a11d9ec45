use super::*;
use std::vec::Vec;

/// A Linux neighbor solicitation: fe80::5054:ff:fe12:3456 asks for
/// fe80::2 (sent to its solicited-node group ff02::1:ff00:2), hop limit 255,
/// with a source link-layer address option 52:54:00:12:34:56.
pub(crate) const LINUX_NS: [u8; 72] = [
    0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x02, 0x87, 0x00, 0x72, 0x20, 0x00, 0x00, 0x00, 0x00,
    0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
    0x01, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
];

fn ns_repr() -> Ipv6Repr {
    Ipv6Repr {
        src_addr: "fe80::5054:ff:fe12:3456".parse().unwrap(),
        dst_addr: "ff02::1:ff00:2".parse().unwrap(),
        next_header: IpProtocol::Icmpv6,
        payload_len: 32,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    }
}

#[test]
fn parse_linux_ns() {
    let p = Ipv6Packet::new_checked(&LINUX_NS[..]).unwrap();
    assert_eq!(p.version(), 6);
    assert_eq!(p.payload_len(), 32);
    assert_eq!(p.next_header(), IpProtocol::Icmpv6);
    assert_eq!(p.hop_limit(), 255);
    assert_eq!(p.payload().len(), 32);
    assert_eq!(Ipv6Repr::parse(&p).unwrap(), ns_repr());
    let chain = p.header_chain().unwrap();
    assert_eq!(
        chain,
        Ipv6HeaderChain {
            next_header: IpProtocol::Icmpv6,
            offset: 0,
            fragment: None,
            next_header_at: 6,
        }
    );
}

#[test]
fn round_trip() {
    let mut repr = ns_repr();
    let mut buf = [0u8; 72];
    let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
    repr.emit(&mut p);
    p.payload_mut().copy_from_slice(&LINUX_NS[40..]);
    assert_eq!(buf, LINUX_NS);
    repr.traffic_class = 0xb8;
    repr.flow_label = 0xabcde;
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
    assert_eq!(buf[..4], [0x6b, 0x8a, 0xbc, 0xde]);
    let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(Ipv6Repr::parse(&p).unwrap(), repr);
    assert_eq!(p.traffic_class(), 0xb8);
    assert_eq!(p.flow_label(), 0xabcde);
}

#[test]
fn truncated_at_every_length() {
    for len in 0..LINUX_NS.len() {
        assert_eq!(
            Ipv6Packet::new_checked(&LINUX_NS[..len]).unwrap_err(),
            Error::Truncated
        );
    }
}

#[test]
fn payload_len_beyond_buffer() {
    let mut b = LINUX_NS;
    b[5] = 33;
    assert_eq!(
        Ipv6Packet::new_checked(&b[..]).unwrap_err(),
        Error::Truncated
    );
    // a longer buffer (padding) is fine
    let mut v = LINUX_NS.to_vec();
    v.extend_from_slice(&[0; 6]);
    let p = Ipv6Packet::new_checked(&v[..]).unwrap();
    assert_eq!(p.payload().len(), 32);
    assert_eq!(p.into_payload().len(), 32);
}

#[test]
fn wrong_version() {
    let mut b = LINUX_NS;
    b[0] = 0x40;
    assert_eq!(
        Ipv6Packet::new_checked(&b[..]).unwrap_err(),
        Error::Malformed
    );
}

/// Payload: Hop-by-Hop (Router Alert + PadN), Destination Options (Pad1 x6),
/// Fragment (offset 1448, M), then 4 bytes of UDP data.
fn chained_payload() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&[60, 0, 5, 2, 0, 0, 1, 0]); // HBH -> DestOpts, RA, PadN(0)
    v.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 0]); // DestOpts -> Frag, Pad1 x6
    let frag = Ipv6FragmentRepr {
        next_header: IpProtocol::Udp,
        frag_offset: 1448,
        more_frags: true,
        ident: 0xdead_beef,
    };
    let mut f = [0u8; 8];
    frag.emit(&mut Ipv6FragmentHeader::new_unchecked(&mut f[..]));
    assert_eq!(f, [17, 0, 0x05, 0xa9, 0xde, 0xad, 0xbe, 0xef]);
    v.extend_from_slice(&f);
    v.extend_from_slice(&[1, 2, 3, 4]);
    v
}

#[test]
fn walk_chain() {
    let v = chained_payload();
    let c = walk_extension_headers(IpProtocol::HopByHop, &v).unwrap();
    assert_eq!(c.next_header, IpProtocol::Udp);
    assert_eq!(c.offset, 24);
    let f = c.fragment.unwrap();
    assert_eq!(
        f,
        Ipv6FragmentRepr {
            next_header: IpProtocol::Udp,
            frag_offset: 1448,
            more_frags: true,
            ident: 0xdead_beef
        }
    );
    assert!(!f.is_atomic());
    let h = Ipv6FragmentHeader::new_checked(&v[16..]).unwrap();
    assert_eq!(h.payload(), &[1, 2, 3, 4]);
    assert_eq!(Ipv6FragmentRepr::parse(&h).unwrap(), f);
}

#[test]
fn walk_routing_header() {
    // Routing type 2 with segments left 0: skipped.
    let mut v = std::vec![6, 2, 2, 0, 0, 0, 0, 0];
    v.extend_from_slice(&[0; 16]);
    let c = walk_extension_headers(IpProtocol::Ipv6Route, &v).unwrap();
    assert_eq!((c.next_header, c.offset), (IpProtocol::Tcp, 24));
    v[3] = 1;
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Route, &v).unwrap_err(),
        Error::Unsupported
    );
}

#[test]
fn ext_header_length_overrun() {
    let v = chained_payload();
    // DestOpts claims 16 bytes more than it has
    let mut w = v.clone();
    w[9] = 200;
    assert_eq!(
        walk_extension_headers(IpProtocol::HopByHop, &w).unwrap_err(),
        Error::Truncated
    );
    // every truncation of the chain errors (never panics)
    for len in 0..24 {
        assert!(
            walk_extension_headers(IpProtocol::HopByHop, &v[..len]).is_err(),
            "{len}"
        );
    }
}

#[test]
fn option_overrun_and_discard() {
    // PadN claims 7 bytes, only 4 remain in the header
    let v = [17u8, 0, 1, 7, 0, 0, 0, 0];
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Opts, &v).unwrap_err(),
        Error::Malformed
    );
    // Type byte at the very end without its length byte
    let v = [17u8, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Opts, &v).unwrap_err(),
        Error::Malformed
    );
    // unknown option with action 01 (discard)
    let v = [17u8, 0, 0x41, 2, 0, 0, 0, 0];
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Opts, &v).unwrap_err(),
        Error::Unsupported
    );
    // unknown option with action 00 (skip)
    let v = [17u8, 0, 0x3e, 4, 0, 0, 0, 0];
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Opts, &v)
            .unwrap()
            .next_header,
        IpProtocol::Udp
    );
}

#[test]
fn hop_by_hop_not_first() {
    let v = [0u8, 0, 1, 4, 0, 0, 0, 0, 17, 0, 1, 4, 0, 0, 0, 0];
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Opts, &v).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn too_many_headers() {
    let mut v = Vec::new();
    for _ in 0..MAX_EXTENSION_HEADERS {
        v.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
    }
    v.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    assert_eq!(
        walk_extension_headers(IpProtocol::Ipv6Opts, &v).unwrap_err(),
        Error::Unsupported
    );
    // exactly the limit is fine
    let c = walk_extension_headers(IpProtocol::Ipv6Opts, &v[8..]).unwrap();
    assert_eq!((c.next_header, c.offset), (IpProtocol::Udp, 64));
}

#[test]
fn no_next_header() {
    let c = walk_extension_headers(IpProtocol::Ipv6NoNxt, &[]).unwrap();
    assert_eq!((c.next_header, c.offset), (IpProtocol::Ipv6NoNxt, 0));
}

#[test]
fn quoted_header() {
    let (r, rest) = Ipv6Repr::parse_quoted(&LINUX_NS[..48]).unwrap();
    assert_eq!(r, ns_repr());
    assert_eq!(rest.len(), 8);
    for len in 0..40 {
        assert_eq!(
            Ipv6Repr::parse_quoted(&LINUX_NS[..len]).unwrap_err(),
            Error::Truncated
        );
    }
}

#[test]
fn fuzz_no_panic() {
    crate::test_util::fuzz(9, 4000, &LINUX_NS, |b| {
        let _ = Ipv6Repr::parse_quoted(b);
        if let Ok(p) = Ipv6Packet::new_checked(&b[..]) {
            let _ = Ipv6Repr::parse(&p);
            let _ = p.header_chain();
        }
    });
    let chain = chained_payload();
    crate::test_util::fuzz(10, 4000, &chain, |b| {
        for first in [
            IpProtocol::HopByHop,
            IpProtocol::Ipv6Opts,
            IpProtocol::Ipv6Route,
            IpProtocol::Ipv6Frag,
        ] {
            let _ = walk_extension_headers(first, b);
        }
        if let Ok(h) = Ipv6ExtHeader::new_checked(&b[..]) {
            let _ = (h.data(), h.next_header());
        }
        if let Ok(h) = Ipv6FragmentHeader::new_checked(&b[..]) {
            let _ = (Ipv6FragmentRepr::parse(&h), h.payload());
        }
    });
}

#[test]
fn fragment_and_ext_header_truncated() {
    let v = chained_payload();
    for len in 0..8 {
        assert_eq!(
            Ipv6FragmentHeader::new_checked(&v[16..16 + len]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6ExtHeader::new_checked(&v[..len]).unwrap_err(),
            Error::Truncated
        );
    }
    let h = Ipv6ExtHeader::new_checked(&v[..8]).unwrap();
    assert_eq!(h.next_header(), IpProtocol::Ipv6Opts);
    assert_eq!(h.header_len(), 8);
    assert_eq!(h.data(), &[5, 2, 0, 0, 1, 0]);
}

#[test]
fn refused_chains_say_where_the_problem_is() {
    let walk = |first, v: &[u8]| walk_extension_headers_reporting(first, v).unwrap_err();
    // DestOpts -> TCP: Pad1, then an unknown option (type 0x85: action 10,
    // "discard and tell even a multicast sender") at payload offset 3, the
    // packet's 43.
    let v = [6, 0, 0, 0x85, 2, 0, 0, 0];
    assert_eq!(
        walk(IpProtocol::Ipv6Opts, &v),
        ExtHeaderError {
            error: Error::Unsupported,
            problem: Some(HeaderProblem {
                code: 2,
                pointer: 43,
                to_multicast: true
            })
        }
    );
    // Action 11: not to multicast.  Action 01: discarded silently.
    let v = [6, 0, 0xc9, 4, 0, 0, 0, 0];
    let e = walk(IpProtocol::Ipv6Opts, &v);
    assert_eq!(
        e.problem.map(|p| (p.pointer, p.to_multicast)),
        Some((42, false))
    );
    let v = [6, 0, 0x49, 4, 0, 0, 0, 0];
    assert_eq!(walk(IpProtocol::Ipv6Opts, &v).problem, None);
    // A routing header with segments left, after an empty DestOpts: its
    // routing type is at payload offset 8 + 2.
    let v = [43, 0, 1, 4, 0, 0, 0, 0, 6, 0, 0, 1, 0, 0, 0, 0];
    let e = walk(IpProtocol::Ipv6Opts, &v);
    assert_eq!(
        e.problem.map(|p| (p.code, p.pointer)),
        Some((0, 40 + 8 + 2))
    );
    // Hop-by-Hop after DestOpts: the DestOpts' next header field named it.
    let v = [0, 0, 1, 4, 0, 0, 0, 0, 6, 0, 1, 4, 0, 0, 0, 0];
    let e = walk(IpProtocol::Ipv6Opts, &v);
    assert_eq!(e.problem.map(|p| (p.code, p.pointer)), Some((1, 40)));
    // Where the upper layer was named: the fixed header, then the last
    // extension header.
    let c = walk_extension_headers_reporting(IpProtocol::Tcp, &[]).unwrap();
    assert_eq!(c.next_header_at, 6);
    let c = walk_extension_headers_reporting(IpProtocol::HopByHop, &chained_payload()).unwrap();
    assert_eq!(c.next_header_at, 40 + 16);
}
