//! Loss recovery without SACK: fast retransmit (RFC 5681 3.2), limited
//! transmit (RFC 3042), NewReno's partial ACKs (RFC 6582), and the
//! congestion control algorithm (CUBIC by default, NewReno selectable).

use stack::{CcAlgorithm, SocketHandle};

use crate::harness::{check, seg, Script, STACK_PORT};

/// Passive open with MSS 1000, no SACK, no timestamps.
fn open_plain(s: &mut Script) -> SocketHandle {
    let l = s.listen(STACK_PORT, 8);
    s.inject(seg().syn().seq(0).win(65535).mss(1000));
    s.expect(seg().syn().ack(1).seq(0).no_sack_perm());
    s.inject(seg().ack(1).seq(1).win(65535));
    s.accept(l)
}

fn send_segments(s: &mut Script, c: SocketHandle, n: u32) {
    s.send_n(c, n as usize * 1000);
    for i in 0..n {
        s.expect(seg().ack(1).seq(1 + 1000 * i).len(1000));
    }
    s.expect_none();
}

/// RFC 5681 3.2: the third duplicate ACK (not the first two) triggers a
/// fast retransmit of the first unacknowledged segment.
#[test]
pub fn fast_retransmit_on_third_dupack() {
    let mut s = Script::new();
    let c = open_plain(&mut s);
    send_segments(&mut s, c, 10);
    s.inject(seg().ack(1).seq(1));
    s.inject(seg().ack(1).seq(1));
    s.expect_none();
    s.inject(seg().ack(1).seq(1));
    s.expect(seg().ack(1).seq(1).len(1000));
    s.expect_none();
    check!(
        s,
        s.stack.counters().tcp_fast_retransmits == 1,
        "one fast retransmit"
    );
}

/// RFC 3042 2: limited transmit: each of the first two duplicate ACKs lets
/// one new segment out.
#[test]
pub fn limited_transmit() {
    let mut s = Script::new();
    let c = open_plain(&mut s);
    s.send_n(c, 12_000);
    for i in 0..10 {
        s.expect(seg().ack(1).seq(1 + 1000 * i).len(1000));
    }
    s.inject(seg().ack(1).seq(1));
    s.expect(seg().ack(1).seq(10_001).len(1000));
    s.inject(seg().ack(1).seq(1));
    s.expect(seg().ack(1).seq(11_001).len(1000));
    s.inject(seg().ack(1).seq(1));
    s.expect(seg().ack(1).seq(1).len(1000));
    s.expect_none();
}

/// RFC 6582 3.2: NewReno: during recovery further duplicate ACKs do not
/// retransmit again; a partial ACK retransmits the next hole at once; the
/// full ACK ends recovery with cwnd deflated to at most ssthresh.
#[test]
pub fn newreno_partial_ack() {
    let mut s = Script::new();
    let c = open_plain(&mut s);
    send_segments(&mut s, c, 10);
    // Segments 1:1001 and 3001:4001 are lost.
    for _ in 0..3 {
        s.inject(seg().ack(1).seq(1));
    }
    s.expect(seg().ack(1).seq(1).len(1000));
    for _ in 0..4 {
        s.inject(seg().ack(1).seq(1));
    }
    s.expect_none();
    s.inject(seg().ack(3001).seq(1));
    s.expect(seg().ack(1).seq(3001).len(1000));
    s.expect_none();
    s.inject(seg().ack(10_001).seq(1));
    s.expect_none();
    let info = s.info(c);
    check!(
        s,
        info.cwnd <= info.ssthresh && info.total_retrans == 2,
        "after recovery: {info:?}"
    );
}

/// RFC 9438 4.6: CUBIC is the default: a loss sets ssthresh (and cwnd) to
/// 0.7 of the window (10 segments -> 7).
#[test]
pub fn cubic_is_default() {
    let mut s = Script::new();
    let c = open_plain(&mut s);
    send_segments(&mut s, c, 10);
    for _ in 0..3 {
        s.inject(seg().ack(1).seq(1));
    }
    s.expect(seg().ack(1).seq(1).len(1000));
    let info = s.info(c);
    check!(
        s,
        info.ssthresh == 7000 && info.cwnd == 7000,
        "beta_cubic = 0.7: {info:?}"
    );
}

