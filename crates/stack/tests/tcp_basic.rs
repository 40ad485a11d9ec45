//! TCP between two stacks over a perfect in-memory wire, time stepping.

use std::net::Ipv4Addr;

use stack::admin::Tunable;
use stack::{
    Duration, IfaceId, InterfaceConfig, RxMeta, Shutdown, SocketError, Stack, StackConfig, TcpState,
};

mod common;
use common::{addr, Net};

const IF0: IfaceId = IfaceId(0);

impl Net {
    /// `a`'s TCP with its fast paths or without (`tcp.fast_path`).
    fn with_fast_path(fast_path: bool) -> Self {
        let mut cfg = StackConfig {
            seed: 1,
            ..StackConfig::default()
        };
        cfg.tcp.fast_path = fast_path;
        Net {
            a: common::stack_on_subnet(1, cfg),
            ..Net::new()
        }
    }
}

#[test]
fn handshake_transfer_and_close() {
    let mut n = Net::new();
    let l = n.b.tcp_listen(addr(2, 80), 16).unwrap();
    let c =
        n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
            .unwrap();
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::SynSent);
    n.run(5);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Established);
    let (s, peer) = n.b.tcp_accept(l).unwrap();
    assert_eq!(peer, n.a.tcp_local_addr(c).unwrap());
    assert_eq!(n.b.tcp_state(s).unwrap(), TcpState::Established);
    let info = n.a.tcp_info(c).unwrap();
    assert!(info.timestamps && info.sack, "options negotiated: {info:?}");

    // 3 MB from a to b, then 1 MB from b to a.
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i * 7 + i / 1000) as u8)
        .collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..20_000 {
        if sent < data.len() {
            match n.a.tcp_send(n.now, c, &data[sent..], &mut n.sa) {
                Ok(k) => sent += k,
                Err(SocketError::WouldBlock) => {}
                Err(e) => panic!("send: {e}"),
            }
        }
        n.run(1);
        loop {
            match n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb) {
                Ok(0) => panic!("early EOF"),
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(SocketError::WouldBlock) => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes intact");
    assert_eq!(
        n.a.counters().tcp_retransmitted_segments,
        0,
        "no loss, no retransmission"
    );

    // Half-close from a: b reads EOF but can still send.
    n.a.tcp_shutdown(n.now, c, Shutdown::Write, &mut n.sa)
        .unwrap();
    n.run(5);
    assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(0));
    assert_eq!(n.b.tcp_state(s).unwrap(), TcpState::CloseWait);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::FinWait2);
    let back = vec![0x5au8; 1_000_000];
    let mut sent = 0;
    let mut got = 0;
    for _ in 0..10_000 {
        if sent < back.len() {
            if let Ok(k) = n.b.tcp_send(n.now, s, &back[sent..], &mut n.sb) {
                sent += k;
            }
        }
        n.run(1);
        while let Ok(k) = n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa) {
            assert!(k > 0 && buf[..k].iter().all(|&x| x == 0x5a));
            got += k;
        }
        if got == back.len() {
            break;
        }
    }
    assert_eq!(got, back.len());
    n.b.tcp_close(n.now, s, &mut n.sb).unwrap();
    n.run(5);
    assert_eq!(n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa), Ok(0));
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::TimeWait);
    n.a.tcp_close(n.now, c, &mut n.sa).unwrap();
    // TIME_WAIT lasts 2 * MSL (60 s by default), then the slot is freed.
    n.run(61_000);
    assert_eq!(n.a.socket_count(), 0);
    assert_eq!(n.b.socket_count(), 1, "only the listener");
}

#[test]
fn connect_to_closed_port_is_refused() {
    let mut n = Net::new();
    let c =
        n.a.tcp_connect(n.now, addr(2, 81), None, &mut n.sa)
            .unwrap();
    n.run(5);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Closed);
    assert_eq!(
        n.a.tcp_take_error(c).unwrap(),
        Some(SocketError::ConnectionRefused)
    );
    assert_eq!(n.b.counters().rx_drop_tcp_no_socket, 1);
    assert_eq!(n.b.counters().tcp_resets_sent, 1);
}

/// An ARP reply from 10.99.1.`last` saying it is now at `mac`, to stack 1.
fn arp_reply_moved(last: u8, mac: [u8; 6]) -> Vec<u8> {
    use wire::arp::{ArpOperation, ArpPacket, ArpRepr};
    use wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, HEADER_LEN};
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: EthernetAddress(mac),
        source_protocol_addr: Ipv4Addr::new(10, 99, 1, last),
        target_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
        target_protocol_addr: Ipv4Addr::new(10, 99, 1, 1),
    };
    let mut frame = vec![0u8; HEADER_LEN + arp.buffer_len()];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src_addr: EthernetAddress(mac),
        dst_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
        ethertype: EtherType::Arp,
    }
    .emit(&mut eth);
    arp.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
    frame
}

