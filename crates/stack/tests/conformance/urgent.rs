//! Urgent data (RFC 9293 3.8.5, RFC 6093): the urgent pointer points at
//! the octet after the urgent data; out of line (the default) the last
//! urgent octet leaves the stream for `recv(MSG_OOB)`, reads stop at it,
//! and SIOCATMARK tells when the read position is there.

use stack::{OobRead, SocketError, SocketHandle};

use crate::harness::{check, pattern, seg, Script, STACK_PORT};

/// Passive open, peer MSS 1000, no options.
fn open() -> (Script, SocketHandle) {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).win(65535).mss(1000));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    (s, c)
}

/// The octet of `pattern` at sequence number `seq`.
fn octet(seq: u32) -> u8 {
    pattern(seq, 1)[0]
}

/// RFC 9293 3.8.5 and RFC 6093 2 (MUST-30, MUST-62): data sent with
/// MSG_OOB goes at once (Nagle does not hold it) with URG and a pointer
/// to the octet after it; a retransmission from before it carries the
/// pointer too; once the urgent data is acknowledged, segments go
/// without URG.
#[test]
pub fn urgent_pointer_after_the_urgent_data() {
    let (mut s, c) = open();
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100));
    s.send_urgent(c, b"!!!");
    s.expect(seg().ack(1).seq(101).len(3).urg(3));
    // The RTO (1 s) sends the data again (in one segment): before SND.UP,
    // so with the pointer, from its own sequence number.
    s.expect_after(1000, seg().ack(1).seq(1).len(103).urg(103));
    s.inject(seg().ack(104).seq(1));
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(104).len(10));
}

/// RFC 9293 3.8.5 (MUST-31): urgent data of any length: 2500 octets sent
/// with MSG_OOB over an MSS of 1000 go in three segments, each with URG
/// and the pointer to the octet after the last urgent one.
#[test]
pub fn urgent_data_longer_than_a_segment() {
    let (mut s, c) = open();
    s.send_urgent(c, &vec![7u8; 2500]);
    s.expect(seg().ack(1).seq(1).len(1000).urg(2500));
    s.expect(seg().ack(1).seq(1001).len(1000).urg(1500));
    s.expect(seg().ack(1).seq(2001).len(500).urg(500));
    s.inject(seg().ack(2501).seq(1));
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(2501).len(10));
}

/// RFC 9293 3.8.5 (MUST-30, 32, 33, 62): a segment with URG and pointer
/// 10 makes its tenth octet urgent: the application is told (EPOLLPRI),
/// a read stops before it, SIOCATMARK then says the mark is reached,
/// `recv(MSG_OOB)` returns the octet once (EINVAL after), and the stream
/// goes on without it.
#[test]
pub fn urgent_octet_read_out_of_band() {
    let (mut s, c) = open();
    s.inject(seg().ack(1).seq(1).len(10).urg(10));
    check!(
        s,
        s.stack.tcp_readiness(c).map(|r| r.urgent) == Ok(true),
        "EPOLLPRI"
    );
    check!(s, !s.at_mark(c), "not at the mark yet");
    check!(s, s.recv(c, 100) == Ok(pattern(1, 9)), "up to the mark");
    check!(s, s.at_mark(c), "at the mark");
    check!(
        s,
        s.recv_urgent(c) == Ok(OobRead::Octet(octet(10))),
        "the urgent octet"
    );
    check!(
        s,
        s.recv_urgent(c) == Err(SocketError::InvalidArgument),
        "EINVAL once taken"
    );
    check!(
        s,
        s.stack.tcp_readiness(c).map(|r| r.urgent) == Ok(false),
        "no EPOLLPRI once taken"
    );
    check!(
        s,
        s.recv(c, 100) == Err(SocketError::WouldBlock),
        "the octet is not in the stream"
    );
    s.inject(seg().ack(1).seq(11).len(5));
    check!(s, s.recv(c, 100) == Ok(pattern(11, 5)), "the data after it");
    check!(s, !s.at_mark(c), "the mark is passed");
}

