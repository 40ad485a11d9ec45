//! Listening sockets: the SYN queue and the accept queue bounded by the
//! backlog (the accept queue by one more, as Linux; the backlog capped by
//! `kern.ipc.somaxconn`), and SYN cookies when the SYN queue is full
//! (RFC 4987).

use stack::{SocketError, TcpState};

use crate::harness::{check, pattern, seg, Script, PEER_PORT, STACK_PORT};

/// RFC 4987 2: the SYN queue (connections in SYN-RECEIVED) holds at most
/// `backlog` entries; without SYN cookies a further SYN is dropped.
#[test]
pub fn syn_queue_bounded_by_backlog() {
    let mut s = Script::with_config(|c| c.tcp.syncookies = false);
    let l = s.listen(STACK_PORT, 2);
    for p in 1..=2 {
        s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + p));
        s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + p));
    }
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 3));
    s.expect_none();
    // One handshake completes: its SYN-queue slot is free again.
    s.inject(seg().ack(1).seq(1).peer_port(PEER_PORT + 1));
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 3));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 3));
    s.accept(l);
}

/// RFC 4987 2: the accept queue holds at most `backlog + 1` established
/// connections (Linux's sk_acceptq_is_full); while it is full new SYNs
/// are dropped, and accepting one makes room.
#[test]
pub fn accept_queue_bounded_by_backlog() {
    let mut s = Script::with_config(|c| c.tcp.syncookies = false);
    let l = s.listen(STACK_PORT, 2);
    for p in 1..=3 {
        s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + p));
        s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + p));
        s.inject(seg().ack(1).seq(1).peer_port(PEER_PORT + p));
    }
    s.expect_none();
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 4));
    s.expect_none();
    let c = s.accept(l);
    s.expect_state(c, TcpState::Established);
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 4));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 4));
}

/// RFC 4987 2: the accept queue never grows past `backlog + 1`: the ACK
/// that completes a handshake while it is full is dropped (the connection
/// stays in SYN-RECEIVED), and a retransmission of it is taken once
/// accept() has made room.
#[test]
pub fn handshake_ack_dropped_while_accept_queue_full() {
    let mut s = Script::with_config(|c| c.tcp.syncookies = false);
    let l = s.listen(STACK_PORT, 2);
    for p in 1..=2 {
        s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + p));
        s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + p));
    }
    // Each completed handshake frees a SYN-queue slot for the next SYN.
    for p in 3..=4 {
        s.inject(seg().ack(1).seq(1).peer_port(PEER_PORT + p - 2));
        s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + p));
        s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + p));
    }
    s.inject(seg().ack(1).seq(1).peer_port(PEER_PORT + 3));
    s.inject(seg().ack(1).seq(1).peer_port(PEER_PORT + 4));
    s.expect_none();
    for _ in 0..3 {
        s.accept(l);
    }
    check!(
        s,
        s.try_accept(l) == Err(SocketError::WouldBlock),
        "the fourth handshake did not complete"
    );
    s.inject(seg().ack(1).seq(1).peer_port(PEER_PORT + 4));
    s.expect_none();
    let c = s.accept(l);
    s.expect_state(c, TcpState::Established);
}

/// RFC 4987 2: a SYN-queue entry whose SYN-ACK goes unanswered
/// (`syn_retries` retransmissions) is dropped, freeing its slot.
#[test]
pub fn syn_queue_entry_expires() {
    let mut s = Script::with_config(|c| {
        c.tcp.syncookies = false;
        c.tcp.syn_retries = 1;
    });
    s.listen(STACK_PORT, 1);
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 1));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 1));
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 2));
    s.expect_none();
    s.expect_after(1000, seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 1));
    s.expect_silence(2000);
    check!(s, s.stack.socket_count() == 1, "the entry is gone");
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 2));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 2));
}

/// RFC 4987 2: `kern.ipc.somaxconn` caps the backlog a listener asks for.
#[test]
pub fn somaxconn_caps_backlog() {
    let mut s = Script::with_config(|c| {
        c.tcp.syncookies = false;
        c.tcp.somaxconn = 1;
    });
    s.listen(STACK_PORT, 128);
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 1));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 1));
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 2));
    s.expect_none();
}

/// RFC 4987 3.6: with the SYN queue full the listener answers with a SYN
/// cookie and keeps no state; the ACK carrying the cookie creates the
/// connection (with the window scale and SACK the SYN offered, kept in the
/// timestamp), which tcp_accept returns.
#[test]
pub fn syn_cookie_when_syn_queue_full() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 1);
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 1));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 1));
    let sockets = s.stack.socket_count();
    let p = PEER_PORT + 2;
    s.inject(
        seg()
            .syn()
            .seq(500)
            .win(65535)
            .mss(1460)
            .sack_perm()
            .ts(1000, 0)
            .wscale(7)
            .peer_port(p),
    );
    s.expect(
        seg()
            .syn()
            .ack(501)
            .seq(0)
            .mss(1460)
            .sack_perm()
            .ts_ecr(1000)
            .wscale(6)
            .peer_port(p),
    );
    check!(
        s,
        s.stack.counters().tcp_syncookies_sent == 1,
        "the SYN-ACK is a cookie"
    );
    check!(
        s,
        s.stack.socket_count() == sockets,
        "a cookie keeps no state"
    );
    s.inject(seg().ack(1).seq(501).win(512).ts_echo(1001).peer_port(p));
    s.expect_none();
    let c = s.accept(l);
    s.flow.1 = p;
    s.expect_state(c, TcpState::Established);
    let info = s.info(c);
    check!(
        s,
        info.sack && info.timestamps && info.snd_wscale == 7 && info.snd_wnd == 512 << 7,
        "options from the cookie: {info:?}"
    );
    s.inject(seg().ack(1).seq(501).len(10).ts_echo(1002));
    s.inject(seg().ack(1).seq(511).len(10).ts_echo(1003));
    s.expect(seg().ack(521).seq(1).ts_ecr(1003));
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(501, 20)),
        "data on the cookie connection"
    );
}

/// RFC 4987 3.6: a cookie SYN-ACK for a SYN without timestamps carries only
/// the MSS (the cookie rounds the peer's down to one of eight values); an
/// ACK whose cookie does not verify is answered with a reset.
#[test]
pub fn syn_cookie_without_timestamps_and_bad_cookie() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 1);
    s.inject(seg().syn().seq(0).mss(1460).peer_port(PEER_PORT + 1));
    s.expect(seg().syn().ack(1).seq(0).peer_port(PEER_PORT + 1));
    let p = PEER_PORT + 2;
    s.inject(
        seg()
            .syn()
            .seq(9)
            .mss(1000)
            .sack_perm()
            .wscale(3)
            .peer_port(p),
    );
    s.expect(
        seg()
            .syn()
            .ack(10)
            .seq(0)
            .mss(1000)
            .no_sack_perm()
            .no_ts()
            .no_wscale()
            .peer_port(p),
    );
    s.inject(seg().ack(2).seq(10).peer_port(p));
    s.expect(seg().rst().seq(2).peer_port(p));
    check!(
        s,
        s.try_accept(l) == Err(SocketError::WouldBlock),
        "no connection from a bad cookie"
    );
    s.inject(seg().ack(1).seq(10).peer_port(p));
    s.expect_none();
    let c = s.accept(l);
    s.flow.1 = p;
    // The cookie keeps the MSS as one of 8 values: 1000 goes down to 536.
    s.set_nodelay(c, true);
    s.send(c, &[1; 1072]);
    s.expect(seg().ack(10).seq(1).len(536));
    s.expect(seg().ack(10).seq(537).len(536));
}