/// A connection keeps where its segments go (route and neighbor) between
/// segments; a neighbor that moves, a route that goes and an entry that
/// expires must each be noticed at the next segment.
#[test]
fn cached_path_follows_neighbor_route_and_expiry_changes() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    // Small segments leave at once, whatever is unacknowledged.
    n.a.tcp_set_nodelay(n.now, c, true, &mut n.sa).unwrap();
    let send_and_dst_mac = |n: &mut Net| -> [u8; 6] {
        assert_eq!(n.a.tcp_send(n.now, c, b"ping", &mut n.sa), Ok(4));
        let (_, f) = n.sa.frames.last().expect("a segment went out").clone();
        f[..6].try_into().unwrap()
    };
    assert_eq!(send_and_dst_mac(&mut n), [2, 0, 0, 0, 0, 2]);
    n.run(5);

    // The neighbor moves: the next segment goes to its new address.
    let moved = [2, 0, 0, 0, 0, 0x22];
    n.a.receive(
        n.now,
        IF0,
        &arp_reply_moved(2, moved),
        RxMeta::default(),
        &mut n.sa,
    );
    n.sa.frames.clear();
    assert_eq!(send_and_dst_mac(&mut n), moved, "the moved neighbor");
    n.sa.frames.clear();

    // It moves back (so the wire works again), then the route goes: no
    // segment can leave.
    n.a.receive(
        n.now,
        IF0,
        &arp_reply_moved(2, [2, 0, 0, 0, 0, 2]),
        RxMeta::default(),
        &mut n.sa,
    );
    assert_eq!(send_and_dst_mac(&mut n), [2, 0, 0, 0, 0, 2]);
    n.run(5);
    let subnet = n.a.routes().iter().next().unwrap().dest;
    let route = n.a.routes_mut().remove(subnet).unwrap();
    n.sa.frames.clear();
    let before = n.a.counters().tx_drop_no_route;
    assert_eq!(n.a.tcp_send(n.now, c, b"lost", &mut n.sa), Ok(4));
    assert!(n.sa.frames.is_empty(), "no route, no frame");
    assert_eq!(n.a.counters().tx_drop_no_route, before + 1);
    n.a.routes_mut().add(route).unwrap();

    // The neighbor entry expires (20 minutes by default): the next
    // segment waits for ARP instead of going to the stale address.
    n.now += Duration::from_secs(3600);
    n.sa.frames.clear();
    assert_eq!(n.a.tcp_send(n.now, c, b"late", &mut n.sa), Ok(4));
    let arp_requests =
        n.sa.frames
            .iter()
            .filter(|(_, f)| f[12..14] == [0x08, 0x06])
            .count();
    assert!(
        arp_requests >= 1,
        "an ARP request, not a segment to a stale address"
    );
    assert!(
        n.sa.frames.iter().all(|(_, f)| f[12..14] != [0x08, 0x00]),
        "no IPv4 frame before the neighbor answers"
    );
    // ARP resolves, everything queued arrives in order.
    n.run(3000);
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while let Ok(k) = n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb) {
        got.extend_from_slice(&buf[..k]);
    }
    assert_eq!(&got[..], b"pingpingpinglostlate");
}

/// Rings keep their storage between the round trips of a ping-pong (no
/// give and take every time), and give it back once the connection has
/// been idle for two trim intervals.
#[test]
fn ring_storage_stays_while_busy_and_goes_when_idle() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    let idle = n.a.tcp_memory().0;
    let mut buf = [0u8; 64];
    let mut busy = None;
    let mut cached = None;
    for round in 0..50 {
        assert_eq!(
            n.a.tcp_send(n.now, c, &[round as u8; 64], &mut n.sa),
            Ok(64)
        );
        n.run(1);
        assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(64));
        assert_eq!(n.b.tcp_send(n.now, s, &buf, &mut n.sb), Ok(64));
        n.run(1);
        assert_eq!(n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa), Ok(64));
        assert_eq!(buf, [round as u8; 64]);
        let held = n.a.tcp_memory().0;
        assert!(held > idle, "round {round}: rings hold storage while busy");
        // The same storage every round: none goes back to the cache (which
        // keeps what is left of the batch the first take allocated).
        assert_eq!(*busy.get_or_insert(held), held, "round {round}");
        let cache = n.a.tcp_buffer_cache_bytes();
        assert_eq!(*cached.get_or_insert(cache), cache, "round {round}");
    }
    // Idle: within two trim intervals (100 ms each) the storage is back in
    // the cache, and the connection holds what it held before any data.
    n.run(250);
    assert_eq!(n.a.tcp_memory().0, idle);
    assert_eq!(n.b.tcp_memory().0, idle, "the same on the other side");
    assert!(
        n.a.tcp_buffer_cache_bytes() > cached.unwrap(),
        "the storage went to the cache"
    );
    // The cache decays: storage nobody took for a whole period is freed.
    n.run(1500);
    assert_eq!(n.a.tcp_buffer_cache_bytes(), 0, "the cache decayed");
    assert_eq!(n.b.tcp_buffer_cache_bytes(), 0, "the cache decayed");
    assert!(n.a.tcp_buffer_released_bytes() > 0);
    // Nothing is parked or cached any more: no trim scan wakes the stack.
    assert!(
        n.a.next_deadline()
            .is_none_or(|d| d > n.now + Duration::from_millis(100)),
        "{:?} at {:?}",
        n.a.next_deadline(),
        n.now
    );
}

