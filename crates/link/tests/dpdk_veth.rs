//! The DPDK link against the kernel: an af_packet virtual device on one end
//! of a veth pair, the kernel's stack on the other end in a namespace.
//!
//! A process of its own: one EAL serves every test here (it starts once
//! per process), without hugepages, and each test adds its own virtual
//! device by hot plug; the tests run one at a time. The hugepage case is
//! tests/dpdk_hugepages.rs.
#![cfg(feature = "dpdk")]

use std::net::UdpSocket;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use link::dpdk::{eal, DpdkLink, DpdkPortConfig, EalConfig};
use link::{Link, PacketBuffer, MAX_BURST};

// The crate's own helpers for tests against the kernel (commands, ARP
// frames, receiving until a count) and its hand-built frames, shared with
// its unit tests; this file uses some of each.
#[allow(dead_code)]
#[path = "../src/test_frames.rs"]
mod test_frames;
#[allow(dead_code)]
#[path = "../src/test_net.rs"]
mod test_net;

use test_frames::partial_udp_frame;
use test_net::{arp_request, is_arp_reply_from, is_root, receive, run, NsVeth};

/// Panics unless the tests run as root: every test here makes kernel
/// interfaces.
fn need_root(what: &str) {
    assert!(is_root(), "this DPDK test needs root ({what})");
}

/// Serializes the tests of this file: the EAL's start and device probes
/// must not race with the commands the tests run.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn test_eal() {
    let cfg = EalConfig {
        no_huge: true,
        no_pci: true,
        // af_packet ports receive into 64 KB mbufs when no framesz is
        // given (16 MB per queue), and ports with scatter gather chains
        // into a pool of their own.
        memory_mb: Some(256),
        file_prefix: Some(format!("ustk-lt{}", std::process::id())),
        log_level: Some(4),
        ..EalConfig::default()
    };
    eal::init(&cfg).expect("EAL");
}

static NEXT_VDEV: AtomicU32 = AtomicU32::new(0);

/// A veth pair (`NsVeth`, named `ud<tag>…`) with our end up, for a
/// virtual device over it, and 10.99.y.1/24 on the kernel's end. The
/// af_packet PMD does not pass the kernel's "checksum not ready" mark on, so
/// a peer that must be understood sends complete checksums: its transmit
/// checksum offload stays on only if `kernel_tx_csum`.
fn veth(tag: &str, y: u8, kernel_tx_csum: bool) -> NsVeth {
    let veth = NsVeth::new(&format!("ud{tag}"), y);
    run(&["ip", "link", "set", &veth.outer, "up"]);
    if !kernel_tx_csum {
        veth.peer_tx_offload(false);
    }
    veth
}

/// Adds virtual device `driver` (its name without the number) with device
/// arguments `args`, a new number each time; returns its port.
fn probe(driver: &str, args: &str) -> u16 {
    let n = NEXT_VDEV.fetch_add(1, Ordering::Relaxed);
    eal::probe_vdev(&format!("{driver}{n},{args}")).unwrap()
}

/// The tests' port configuration: `pool_size` mbufs, 128 descriptors each
/// way, a reserve of 16.
fn port_config(port: u16, pool_size: u32) -> DpdkPortConfig {
    DpdkPortConfig {
        pool_size,
        rx_desc: 128,
        tx_desc: 128,
        reserve: 16,
        ..DpdkPortConfig::new(port)
    }
}

/// A link on a new af_packet virtual device over `veth.outer`, with more
/// device arguments if `extra` is not empty.
fn open_on(veth: &NsVeth, pool_size: u32, extra: &str) -> DpdkLink {
    test_eal();
    let port = probe("net_af_packet", &format!("iface={}{extra}", veth.outer));
    DpdkLink::open(&port_config(port, pool_size)).unwrap()
}

/// Sends `count` ARP requests from `me` asking for `peer` as fast as the
/// link takes them, pausing `pause` between rounds and reading the replies
/// between sends as an engine would; returns how many replies came back
/// within 10 s.
fn arp_round_trips(
    link: &mut DpdkLink,
    (me, peer): ([u8; 4], [u8; 4]),
    count: usize,
    pause: Duration,
) -> usize {
    let mac = link.info().mac;
    let req = arp_request(mac, me, peer);
    let mut to_send = count;
    let mut replies = 0;
    let mut v = Vec::new();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while replies < count && Instant::now() < deadline {
        while to_send > 0 && v.len() < MAX_BURST {
            let mut b = link.alloc_tx().unwrap();
            b.set_len(req.len());
            b.data_mut().copy_from_slice(&req);
            v.push(b);
            to_send -= 1;
        }
        link.tx_burst(&mut v).unwrap();
        link.rx_burst(&mut out, MAX_BURST).unwrap();
        for b in out.drain(..) {
            if is_arp_reply_from(b.data(), mac, peer) {
                replies += 1;
            }
            link.recycle(b);
        }
        link.service().unwrap();
        std::thread::sleep(pause);
    }
    replies
}

