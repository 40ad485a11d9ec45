//! The tc program against frames (BPF_PROG_TEST_RUN: the kernel runs it
//! on a socket buffer made of the frame, received on loopback, whose MAC
//! address is all zeroes) and its attachment's lifetime. Root only.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use super::*;
use crate::test_net::{is_root, quiet_veth_pair};

const HOST_MAC: [u8; 6] = [0; 6];
const BROADCAST_MAC: [u8; 6] = [0xff; 6];
const OURS4: Ipv4Addr = Ipv4Addr::new(10, 99, 65, 2);
const OTHER4: Ipv4Addr = Ipv4Addr::new(10, 99, 65, 3);
const OURS6: Ipv6Addr = Ipv6Addr::new(0xfd99, 0x65, 0, 0, 0, 0, 0, 2);
const OTHER6: Ipv6Addr = Ipv6Addr::new(0xfd99, 0x65, 0, 0, 0, 0, 0, 3);

fn require_root() {
    assert!(
        is_root(),
        "this test loads and attaches BPF programs: run it as root"
    );
}

fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert_ne!(i, 0, "no interface {name}");
    i
}

/// An Ethernet frame to `dst_mac` with `vlan` tags in it, then `ethertype`
/// and `l3`, padded to 60 bytes.
fn frame(dst_mac: [u8; 6], vlans: &[u16], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = dst_mac.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    for v in vlans {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f.resize(f.len().max(60), 0);
    f
}

/// An IPv4 header (no checksum: the program does not look) and 8 bytes.
fn ipv4(dst: Ipv4Addr) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 99, 65, 1];
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(&[0; 8]);
    h
}

fn ipv6(dst: Ipv6Addr) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
    h.extend_from_slice(&Ipv6Addr::new(0xfd99, 0x65, 0, 0, 0, 0, 0, 1).octets());
    h.extend_from_slice(&dst.octets());
    h.extend_from_slice(&[0; 8]);
    h
}

#[test]
fn drops_unicast_ip_to_its_addresses_and_passes_the_rest() {
    require_root();
    let (na, _nb, _cleanup) = quiet_veth_pair("rxd");
    let p = KernelRxDrop::attach(ifindex(&na)).expect("attach at tcx ingress");
    p.set_addresses(&[OURS4], &[OURS6]).unwrap();
    assert_eq!(p.addresses().unwrap(), (vec![OURS4], vec![OURS6]));

    let verdict = |f: Vec<u8>| p.test_run(&f).expect("BPF_PROG_TEST_RUN");
    let ip4 = 0x0800;
    let ip6 = 0x86dd;
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip4, &ipv4(OURS4))),
        abi::TCX_DROP
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip4, &ipv4(OTHER4))),
        abi::TCX_NEXT
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip6, &ipv6(OURS6))),
        abi::TCX_DROP
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip6, &ipv6(OTHER6))),
        abi::TCX_NEXT
    );
    // Behind one VLAN tag left in the frame.
    assert_eq!(
        verdict(frame(HOST_MAC, &[10], ip4, &ipv4(OURS4))),
        abi::TCX_DROP
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[10], ip6, &ipv6(OURS6))),
        abi::TCX_DROP
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[10], ip4, &ipv4(OTHER4))),
        abi::TCX_NEXT
    );
    // Not behind two.
    assert_eq!(
        verdict(frame(HOST_MAC, &[10, 20], ip4, &ipv4(OURS4))),
        abi::TCX_NEXT
    );
    // Broadcast frames go on (the kernel's own handling of them).
    assert_eq!(
        verdict(frame(BROADCAST_MAC, &[], ip4, &ipv4(OURS4))),
        abi::TCX_NEXT
    );
    // ARP asking for ustack's address goes on.
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 99, 65, 1];
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&OURS4.octets());
    assert_eq!(verdict(frame(HOST_MAC, &[], 0x0806, &arp)), abi::TCX_NEXT);
    // A truncated header goes on, not read past the frame's end (tagged:
    // the kernel's test run refuses an untagged IPv6 frame that short).
    let mut short6 = frame(HOST_MAC, &[10], ip6, &ipv6(OURS6));
    short6.truncate(18 + 39);
    assert_eq!(verdict(short6), abi::TCX_NEXT);

    // The addresses follow the port's.
    p.set_addresses(&[OTHER4], &[]).unwrap();
    assert_eq!(p.addresses().unwrap(), (vec![OTHER4], vec![]));
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip4, &ipv4(OURS4))),
        abi::TCX_NEXT
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip4, &ipv4(OTHER4))),
        abi::TCX_DROP
    );
    assert_eq!(
        verdict(frame(HOST_MAC, &[], ip6, &ipv6(OURS6))),
        abi::TCX_NEXT
    );
}