/// A trim scan looks at the connections whose rings emptied, not at every
/// connection (a million idle connections made each scan the engine's whole
/// work): they join a list when a ring parks and leave it once trimmed.
#[test]
fn trim_scans_look_only_at_connections_whose_rings_emptied() {
    let mut n = Net::new();
    let l = n.b.tcp_listen(addr(2, 80), 64).unwrap();
    // The first one alone: the neighbor is resolved for the others.
    let mut clients = vec![n
        .a
        .tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
        .unwrap()];
    n.run(5);
    for _ in 1..20 {
        clients.push(
            n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
                .unwrap(),
        );
    }
    n.run(5);
    let servers: Vec<_> = (0..20).map(|_| n.b.tcp_accept(l).unwrap().0).collect();
    let idle = (n.a.tcp_memory().0, n.b.tcp_memory().0);
    let mut buf = [0u8; 64];
    // Every connection says hello once: every receive ring (b) and every
    // send ring once acknowledged (a) empties and keeps its storage.
    for &c in &clients {
        assert_eq!(n.a.tcp_send(n.now, c, b"hello", &mut n.sa), Ok(5));
    }
    n.run(1);
    for &s in &servers {
        assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(5));
    }
    // The delayed ACKs come.
    n.run(50);
    assert_eq!(n.b.tcp_trim_listed(), 20, "each read emptied a ring");
    assert_eq!(n.a.tcp_trim_listed(), 20, "each ACK emptied a ring");
    // Two intervals idle: all storage back, the lists empty.
    n.run(250);
    assert_eq!((n.a.tcp_memory().0, n.b.tcp_memory().0), idle);
    assert_eq!((n.a.tcp_trim_listed(), n.b.tcp_trim_listed()), (0, 0));
    // One connection busy: only it is listed.
    assert_eq!(n.a.tcp_send(n.now, clients[7], b"again", &mut n.sa), Ok(5));
    n.run(1);
    assert_eq!(n.b.tcp_recv(n.now, servers[7], &mut buf, &mut n.sb), Ok(5));
    assert_eq!(n.b.tcp_trim_listed(), 1);
    n.run(250);
    assert_eq!(n.b.tcp_memory().0, idle.1);
    // Every ring that parked was claimed by its connection: no scan of
    // every connection was needed.
    assert_eq!(n.a.tcp_trim_full_scans(), 0);
    assert_eq!(n.b.tcp_trim_full_scans(), 0);
}

/// A connection freed while its rings still keep their storage gives it
/// to the cache (the next connection takes it instead of allocating).
#[test]
fn freed_connection_gives_parked_storage_to_the_cache() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    let mut buf = [0u8; 64];
    assert_eq!(n.a.tcp_send(n.now, c, &[7; 64], &mut n.sa), Ok(64));
    n.run(1);
    assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(64));
    let cached = n.b.tcp_buffer_cache_bytes();
    // b resets at once (SO_LINGER 0): the socket is freed right away.
    n.b.tcp_set_linger_zero(s, true).unwrap();
    n.b.tcp_close(n.now, s, &mut n.sb).unwrap();
    assert_eq!(n.b.socket_count(), 1, "only the listener");
    assert!(
        n.b.tcp_buffer_cache_bytes() >= cached + 1024,
        "the parked ring's storage is in the cache: {}",
        n.b.tcp_buffer_cache_bytes()
    );
}

/// A segment whose port is zero matches no connection: header prediction
/// lets it by, and the general path drops it as malformed and counts it.
/// The connection is untouched: the same segment with its port takes.
#[test]
fn segment_with_a_zero_port_is_dropped_and_counted() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    n.a.tcp_send(n.now, c, b"0123456789", &mut n.sa).unwrap();
    let (_, frame) = n.sa.frames.pop().expect("a data segment");
    assert!(n.sa.frames.is_empty());
    let malformed = n.b.counters().rx_drop_tcp_malformed;
    let predicted = n.b.counters().tcp_predicted_segments;
    let meta = RxMeta { csum_partial: true };
    for at in [34, 36] {
        let mut zero = frame.clone();
        zero[at..at + 2].copy_from_slice(&[0, 0]);
        n.b.receive(n.now, IF0, &zero, meta, &mut n.sb);
    }
    assert_eq!(n.b.counters().rx_drop_tcp_malformed, malformed + 2);
    assert_eq!(n.b.counters().tcp_predicted_segments, predicted);
    let mut buf = [0u8; 64];
    assert_eq!(
        n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb),
        Err(SocketError::WouldBlock)
    );
    n.b.receive(n.now, IF0, &frame, meta, &mut n.sb);
    assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(10));
    assert_eq!(&buf[..10], b"0123456789");
}