/// The link's extra counters by name.
fn extra_stats(link: &DpdkLink) -> std::collections::HashMap<&'static str, u64> {
    link.extra_stats().into_iter().collect()
}

fn send(link: &mut DpdkLink, frame: &[u8], csum_partial: bool) {
    let mut b = link.alloc_tx().expect("an mbuf");
    b.set_len(frame.len());
    b.data_mut().copy_from_slice(frame);
    b.set_csum_partial(csum_partial);
    let mut v = vec![b];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !v.is_empty() {
        assert!(Instant::now() < deadline, "tx never took the frame");
        link.tx_burst(&mut v).unwrap();
    }
}

#[test]
fn bad_port_and_small_pool_are_refused() {
    need_root("kernel interfaces");
    let _serial = serial();
    test_eal();
    test_eal();
    let err = DpdkLink::open(&DpdkPortConfig::new(999)).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("no DPDK port 999"), "{err}");
    let veth = veth("s", 0, true);
    let port = probe("net_af_packet", &format!("iface={}", veth.outer));
    let cfg = DpdkPortConfig {
        pool_size: 100,
        ..DpdkPortConfig::new(port)
    };
    let err = DpdkLink::open(&cfg).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("too small"), "{err}");
}

#[test]
fn veth_arp_udp_and_zero_copy_receive() {
    need_root("kernel interfaces");
    let _serial = serial();
    test_eal();
    let y = 60 + (std::process::id() % 30) as u8;
    let veth = veth("", y, false);
    let mut link = open_on(&veth, 1024, "");
    assert_eq!(link.driver(), "net_af_packet");
    assert_eq!(link.info().mtu, 1500);
    assert!(link.promiscuous());
    let mac = link.info().mac;
    let peer = [10, 99, y, 1];
    let me = [10, 99, y, 2];

    // ARP: a request out, the kernel's reply in.
    send(&mut link, &arp_request(mac, me, peer), false);
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let reply = loop {
        assert!(Instant::now() < deadline, "no ARP reply");
        link.rx_burst(&mut out, MAX_BURST).unwrap();
        if let Some(i) = out
            .iter()
            .position(|b| is_arp_reply_from(b.data(), mac, peer))
        {
            break out.swap_remove(i);
        }
        out.clear();
    };
    // The frame the engine reads is the mbuf's own memory: its bytes lie
    // in the link's mempool, right after the mbuf's headroom. Nothing was
    // copied into another buffer.
    assert!(link.owns_memory_of(&reply));
    let m = reply.as_mbuf_ptr() as usize;
    let d = reply.data().as_ptr() as usize;
    assert!(d > m && d - m < 512, "data at mbuf+{}", d.wrapping_sub(m));
    assert_eq!(DpdkLink::page_size_of(&reply), 4096, "no_huge: 4 KiB pages");
    drop(reply);

    // A datagram from the kernel arrives whole.
    let me_s = format!("10.99.{y}.2");
    veth.peer_neigh(mac);
    let dst = format!("{me_s}:9999");
    veth.in_ns(move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.send_to(b"hello-dpdk", dst.as_str()).unwrap();
    });
    let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
        let d = b.data();
        d.len() >= 42 && d[12..14] == [0x08, 0x00] && d[23] == 17 && d[36..38] == [0x27, 0x0f]
    });
    assert_eq!(got.len(), 1, "no UDP datagram");
    assert!(got[0].0.ends_with(b"hello-dpdk"));

    // A frame left partial goes out with its checksum finished (by the
    // NIC or by the link): the kernel, which verifies it, delivers it.
    let kernel_mac = {
        let out = std::process::Command::new("ip")
            .args(["-n", &veth.ns, "-o", "link", "show", &veth.inner])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let at = text.find("link/ether ").unwrap() + 11;
        let mut m = [0u8; 6];
        for (i, part) in text[at..at + 17].split(':').enumerate() {
            m[i] = u8::from_str_radix(part, 16).unwrap();
        }
        m
    };
    let sock = veth.in_ns(move || {
        let s = UdpSocket::bind(format!("10.99.{y}.1:7777")).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    });
    let frame = partial_udp_frame(kernel_mac, mac, me, peer, 7777, b"finished-by-link");
    send(&mut link, &frame, true);
    let mut buf = [0u8; 64];
    let (n, from) = sock
        .recv_from(&mut buf)
        .expect("the kernel dropped the datagram");
    assert_eq!(&buf[..n], b"finished-by-link");
    assert_eq!(from.to_string(), format!("{me_s}:40000"));
    let extra = extra_stats(&link);
    assert_eq!(
        extra["tx_csum_offloaded"] + extra["tx_csum_software"],
        1,
        "{extra:?}"
    );

    let s = link.stats();
    assert_eq!(s.tx_frames, 2);
    assert!(s.rx_frames >= 2);
    assert_eq!(s.tx_dropped, 0);
    // A frame too short for Ethernet is refused and counted.
    let mut b = link.alloc_tx().unwrap();
    b.set_len(10);
    let mut v = vec![b];
    link.tx_burst(&mut v).unwrap();
    assert!(v.is_empty());
    assert_eq!(link.stats().tx_dropped, 1);
}