/// RFC 5681 3.1 (equation 4; with RFC 6582 3.2): with `cc = NewReno` a
/// loss sets ssthresh to max(FlightSize / 2, 2 * SMSS).
#[test]
pub fn newreno_selectable() {
    let mut s = Script::with_config(|c| c.tcp.cc = CcAlgorithm::NewReno);
    let c = open_plain(&mut s);
    send_segments(&mut s, c, 10);
    for _ in 0..3 {
        s.inject(seg().ack(1).seq(1));
    }
    s.expect(seg().ack(1).seq(1).len(1000));
    let info = s.info(c);
    check!(s, info.ssthresh == 5000, "FlightSize / 2: {info:?}");
}

/// RFC 5681 3.2 (steps 4 and 5): in fast recovery each further duplicate
/// ACK inflates the window by one segment (cwnd is ssthresh plus 3 SMSS,
/// then one SMSS more per duplicate), and new data leaves once it exceeds
/// what is outstanding: with NewReno, 10 segments out and ssthresh 5000,
/// at the sixth.
#[test]
pub fn fast_recovery_inflates_window() {
    let mut s = Script::with_config(|c| c.tcp.cc = CcAlgorithm::NewReno);
    let c = open_plain(&mut s);
    send_segments(&mut s, c, 10);
    for _ in 0..3 {
        s.inject(seg().ack(1).seq(1));
    }
    s.expect(seg().ack(1).seq(1).len(1000));
    s.send_n(c, 10_000);
    s.expect_none();
    s.inject(seg().ack(1).seq(1));
    s.inject(seg().ack(1).seq(1));
    s.expect_none();
    s.inject(seg().ack(1).seq(1));
    s.expect(seg().ack(1).seq(10_001).len(1000));
    s.expect_none();
    s.inject(seg().ack(1).seq(1));
    s.expect(seg().ack(1).seq(11_001).len(1000));
    s.expect_none();
}

/// RFC 5681 3.1 (RFC 9293 3.8.2, MUST-19): above ssthresh the window grows
/// by one segment per window of data acknowledged (congestion avoidance),
/// not one per ACK as in slow start: after a loss leaves cwnd at ssthresh
/// (5000, NewReno), five ACKs of one segment each add 1000, and each ACK
/// before the fifth only lets the next segment go.
#[test]
pub fn congestion_avoidance_grows_one_segment_per_window() {
    let mut s = Script::with_config(|c| c.tcp.cc = CcAlgorithm::NewReno);
    let c = open_plain(&mut s);
    send_segments(&mut s, c, 10);
    for _ in 0..3 {
        s.inject(seg().ack(1).seq(1));
    }
    s.expect(seg().ack(1).seq(1).len(1000));
    s.inject(seg().ack(10_001).seq(1));
    let info = s.info(c);
    check!(
        s,
        info.cwnd == 5000 && info.ssthresh == 5000,
        "recovery over, cwnd at ssthresh: {info:?}"
    );
    s.send_n(c, 20_000);
    for i in 0..5 {
        s.expect(seg().ack(1).seq(10_001 + 1000 * i).len(1000));
    }
    s.expect_none();
    for i in 1..=4u32 {
        s.inject(seg().ack(10_001 + 1000 * i).seq(1));
        s.expect(seg().ack(1).seq(14_001 + 1000 * i).len(1000));
        s.expect_none();
        let cwnd = s.info(c).cwnd;
        check!(s, cwnd == 5000, "after ACK {i} cwnd {cwnd}, still 5000");
    }
    s.inject(seg().ack(15_001).seq(1));
    s.expect(seg().ack(1).seq(19_001).len(1000));
    s.expect(seg().ack(1).seq(20_001).len(1000));
    s.expect_none();
    let cwnd = s.info(c).cwnd;
    check!(
        s,
        cwnd == 6000,
        "a window acknowledged: cwnd {cwnd}, one segment more"
    );
}