/// RFC 9293 3.8.5 (MUST-30): a read that does not take the urgent octet
/// stops at the mark, and the next one reads past it, skipping the octet
/// (out of line): it is then lost, and `recv(MSG_OOB)` says EINVAL.
#[test]
pub fn read_past_the_mark_skips_the_octet() {
    let (mut s, c) = open();
    s.inject(seg().ack(1).seq(1).len(10).urg(5));
    check!(s, s.recv(c, 100) == Ok(pattern(1, 4)), "up to the mark");
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(6, 5)),
        "past the mark, without it"
    );
    check!(
        s,
        s.recv_urgent(c) == Err(SocketError::InvalidArgument),
        "read past: EINVAL"
    );
}

/// RFC 9293 3.8.5 (MUST-30, 33): a pointer beyond the data of its segment
/// points into a later one: until that comes, `recv(MSG_OOB)` would
/// block, reads take the data before the mark, and no EPOLLPRI; the
/// later segment, without URG, brings the octet.
#[test]
pub fn urgent_pointer_into_a_later_segment() {
    let (mut s, c) = open();
    s.inject(seg().ack(1).seq(1).len(10).urg(20));
    check!(
        s,
        s.recv_urgent(c) == Err(SocketError::WouldBlock),
        "the octet has not come"
    );
    check!(
        s,
        s.stack.tcp_readiness(c).map(|r| r.urgent) == Ok(false),
        "no EPOLLPRI before the octet"
    );
    check!(s, s.recv(c, 100) == Ok(pattern(1, 10)), "the data before");
    check!(s, !s.at_mark(c), "the mark is further");
    s.inject(seg().ack(1).seq(11).len(10));
    check!(
        s,
        s.stack.tcp_readiness(c).map(|r| r.urgent) == Ok(true),
        "EPOLLPRI"
    );
    check!(s, s.recv(c, 100) == Ok(pattern(11, 9)), "up to the mark");
    check!(s, s.at_mark(c), "at the mark");
    check!(
        s,
        s.recv_urgent(c) == Ok(OobRead::Octet(octet(20))),
        "the urgent octet"
    );
}

/// RFC 6093 3 (SO_OOBINLINE): with urgent data in line the octet stays
/// in the stream: `recv(MSG_OOB)` is EINVAL, reads still stop at the
/// mark, and the next read starts with the urgent octet.
#[test]
pub fn oob_inline_keeps_the_octet_in_the_stream() {
    let (mut s, c) = open();
    s.stack.tcp_set_oob_inline(c, true).unwrap();
    s.note("SO_OOBINLINE on");
    s.inject(seg().ack(1).seq(1).len(10).urg(5));
    check!(
        s,
        s.recv_urgent(c) == Err(SocketError::InvalidArgument),
        "EINVAL in line"
    );
    check!(s, s.recv(c, 100) == Ok(pattern(1, 4)), "up to the mark");
    check!(s, s.at_mark(c), "at the mark");
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(5, 6)),
        "the urgent octet and the rest"
    );
    check!(s, !s.at_mark(c), "past the mark");
}

/// RFC 6093 4: a newer urgent pointer moves the mark; the older urgent
/// octet, not read, stays in the stream as ordinary data.
#[test]
pub fn newer_urgent_pointer_moves_the_mark() {
    let (mut s, c) = open();
    s.inject(seg().ack(1).seq(1).len(10).urg(3));
    s.inject(seg().ack(1).seq(11).len(10).urg(5));
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(1, 14)),
        "up to the new mark"
    );
    check!(s, s.at_mark(c), "at the new mark");
    check!(
        s,
        s.recv_urgent(c) == Ok(OobRead::Octet(octet(15))),
        "the newer urgent octet"
    );
    check!(s, s.recv(c, 100) == Ok(pattern(16, 5)), "the rest");
}
