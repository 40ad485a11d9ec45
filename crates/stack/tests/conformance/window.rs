//! The receive window (RFC 9293 3.8.6.2.2, 3.10.7.4): what the stack
//! advertises as its buffer fills and drains, and what it does with data
//! beyond it.

use stack::{SocketError, SocketHandle, TcpState};

use crate::harness::{check, pattern, seg, Script, STACK_PORT};

/// Passive open (peer MSS 1000, no options) on a stack with a
/// `recv_space`-byte receive buffer.
fn open_small(recv_space: usize) -> (Script, SocketHandle) {
    let mut s = Script::with_config(|c| c.tcp.recv_space = recv_space);
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).win(65535).mss(1000));
    s.expect(seg().syn().ack(1).seq(0).win(recv_space as u16));
    s.inject(seg().ack(1).seq(1));
    s.expect_none();
    let c = s.accept(l);
    (s, c)
}

/// RFC 9293 3.8.6.2.2: the window advertised shrinks as data waits unread
/// (never moving its right edge left), reaches zero, and reopens with a
/// window update only once it can grow by enough (receiver SWS
/// avoidance: half the buffer or an MSS).
#[test]
pub fn receive_window_and_update() {
    let (mut s, c) = open_small(4000);
    s.inject(seg().ack(1).seq(1).len(1000));
    s.expect_after(40, seg().ack(1001).seq(1).win(3000));
    s.inject(seg().ack(1).seq(1001).len(1000));
    s.inject(seg().ack(1).seq(2001).len(1000));
    s.expect(seg().ack(3001).seq(1).win(1000));
    s.inject(seg().ack(1).seq(3001).len(1000));
    s.expect_after(40, seg().ack(4001).seq(1).win(0));
    check!(s, s.recv(c, 500) == Ok(pattern(1, 500)), "500 bytes");
    s.expect_silence(100);
    check!(
        s,
        s.recv(c, 1500) == Ok(pattern(501, 1500)),
        "1500 more bytes"
    );
    s.expect(seg().ack(4001).seq(1).win(2000));
}

/// RFC 9293 3.8.6.2.2: a read in place that opens a zero window by
/// enough sends the window update at once, as a copying read does.
#[test]
pub fn read_in_place_sends_the_window_update() {
    let (mut s, c) = open_small(2000);
    s.inject(seg().ack(1).seq(1).len(1000));
    s.inject(seg().ack(1).seq(1001).len(1000));
    s.expect(seg().ack(2001).seq(1).win(0));
    check!(
        s,
        s.recv_in_place(c, 1500) == Ok(pattern(1, 1500)),
        "1500 bytes in place"
    );
    s.expect(seg().ack(2001).seq(1).win(1500));
}

/// RFC 9293 3.8.6.2.2: a receive buffer made larger (SO_RCVBUF) opens the
/// window by more than an MSS, so the next segment is answered at once
/// with the wider window (as after a read that opened it), not with a
/// delayed ACK; the option itself sends nothing.
#[test]
pub fn larger_receive_buffer_opens_the_window_with_the_next_ack() {
    let (mut s, c) = open_small(2000);
    s.inject(seg().ack(1).seq(1).len(1000));
    s.expect_after(40, seg().ack(1001).seq(1).win(1000));
    s.stack.tcp_set_recv_buffer(c, 8000).unwrap();
    s.expect_none();
    s.inject(seg().ack(1).seq(1001).len(100));
    s.expect(seg().ack(1101).seq(1).win(6900));
    check!(s, s.recv(c, 2000) == Ok(pattern(1, 1100)), "all the data");
}

