//! Initial sequence numbers (RFC 6528) and ephemeral ports (RFC 6056).

use std::net::Ipv4Addr;

use crate::harness::{check, seg, Script, PEER_IP, PEER_PORT};

/// RFC 6528 3: ISN = M + F(4-tuple, secret): connections to different
/// 4-tuples at the same instant get unrelated ISNs; the same 4-tuple
/// later gets an ISN advanced by the 4 µs clock M.
#[test]
pub fn isn_per_four_tuple() {
    let mut s = Script::new();
    // The same 4-tuple one second apart (the first connection aborted):
    // M moved 1 s / 4 us = 250000.
    let c = s.connect_from(Some(30_001), PEER_IP, PEER_PORT);
    s.expect(seg().syn().seq(0));
    let first = s.isn();
    s.stack
        .tcp_abort(s.now, c, &mut stack::VecSink::default())
        .unwrap();
    s.advance(1000);
    s.connect_from(Some(30_001), PEER_IP, PEER_PORT);
    s.expect(seg().syn().seq(0));
    let second = s.isn();
    check!(
        s,
        second.wrapping_sub(first) == 250_000,
        "ISN moved {} in 1 s",
        second.wrapping_sub(first)
    );
    // Other 4-tuples at the same instant: unrelated ISNs.
    let mut isns = vec![second];
    for p in 1..4u16 {
        s.connect_from(Some(30_001), PEER_IP, PEER_PORT + p);
        s.expect(seg().syn().seq(0));
        isns.push(s.isn());
    }
    let mut sorted = isns.clone();
    sorted.sort_unstable();
    sorted.dedup();
    check!(s, sorted.len() == 4, "distinct ISNs: {isns:?}");
    // Not a fixed step apart either: no global counter.
    let steps: Vec<u32> = isns.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    check!(
        s,
        steps.windows(2).any(|w| w[0] != w[1]),
        "ISNs in steps: {isns:?}"
    );
}

/// RFC 6056 3.3.4: ephemeral ports come from the configured range,
/// differ between destinations (no global counter), and differ between
/// successive connections to one destination.
#[test]
pub fn ephemeral_ports() {
    let mut s = Script::with_config(|c| {
        c.tcp.port_first = 20_000;
        c.tcp.port_last = 20_999;
    });
    let mut ports = Vec::new();
    for d in 0..10u8 {
        let ip = Ipv4Addr::new(10, 99, 1, 10 + d);
        s.connect_to(ip, 80);
        s.expect(seg().syn().seq(0).peer_ip(ip).peer_port(80));
        ports.push(s.flow.0);
    }
    check!(
        s,
        ports.iter().all(|p| (20_000..=20_999).contains(p)),
        "ports in range: {ports:?}"
    );
    let mut sorted = ports.clone();
    sorted.sort_unstable();
    sorted.dedup();
    check!(
        s,
        sorted.len() >= 9,
        "ports differ by destination: {ports:?}"
    );
    let consecutive = ports.windows(2).filter(|w| w[1] == w[0] + 1).count();
    check!(s, consecutive < 3, "not a global counter: {ports:?}");
    let mut same = Vec::new();
    for _ in 0..3 {
        s.connect_to(PEER_IP, 80);
        s.expect(seg().syn().seq(0).peer_port(80));
        same.push(s.flow.0);
    }
    check!(
        s,
        same[0] != same[1] && same[1] != same[2] && same[0] != same[2],
        "successive connections to one destination: {same:?}"
    );
}
