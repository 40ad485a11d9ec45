//! RFC 9293: the connection state machine (opening, closing, TIME-WAIT)
//! and reset processing, including segments to closed ports and listeners.

use stack::{Duration, Shutdown, SocketError, TcpState};

use crate::harness::{check, pattern, seg, Script, PEER_PORT, STACK_PORT};

/// RFC 9293 3.5: active open (Figure 7): SYN from SYN-SENT with MSS,
/// SACK-permitted, timestamps and window scale; the SYN-ACK is ACKed and
/// the connection is ESTABLISHED.
#[test]
pub fn active_open() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect_state(c, TcpState::SynSent);
    s.expect(
        seg()
            .syn()
            .seq(0)
            .win(65535)
            .mss(1460)
            .sack_perm()
            .ts_ecr(0)
            .wscale(6)
            .len(0),
    );
    s.inject(seg().syn().ack(1).seq(0).win(65535).mss(1460));
    s.expect(seg().ack(1).seq(1).win(65535).len(0).no_ts().no_sack());
    s.expect_state(c, TcpState::Established);
    // Data flows both ways.
    s.send(c, b"hello");
    s.expect(seg().ack(1).seq(1).len(5).psh().payload(b"hello"));
    s.inject(seg().ack(6).seq(1).len(3).psh());
    s.expect_after(40, seg().ack(4).seq(6).len(0));
    check!(s, s.recv(c, 100) == Ok(pattern(1, 3)), "the peer's bytes");
}

/// RFC 9293 3.5: passive open: LISTEN answers a SYN with a SYN-ACK that
/// carries only the options the peer offered; the ACK completes the
/// handshake and the connection is accepted.
#[test]
pub fn passive_open() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 8);
    s.expect_state(l, TcpState::Listen);
    s.inject(seg().syn().seq(1000).win(65535).mss(1460));
    s.expect(
        seg()
            .syn()
            .ack(1001)
            .seq(0)
            .mss(1460)
            .no_wscale()
            .no_sack_perm()
            .no_ts()
            .len(0),
    );
    check!(
        s,
        s.try_accept(l) == Err(SocketError::WouldBlock),
        "nothing to accept before the handshake completes",
    );
    s.inject(seg().ack(1).seq(1001).win(65535));
    s.expect_none();
    let c = s.accept(l);
    s.expect_state(c, TcpState::Established);
    s.inject(seg().ack(1).seq(1001).len(10).psh());
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(1001, 10)),
        "data after accept"
    );
}

/// RFC 9293 3.5: simultaneous open (Figure 8): a SYN in SYN-SENT moves to
/// SYN-RECEIVED and is answered with SYN-ACK; the peer's SYN-ACK then
/// completes the connection without further segments.
#[test]
pub fn simultaneous_open() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject(seg().syn().seq(300).win(65535).mss(1460));
    s.expect(seg().syn().ack(301).seq(0).mss(1460).len(0));
    s.expect_state(c, TcpState::SynReceived);
    s.inject(seg().syn().ack(1).seq(300).win(65535).mss(1460));
    s.expect_state(c, TcpState::Established);
    s.expect_none();
    s.send(c, b"abc");
    s.expect(seg().ack(301).seq(1).len(3));
}

/// RFC 9293 3.6: simultaneous close (Figure 13): FIN-WAIT-1 receives the
/// peer's FIN before the ACK of ours: CLOSING, then TIME-WAIT.
#[test]
pub fn simultaneous_close() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(1).seq(1));
    s.expect_state(c, TcpState::FinWait1);
    s.inject(seg().fin().ack(1).seq(1));
    s.expect(seg().ack(2).seq(2).len(0));
    s.expect_state(c, TcpState::Closing);
    s.inject(seg().ack(2).seq(2));
    s.expect_none();
    s.expect_state(c, TcpState::TimeWait);
}