#[test]
fn tcp_cork_holds_short_segments_until_uncorked() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    n.a.tcp_set_nodelay(n.now, c, true, &mut n.sa).unwrap();
    n.a.tcp_set_cork(n.now, c, true, &mut n.sa).unwrap();
    // Corked: two short writes leave nothing on the wire, even with
    // TCP_NODELAY and nothing in flight.
    n.a.tcp_send(n.now, c, b"head", &mut n.sa).unwrap();
    n.a.tcp_send(n.now, c, b"ers\r\n", &mut n.sa).unwrap();
    assert!(n.sa.frames.is_empty(), "a corked short segment waits");
    // Uncorking sends what waits, in one segment.
    n.a.tcp_set_cork(n.now, c, false, &mut n.sa).unwrap();
    assert_eq!(n.sa.frames.len(), 1);
    n.run(2);
    let mut buf = [0u8; 64];
    assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(9));
    assert_eq!(&buf[..9], b"headers\r\n");
    // A full segment goes even while corked; the short rest waits for the
    // close, whose FIN takes it.
    n.a.tcp_set_cork(n.now, c, true, &mut n.sa).unwrap();
    let mss = n.a.tcp_info(c).unwrap().snd_mss as usize;
    let data = vec![7u8; mss + 100];
    assert_eq!(n.a.tcp_send(n.now, c, &data, &mut n.sa), Ok(data.len()));
    assert_eq!(n.sa.frames.len(), 1, "the full segment");
    n.run(2);
    assert_eq!(
        n.b.tcp_recv(n.now, s, &mut vec![0u8; 4096], &mut n.sb),
        Ok(mss)
    );
    n.a.tcp_close(n.now, c, &mut n.sa).unwrap();
    n.run(2);
    assert_eq!(
        n.b.tcp_recv(n.now, s, &mut vec![0u8; 4096], &mut n.sb),
        Ok(100)
    );
    assert_eq!(
        n.b.tcp_recv(n.now, s, &mut vec![0u8; 4096], &mut n.sb),
        Ok(0)
    );
}

/// [`Net::run`], keeping every frame `a` sends.
fn run_keeping_a_frames(n: &mut Net, steps: usize, kept: &mut Vec<Vec<u8>>) {
    for _ in 0..steps {
        for _ in 0..100 {
            if n.sa.frames.is_empty() && n.sb.frames.is_empty() {
                break;
            }
            for (_, f) in std::mem::take(&mut n.sa.frames) {
                n.b.receive(n.now, IF0, &f, RxMeta::default(), &mut n.sb);
                kept.push(f);
            }
            for (_, f) in std::mem::take(&mut n.sb.frames) {
                n.a.receive(n.now, IF0, &f, RxMeta::default(), &mut n.sa);
            }
        }
        n.now += Duration::from_millis(1);
        n.a.poll(n.now, &mut n.sa);
        n.b.poll(n.now, &mut n.sb);
    }
}

/// A corked short segment is held by the output's fast path without the
/// general one: the wire sees what the general path sends, frame for
/// frame, through nginx's pattern (corked header and body writes, then an
/// uncork) with data in flight, ACKs and the peer's data coming between.
#[test]
fn corked_short_writes_leave_what_the_general_path_leaves() {
    let run = |fast_path: bool| {
        let mut n = Net::with_fast_path(fast_path);
        let (c, s) = n.connect(80);
        let mss = n.a.tcp_info(c).unwrap().snd_mss as usize;
        let mut kept = Vec::new();
        n.a.tcp_set_cork(n.now, c, true, &mut n.sa).unwrap();
        n.a.tcp_send(n.now, c, &[1u8; 100], &mut n.sa).unwrap();
        assert!(n.sa.frames.is_empty(), "a short corked write waits");
        // A full segment goes; the rest waits, with data in flight.
        n.a.tcp_send(n.now, c, &vec![2u8; mss], &mut n.sa).unwrap();
        assert_eq!(n.sa.frames.len(), 1);
        n.a.tcp_send(n.now, c, &[3u8; 50], &mut n.sa).unwrap();
        assert_eq!(n.sa.frames.len(), 1, "the short rest waits");
        // The full segment's ACK comes back; the corked rest still waits.
        run_keeping_a_frames(&mut n, 50, &mut kept);
        assert_eq!(n.a.tcp_info(c).unwrap().unacked, 0);
        // The peer's data arrives between corked writes.
        n.b.tcp_send(n.now, s, b"request", &mut n.sb).unwrap();
        run_keeping_a_frames(&mut n, 1, &mut kept);
        n.a.tcp_send(n.now, c, &[4u8; 5], &mut n.sa).unwrap();
        run_keeping_a_frames(&mut n, 50, &mut kept);
        n.a.tcp_set_cork(n.now, c, false, &mut n.sa).unwrap();
        run_keeping_a_frames(&mut n, 50, &mut kept);
        let mut got = vec![0u8; 4 * mss];
        let len = n.b.tcp_recv(n.now, s, &mut got, &mut n.sb).unwrap();
        let mut want = vec![1u8; 100];
        want.extend(vec![2u8; mss - 100]);
        want.extend([2u8; 100]);
        want.extend([3u8; 50]);
        want.extend([4u8; 5]);
        assert_eq!(&got[..len], &want[..]);
        kept
    };
    let fast = run(true);
    assert!(fast.len() >= 3, "data segments and ACKs: {}", fast.len());
    assert_eq!(
        fast,
        run(false),
        "the same frames with and without the fast path"
    );
}