#[test]
fn one_program_per_interface_and_process_detached_with_its_last_holder() {
    require_root();
    let (na, nb, _cleanup) = quiet_veth_pair("rxq");
    let (ia, ib) = (ifindex(&na), ifindex(&nb));
    assert_eq!(tcx_ingress_programs(ia).unwrap(), Vec::<u32>::new());

    let first = KernelRxDrop::attach(ia).unwrap();
    let second = KernelRxDrop::attach(ia).unwrap();
    assert!(
        Arc::ptr_eq(&first, &second),
        "engines of one process share it"
    );
    let on_a = tcx_ingress_programs(ia).unwrap();
    assert_eq!(on_a.len(), 1, "one program on {na}: {on_a:?}");
    let other = KernelRxDrop::attach(ib).unwrap();
    assert!(!Arc::ptr_eq(&first, &other));
    assert_eq!(tcx_ingress_programs(ib).unwrap().len(), 1);

    drop(first);
    assert_eq!(tcx_ingress_programs(ia).unwrap(), on_a, "still held");
    drop(second);
    assert_eq!(
        programs_once_settled(ia),
        Vec::<u32>::new(),
        "detached with its last holder"
    );
    drop(other);
    assert_eq!(programs_once_settled(ib), Vec::<u32>::new());
}

/// The tcx programs of `ifindex` once none is left, or after 2 s. The
/// BPF link goes with its last descriptor, and another test of this
/// process that spawns a command holds a copy of every descriptor between
/// its fork and its exec (close-on-exec acts only at the exec), so the
/// detach may come a moment later.
fn programs_once_settled(ifindex: u32) -> Vec<u32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let ids = tcx_ingress_programs(ifindex).unwrap();
        if ids.is_empty() || std::time::Instant::now() > deadline {
            return ids;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn an_af_packet_link_attaches_it_and_feeds_it_the_port_addresses() {
    use crate::{AfPacketLink, Link, PacketPool, RingConfig};
    require_root();
    let (na, _nb, _cleanup) = quiet_veth_pair("rxl");
    let ia = ifindex(&na);

    let off = RingConfig {
        kernel_rx_drop: false,
        ..RingConfig::default()
    };
    let link = AfPacketLink::open(&na, PacketPool::new(2048, 64), &off).unwrap();
    assert_eq!(tcx_ingress_programs(ia).unwrap(), Vec::<u32>::new());
    assert!(!link.serve_addresses(&[OURS4], &[]).unwrap(), "no filter");
    assert_eq!(link.stats().kernel_rx_drop_refused, 0);
    drop(link);

    let link = AfPacketLink::open(&na, PacketPool::new(2048, 64), &RingConfig::default()).unwrap();
    assert_eq!(tcx_ingress_programs(ia).unwrap().len(), 1);
    assert_eq!(link.stats().kernel_rx_drop_refused, 0);
    assert!(link.serve_addresses(&[OURS4], &[OURS6]).unwrap());
    let p = KernelRxDrop::attach(ia).unwrap();
    assert_eq!(p.addresses().unwrap(), (vec![OURS4], vec![OURS6]));
    assert_eq!(
        p.test_run(&frame(HOST_MAC, &[], 0x0800, &ipv4(OURS4)))
            .unwrap(),
        abi::TCX_DROP
    );

    // An address the kernel holds itself is left out: its own frames to
    // it go on reaching it.
    crate::test_net::run(&["ip", "addr", "add", "10.99.65.3/32", "dev", &na]);
    assert!(link.serve_addresses(&[OURS4, OTHER4], &[OURS6]).unwrap());
    assert_eq!(p.addresses().unwrap(), (vec![OURS4], vec![OURS6]));

    drop(p);
    drop(link);
    assert_eq!(programs_once_settled(ia), Vec::<u32>::new());
}

#[test]
fn a_refused_attachment_is_an_error_and_attach_or_say_gives_none() {
    require_root();
    // No such interface: the kernel refuses the BPF link (ENODEV).
    let e = KernelRxDrop::attach(0x7fff_fff0).unwrap_err();
    assert!(
        e.to_string().contains("attaching at tc ingress"),
        "the error says what was refused: {e}"
    );
    assert!(attach_or_say(0x7fff_fff0, "nosuch").is_none());
}