/// RFC 9293 3.6: half-close by the stack: after its FIN is ACKed
/// (FIN-WAIT-2) it still receives data, and the peer's FIN leads to
/// TIME-WAIT.
#[test]
pub fn half_close_local() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(1).seq(1));
    s.inject(seg().ack(2).seq(1));
    s.expect_state(c, TcpState::FinWait2);
    check!(
        s,
        s.stack
            .tcp_send(s.now, c, b"x", &mut stack::VecSink::default())
            == Err(SocketError::BrokenPipe),
        "no sending after shutdown(Write)",
    );
    s.inject(seg().ack(2).seq(1).len(1000));
    s.inject(seg().ack(2).seq(1001).len(1000));
    s.expect(seg().ack(2001).seq(2).len(0));
    check!(
        s,
        s.recv(c, 4000) == Ok(pattern(1, 2000)),
        "data in FIN-WAIT-2"
    );
    s.inject(seg().fin().ack(2).seq(2001));
    s.expect(seg().ack(2002).seq(2));
    s.expect_state(c, TcpState::TimeWait);
    check!(s, s.recv(c, 10) == Ok(vec![]), "EOF");
}

/// RFC 9293 3.6: half-close by the peer: its FIN moves the stack to
/// CLOSE-WAIT (the application reads EOF) while the stack still sends;
/// the stack's FIN then goes through LAST-ACK to CLOSED.
#[test]
pub fn half_close_remote() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().fin().ack(1).seq(1));
    s.expect(seg().ack(2).seq(1).len(0));
    s.expect_state(c, TcpState::CloseWait);
    check!(s, s.recv(c, 10) == Ok(vec![]), "EOF after the peer's FIN");
    s.send(c, &[7; 100]);
    s.expect(seg().ack(2).seq(1).len(100));
    s.inject(seg().ack(101).seq(2));
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(2).seq(101).len(0));
    s.expect_state(c, TcpState::LastAck);
    s.inject(seg().ack(102).seq(2));
    s.expect_state(c, TcpState::Closed);
    s.expect_none();
}

/// RFC 9293 3.10.7.4: TIME-WAIT lasts 2*MSL (`TcpConfig::msl`), then the
/// connection is CLOSED and a segment for it is answered with a reset.
#[test]
pub fn time_wait_lasts_two_msl() {
    let mut s = Script::with_config(|c| c.tcp.msl = Duration::from_secs(2));
    let (_, c) = s.passive_open();
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(1).seq(1));
    s.inject(seg().ack(2).seq(1));
    s.inject(seg().fin().ack(2).seq(1));
    s.expect(seg().ack(2).seq(2));
    s.expect_state(c, TcpState::TimeWait);
    s.advance(3999);
    s.expect_state(c, TcpState::TimeWait);
    s.inject(seg().ack(2).seq(2));
    s.expect_none();
    s.advance(1);
    s.expect_state(c, TcpState::Closed);
    // The 4-tuple is gone: the listener answers a stray ACK with a reset.
    s.inject(seg().ack(2).seq(2));
    s.expect(seg().rst().seq(2).len(0));
}

/// RFC 9293 3.10.7.4: a retransmitted FIN in TIME-WAIT is ACKed and
/// restarts the 2*MSL timeout.
#[test]
pub fn time_wait_acks_retransmitted_fin() {
    let mut s = Script::with_config(|c| c.tcp.msl = Duration::from_secs(2));
    let (_, c) = s.passive_open();
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(1).seq(1));
    s.inject(seg().ack(2).seq(1));
    s.inject(seg().fin().ack(2).seq(1));
    s.expect(seg().ack(2).seq(2));
    s.advance(3000);
    s.inject(seg().fin().ack(2).seq(1));
    s.expect(seg().ack(2).seq(2).len(0));
    s.advance(3999);
    s.expect_state(c, TcpState::TimeWait);
    s.advance(1);
    s.expect_state(c, TcpState::Closed);
}

/// RFC 9293 3.10.7.4 (with RFC 5961 3.2): a RST whose sequence number is
/// exactly RCV.NXT resets the connection: CLOSED, ECONNRESET, no answer.
#[test]
pub fn rst_at_rcv_nxt_resets() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().rst().seq(1));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionReset),
        "ECONNRESET",
    );
}

/// RFC 9293 3.10.7.4 (RFC 5961 3.2): a RST outside the receive window is
/// silently dropped.
#[test]
pub fn rst_outside_window_dropped() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().rst().seq(1 + 70_000));
    s.inject(seg().rst().seq(0));
    s.expect_none();
    s.expect_state(c, TcpState::Established);
}

