//! The retransmission timer (RFC 6298) and giving up (RFC 9293 3.8.3).

use stack::{Duration, TcpState};

use crate::harness::{check, seg, Script, STACK_PORT};

/// RFC 6298 2.1, 5.5: the first RTO is 1 s and each expiry doubles it:
/// the SYN is sent again after 1, 2 and 4 s.
#[test]
pub fn syn_rto_initial_and_backoff() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.expect_after(1000, seg().syn().seq(0));
    s.expect_after(2000, seg().syn().seq(0));
    s.expect_after(4000, seg().syn().seq(0));
    s.expect_state(c, TcpState::SynSent);
}

/// RFC 9293 3.8.3: a SYN unanswered after `syn_retries` retransmissions
/// fails the connection with ETIMEDOUT.
#[test]
pub fn connect_times_out() {
    let mut s = Script::with_config(|c| c.tcp.syn_retries = 2);
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.expect_after(1000, seg().syn().seq(0));
    s.expect_after(2000, seg().syn().seq(0));
    s.expect_syn_given_up(c, 3999);
}

/// RFC 6298 2.4, 5.5: the RTO never goes below the configured minimum
/// (200 ms) and doubles on each expiry; a new ACK ends the backoff.
#[test]
pub fn data_rto_minimum_and_backoff() {
    let mut s = Script::new();
    let c = s.active_open();
    check!(
        s,
        s.info(c).rto == Duration::from_millis(200),
        "RTO after a 0 ms sample: {:?}",
        s.info(c)
    );
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_after(200, seg().ack(1).seq(1).len(100));
    s.expect_after(400, seg().ack(1).seq(1).len(100));
    s.expect_after(800, seg().ack(1).seq(1).len(100));
    s.inject(seg().ack(101).seq(1));
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(101).len(100));
    s.expect_after(200, seg().ack(1).seq(101).len(100));
}

/// RFC 6298 5.3: an ACK of new data restarts the timer for what is still
/// outstanding.
#[test]
pub fn rto_restarted_by_new_ack() {
    let mut s = Script::new();
    let c = s.active_open();
    s.set_nodelay(c, true);
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.advance(100);
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(101).len(100));
    s.advance(50);
    s.inject(seg().ack(101).seq(1));
    s.expect_after(200, seg().ack(1).seq(101).len(100));
}

/// RFC 6298 5.7: when the SYN was retransmitted and no RTT was measured,
/// the RTO for data is re-initialized to 3 s.
#[test]
pub fn rto_three_seconds_after_syn_retransmission() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0));
    s.expect_after(1000, seg().syn().seq(0));
    s.advance(500);
    s.inject(seg().syn().ack(1).seq(0).win(65535).mss(1460));
    s.expect(seg().ack(1).seq(1));
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_after(3000, seg().ack(1).seq(1).len(100));
}

/// RFC 6298 5.7: the same on the passive side: a SYN-ACK retransmitted
/// before the handshake's ACK leaves an RTO of 3 s for data.
#[test]
pub fn rto_three_seconds_after_syn_ack_retransmission() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.expect_after(1000, seg().syn().ack(1).seq(0));
    s.advance(100);
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    check!(
        s,
        s.info(c).rto == Duration::from_secs(3),
        "{:?}",
        s.info(c)
    );
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_after(3000, seg().ack(1).seq(1).len(100));
}

/// RFC 9293 3.8.3: after `max_retries` retransmissions of a segment the
/// connection is reset and fails with ETIMEDOUT.
#[test]
pub fn retransmissions_give_up() {
    let mut s = Script::with_config(|c| c.tcp.max_retries = 3);
    let c = s.active_open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_after(200, seg().ack(1).seq(1).len(100));
    s.expect_after(400, seg().ack(1).seq(1).len(100));
    s.expect_after(800, seg().ack(1).seq(1).len(100));
    s.expect_after(1600, seg().rst().ack(1).seq(101));
    s.expect_timed_out(c);
}