#[test]
fn many_frames_and_the_pool_comes_back() {
    need_root("kernel interfaces");
    let _serial = serial();
    test_eal();
    let y = 30 + (std::process::id() % 30) as u8;
    let veth = veth("m", y, false);
    let mut link = open_on(&veth, 512, "");
    let (_, size) = link.pool_levels();
    assert_eq!(size, 512);
    // 300 requests, answered while sending as an engine would; the pool
    // (512 mbufs, 128 RX descriptors) is reused many times over.
    let peers = ([10, 99, y, 2], [10, 99, y, 1]);
    let replies = arp_round_trips(&mut link, peers, 300, Duration::ZERO);
    assert_eq!(replies, 300, "stats {:?}", link.stats());
    assert_eq!(link.stats().tx_frames, 300);
    // Every mbuf is back but those in the RX ring, the reserve and TX
    // descriptors the driver has not yet freed.
    let (avail, _) = link.pool_levels();
    assert!(
        avail >= 512 - 128 - 16 - 128,
        "only {avail} of 512 mbufs back"
    );
}

#[test]
fn reassembled_datagram_fits_an_mbuf() {
    need_root("kernel interfaces");
    let _serial = serial();
    test_eal();
    let y = 90 + (std::process::id() % 9) as u8;
    let veth = veth("f", y, false);
    // The af_packet driver reassembles fragments (fanout defrag): with
    // 16 KiB frames the link's mbufs are 16 KiB too, and a datagram the
    // kernel sent in three fragments arrives whole, in one mbuf.
    let mut link = open_on(&veth, 512, ",framesz=16384,blocksz=16384");
    assert_eq!(link.info().mtu, 1500);
    let me = format!("10.99.{y}.2");
    veth.peer_neigh(link.info().mac);
    let payload: Vec<u8> = (0..4000u32).map(|i| (i * 7) as u8).collect();
    let (dst, p) = (format!("{me}:9998"), payload.clone());
    veth.in_ns(move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        s.send_to(&p, dst.as_str()).unwrap();
    });
    let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
        let d = b.data();
        d.len() >= 42 && d[12..14] == [0x08, 0x00] && d[23] == 17
    });
    assert_eq!(got.len(), 1, "no datagram; stats {:?}", link.stats());
    let frame = &got[0].0;
    assert_eq!(frame.len(), 14 + 20 + 8 + 4000);
    assert_eq!(&frame[42..], &payload[..]);
}