/// A send split in two (`tcp_send_queue`, then `tcp_send_push` only when
/// it says output must follow: the socket layer, which reads its clock
/// only for the push) leaves on the wire what `tcp_send` leaves, frame for
/// frame, through nginx's pattern (corked writes and a zero-copy commit,
/// ACKs and the peer's data between, the uncork); and a corked short send
/// says no push is due, a full segment that one is.
#[test]
fn a_send_in_two_halves_leaves_what_tcp_send_leaves() {
    let run = |halves: bool| {
        let mut n = Net::new();
        let (c, s) = n.connect(80);
        let mss = n.a.tcp_info(c).unwrap().snd_mss as usize;
        let mut kept = Vec::new();
        let mut pushes = Vec::new();
        let send = |n: &mut Net, data: &[u8], pushes: &mut Vec<bool>| {
            if !halves {
                return n.a.tcp_send(n.now, c, data, &mut n.sa).unwrap();
            }
            let (sent, push) = n.a.tcp_send_queue(c, data).unwrap();
            pushes.push(push);
            if push {
                n.a.tcp_send_push(n.now, c, &mut n.sa).unwrap();
            }
            sent
        };
        let commit = |n: &mut Net, data: &[u8], pushes: &mut Vec<bool>| {
            let region = n.a.tcp_send_reserve(c, data.len()).unwrap();
            region[..data.len()].copy_from_slice(data);
            if !halves {
                return n
                    .a
                    .tcp_send_commit(n.now, c, data.len(), &mut n.sa)
                    .unwrap();
            }
            let (sent, push) = n.a.tcp_send_commit_queue(c, data.len()).unwrap();
            pushes.push(push);
            if push {
                n.a.tcp_send_commit_push(n.now, c, &mut n.sa).unwrap();
            }
            sent
        };
        n.a.tcp_cork(c).unwrap();
        send(&mut n, &[1u8; 100], &mut pushes);
        commit(&mut n, &[5u8; 40], &mut pushes);
        assert!(n.sa.frames.is_empty(), "short corked sends wait");
        // A full segment goes; the rest waits, with data in flight.
        send(&mut n, &vec![2u8; mss], &mut pushes);
        assert_eq!(n.sa.frames.len(), 1);
        send(&mut n, &[3u8; 50], &mut pushes);
        run_keeping_a_frames(&mut n, 50, &mut kept);
        // The peer's data arrives between corked sends.
        n.b.tcp_send(n.now, s, b"request", &mut n.sb).unwrap();
        run_keeping_a_frames(&mut n, 1, &mut kept);
        commit(&mut n, &[4u8; 5], &mut pushes);
        run_keeping_a_frames(&mut n, 50, &mut kept);
        n.a.tcp_set_cork(n.now, c, false, &mut n.sa).unwrap();
        run_keeping_a_frames(&mut n, 50, &mut kept);
        // Uncorked, a short send with nothing in flight goes at once.
        send(&mut n, &[6u8; 7], &mut pushes);
        run_keeping_a_frames(&mut n, 50, &mut kept);
        let mut got = vec![0u8; 4 * mss];
        let len = n.b.tcp_recv(n.now, s, &mut got, &mut n.sb).unwrap();
        let mut want = vec![1u8; 100];
        want.extend([5u8; 40]);
        want.extend(vec![2u8; mss]);
        want.extend([3u8; 50]);
        want.extend([4u8; 5]);
        want.extend([6u8; 7]);
        assert_eq!(&got[..len], &want[..]);
        (kept, pushes)
    };
    let (halves, pushes) = run(true);
    assert_eq!(
        pushes,
        [false, false, true, false, false, true],
        "held while corked and short; pushed for a full segment and uncorked"
    );
    let (whole, _) = run(false);
    assert!(whole.len() >= 3, "data segments and ACKs: {}", whole.len());
    assert_eq!(halves, whole, "the same frames from the sender");
}

#[test]
fn closed_connections_with_data_in_flight_are_unfinished_until_acknowledged() {
    let mut n = Net::new();
    let l = n.b.tcp_listen(addr(2, 80), 16).unwrap();
    let connect = |n: &mut Net| {
        let c =
            n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
                .unwrap();
        n.run(5);
        (c, n.b.tcp_accept(l).unwrap().0)
    };
    let (c, s) = connect(&mut n);
    let (c2, s2) = connect(&mut n);
    assert_eq!(
        n.b.tcp_unfinished_closes(),
        0,
        "open connections are not counted"
    );
    // b sends and closes both; nothing has reached a yet.
    n.b.tcp_send(n.now, s, &[7u8; 3000], &mut n.sb).unwrap();
    n.b.tcp_send(n.now, s2, &[8u8; 3000], &mut n.sb).unwrap();
    n.b.tcp_close(n.now, s, &mut n.sb).unwrap();
    n.b.tcp_close(n.now, s2, &mut n.sb).unwrap();
    assert_eq!(n.b.tcp_unfinished_closes(), 2);
    // The data and FINs arrive and are acknowledged.
    n.run(5);
    assert_eq!(n.b.tcp_unfinished_closes(), 0);
    let mut buf = [0u8; 8192];
    assert_eq!(n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa), Ok(3000));
    assert_eq!(n.a.tcp_recv(n.now, c2, &mut buf, &mut n.sa), Ok(3000));
    // A third: data and FIN lost in flight; at exit it is reset.
    let (c3, s3) = connect(&mut n);
    n.b.tcp_send(n.now, s3, &[9u8; 3000], &mut n.sb).unwrap();
    n.b.tcp_close(n.now, s3, &mut n.sb).unwrap();
    n.sb.frames.clear();
    assert_eq!(n.b.tcp_unfinished_closes(), 1);
    let resets = n.b.counters().tcp_resets_sent;
    assert_eq!(n.b.tcp_abort_unfinished_closes(n.now, &mut n.sb), 1);
    assert_eq!(n.b.counters().tcp_resets_sent, resets + 1);
    assert_eq!(n.b.tcp_unfinished_closes(), 0);
    n.run(5);
    assert_eq!(
        n.a.tcp_state(c3).unwrap(),
        TcpState::Closed,
        "a saw the reset"
    );
}