/// RFC 9293 3.10.7.4: with the window at zero, data is not acceptable
/// (it is dropped and ACKed), but ACKs still are.
#[test]
pub fn zero_window_accepts_acks_only() {
    let (mut s, c) = open_small(2000);
    s.inject(seg().ack(1).seq(1).len(1000));
    s.inject(seg().ack(1).seq(1001).len(1000));
    s.expect(seg().ack(2001).seq(1).win(0));
    s.send_n(c, 10);
    s.expect(seg().ack(2001).seq(1).len(10).win(0));
    s.inject(seg().ack(1).seq(2001).len(100));
    s.expect(seg().ack(2001).seq(11).win(0).len(0));
    s.inject(seg().ack(11).seq(2001));
    check!(
        s,
        s.info(c).unacked == 0,
        "the ACK was taken: {:?}",
        s.info(c)
    );
    check!(
        s,
        s.recv(c, 5000).map(|v| v.len()) == Ok(2000),
        "only what fitted"
    );
}

/// RFC 9293 3.10.7.4: a segment reaching past the window is trimmed to it:
/// what fits is taken, the rest is left for a retransmission.
#[test]
pub fn data_beyond_window_trimmed() {
    let (mut s, c) = open_small(1500);
    s.inject(seg().ack(1).seq(1).len(1000));
    s.inject(seg().ack(1).seq(1001).len(1000));
    s.expect(seg().ack(1501).seq(1).win(0));
    check!(
        s,
        s.recv(c, 5000) == Ok(pattern(1, 1500)),
        "the first 1500 bytes"
    );
}

/// RFC 9293 3.10.7.4: a FIN ahead of missing data waits for it; when the
/// gap fills, the data and the FIN are taken together.
#[test]
pub fn fin_after_gap_waits() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().fin().ack(1).seq(101).len(100));
    s.expect(seg().ack(1).seq(1));
    s.expect_state(c, TcpState::Established);
    s.inject(seg().ack(1).seq(1).len(100));
    s.expect(seg().ack(202).seq(1));
    s.expect_state(c, TcpState::CloseWait);
    check!(s, s.recv(c, 1000) == Ok(pattern(1, 200)), "all the data");
    check!(s, s.recv(c, 1000) == Ok(vec![]), "then EOF");
}

/// RFC 9293 3.10.7.4: the handshake's ACK may carry data, which is taken
/// as the connection becomes ESTABLISHED.
#[test]
pub fn data_on_handshake_ack() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1).len(50));
    let c = s.accept(l);
    check!(s, s.recv(c, 100) == Ok(pattern(1, 50)), "the data");
    s.expect_after(40, seg().ack(51).seq(1));
    check!(
        s,
        s.recv(c, 100) == Err(SocketError::WouldBlock),
        "nothing more"
    );
}

/// RFC 9293 3.8.6.2.1: sender SWS avoidance: a sliver of usable window
/// (100 bytes, less than half the largest window seen) is not used while
/// data is in flight; the data goes once the window allows a full segment.
#[test]
pub fn sender_sws_avoidance() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).win(5000).mss(1000));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1).win(5000));
    let c = s.accept(l);
    s.send_n(c, 3000);
    for i in 0..3 {
        s.expect(seg().ack(1).seq(1 + 1000 * i).len(1000));
    }
    s.inject(seg().ack(1001).seq(1).win(2100));
    s.send_n(c, 1000);
    s.expect_silence(100);
    s.inject(seg().ack(3001).seq(1).win(5000));
    s.expect(seg().ack(1).seq(3001).len(1000));
}

/// RFC 9293 3.10.7.4 (MUST-66): with the receive window at zero, a RST at
/// RCV.NXT is still processed: the connection is reset (ECONNRESET),
/// while a RST beyond it, outside the (empty) window, is dropped.
#[test]
pub fn rst_processed_with_zero_window() {
    let (mut s, c) = open_small(2000);
    s.inject(seg().ack(1).seq(1).len(1000));
    s.inject(seg().ack(1).seq(1001).len(1000));
    s.expect(seg().ack(2001).seq(1).win(0));
    s.inject(seg().rst().seq(2002));
    s.expect_none();
    s.expect_state(c, TcpState::Established);
    s.inject(seg().rst().seq(2001));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionReset),
        "ECONNRESET"
    );
}
