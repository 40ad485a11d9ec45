//! Explicit Congestion Notification (RFC 3168 6.1): negotiated in the
//! handshake, ECT(0) on new data, CE echoed with ECE until CWR, ECE
//! answered by one window reduction per window and CWR.

use stack::EcnMode;

use crate::harness::{check, seg, Script, STACK_PORT};

/// Passive open where the peer's SYN asks for ECN; returns the script
/// and the connection.
fn open_asked(mode: EcnMode) -> (Script, stack::SocketHandle) {
    let mut s = Script::with_config(|c| c.tcp.ecn = mode);
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().ece().cwr().seq(0).mss(1000).win(65535));
    if mode == EcnMode::Off {
        s.expect(seg().syn().ack(1).seq(0).ip_ecn(0));
    } else {
        s.expect(seg().syn().ece().ack(1).seq(0).ip_ecn(0));
    }
    s.inject(seg().ack(1).seq(1).win(65535));
    let c = s.accept(l);
    (s, c)
}

/// RFC 3168 6.1.1, 6.1.4, 6.1.5: by default (`net.inet.tcp.ecn.enable=2`,
/// accept only) a SYN that asks for ECN (ECE and CWR) is answered with
/// ECE alone; new data then goes ECT(0), a pure ACK and a retransmission
/// Not-ECT.
#[test]
pub fn ecn_agreed_when_the_peer_asks() {
    let (mut s, c) = open_asked(EcnMode::AcceptOnly);
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100).ip_ecn(2));
    s.inject(seg().ack(1).seq(1).len(10));
    s.expect_after(40, seg().ack(11).seq(101).len(0).ip_ecn(0));
    // The RTO (1 s from the data) sends it again, Not-ECT.
    s.expect_after(960, seg().ack(11).seq(1).len(100).ip_ecn(0));
}

/// RFC 3168 6.1.1: with `net.inet.tcp.ecn.enable=0` a SYN asking for ECN
/// gets a SYN-ACK without ECE, and data goes Not-ECT.
#[test]
pub fn ecn_refused_when_off() {
    let (mut s, c) = open_asked(EcnMode::Off);
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100).ip_ecn(0));
}

/// RFC 3168 6.1.1: with `net.inet.tcp.ecn.enable=1` a connect asks (ECE
/// and CWR on the SYN, Not-ECT); a SYN-ACK with ECE agrees and data goes
/// ECT(0); by default (2) the SYN does not ask.
#[test]
pub fn ecn_asked_on_connect() {
    let mut s = Script::with_config(|c| c.tcp.ecn = EcnMode::On);
    let c = s.connect();
    s.expect(seg().syn().ece().cwr().seq(0).ip_ecn(0));
    s.inject(seg().syn().ece().ack(1).seq(0).mss(1000));
    s.expect(seg().ack(1).seq(1).ip_ecn(0));
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10).ip_ecn(2));

    let mut s = Script::with_config(|c| c.tcp.ecn = EcnMode::On);
    let c = s.connect();
    s.expect(seg().syn().ece().cwr().seq(0));
    // A SYN-ACK without ECE: the peer does not do ECN.
    s.inject(seg().syn().ack(1).seq(0).mss(1000));
    s.expect(seg().ack(1).seq(1));
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10).ip_ecn(0));

    let mut s = Script::new();
    s.connect();
    s.expect(seg().syn().seq(0));
}

/// RFC 3168 6.1.3: a data segment that arrives CE is ACKed at once with
/// ECE, and every segment after carries ECE until one with CWR arrives.
#[test]
pub fn ce_echoed_until_cwr() {
    let (mut s, _c) = open_asked(EcnMode::AcceptOnly);
    s.inject(seg().ack(1).seq(1).len(100).ip_ecn(3));
    s.expect(seg().ece().ack(101).seq(1));
    s.inject(seg().ack(1).seq(101).len(100).ip_ecn(2));
    s.inject(seg().ack(1).seq(201).len(100).ip_ecn(2));
    s.expect(seg().ece().ack(301).seq(1));
    s.inject(seg().cwr().ack(1).seq(301).len(100).ip_ecn(2));
    s.inject(seg().ack(1).seq(401).len(100).ip_ecn(2));
    s.expect(seg().ack(501).seq(1));
}

/// RFC 3168 6.1.2: an ACK with ECE halves the congestion window (CUBIC:
/// by its beta) as a loss would, without a retransmission, once per
/// window: the next new data carries CWR, and an ECE for the same window
/// reduces nothing more.
#[test]
pub fn ece_reduces_the_window_once_per_window() {
    let (mut s, c) = open_asked(EcnMode::AcceptOnly);
    s.send_n(c, 4000);
    for i in 0..4 {
        s.expect(seg().ack(1).seq(1 + 1000 * i).len(1000).ip_ecn(2));
    }
    let before = s.info(c).cwnd;
    s.inject(seg().ece().ack(1001).seq(1));
    let after = s.info(c).cwnd;
    check!(
        s,
        after < before,
        "the window was reduced: {before} -> {after}"
    );
    s.inject(seg().ece().ack(2001).seq(1));
    check!(
        s,
        s.info(c).cwnd >= after,
        "not again in the same window: {after} -> {}",
        s.info(c).cwnd
    );
    s.send_n(c, 1000);
    s.expect(seg().cwr().ack(1).seq(4001).len(1000).ip_ecn(2));
    s.send_n(c, 1000);
    s.expect(seg().ack(1).seq(5001).len(1000).ip_ecn(2));
}