/// Sends `total` bytes from a to b, b reading everything every step;
/// returns b's receive buffer size at the end.
fn bulk(n: &mut Net, c: stack::SocketHandle, s: stack::SocketHandle, total: usize) -> usize {
    let data = vec![0x3cu8; total];
    let (mut sent, mut got) = (0, 0);
    let mut buf = vec![0u8; 1 << 16];
    for _ in 0..20_000 {
        if sent < total {
            if let Ok(k) = n.a.tcp_send(n.now, c, &data[sent..], &mut n.sa) {
                sent += k;
            }
        }
        n.run(1);
        while let Ok(k) = n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb) {
            if k == 0 {
                break;
            }
            got += k;
        }
        if got == total {
            break;
        }
    }
    assert_eq!(got, total);
    n.b.tcp_recv_buffer(s).unwrap()
}

#[test]
fn receive_buffer_grows_when_the_peer_fills_it_within_a_round_trip() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    let start = n.b.tcp_recv_buffer(s).unwrap();
    assert_eq!(start, 64 << 10, "recvspace");
    let end = bulk(&mut n, c, s, 8 << 20);
    let grown = n.b.counters().tcp_rcvbuf_grown;
    assert!(
        grown > 0 && end > start,
        "grown {grown} times: {start} -> {end}"
    );
    assert!(end <= 2 << 20, "recvbuf_max bounds it: {end}");
    assert!(
        n.b.tcp_info(s).unwrap().rcv_wnd > 65535,
        "the window advertised grew"
    );

    // SO_RCVBUF fixes the size, as with the kernel.
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    n.b.tcp_set_recv_buffer(s, 32 << 10).unwrap();
    assert_eq!(bulk(&mut n, c, s, 4 << 20), 32 << 10);
    assert_eq!(n.b.counters().tcp_rcvbuf_grown, 0);
}

/// The pure ACKs among `frames` (a's TCP segments without payload).
fn pure_acks(frames: &[(stack::IfaceId, Vec<u8>)]) -> usize {
    frames
        .iter()
        .filter(|(_, f)| {
            let ip = &f[14..];
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let doff = usize::from(ip[ihl + 12] >> 4) * 4;
            ip[9] == 6 && total == ihl + doff && ip[ihl + 13] & 0x10 != 0
        })
        .count()
}

#[test]
fn acks_wait_for_the_end_of_the_receive_burst_when_asked() {
    for (per_burst, segments, want) in [(false, 10, 5), (true, 10, 1), (true, 40, 3)] {
        let mut n = Net::new();
        let (c, s) = n.connect(80);
        // A transfer first: a's congestion window and buffers grow.
        bulk(&mut n, c, s, 4 << 20);
        n.run(50);
        n.b.set_ack_per_burst(per_burst);
        // a sends `segments` full segments; b receives them as one burst.
        let data = vec![7u8; 1448 * segments];
        let mut sent = 0;
        while sent < data.len() {
            sent += n.a.tcp_send(n.now, c, &data[sent..], &mut n.sa).unwrap();
        }
        let frames: Vec<_> = std::mem::take(&mut n.sa.frames);
        let data_frames = frames.len();
        assert_eq!(data_frames, segments, "a sent the burst at once");
        for (_, f) in frames {
            n.b.receive(n.now, IF0, &f, RxMeta::default(), &mut n.sb);
        }
        if per_burst {
            assert_eq!(
                pure_acks(&n.sb.frames),
                want - 1,
                "ACKs before the burst's end ({segments} segments)"
            );
            n.b.end_of_burst(n.now, &mut n.sb);
        }
        assert_eq!(
            pure_acks(&n.sb.frames),
            want,
            "per burst {per_burst}, {segments} segments"
        );
        // The last ACK covers everything.
        n.run(2);
        assert_eq!(n.a.tcp_info(c).unwrap().unacked, 0);
    }
}

