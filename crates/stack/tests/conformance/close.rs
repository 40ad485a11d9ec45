//! Closing: the FIN after queued data (RFC 9293 3.10.4), aborting with a
//! reset (RFC 9293 3.10.5): SO_LINGER zero, unread data (RFC 1122
//! 4.2.2.13, RFC 2525 2.17).

use stack::{Shutdown, TcpState};

use crate::harness::{check, seg, Script};

/// RFC 9293 3.10.4: CLOSE sends the queued data first, the FIN after it
/// (on the last data segment).
#[test]
pub fn close_sends_fin_after_data() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 2000);
    s.close(c);
    s.expect(seg().ack(1).seq(1).len(1460));
    s.expect(seg().fin().ack(1).seq(1461).len(540));
    s.inject(seg().ack(2002).seq(1));
    s.inject(seg().fin().ack(2002).seq(1));
    s.expect(seg().ack(2).seq(2002));
}

/// RFC 9293 3.10.5: with SO_LINGER {on, 0} close aborts: a RST
/// (SEQ=SND.NXT) and the connection is gone at once.
#[test]
pub fn linger_zero_close_sends_rst() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10));
    s.set_linger_zero(c);
    s.close(c);
    s.expect(seg().rst().ack(1).seq(11).len(0));
    s.expect_state(c, TcpState::Closed);
    check!(s, s.stack.socket_count() == 1, "only the listener is left");
    s.inject(seg().ack(11).seq(1));
    s.expect(seg().rst().seq(11));
}

/// RFC 1122 4.2.2.13 (RFC 2525 2.17): close with received data unread
/// sends a RST (not a FIN), telling the peer the data was lost.
#[test]
pub fn close_with_unread_data_sends_rst() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().ack(1).seq(1).len(100));
    s.close(c);
    s.expect(seg().rst().ack(101).seq(1).len(0));
    s.expect_none();
    check!(s, s.stack.socket_count() == 1, "only the listener is left");
}

/// RFC 1122 4.2.2.13: data that arrives after close() is answered with a
/// RST.
#[test]
pub fn data_after_close_sends_rst() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.close(c);
    s.expect(seg().fin().ack(1).seq(1));
    s.inject(seg().ack(2).seq(1).len(100));
    s.expect(seg().rst().seq(2).len(0));
    s.expect_none();
}

/// RFC 6298 5.4 (RFC 9293 3.10.4): an unacknowledged FIN is retransmitted
/// on timeout like data, in FIN-WAIT-1 and in LAST-ACK.
#[test]
pub fn fin_retransmitted_on_timeout() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.shutdown(c, Shutdown::Write);
    s.expect(seg().fin().ack(1).seq(1));
    s.expect_after(1000, seg().fin().ack(1).seq(1));
    s.expect_after(2000, seg().fin().ack(1).seq(1));
    s.inject(seg().ack(2).seq(1));
    s.expect_state(c, TcpState::FinWait2);

    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.inject(seg().fin().ack(1).seq(1));
    s.expect(seg().ack(2).seq(1));
    s.close(c);
    s.expect(seg().fin().ack(2).seq(1));
    s.expect_after(1000, seg().fin().ack(2).seq(1));
    s.inject(seg().ack(2).seq(2));
    s.expect_silence(5000);
    check!(s, s.stack.socket_count() == 1, "only the listener is left");
}