#[test]
fn queue_pairs_each_with_a_pool_of_their_own_on_their_own_threads() {
    need_root("kernel interfaces");
    let _serial = serial();
    test_eal();
    let y = 90 + (std::process::id() % 30) as u8;
    let veth = veth("q", y, false);
    let port = probe("net_af_packet", &format!("iface={},qpairs=2", veth.outer));
    let cfg = port_config(port, 512);
    // More queue pairs than the device has: refused, saying how to get them.
    let err = DpdkLink::open_queues(&cfg, 3).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("qpairs=3"), "{err}");

    let mut links = DpdkLink::open_queues(&cfg, 2).unwrap();
    assert_eq!(links.len(), 2);
    let mac = links[0].info().mac;
    assert_eq!(links[1].info().mac, mac);
    assert_eq!((links[0].queue(), links[1].queue()), (0, 1));
    // Each queue has a pool of the configured size: an mbuf of one is not
    // in the memory of the other.
    let a = links[0].alloc_tx().unwrap();
    let b = links[1].alloc_tx().unwrap();
    assert!(links[0].owns_memory_of(&a) && !links[1].owns_memory_of(&a));
    assert!(links[1].owns_memory_of(&b) && !links[0].owns_memory_of(&b));
    assert_eq!(links[1].pool_levels().1, 512);
    drop((a, b));

    // Datagrams from 64 source ports: the driver's fanout spreads them over
    // both queues, each read by a thread of its own, and none is lost.
    let me = format!("10.99.{y}.2");
    veth.peer_neigh(mac);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = links
        .drain(..)
        .map(|mut link| {
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut got = 0u32;
                let mut out = Vec::new();
                while !stop.load(Ordering::Acquire) {
                    link.rx_burst(&mut out, MAX_BURST).unwrap();
                    for m in out.drain(..) {
                        let d = m.data();
                        if d.len() >= 42 && d[23] == 17 && d[36..38] == [0x23, 0x28] {
                            got += 1;
                        }
                        link.recycle(m);
                    }
                    link.service().unwrap();
                }
                (link.queue(), got, link.stats().rx_frames)
            })
        })
        .collect();
    let dst = format!("{me}:9000");
    veth.in_ns(move || {
        for _ in 0..64 {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            s.send_to(b"to-some-queue", dst.as_str()).unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Release);
    let per_queue: Vec<(u16, u32, u64)> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let total: u32 = per_queue.iter().map(|q| q.1).sum();
    assert_eq!(total, 64, "datagrams per queue {per_queue:?}");
    assert!(
        per_queue.iter().all(|q| q.1 > 0),
        "both queues must receive: {per_queue:?}"
    );
}

#[test]
fn af_xdp_vdev_with_default_arguments_and_a_small_pool_loses_no_frame() {
    need_root("AF_XDP and a veth");
    let _serial = serial();
    test_eal();
    let y = 30 + (std::process::id() % 30) as u8;
    let veth = veth("x", y, true);
    // As people write it: the interface and nothing else.
    let port = probe("net_af_xdp", &format!("iface={}", veth.outer));
    let cfg = port_config(port, 512);
    // The driver's queue setup takes 2048 mbufs for its fill ring: the
    // pool grows by that much instead of failing the setup.
    let mut link = DpdkLink::open(&cfg).expect("net_af_xdp with a pool of 512 mbufs");
    assert_eq!(link.driver(), "net_af_xdp");
    let (_, size) = link.pool_levels();
    assert_eq!(size, 128 + 128 + 2 * MAX_BURST as u32 + 16 + 2048);
    // 600 requests: the mbufs they are sent from and the replies land in
    // go round the whole pool, each of which must lie in the driver's UMEM
    // (a pool whose mbufs skip page boundaries has some outside it, and
    // the kernel drops every frame in those).
    let peers = ([10, 99, y, 2], [10, 99, y, 1]);
    let replies = arp_round_trips(&mut link, peers, 600, Duration::from_micros(200));
    assert_eq!(replies, 600, "stats {:?}", link.stats());
}

/// Sends `frame` out of kernel interface `ifname` through a packet socket.
fn send_raw(ifname: &str, frame: &[u8]) {
    let name = std::ffi::CString::new(ifname).unwrap();
    // SAFETY: plain libc calls on a socket this function owns; the address
    // and frame buffers live across the calls that read them.
    unsafe {
        let ifindex = libc::if_nametoindex(name.as_ptr());
        assert!(ifindex != 0, "no interface {ifname}");
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        assert!(
            fd >= 0,
            "packet socket: {}",
            std::io::Error::last_os_error()
        );
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = ifindex as i32;
        sll.sll_halen = 6;
        sll.sll_addr[..6].copy_from_slice(&frame[..6]);
        let n = libc::sendto(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        assert_eq!(n, frame.len() as isize, "sendto: {err}");
    }
}

#[test]
fn frames_longer_than_an_mbuf_arrive_chained_and_are_gathered_whole() {
    need_root("a TAP interface");
    let _serial = serial();
    test_eal();
    // DPDK's tap driver reads whatever the kernel sends into its TAP, of
    // the TAP's MTU, whatever the port was configured with: with the TAP's
    // MTU raised behind the port's back, a 7000-byte frame does not fit in
    // a 2048-byte mbuf. Without scatter the driver reads it into one mbuf
    // and cuts it; with scatter it comes chained and the link gathers it.
    let ifname = format!("ustkc{}", std::process::id() % 100_000);
    let port = probe("net_tap", &format!("iface={ifname}"));
    let cfg = port_config(port, 512);
    let mut link = DpdkLink::open(&cfg).expect("net_tap");
    assert!(link.offloads().rx_scatter, "net_tap offers scatter receive");
    run(&["ip", "link", "set", &ifname, "mtu", "9000", "up"]);
    let mut frame = vec![0u8; 7000];
    frame[..6].copy_from_slice(&link.info().mac);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental
    for (i, b) in frame[14..].iter_mut().enumerate() {
        *b = (i * 13 % 251) as u8;
    }
    send_raw(&ifname, &frame);
    let got = receive(&mut link, 1, Duration::from_secs(5), |b| {
        b.data().len() >= 14 && b.data()[12..14] == [0x88, 0xb5]
    });
    assert_eq!(got.len(), 1, "no frame; stats {:?}", link.stats());
    assert_eq!(got[0].0.len(), frame.len(), "the frame was cut");
    assert!(
        got[0].0 == frame,
        "the gathered frame differs from the one sent"
    );
    let extra = extra_stats(&link);
    assert!(extra["rx_chained_gathered"] >= 1, "{extra:?}");
    assert_eq!(link.stats().rx_oversize, 0);
}

/// A UDP frame as `partial_udp_frame` makes it, with its checksum whole.
fn whole_udp_frame(dst_mac: [u8; 6], payload: &[u8]) -> Vec<u8> {
    let (src, dst) = ([10, 99, 59, 1], [10, 99, 59, 2]);
    let mut f = partial_udp_frame(dst_mac, [0x02, 0, 0, 0, 0, 0x59], src, dst, 7, payload);
    f[40..42].fill(0);
    let mut covered = Vec::new();
    covered.extend_from_slice(&src);
    covered.extend_from_slice(&dst);
    covered.extend_from_slice(&[0, 17]);
    covered.extend_from_slice(&((f.len() - 34) as u16).to_be_bytes());
    covered.extend_from_slice(&f[34..]);
    let sum = match !wire::checksum::data(&covered) {
        0 => 0xffff,
        s => s,
    };
    f[40..42].copy_from_slice(&sum.to_be_bytes());
    f
}

#[test]
fn frames_the_port_finds_with_a_bad_checksum_are_dropped_and_counted() {
    need_root("a TAP interface");
    let _serial = serial();
    test_eal();
    // net_tap checks IPv4 header and L4 checksums in software when asked
    // (RX offloads IPV4_CKSUM, UDP_CKSUM, TCP_CKSUM) and flags the mbuf
    // GOOD or BAD, as a NIC would.
    let ifname = format!("ustkk{}", std::process::id() % 100_000);
    let port = probe("net_tap", &format!("iface={ifname}"));
    let cfg = port_config(port, 512);
    let mut link = DpdkLink::open(&cfg).expect("net_tap");
    let o = link.offloads();
    assert!(o.rx_udp_csum && o.rx_tcp_csum && o.rx_ipv4_csum, "{o:?}");
    assert!(!o.rx_lro, "net_tap offers no LRO: {o:?}");
    run(&["ip", "link", "set", &ifname, "up"]);
    let mac = link.info().mac;
    let good = whole_udp_frame(mac, b"good checksums");
    let mut bad_l4 = whole_udp_frame(mac, b"bad UDP checksum");
    bad_l4[40] ^= 0x5a;
    let mut bad_ip = whole_udp_frame(mac, b"bad IPv4 header checksum");
    bad_ip[24] ^= 0x5a;
    for f in [&bad_l4, &bad_ip, &good] {
        send_raw(&ifname, f);
    }
    let ours = |b: &link::dpdk::Mbuf| b.data().len() > 42 && b.data()[36..38] == 7u16.to_be_bytes();
    let got: Vec<Vec<u8>> = receive(&mut link, 1, Duration::from_secs(5), ours)
        .into_iter()
        .map(|(frame, _)| frame)
        .collect();
    assert_eq!(got, vec![good.clone()], "stats {:?}", link.stats());
    // Nothing else of ours follows.
    assert!(receive(&mut link, 1, Duration::from_millis(300), ours).is_empty());
    let extra = extra_stats(&link);
    assert_eq!(extra["rx_l4_csum_bad"], 1, "{extra:?}");
    assert_eq!(extra["rx_ip_csum_bad"], 1, "{extra:?}");
    assert!(extra["rx_l4_csum_offloaded"] >= 1, "{extra:?}");
    assert_eq!(extra["rx_lro_frames"], 0);
}