#[test]
fn a_full_socket_table_refuses_a_handshake_with_a_counter_and_takes_it_once_there_is_room() {
    let mut n = Net::new();
    // b holds three sockets: its listener and two connections.
    n.b = Stack::new(StackConfig {
        seed: 2,
        max_sockets: 3,
        ..StackConfig::default()
    });
    n.b.add_interface(&InterfaceConfig::new(
        "p2",
        [2, 0, 0, 0, 0, 2],
        Ipv4Addr::new(10, 99, 1, 2),
        24,
    ))
    .unwrap();
    let l = n.b.tcp_listen(addr(2, 80), 16).unwrap();
    let mut conns = Vec::new();
    for _ in 0..3 {
        let c =
            n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
                .unwrap();
        n.run(5);
        conns.push(c);
    }
    let states: Vec<_> = conns.iter().map(|&c| n.a.tcp_state(c).unwrap()).collect();
    assert_eq!(
        states,
        [
            TcpState::Established,
            TcpState::Established,
            TcpState::SynSent
        ]
    );
    assert!(n.b.counters().rx_drop_tcp_table_full >= 1);
    assert_eq!(n.b.counters().rx_drop_tcp_listen_overflow, 0);
    // One connection goes: the third's SYN, sent again, is taken.
    let (s0, _) = n.b.tcp_accept(l).unwrap();
    n.a.tcp_close(n.now, conns[0], &mut n.sa).unwrap();
    n.run(5);
    n.b.tcp_close(n.now, s0, &mut n.sb).unwrap();
    n.run(3_000);
    assert_eq!(n.a.tcp_state(conns[2]).unwrap(), TcpState::Established);
}

/// `tcp_poll_view`, the one look-up the socket layer's poll makes, says
/// what each getter it stands for says: with data unacknowledged, with
/// data and an urgent octet waiting (not readable once it is next), after
/// the peer's FIN; while connecting, with data held by a cork, and after
/// the peer's reset (its pending error); a listener is not a connection.
#[test]
fn poll_view_says_what_each_getter_says() {
    fn agrees(st: &Stack, h: stack::SocketHandle) -> stack::TcpPollView {
        let v = st.tcp_poll_view(h).unwrap();
        assert_eq!(v.state, st.tcp_state(h).unwrap());
        assert_eq!(v.recv_queued, st.tcp_recv_queued(h).unwrap());
        assert_eq!(v.recv_readable, st.tcp_recv_readable(h).unwrap());
        assert_eq!(v.urgent, st.tcp_readiness(h).unwrap().urgent);
        assert_eq!(v.send_space, st.tcp_send_space(h).unwrap());
        assert_eq!(v.send_queued, st.tcp_send_queued(h).unwrap());
        assert_eq!(v.error, st.tcp_peek_error(h).unwrap());
        v
    }
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    n.a.tcp_send(n.now, c, &[7u8; 300], &mut n.sa).unwrap();
    n.a.tcp_send_urgent(n.now, c, b"!", &mut n.sa).unwrap();
    let sending = agrees(&n.a, c);
    assert_eq!(sending.send_queued, 301);
    n.run(5);
    let acked = agrees(&n.a, c);
    assert_eq!((acked.send_queued, acked.state), (0, TcpState::Established));
    let urgent = agrees(&n.b, s);
    assert!(urgent.urgent);
    assert_eq!((urgent.recv_queued, urgent.recv_readable), (301, 301));
    // Read up to the mark: the urgent octet is next, queued but not
    // readable for poll.
    let mut buf = [0u8; 300];
    assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(300));
    let at_mark = agrees(&n.b, s);
    assert_eq!((at_mark.recv_queued, at_mark.recv_readable), (1, 0));
    n.a.tcp_shutdown(n.now, c, Shutdown::Write, &mut n.sa)
        .unwrap();
    n.run(5);
    assert_eq!(agrees(&n.b, s).state, TcpState::CloseWait);

    // Connecting, corked, then reset by the peer.
    let l = n.b.tcp_listen(addr(2, 82), 4).unwrap();
    let c =
        n.a.tcp_connect(n.now, addr(2, 82), None, &mut n.sa)
            .unwrap();
    agrees(&n.a, c);
    n.run(5);
    let (s, _) = n.b.tcp_accept(l).unwrap();
    agrees(&n.a, c);
    // Corked: the data waits in a's send buffer.
    n.a.tcp_cork(c).unwrap();
    assert_eq!(n.a.tcp_send(n.now, c, &[7u8; 300], &mut n.sa), Ok(300));
    n.run(5);
    assert_eq!(agrees(&n.a, c).send_queued, 300);
    assert_eq!(agrees(&n.b, s).recv_queued, 0, "held by the cork");
    n.a.tcp_set_cork(n.now, c, false, &mut n.sa).unwrap();
    n.run(5);
    assert_eq!(agrees(&n.b, s).recv_queued, 300);
    // The peer's reset (SO_LINGER 0, close): the state and the pending
    // error.
    n.b.tcp_set_linger_zero(s, true).unwrap();
    n.b.tcp_close(n.now, s, &mut n.sb).unwrap();
    n.run(5);
    let v = agrees(&n.a, c);
    assert_eq!(v.state, TcpState::Closed);
    assert!(v.error.is_some(), "the reset is pending");

    let l = n.b.tcp_listen(addr(2, 81), 4).unwrap();
    assert_eq!(n.b.tcp_poll_view(l), Err(SocketError::NotSupported));
}

