//! RFC 5961: challenge ACKs against blind reset, SYN and data injection.

use stack::{SocketError, TcpState};

use crate::harness::{check, seg, Script};

/// RFC 5961 3.2: a RST inside the window but not exactly at RCV.NXT is
/// answered with a challenge ACK and does not reset the connection.
#[test]
pub fn challenge_ack_for_rst_not_at_rcv_nxt() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().rst().seq(101));
    s.expect(seg().ack(1).seq(1).len(0));
    s.inject(seg().rst().ack(1).seq(60_000));
    s.expect(seg().ack(1).seq(1).len(0));
    s.expect_state(c, TcpState::Established);
    // The peer's answer to the challenge, a RST at RCV.NXT, is taken.
    s.inject(seg().rst().seq(1));
    s.expect_none();
    s.expect_state(c, TcpState::Closed);
}

/// RFC 5961 4.2: a SYN in a synchronized state, whatever its sequence
/// number, is answered with a challenge ACK; the connection stays.
#[test]
pub fn challenge_ack_for_syn_in_established() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().syn().seq(50).mss(1460));
    s.expect(seg().ack(1).seq(1).len(0));
    s.inject(seg().syn().seq(1_000_000).mss(1460));
    s.expect(seg().ack(1).seq(1).len(0));
    s.inject(seg().syn().ack(1).seq(1).mss(1460));
    s.expect(seg().ack(1).seq(1).len(0));
    s.expect_state(c, TcpState::Established);
    s.inject(seg().ack(1).seq(1).len(5));
    check!(
        s,
        s.recv(c, 10).map(|v| v.len()) == Ok(5),
        "still connected"
    );
}

/// RFC 5961 5.2: an ACK below SND.UNA - MAX.SND.WND is answered with a
/// challenge ACK and its data is dropped.
#[test]
pub fn challenge_ack_for_ack_too_old() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    let too_old = 1u32.wrapping_sub(100_000);
    s.inject(seg().ack(too_old).seq(1).len(10));
    s.expect(seg().ack(1).seq(1).len(0));
    check!(
        s,
        s.recv(c, 100) == Err(SocketError::WouldBlock),
        "the data of an unacceptable ACK is dropped"
    );
    s.expect_state(c, TcpState::Established);
}

/// RFC 5961 5.2 (RFC 9293 3.10.7.4): an ACK for data never sent
/// (SEG.ACK > SND.NXT) is answered with an ACK and dropped.
#[test]
pub fn ack_for_unsent_data_dropped() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().ack(5000).seq(1).len(10));
    s.expect(seg().ack(1).seq(1).len(0));
    check!(
        s,
        s.recv(c, 100) == Err(SocketError::WouldBlock),
        "the data is dropped"
    );
    s.inject(seg().ack(1).seq(1).len(10));
    s.expect_after(40, seg().ack(11).seq(1));
}

/// RFC 5961 7: challenge ACKs are rate limited (1000 per second).
#[test]
pub fn challenge_acks_rate_limited() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    for i in 0..1500u32 {
        s.inject(seg().rst().seq(2 + i));
    }
    let n = s.drain().len();
    check!(
        s,
        n == 1000,
        "{n} challenge ACKs in one instant, expected 1000"
    );
    s.advance(1000);
    s.inject(seg().rst().seq(77));
    s.expect(seg().ack(1).seq(1));
    s.expect_state(c, TcpState::Established);
}
