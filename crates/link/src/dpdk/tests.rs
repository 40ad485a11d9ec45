//! Tests of the DPDK link's pure parts; the tests against the kernel over
//! a veth are in tests/dpdk_veth.rs (a process of their own: the EAL starts
//! once per process, and its start must not race with the commands other
//! tests of this crate run).

use super::*;
use crate::test_frames::partial_udp_frame;
use wire::checksum;

#[test]
fn checksum_completion_matches_a_full_checksum() {
    let mut f = partial_udp_frame(
        [2; 6],
        [4; 6],
        [10, 99, 1, 2],
        [10, 99, 1, 1],
        7,
        b"odd-length payload",
    );
    let l4 = port::l4_of(&f).unwrap();
    port::complete_checksum(&mut f, &l4);
    // The one's complement sum over pseudo-header and segment is 0xffff.
    let mut all = Vec::new();
    all.extend_from_slice(&f[26..34]);
    all.extend_from_slice(&[0, 17]);
    all.extend_from_slice(&f[38..40]);
    all.extend_from_slice(&f[34..]);
    assert_eq!(checksum::data(&all), 0xffff);
    // Fragments and non-IPv4 frames are left alone.
    let mut frag = f.clone();
    frag[20] = 0x20; // more fragments
    assert!(port::l4_of(&frag).is_none());
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert!(port::l4_of(&arp).is_none());
}

#[test]
fn af_packet_frames_size_the_mbufs() {
    // What the driver's queue setup asks an mbuf to hold: framesz - 32.
    assert_eq!(port::device_frame_size("net_af_packet", "iface=v0"), 2016);
    assert_eq!(
        port::kernel_interface("net_af_packet", "iface=v0,framesz=16384"),
        Some("v0")
    );
    assert_eq!(
        port::kernel_interface("net_af_xdp", "start_queue=0,iface=v1"),
        Some("v1")
    );
    assert_eq!(port::kernel_interface("net_af_xdp", "iface="), None);
    assert_eq!(port::kernel_interface("net_ixgbe", "iface=v0"), None);
    assert_eq!(
        port::device_frame_size("net_af_packet", "iface=v0,framesz=16384,blocksz=16384"),
        16352
    );
    assert_eq!(
        port::device_frame_size("net_af_packet", "iface=v0,blocksz=2093056, framesz=65408"),
        65376
    );
    assert_eq!(port::device_frame_size("net_ixgbe", "framesz=16384"), 0);
}

#[test]
fn a_tap_port_answers_with_a_unicast_address_other_than_the_kernels() {
    for kernel in [
        [0x22, 0x67, 0xff, 0x2b, 0x65, 0x6d],
        [0x01, 0, 0, 0, 0, 0],
        [0xfe, 0xff, 0xff, 0xff, 0xff, 0xff],
    ] {
        let own = port::tap_peer_mac(kernel);
        assert_ne!(own, kernel);
        assert_eq!(own[0] & 0x01, 0, "{own:02x?} is multicast");
        assert_eq!(
            own[0] & 0x02,
            0x02,
            "{own:02x?} is not locally administered"
        );
    }
}

#[test]
fn ipv6_checksums_are_completed_too() {
    // An IPv6/UDP frame whose checksum field holds the pseudo-header sum.
    let (src, dst) = ([0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], {
        let mut d = [0u8; 16];
        d[0] = 0xfd;
        d[1] = 0x99;
        d[15] = 2;
        d
    });
    let payload = b"odd-length payload over six";
    let udp_len = 8 + payload.len();
    let mut f = vec![2u8; 6];
    f.extend_from_slice(&[4u8; 6]);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&(udp_len as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&7u16.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&checksum::data(&pseudo).to_be_bytes());
    f.extend_from_slice(payload);
    // Ethernet padding after the packet is not summed.
    f.extend_from_slice(&[0xee; 3]);
    let l4 = port::l4_of(&f).expect("IPv6/UDP");
    port::complete_checksum(&mut f, &l4);
    let mut all = pseudo.clone();
    all.extend_from_slice(&f[54..54 + udp_len]);
    assert_eq!(checksum::data(&all), 0xffff);
    // An extension header first: left alone.
    let mut ext = f.clone();
    ext[20] = 0;
    assert!(port::l4_of(&ext).is_none());
}

#[test]
fn tso_segments_fit_the_mtu_as_the_port_counts_it() {
    // The stack's segment size when it fits: IPv4 (20) and TCP with
    // timestamps (32) under a 1500-byte MTU leave 1448.
    assert_eq!(port::tso_segment_size(1448, 1500, 20 + 32), 1448);
    // net_tap counts the Ethernet header too: 14 bytes less.
    assert_eq!(port::tso_segment_size(1448, 1500, 14 + 20 + 32), 1434);
    // A peer's smaller MSS stays; headers larger than the MTU leave 1.
    assert_eq!(port::tso_segment_size(536, 1500, 14 + 40 + 32), 536);
    assert_eq!(port::tso_segment_size(1448, 60, 14 + 40 + 32), 1);
}