/// RFC 1122 4.2.2.13 as Linux applies it: data that reaches a connection
/// shut both ways (not closed) is answered with a reset, and that
/// connection hears of it (ECONNRESET).  The sender, in CLOSE-WAIT (it
/// had the FIN), still reads the end of the stream, and its writes say
/// EPIPE, not ECONNRESET.
#[test]
fn data_to_a_connection_shut_both_ways_resets_it() {
    let mut n = Net::new();
    let (c, s) = n.connect(80);
    n.b.tcp_shutdown(n.now, s, Shutdown::Both, &mut n.sb)
        .unwrap();
    n.run(5);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::CloseWait);
    assert_eq!(n.a.tcp_send(n.now, c, b"lost", &mut n.sa).unwrap(), 4);
    n.run(5);
    assert_eq!(n.b.counters().tcp_aborts_on_data, 1);
    assert_eq!(n.b.tcp_state(s).unwrap(), TcpState::Closed);
    assert_eq!(
        n.b.tcp_take_error(s).unwrap(),
        Some(SocketError::ConnectionReset)
    );
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Closed);
    let mut buf = [0u8; 8];
    assert_eq!(n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa), Ok(0));
    assert_eq!(
        n.a.tcp_take_error(c).unwrap(),
        Some(SocketError::BrokenPipe)
    );
}

/// As Linux (sk_acceptq_is_full), a listener's accept queue holds one
/// more established connection than its backlog: listen(0) takes one,
/// listen(2) three; the next handshake waits (its SYN unanswered, counted)
/// until accept() makes room.  A backlog above `somaxconn` is `somaxconn`,
/// on the first listen() and on a later one.
#[test]
fn the_accept_queue_holds_one_more_than_the_backlog() {
    fn connects(n: &mut Net, count: usize) -> Vec<TcpState> {
        let conns: Vec<_> = (0..count)
            .map(|_| {
                let c =
                    n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
                        .unwrap();
                n.run(5);
                c
            })
            .collect();
        conns.iter().map(|&c| n.a.tcp_state(c).unwrap()).collect()
    }
    use TcpState::{Established as E, SynSent as S};

    for (backlog, somaxconn, queued) in [(0, 4096, 1), (2, 4096, 3), (usize::MAX, 2, 3)] {
        let mut n = Net::new();
        n.b.set_tunable(Tunable::Somaxconn(somaxconn));
        let l = n.b.tcp_listen(addr(2, 80), backlog).unwrap();
        let mut want = vec![E; queued];
        want.push(S);
        assert_eq!(connects(&mut n, queued + 1), want, "backlog {backlog}");
        assert_eq!(n.b.tcp_accept_queue_len(l), Ok(queued));
        assert!(n.b.counters().rx_drop_tcp_listen_overflow >= 1);
        // accept() makes room: the waiting SYN, sent again, is taken.
        n.b.tcp_accept(l).unwrap();
        n.run(3_000);
        assert_eq!(n.b.tcp_accept_queue_len(l), Ok(queued));
    }

    // listen() again with a larger backlog than somaxconn: capped too.
    let mut n = Net::new();
    n.b.set_tunable(Tunable::Somaxconn(1));
    let l = n.b.tcp_listen(addr(2, 80), 0).unwrap();
    n.b.tcp_set_backlog(l, usize::MAX).unwrap();
    assert_eq!(connects(&mut n, 3), [E, E, S]);
}

/// A read in two halves (`tcp_read`, then `tcp_window_update` when it says
/// one is due: the socket layer's read, which reads its clock only then)
/// leaves on the wire what `tcp_recv` leaves, frame for frame, through a
/// receive window that closes and opens again; and a short read says no
/// update is due.
#[test]
fn a_read_in_two_halves_leaves_what_tcp_recv_leaves() {
    let run = |halves: bool| {
        let mut n = Net::new();
        let (c, s) = n.connect(80);
        let mut updates = 0;
        let mut read = |n: &mut Net, buf: &mut [u8]| -> usize {
            if !halves {
                return n.b.tcp_recv(n.now, s, buf, &mut n.sb).unwrap_or(0);
            }
            match n.b.tcp_read(s, buf) {
                Ok((got, due)) => {
                    if due {
                        updates += 1;
                        n.b.tcp_window_update(n.now, s, &mut n.sb).unwrap();
                    }
                    got
                }
                Err(_) => 0,
            }
        };
        n.a.tcp_send(n.now, c, b"short", &mut n.sa).unwrap();
        n.run(5);
        let mut buf = vec![0u8; 1 << 20];
        assert_eq!(read(&mut n, &mut buf), 5);
        let mut b_frames = Vec::new();
        let mut total = 0;
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let (mut sent, mut got) = (0, Vec::new());
        for _ in 0..2000 {
            if got.len() == data.len() {
                break;
            }
            if sent < data.len() {
                sent +=
                    n.a.tcp_send(n.now, c, &data[sent..], &mut n.sa)
                        .unwrap_or(0);
            }
            // The receiver reads only every tenth round: its window
            // closes between.
            total += 1;
            if total % 10 == 0 {
                let k = read(&mut n, &mut buf);
                got.extend_from_slice(&buf[..k]);
            }
            b_frames.extend(n.sb.frames.iter().map(|(_, f)| f.clone()));
            n.run(1);
        }
        assert!(got == data, "all data read, in order");
        (b_frames, updates)
    };
    let (two_halves, updates) = run(true);
    assert!(updates > 0, "the window closed and a read reopened it");
    let (whole, _) = run(false);
    assert_eq!(two_halves, whole, "the same frames from the receiver");
}
