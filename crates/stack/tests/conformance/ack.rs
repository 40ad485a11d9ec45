//! When the stack ACKs (RFC 9293 3.8.6.3, RFC 5681 4.2) and when it holds
//! small segments (Nagle, RFC 9293 3.7.4).

use stack::Duration;

use crate::harness::{seg, Script};

/// RFC 5681 4.2: an ACK is sent for at least every second full-sized
/// segment; the first one waits.
#[test]
pub fn delayed_ack_every_second_segment() {
    let mut s = Script::new();
    s.passive_open();
    s.inject(seg().ack(1).seq(1).len(1460));
    s.expect_none();
    s.inject(seg().ack(1).seq(1461).len(1460));
    s.expect(seg().ack(2921).seq(1).len(0));
    s.inject(seg().ack(1).seq(2921).len(1460));
    s.expect_none();
    s.inject(seg().ack(1).seq(4381).len(1460));
    s.expect(seg().ack(5841).seq(1).len(0));
}

/// RFC 9293 3.8.6.3: a delayed ACK goes out after the delayed-ACK timeout
/// (40 ms by default, `delayed_ack_timeout`; under 0.5 s).
#[test]
pub fn delayed_ack_timeout() {
    let mut s = Script::new();
    s.passive_open();
    s.inject(seg().ack(1).seq(1).len(100));
    s.expect_after(40, seg().ack(101).seq(1).len(0));
    let mut s = Script::with_config(|c| c.tcp.delayed_ack_timeout = Duration::from_millis(200));
    s.passive_open();
    s.inject(seg().ack(1).seq(1).len(100));
    s.expect_after(200, seg().ack(101).seq(1).len(0));
}

/// RFC 9293 3.8.6.3: with delayed ACKs off every segment is ACKed at once.
#[test]
pub fn delayed_ack_disabled() {
    let mut s = Script::with_config(|c| c.tcp.delayed_ack = false);
    s.passive_open();
    s.inject(seg().ack(1).seq(1).len(100));
    s.expect(seg().ack(101).seq(1).len(0));
}

/// RFC 5681 4.2: out-of-order data is ACKed at once (a duplicate ACK),
/// and so is the segment that fills the gap.
#[test]
pub fn immediate_ack_for_out_of_order_and_gap_fill() {
    let mut s = Script::new();
    s.passive_open();
    s.inject(seg().ack(1).seq(101).len(100));
    s.expect(seg().ack(1).seq(1).len(0));
    s.inject(seg().ack(1).seq(301).len(100));
    s.expect(seg().ack(1).seq(1).len(0));
    s.inject(seg().ack(1).seq(1).len(100));
    s.expect(seg().ack(201).seq(1).len(0));
    s.inject(seg().ack(1).seq(201).len(100));
    s.expect(seg().ack(401).seq(1).len(0));
}

/// RFC 9293 3.8.6.3: data going out carries the pending ACK, which then
/// does not follow on its own.
#[test]
pub fn ack_piggybacked_on_data() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().ack(1).seq(1).len(100));
    s.send(c, b"reply");
    s.expect(seg().ack(101).seq(1).len(5));
    s.expect_silence(500);
}

/// RFC 9293 3.7.4: Nagle: while data is unacknowledged a segment smaller
/// than the MSS waits; the ACK releases what has gathered as one segment.
#[test]
pub fn nagle_holds_small_segments() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10));
    s.send_n(c, 10);
    s.send_n(c, 10);
    s.expect_silence(100);
    s.inject(seg().ack(11).seq(1));
    s.expect(seg().ack(1).seq(11).len(20));
}

/// RFC 9293 3.7.4: Nagle holds only less-than-full segments: full ones
/// still go while small data is unacknowledged.
#[test]
pub fn nagle_sends_full_segments() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10));
    s.send_n(c, 2000);
    s.expect(seg().ack(1).seq(11).len(1460));
    s.expect_none();
    s.inject(seg().ack(1471).seq(1));
    s.expect(seg().ack(1).seq(1471).len(540));
}

/// RFC 9293 3.7.4: TCP_NODELAY turns Nagle off: each small write leaves
/// at once; turning it on releases what Nagle held.
#[test]
pub fn nodelay_sends_at_once() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10));
    s.send_n(c, 10);
    s.expect_none();
    s.set_nodelay(c, true);
    s.expect(seg().ack(1).seq(11).len(10));
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(21).len(10));
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(31).len(10));
}