/// RFC 5681 3.1 (with RFC 6298 5.4): after a timeout the window is one
/// segment (the loss window): only the earliest segment is sent again,
/// then slow start resends the rest from SND.UNA.
#[test]
pub fn timeout_restarts_from_one_segment() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1000));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    s.send_n(c, 4000);
    for i in 0..4 {
        s.expect(seg().ack(1).seq(1 + 1000 * i).len(1000));
    }
    s.expect_after(1000, seg().ack(1).seq(1).len(1000));
    s.expect_none();
    check!(s, s.info(c).cwnd == 1000, "loss window: {:?}", s.info(c));
    s.inject(seg().ack(1001).seq(1));
    s.expect(seg().ack(1).seq(1001).len(1000));
    s.expect(seg().ack(1).seq(2001).len(1000));
    s.expect_none();
}

/// RFC 6298 3 (Karn): no RTT sample is taken from a segment that was
/// retransmitted.
#[test]
pub fn no_rtt_sample_from_retransmission() {
    let mut s = Script::new();
    let c = s.active_open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_after(200, seg().ack(1).seq(1).len(100));
    s.advance(100);
    s.inject(seg().ack(101).seq(1));
    let i = s.info(c);
    check!(
        s,
        i.srtt == Duration::ZERO && i.rto == Duration::from_millis(200),
        "no sample from the retransmitted segment: {i:?}"
    );
    // A segment sent once is measured: 50 ms.
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(101).len(100));
    s.advance(50);
    s.inject(seg().ack(201).seq(1));
    let i = s.info(c);
    check!(
        s,
        i.srtt == Duration::from_micros(6250),
        "SRTT 7/8 * 0 + 1/8 * 50 ms: {i:?}"
    );
}

/// RFC 9293 3.8.3 (MUST-20, MUST-21), RFC 5482 3: an application sets R2
/// for its connection as a time (TCP_USER_TIMEOUT, 1 s here): unacknowledged
/// data is retransmitted with backoff until then, the timer's last wait cut
/// short to end exactly at the timeout, where the connection sends a RST
/// and fails with ETIMEDOUT, long before the stack's retry count (15).
#[test]
pub fn user_timeout_ends_retransmissions() {
    let mut s = Script::new();
    let c = s.active_open();
    s.set_user_timeout(c, 1000);
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_after(200, seg().ack(1).seq(1).len(100));
    s.expect_after(400, seg().ack(1).seq(1).len(100));
    s.expect_after(400, seg().rst().ack(1).seq(101));
    s.expect_timed_out(c);
}

/// RFC 9293 3.8.3 (MUST-21, MUST-22), RFC 5482 3: the user timeout bounds
/// a connect as well (1.5 s: SYNs at 0 and 1 s, then ETIMEDOUT at 1.5 s,
/// without a RST in SYN-SENT).
#[test]
pub fn user_timeout_bounds_connect() {
    let mut s = Script::new();
    let c = s.connect();
    s.set_user_timeout(c, 1500);
    s.expect(seg().syn().seq(0));
    s.expect_after(1000, seg().syn().seq(0));
    s.expect_syn_given_up(c, 499);
}

/// RFC 9293 3.8.3 (MUST-21, MUST-22): the SYN retry count is set per
/// connection (TCP_SYNCNT 1: one retransmission, then ETIMEDOUT after its
/// backed-off timeout), whatever the stack's default.
#[test]
pub fn syn_retries_per_connection() {
    let mut s = Script::new();
    let c = s.connect();
    s.set_syn_retries(c, 1);
    s.expect(seg().syn().seq(0));
    s.expect_after(1000, seg().syn().seq(0));
    s.expect_syn_given_up(c, 1999);
}

/// RFC 9293 3.8.3 (MUST-20), RFC 1122 4.2.3.5: after R1 (3)
/// retransmissions unanswered TCP gives IP negative advice: the next hop's
/// link address is resolved again before the next segment; the two
/// retransmissions before it go without asking.
#[test]
pub fn negative_advice_after_r1_retransmissions() {
    let mut s = Script::new();
    let c = s.active_open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    let before = s.resolutions;
    s.expect_after(200, seg().ack(1).seq(1).len(100));
    s.expect_after(400, seg().ack(1).seq(1).len(100));
    check!(s, s.resolutions == before, "no resolution before R1");
    s.expect_after(800, seg().ack(1).seq(1).len(100));
    check!(
        s,
        s.resolutions == before + 1 && s.stack.counters().neighbor_negative_advice == 1,
        "the peer's address resolved again at R1: {} resolutions",
        s.resolutions - before
    );
    s.inject(seg().ack(101).seq(1));
    s.expect_state(c, TcpState::Established);
}