/// RFC 9293 3.10.7.3: in SYN-SENT a RST is taken only with an acceptable
/// ACK (then "connection reset", ECONNREFUSED); without ACK, or with an
/// unacceptable one, it is dropped.
#[test]
pub fn rst_in_syn_sent() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject(seg().rst().seq(0));
    s.inject(seg().rst().ack(5).seq(0));
    s.expect_none();
    s.expect_state(c, TcpState::SynSent);
    s.inject(seg().rst().ack(1).seq(0));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionRefused),
        "ECONNREFUSED",
    );
}

/// RFC 9293 3.10.7.3: in SYN-SENT an ACK that does not acknowledge our
/// SYN is answered with <SEQ=SEG.ACK><CTL=RST>.
#[test]
pub fn syn_sent_bad_ack_gets_reset() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject(seg().ack(1000).seq(77));
    s.expect(seg().rst().seq(1000).len(0));
    s.expect_state(c, TcpState::SynSent);
}

/// RFC 9293 3.10.7.4: a RST in SYN-RECEIVED of a passive open returns to
/// LISTEN: the embryonic connection is gone, the listener still works.
#[test]
pub fn rst_in_syn_received_returns_to_listen() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 8);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().rst().seq(1));
    s.expect_none();
    check!(
        s,
        s.try_accept(l) == Err(SocketError::WouldBlock),
        "nothing to accept",
    );
    check!(s, s.stack.socket_count() == 1, "only the listener is left");
    s.inject(seg().syn().seq(5000).mss(1460));
    s.expect(seg().syn().ack(5001).seq(0));
}

/// RFC 9293 3.10.7.1: a segment with ACK to a closed port is answered with
/// <SEQ=SEG.ACK><CTL=RST>.
#[test]
pub fn closed_port_rst_for_ack() {
    let mut s = Script::new();
    s.inject(seg().ack(12345).seq(999).len(10).stack_port(81));
    s.expect(
        seg()
            .rst()
            .seq(12345)
            .win(0)
            .len(0)
            .stack_port(81)
            .no_mss()
            .no_ts(),
    );
}

/// RFC 9293 3.10.7.1: a segment without ACK to a closed port is answered
/// with <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK> (SYN and FIN count).
#[test]
pub fn closed_port_rst_for_no_ack() {
    let mut s = Script::new();
    s.inject(seg().syn().seq(1000).stack_port(81).mss(1460));
    s.expect(seg().rst().ack(1001).seq(0).len(0).stack_port(81));
    s.inject(seg().fin().seq(2000).len(10).stack_port(81));
    s.expect(seg().rst().ack(2011).seq(0).len(0).stack_port(81));
    s.inject(seg().seq(3000).len(7).stack_port(81));
    s.expect(seg().rst().ack(3007).seq(0).len(0).stack_port(81));
}

/// RFC 9293 3.10.7.1: a RST to a closed port is discarded.
#[test]
pub fn closed_port_ignores_rst() {
    let mut s = Script::new();
    s.inject(seg().rst().seq(1000).stack_port(81));
    s.inject(seg().rst().ack(5).seq(1000).stack_port(81));
    s.expect_none();
}

/// RFC 9293 3.10.7.2: in LISTEN a RST is ignored and an ACK is answered
/// with <SEQ=SEG.ACK><CTL=RST>.
#[test]
pub fn listen_rejects_ack_ignores_rst() {
    let mut s = Script::with_config(|c| c.tcp.syncookies = false);
    let l = s.listen(STACK_PORT, 8);
    s.inject(seg().rst().seq(1));
    s.expect_none();
    s.inject(seg().ack(4242).seq(1).peer_port(PEER_PORT + 1));
    s.expect(seg().rst().seq(4242).len(0).peer_port(PEER_PORT + 1));
    // "Any acknowledgment is bad": a SYN-ACK too.
    s.inject(seg().syn().ack(999).seq(5).peer_port(PEER_PORT + 2));
    s.expect(seg().rst().seq(999).len(0).peer_port(PEER_PORT + 2));
    s.expect_state(l, TcpState::Listen);
    check!(s, s.stack.socket_count() == 1, "no connection made");
}

