use super::*;
use crate::ipv4::{Ipv4Packet, Ipv4Repr};
use core::net::{Ipv4Addr, Ipv6Addr};

const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

/// A Linux SYN (`curl http://10.0.0.2/` from 10.0.0.1:45678), whole IPv4
/// packet: window 64240, options MSS 1460, SACK-permitted, timestamps, NOP,
/// window scale 7, in Linux's order.
const LINUX_SYN: [u8; 60] = [
    0x45, 0x00, 0x00, 0x3c, 0x7a, 0x51, 0x40, 0x00, 0x40, 0x06, 0xac, 0x68, 0x0a, 0x00, 0x00, 0x01,
    0x0a, 0x00, 0x00, 0x02, // IPv4
    0xb2, 0x6e, 0x00, 0x50, 0x1e, 0x2f, 0x3a, 0x4b, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0,
    0x77, 0x93, 0x00, 0x00, // TCP header
    0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x9a, 0x3b, 0x1c, 0x05, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x03, 0x03, 0x07, // options
];

fn syn_repr() -> TcpRepr<'static> {
    TcpRepr {
        src_port: 45678,
        dst_port: 80,
        flags: TcpFlags::SYN,
        seq_number: SeqNumber::new(0x1e2f_3a4b),
        ack_number: None,
        window_len: 64240,
        window_scale: Some(7),
        max_seg_size: Some(1460),
        sack_permitted: true,
        sack_ranges: [None; 3],
        timestamp: Some((0x9a3b_1c05, 0)),
        urgent_pointer: 0,
        payload: &[],
    }
}

/// 10.0.0.2:80 -> 10.0.0.1:45678, FIN|PSH|ACK with "hi\n", options
/// NOP NOP TS, NOP NOP SACK(1000-2000).
const DATA_FIN: [u8; 47] = [
    0x00, 0x50, 0xb2, 0x6e, 0x55, 0x66, 0x77, 0x88, 0x1e, 0x2f, 0x3a, 0x4c, 0xb0, 0x19, 0x01, 0xf6,
    0x1a, 0x11, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x01, 0x02, 0x03, 0x04, 0x9a, 0x3b, 0x1c, 0x05,
    0x01, 0x01, 0x05, 0x0a, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x07, 0xd0, 0x68, 0x69, 0x0a,
];

fn data_fin_repr() -> TcpRepr<'static> {
    TcpRepr {
        src_port: 80,
        dst_port: 45678,
        flags: TcpFlags::FIN | TcpFlags::PSH | TcpFlags::ACK,
        seq_number: SeqNumber::new(0x5566_7788),
        ack_number: Some(SeqNumber::new(0x1e2f_3a4c)),
        window_len: 502,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [Some((1000, 2000)), None, None],
        timestamp: Some((0x0102_0304, 0x9a3b_1c05)),
        urgent_pointer: 0,
        payload: b"hi\n",
    }
}

#[test]
fn parse_linux_syn() {
    let ip = Ipv4Packet::new_checked(&LINUX_SYN[..]).unwrap();
    let ipr = Ipv4Repr::parse(&ip, ChecksumMode::Full).unwrap();
    assert_eq!(ipr.next_header, IpProtocol::Tcp);
    let (s, d) = (IpAddr::V4(ipr.src_addr), IpAddr::V4(ipr.dst_addr));
    let p = TcpPacket::new_checked(ip.into_payload()).unwrap();
    assert_eq!(p.header_len(), 40);
    assert!(p.syn() && !p.ack() && !p.fin());
    assert_eq!(p.window_len(), 64240);
    assert!(p.verify_checksum(&s, &d));
    assert_eq!(p.segment_len(), 1);
    assert_eq!(p.options().len(), 20);
    let repr = TcpRepr::parse(&p, &s, &d, ChecksumMode::Full).unwrap();
    assert_eq!(repr, syn_repr());
    assert_eq!(repr.segment_len(), 1);
}

#[test]
fn emit_syn_matches_linux() {
    let repr = syn_repr();
    assert_eq!(repr.header_len(), 40);
    assert_eq!(repr.buffer_len(), 40);
    let mut buf = [0u8; 40];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    assert_eq!(buf, LINUX_SYN[20..]);
}

#[test]
fn round_trip_data_fin() {
    let repr = data_fin_repr();
    assert_eq!(repr.buffer_len(), DATA_FIN.len());
    assert_eq!(repr.segment_len(), 4);
    let mut buf = [0u8; 47];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &B,
        &A,
        ChecksumMode::Full,
    );
    assert_eq!(buf, DATA_FIN);
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &B, &A, ChecksumMode::Full).unwrap(),
        repr
    );
    assert_eq!(p.payload(), b"hi\n");
}

