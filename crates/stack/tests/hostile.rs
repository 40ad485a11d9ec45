//! Hostile input: thousands of crafted bad frames.  None may panic, each must
//! end in exactly one outcome counter, and the stack must work right after.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::rand::Rng;
use stack::{Duration, IfaceId, Instant, InterfaceConfig, RxMeta, Stack, StackConfig, VecSink};

const IF0: IfaceId = IfaceId(0);
const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const OUR_IP: [u8; 4] = [10, 99, 1, 2];
const PEER_IP: [u8; 4] = [10, 99, 1, 1];

fn target() -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: 99,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        "p0",
        OUR_MAC,
        Ipv4Addr::from(OUR_IP),
        24,
    ))
    .unwrap();
    s
}

fn csum(bytes: &[u8]) -> u16 {
    !wire::checksum::data(bytes)
}

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&OUR_MAC);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A well-formed IPv4 header for `payload`, which the caller then breaks.
fn ipv4(proto: u8, ident: u16, frag: u16, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&ident.to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&PEER_IP);
    h.extend_from_slice(&OUR_IP);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

fn fix_ipv4_checksum(p: &mut [u8]) {
    let ihl = usize::from(p[0] & 0xf) * 4;
    if ihl >= 20 && p.len() >= ihl {
        p[10] = 0;
        p[11] = 0;
        let c = csum(&p[..ihl]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

/// `base` plus up to `extra - 1` random bytes.
fn random_bytes(rng: &mut Rng, base: usize, extra: u64) -> Vec<u8> {
    let n = base + rng.below(extra) as usize;
    (0..n).map(|_| rng.next_u32() as u8).collect()
}

/// One hostile frame of kind `k`.
fn hostile(rng: &mut Rng, k: u64) -> Vec<u8> {
    match k {
        // Random bytes, sometimes addressed to us.
        0 => {
            let mut f = random_bytes(rng, 0, 1600);
            if f.len() >= 6 && rng.below(2) == 0 {
                f[..6].copy_from_slice(&OUR_MAC);
            }
            f
        }
        // Truncated Ethernet.
        1 => OUR_MAC[..rng.below(6) as usize]
            .to_vec()
            .into_iter()
            .chain(random_bytes(rng, 0, 8))
            .collect(),
        // IPv4 with a lying total length, IHL or checksum.
        2 => {
            let mut p = ipv4(17, 1, 0, &random_bytes(rng, 0, 100));
            match rng.below(4) {
                0 => p[2..4].copy_from_slice(&(rng.next_u32() as u16).to_be_bytes()),
                1 => p[0] = 0x40 | (rng.below(16) as u8),
                2 => p[10] ^= 0x55,
                _ => p[0] = (rng.next_u32() as u8) & 0xf0 | 5,
            }
            if rng.below(2) == 0 {
                fix_ipv4_checksum(&mut p);
            }
            let cut = rng.below(p.len() as u64 + 1) as usize;
            eth(0x0800, &p[..cut.max(p.len() / 2)])
        }
        // TCP with a lying data offset or truncated header.
        3 => {
            let mut tcp = random_bytes(rng, 20, 40);
            tcp[12] = (rng.below(16) as u8) << 4;
            let cut = rng.below(tcp.len() as u64 + 1) as usize;
            eth(0x0800, &ipv4(6, 2, 0, &tcp[..cut]))
        }
        // UDP with a lying length or checksum.
        4 => {
            let mut udp = random_bytes(rng, 8, 64);
            udp[4..6].copy_from_slice(&(rng.below(200) as u16).to_be_bytes());
            eth(0x0800, &ipv4(17, 3, 0, &udp))
        }
        // ARP with lying lengths or types.
        5 => {
            let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
            arp.extend_from_slice(&PEER_MAC);
            arp.extend_from_slice(&PEER_IP);
            arp.extend_from_slice(&[0; 6]);
            arp.extend_from_slice(&OUR_IP);
            let i = rng.below(8) as usize;
            arp[i] = rng.next_u32() as u8;
            let cut = rng.below(arp.len() as u64 + 1) as usize;
            eth(0x0806, &arp[..cut])
        }
        // Random fragments: random offsets, lengths, flags, ids.
        6 => {
            let len = 8 * (1 + rng.below(20) as usize);
            let frag = (rng.next_u32() as u16) & 0x3fff;
            eth(
                0x0800,
                &ipv4(17, rng.below(64) as u16, frag, &random_bytes(rng, len, 1)),
            )
        }
        // Nested VLAN tags.
        7 => {
            let depth = 1 + rng.below(4) as usize;
            let mut p = Vec::new();
            for _ in 0..depth {
                p.extend_from_slice(&[0, (rng.below(4095) + 1) as u8]);
                p.extend_from_slice(&[0x81, 0x00]);
            }
            p.extend_from_slice(&random_bytes(rng, 0, 64));
            let cut = rng.below(p.len() as u64 + 1) as usize;
            eth(if rng.below(2) == 0 { 0x8100 } else { 0x88a8 }, &p[..cut])
        }
        // IPv6 junk.
        8 => {
            let mut p = random_bytes(rng, 0, 120);
            if let Some(b) = p.first_mut() {
                *b = 0x60 | (*b & 0xf);
            }
            eth(0x86dd, &p)
        }
        // ICMP junk: bad checksums, unknown types, truncated errors.
        _ => {
            let mut icmp = random_bytes(rng, 4, 64);
            icmp[0] = [0u8, 3, 8, 11, 5, 42][rng.below(6) as usize];
            if rng.below(2) == 0 {
                icmp[2] = 0;
                icmp[3] = 0;
                let c = csum(&icmp);
                icmp[2..4].copy_from_slice(&c.to_be_bytes());
            }
            eth(0x0800, &ipv4(1, 4, 0, &icmp))
        }
    }
}

#[test]
fn hostile_frames_are_each_counted_and_nothing_breaks() {
    let mut s = target();
    let mut sink = VecSink::default();
    let mut rng = Rng::new(0x5eed);
    let mut now = Instant::from_secs(1);
    let frames = 20_000;
    for i in 0..frames {
        let kind = i % 10;
        let f = hostile(&mut rng, kind);
        let before = s.counters().rx_outcomes();
        let meta = RxMeta {
            csum_partial: rng.below(8) == 0,
        };
        s.receive(now, IF0, &f, meta, &mut sink);
        assert_eq!(
            s.counters().rx_outcomes(),
            before + 1,
            "frame {i} (kind {kind}) was not counted once: {f:02x?}"
        );
        if i % 1000 == 0 {
            now += Duration::from_millis(100);
            s.poll(now, &mut sink);
        }
        sink.frames.clear();
    }
    let c = s.counters().clone();
    assert_eq!(c.rx_frames, frames);
    assert_eq!(c.rx_outcomes(), frames);
    // Nearly all of it must be dropped; what was accepted is explained by
    // frames that happened to be valid (fragments held, ICMP answered).
    assert!(
        c.rx_drops() > frames * 8 / 10,
        "drops {} of {frames}",
        c.rx_drops()
    );
    let mut reasons = Vec::new();
    c.visit(|name, v| {
        if name.starts_with("rx_drop_") && v > 0 {
            reasons.push(name)
        }
    });
    assert!(
        reasons.len() >= 15,
        "the drops are told apart by reason: {reasons:?}"
    );

    // Held fragments time out and free their memory.
    now += Duration::from_secs(31);
    s.poll(now, &mut sink);
    assert!(s.counters().ipv4_reassembly_timeout > 0);

    // The stack still answers: UDP echo from a peer.
    let h = s
        .udp_bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 7))
        .unwrap();
    let mut udp = vec![0x30, 0x39, 0, 7, 0, 13, 0, 0];
    udp.extend_from_slice(b"alive");
    let f = eth(0x0800, &ipv4(17, 77, 0, &udp));
    s.receive(now, IF0, &f, RxMeta::default(), &mut sink);
    let mut buf = [0u8; 16];
    let got = s.udp_recv_from(h, &mut buf).unwrap();
    assert_eq!(&buf[..got.len], b"alive");
    s.udp_send_to(now, h, got.meta.src, None, b"alive", &mut sink)
        .unwrap();
    assert!(
        !sink.frames.is_empty(),
        "the reply (or its ARP request) left"
    );
}

#[test]
fn fragment_flood_is_bounded() {
    let mut s = target();
    let mut sink = VecSink::default();
    let mut rng = Rng::new(42);
    let now = Instant::from_secs(1);
    for i in 0..50_000u32 {
        // Never completes: only first fragments of distinct datagrams.
        let f = eth(
            0x0800,
            &ipv4(17, i as u16, 0x2000, &random_bytes(&mut rng, 1400, 1)),
        );
        s.receive(now, IF0, &f, RxMeta::default(), &mut sink);
    }
    let c = s.counters();
    assert_eq!(
        c.rx_accept_ipv4_fragment + c.rx_drop_ipv4_frag_no_room,
        50_000
    );
    assert!(
        c.rx_accept_ipv4_fragment <= 1024,
        "net.inet.ip.maxfragpackets bounds the datagrams held"
    );
}
