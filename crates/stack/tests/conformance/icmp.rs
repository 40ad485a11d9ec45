//! ICMP errors about our segments reach their connection (RFC 9293
//! 3.9.2.2, RFC 1122 4.2.3.9, RFC 5927).  The scripts name IPv4 codes;
//! their IPv6 runs inject the ICMPv6 errors that mean the same.

use std::net::Ipv4Addr;

use stack::{SocketError, TcpState};

use crate::harness::{check, seg, Script, PEER_IP};

/// A router between the stack and the peer.
const ROUTER: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 254);

/// RFC 1122 4.2.3.9 (RFC 9293 3.9.2.2): port unreachable in answer to
/// a SYN aborts the connection at once with ECONNREFUSED; no SYN follows.
#[test]
pub fn port_unreachable_refuses_connect() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject_unreachable(PEER_IP, 3);
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionRefused),
        "ECONNREFUSED"
    );
    s.expect_silence(10_000);
}

/// RFC 1122 4.2.3.9 (RFC 9293 3.9.2.2): protocol unreachable in answer
/// to a retransmitted SYN aborts the connection with ECONNREFUSED.
#[test]
pub fn protocol_unreachable_refuses_connect() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.expect_after(1000, seg().syn().seq(0));
    s.inject_unreachable(PEER_IP, 2);
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionRefused),
        "ECONNREFUSED"
    );
    s.expect_silence(10_000);
}

/// RFC 1122 4.2.3.9 (RFC 9293 3.9.2.2): host unreachable is a soft
/// error: the SYN is sent again as if nothing came, and the connection,
/// once it times out, reports EHOSTUNREACH instead of ETIMEDOUT.
#[test]
pub fn host_unreachable_is_soft_and_reported_at_timeout() {
    let mut s = Script::with_config(|c| c.tcp.syn_retries = 2);
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject_unreachable(ROUTER, 1);
    s.expect_state(c, TcpState::SynSent);
    check!(s, s.take_error(c).is_none(), "no error before the timeout");
    s.expect_after(1000, seg().syn().seq(0));
    s.expect_after(2000, seg().syn().seq(0));
    s.advance(4000);
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::HostUnreachable),
        "EHOSTUNREACH"
    );
}

/// RFC 5927 4.2, RFC 1122 4.2.3.9: in ESTABLISHED
/// even port unreachable is only a soft error: data still flows, and a
/// connection that then times out reports ECONNREFUSED; time exceeded is
/// soft too.
#[test]
pub fn errors_on_established_connection_are_soft() {
    let mut s = Script::with_config(|c| c.tcp.max_retries = 2);
    let c = s.active_open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.inject_time_exceeded(ROUTER);
    s.inject_unreachable(PEER_IP, 3);
    s.expect_none();
    s.expect_state(c, TcpState::Established);
    s.inject(seg().ack(101).seq(1));
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(101).len(100));
    s.inject_unreachable(PEER_IP, 3);
    s.expect_state(c, TcpState::Established);
    s.expect_after(200, seg().ack(1).seq(101).len(100));
    s.expect_after(400, seg().ack(1).seq(101).len(100));
    s.expect_after(800, seg().rst().ack(1).seq(201));
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionRefused),
        "ECONNREFUSED"
    );
}

/// RFC 1122 4.2.3.9: a soft error is forgotten once the peer is heard
/// again: a later timeout reports ETIMEDOUT.
#[test]
pub fn soft_error_forgotten_when_peer_answers() {
    let mut s = Script::with_config(|c| c.tcp.max_retries = 1);
    let c = s.active_open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.inject_unreachable(ROUTER, 0);
    s.advance(1);
    s.inject(seg().ack(101).seq(1));
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(101).len(100));
    s.expect_after(200, seg().ack(1).seq(101).len(100));
    s.expect_after(400, seg().rst().ack(1).seq(201));
    s.expect_timed_out(c);
}

/// RFC 5927 4.1: an error whose quoted sequence number is not in
/// SND.UNA..SND.NXT (here about a segment the peer acknowledged) is
/// ignored: no refusal, no soft error, no smaller segments.
#[test]
pub fn error_about_acknowledged_segment_ignored() {
    let mut s = Script::with_config(|c| c.tcp.max_retries = 1);
    let c = s.active_open();
    s.send_n(c, 1460);
    s.expect(seg().ack(1).seq(1).len(1460));
    s.inject(seg().ack(1461).seq(1));
    s.inject_frag_needed(ROUTER, 1000);
    s.send_n(c, 1460);
    s.expect(seg().ack(1).seq(1461).len(1460));
    s.inject(seg().ack(2921).seq(1));
    // Quotes `sent`, now acknowledged too.
    s.inject_unreachable(ROUTER, 1);
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(2921).len(100));
    s.expect_after(200, seg().ack(1).seq(2921).len(100));
    s.expect_after(400, seg().rst().ack(1).seq(3021));
    s.expect_timed_out(c);
}

/// RFC 1191 6.4, RFC 9293 3.7.2, RFC 5927 7.2: fragmentation needed about a
/// segment in flight lowers the path MTU; the segments in flight go again
/// at once in the new size, and later ones keep it.
#[test]
pub fn frag_needed_shrinks_segments_and_resends_at_once() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 3000);
    s.expect(seg().ack(1).seq(1).len(1460));
    s.expect(seg().ack(1).seq(1461).len(1460));
    s.inject_frag_needed(ROUTER, 1300);
    // 1300 - 20 (IPv4) - 20 (TCP), from SND.UNA on.
    s.expect(seg().ack(1).seq(1).len(1260));
    s.expect(seg().ack(1).seq(1261).len(1260));
    s.inject(seg().ack(2521).seq(1));
    s.expect(seg().ack(1).seq(2521).len(480));
    s.inject(seg().ack(3001).seq(1));
    s.expect_silence(1000);
    check!(s, s.info(c).snd_mss == 1260, "MSS {}", s.info(c).snd_mss);
}

/// RFC 9293 3.9.2.2 (MUST-55, RFC 6633): source quench is ignored: the
/// window does not shrink, nothing is resent, data flows on.
#[test]
pub fn source_quench_ignored() {
    let mut s = Script::new();
    let c = s.active_open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    let before = s.info(c);
    s.inject_source_quench(ROUTER);
    s.expect_none();
    let after = s.info(c);
    check!(
        s,
        before.cwnd == after.cwnd && before.ssthresh == after.ssthresh,
        "window unchanged: {before:?} -> {after:?}"
    );
    s.inject(seg().ack(101).seq(1));
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(101).len(100));
}