#[test]
fn ack_flag_follows_ack_number() {
    let mut repr = TcpRepr::new(1, 2, TcpFlags::ACK | TcpFlags::RST, SeqNumber(5));
    let mut buf = [0u8; 20];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    assert_eq!(buf[13], 0x04);
    repr.ack_number = Some(SeqNumber(9));
    repr.flags = TcpFlags::RST;
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    assert_eq!(buf[13], 0x14);
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    let r = TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap();
    assert_eq!(r.flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(r.ack_number, Some(SeqNumber(9)));
}

#[test]
fn ipv6_checksum_and_offload() {
    let s = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
    let d = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let repr = data_fin_repr();
    let mut buf = [0u8; 47];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &s,
        &d,
        ChecksumMode::Full,
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert!(p.verify_checksum(&s, &d));
    assert!(!p.verify_checksum(&d, &A));
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &s,
        &d,
        ChecksumMode::Offload,
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert!(TcpRepr::parse(&p, &s, &d, ChecksumMode::Offload).is_ok());
    assert_eq!(
        TcpRepr::parse(&p, &s, &d, ChecksumMode::Full).unwrap_err(),
        Error::BadChecksum
    );
    // Complete it as a NIC does.
    let c = !checksum::data(&buf);
    buf[16..18].copy_from_slice(&c.to_be_bytes());
    assert!(TcpPacket::new_checked(&buf[..])
        .unwrap()
        .verify_checksum(&s, &d));
}

#[test]
fn sack_blocks_limited_to_option_space() {
    let mut repr = syn_repr();
    repr.flags = TcpFlags::ACK;
    repr.sack_ranges = [Some((1, 2)), Some((3, 4)), Some((5, 6))];
    // MSS 4 + TS 12 + WS 4 = 20; room for 2 blocks (4 + 16).
    assert_eq!(repr.options_len(), 40);
    assert_eq!(repr.header_len(), 60);
    let mut buf = [0u8; 60];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    let r = TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap();
    assert_eq!(r.sack_ranges, [Some((1, 2)), Some((3, 4)), None]);
    // Timestamps + 3 blocks fill exactly 40 bytes.
    repr.max_seg_size = None;
    repr.window_scale = None;
    repr.sack_permitted = false;
    assert_eq!(repr.options_len(), 40);
    let mut buf = [0u8; 60];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    let r = TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap();
    assert_eq!(r.sack_ranges, repr.sack_ranges);
}

#[test]
fn sack_permitted_without_timestamps() {
    let mut repr = TcpRepr::new(1000, 80, TcpFlags::SYN, SeqNumber(1));
    repr.sack_permitted = true;
    repr.max_seg_size = Some(536);
    let mut buf = [0u8; 28];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    assert_eq!(buf[20..], [2, 4, 2, 0x18, 1, 1, 4, 2]);
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap(),
        repr
    );
}

#[test]
fn window_scale_clamped() {
    let mut seg = [0u8; 40];
    seg.copy_from_slice(&LINUX_SYN[20..]);
    seg[39] = 20;
    let mut p = TcpPacket::new_unchecked(&mut seg[..]);
    p.fill_checksum(&A, &B);
    let p = TcpPacket::new_checked(&seg[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &A, &B, ChecksumMode::Full)
            .unwrap()
            .window_scale,
        Some(14)
    );
}

#[test]
fn truncated_at_every_length() {
    let seg = &LINUX_SYN[20..];
    for len in 0..seg.len() {
        assert_eq!(
            TcpPacket::new_checked(&seg[..len]).unwrap_err(),
            Error::Truncated,
            "{len}"
        );
    }
}

#[test]
fn data_offset_below_five() {
    for off in 0..5u8 {
        let mut seg = [0u8; 40];
        seg.copy_from_slice(&LINUX_SYN[20..]);
        seg[12] = off << 4;
        assert_eq!(
            TcpPacket::new_checked(&seg[..]).unwrap_err(),
            Error::Malformed
        );
    }
}

#[test]
fn data_offset_beyond_buffer() {
    let mut seg = [0u8; 40];
    seg.copy_from_slice(&LINUX_SYN[20..]);
    seg[12] = 0xf0; // 60 bytes
    assert_eq!(
        TcpPacket::new_checked(&seg[..]).unwrap_err(),
        Error::Truncated
    );
}

fn segment_with_options(opts: &[u8; 4]) -> [u8; 24] {
    let mut seg = [0u8; 24];
    seg[..20].copy_from_slice(&DATA_FIN[..20]);
    seg[12] = 6 << 4;
    seg[20..].copy_from_slice(opts);
    TcpPacket::new_unchecked(&mut seg[..]).fill_checksum(&B, &A);
    seg
}