/// RFC 9293 3.10.7.4: in SYN-RECEIVED an ACK that does not acknowledge
/// our SYN is answered with <SEQ=SEG.ACK><CTL=RST>; the half-open
/// connection stays.
#[test]
pub fn syn_received_bad_ack_gets_reset() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 8);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(77).seq(1));
    s.expect(seg().rst().seq(77).len(0));
    s.inject(seg().ack(1).seq(1));
    s.expect_none();
    s.accept(l);
}

/// RFC 9293 3.10.7.4: a retransmitted SYN in SYN-RECEIVED (our SYN-ACK was
/// lost) is answered with the SYN-ACK again, same ISN.
#[test]
pub fn duplicate_syn_resends_syn_ack() {
    let mut s = Script::new();
    s.listen(STACK_PORT, 8);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.advance(300);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0).mss(1460));
    s.expect_none();
}

/// RFC 9293 3.10.7.4: a RST in SYN-RECEIVED of an active open (a
/// simultaneous open) means the connection was refused.
#[test]
pub fn rst_in_simultaneous_open_refuses() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject(seg().syn().seq(300).mss(1460));
    s.expect(seg().syn().ack(301).seq(0));
    s.inject(seg().rst().seq(301));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionRefused),
        "ECONNREFUSED"
    );
}

/// RFC 9293 3.10.7.4: a RST at RCV.NXT in CLOSING, LAST-ACK or TIME-WAIT
/// closes the connection without an error to report.
#[test]
pub fn rst_while_closing() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().fin().ack(1).seq(1));
    s.expect(seg().ack(2).seq(1));
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(2).seq(1));
    s.expect_state(c, TcpState::LastAck);
    s.inject(seg().rst().seq(2));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(s, s.take_error(c).is_none(), "no error after both FINs");
}

/// RFC 9293 3.10.7.3: text and FIN in the SYN-ACK are processed (sixth
/// step on), so its data is delivered and acknowledged with the SYN.
#[test]
pub fn data_in_syn_ack_taken() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject(seg().syn().ack(1).seq(0).mss(1460).len(10));
    s.expect(seg().ack(11).seq(1));
    s.expect_state(c, TcpState::Established);
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(1, 10)),
        "the SYN-ACK's data"
    );
    // A FIN too.
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.inject(seg().syn().fin().ack(1).seq(0).mss(1460).len(5));
    s.expect(seg().ack(7).seq(1));
    s.expect_state(c, TcpState::CloseWait);
}

/// RFC 9293 3.1 (MUST-3): a segment whose checksum does not verify is
/// dropped and counted, whatever it carries: a SYN gets no SYN-ACK, data
/// is neither taken nor ACKed, a RST resets nothing; the same segments
/// with a good checksum are taken.
#[test]
pub fn bad_checksum_dropped() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    let before = s.stack.counters().rx_drop_tcp_bad_checksum;
    s.inject(seg().syn().seq(0).mss(1460).bad_checksum());
    s.expect_silence(100);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    s.inject(seg().ack(1).seq(1).len(100).bad_checksum());
    s.expect_silence(1000);
    check!(
        s,
        s.recv(c, 1000) == Err(SocketError::WouldBlock),
        "nothing taken"
    );
    s.inject(seg().rst().seq(1).bad_checksum());
    s.expect_state(c, TcpState::Established);
    s.inject(seg().ack(1).seq(1).len(100));
    s.expect_within(0, 500, seg().ack(101).seq(1));
    check!(s, s.recv(c, 1000) == Ok(pattern(1, 100)), "the good copy");
    check!(
        s,
        s.stack.counters().rx_drop_tcp_bad_checksum == before + 3,
        "three counted: {}",
        s.stack.counters().rx_drop_tcp_bad_checksum - before
    );
}

/// RFC 9293 3.5.3 (SHLD-2): a RST may carry data (a diagnostic): one at
/// RCV.NXT resets the connection all the same, its data not delivered.
#[test]
pub fn rst_with_data_resets() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().rst().ack(1).seq(1).payload(b"no more, thank you"));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionReset),
        "ECONNRESET"
    );
}