#[test]
fn option_length_zero() {
    let seg = segment_with_options(&[2, 0, 5, 0xb4]);
    let p = TcpPacket::new_checked(&seg[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &B, &A, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn option_length_one() {
    let seg = segment_with_options(&[1, 0xfe, 1, 0]);
    let p = TcpPacket::new_checked(&seg[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &B, &A, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn option_length_overrun() {
    // The timestamp option claims 10 bytes but only 2 remain in the header;
    // the payload bytes after the header must not be read as option data.
    let mut seg = [0u8; 40];
    seg[..24].copy_from_slice(&segment_with_options(&[1, 1, 8, 10]));
    TcpPacket::new_unchecked(&mut seg[..]).fill_checksum(&B, &A);
    let p = TcpPacket::new_checked(&seg[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &B, &A, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn bad_checksum() {
    let mut seg = DATA_FIN;
    seg[46] ^= 0x01;
    let p = TcpPacket::new_checked(&seg[..]).unwrap();
    assert!(!p.verify_checksum(&B, &A));
    assert_eq!(
        TcpRepr::parse(&p, &B, &A, ChecksumMode::Full).unwrap_err(),
        Error::BadChecksum
    );
}

#[test]
fn zero_ports() {
    let mut seg = DATA_FIN;
    seg[0] = 0;
    seg[1] = 0;
    TcpPacket::new_unchecked(&mut seg[..]).fill_checksum(&B, &A);
    let p = TcpPacket::new_checked(&seg[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &B, &A, ChecksumMode::Full).unwrap_err(),
        Error::Malformed
    );
}

#[test]
fn setters() {
    let mut seg = DATA_FIN;
    let mut p = TcpPacket::new_unchecked(&mut seg[..]);
    p.set_flags(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
    p.set_urgent_at(7);
    p.set_seq_number(SeqNumber::new(u32::MAX));
    assert_eq!(p.header_len(), 44);
    assert_eq!(p.flags(), TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR);
    assert!(p.ece() && p.cwr() && p.syn());
    assert_eq!(p.urgent_at(), 7);
    assert_eq!(p.seq_number() + 1, SeqNumber(0));
    p.set_header_len(20);
    assert_eq!(p.payload().len(), 27);
    assert!(p.options().is_empty());
}

#[test]
fn fuzz_no_panic() {
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    crate::test_util::fuzz(8, 5000, &LINUX_SYN[20..], |b| {
        if b.len() >= 20 && b[19] & 1 == 0 {
            TcpPacket::new_unchecked(&mut b[..]).fill_checksum(&A, &B);
        }
        if let Ok(p) = TcpPacket::new_checked(&b[..]) {
            let _ = TcpRepr::parse(&p, &A, &B, ChecksumMode::Full);
            let _ = TcpRepr::parse(&p, &v6, &v6, ChecksumMode::Offload);
            let _ = (p.payload(), p.segment_len(), p.options_iter().count());
            let _ = p.into_payload();
        }
    });
}

/// The predicted layout (NOP, NOP, timestamps) is what `emit` writes for
/// an established segment, and `parse` reads it, and every other 12-byte
/// option area holding timestamps, the same as the option walk does.
#[test]
fn timestamp_only_options_take_the_predicted_layout() {
    let mut repr = TcpRepr::new(4000, 80, TcpFlags::ACK | TcpFlags::PSH, SeqNumber(7));
    repr.ack_number = Some(SeqNumber(99));
    repr.window_len = 501;
    repr.timestamp = Some((0x0102_0304, 0xa0b0_c0d0));
    repr.payload = b"data";
    assert_eq!(repr.header_len(), 32);
    let mut buf = [0u8; 36];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    assert_eq!(
        buf[20..32],
        [1, 1, 8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0]
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap(),
        repr
    );

    // Other orders of the same option reach the walk and give the same.
    for opts in [
        [8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0, 1, 1],
        [1, 8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0, 0],
    ] {
        buf[20..32].copy_from_slice(&opts);
        let mut p = TcpPacket::new_unchecked(&mut buf[..]);
        p.fill_checksum(&A, &B);
        let p = TcpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(
            TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap(),
            repr
        );
    }
    // A timestamp option with a wrong length is still an error.
    buf[20..32].copy_from_slice(&[1, 1, 8, 9, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0]);
    let mut p = TcpPacket::new_unchecked(&mut buf[..]);
    p.fill_checksum(&A, &B);
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert!(TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).is_err());
    // With other options beside timestamps, the general path emits them.
    repr.sack_ranges[0] = Some((10, 20));
    assert_eq!(repr.header_len(), 44);
    let mut buf = [0u8; 48];
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &A,
        &B,
        ChecksumMode::Full,
    );
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(
        TcpRepr::parse(&p, &A, &B, ChecksumMode::Full).unwrap(),
        repr
    );
}

#[test]
fn urgent_pointer_round_trip() {
    let (src, dst) = (
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    );
    let mut r = TcpRepr::new(1000, 2000, TcpFlags::ACK | TcpFlags::URG, SeqNumber::new(7));
    r.ack_number = Some(SeqNumber::new(9));
    r.urgent_pointer = 3;
    r.payload = b"abc";
    let mut buf = [0u8; 23];
    assert_eq!(r.buffer_len(), buf.len());
    r.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &src,
        &dst,
        ChecksumMode::Full,
    );
    assert_eq!(&buf[18..20], &[0, 3]);
    let p = TcpPacket::new_checked(&buf[..]).unwrap();
    let back = TcpRepr::parse(&p, &src, &dst, ChecksumMode::Full).unwrap();
    assert_eq!(back.urgent_pointer, 3);
    assert!(back.flags.urg());
    // Without URG the field is neither written nor read.
    r.flags = TcpFlags::ACK;
    r.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        &src,
        &dst,
        ChecksumMode::Full,
    );
    assert_eq!(&buf[18..20], &[0, 0]);
}
