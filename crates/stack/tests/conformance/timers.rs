//! The persist timer and zero-window probes (RFC 9293 3.8.6.1, RFC 1122
//! 4.2.2.17) and keep-alives (RFC 9293 3.8.4, RFC 1122 4.2.3.6).

use stack::{Duration, TcpState};

use crate::harness::{seg, Script, STACK_PORT};

/// RFC 9293 3.8.6.1: with the peer's window at zero and data to send, the
/// stack probes the window after an RTO, backing off exponentially, and
/// sends as soon as the window opens.
#[test]
pub fn zero_window_probes() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).win(65535).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1).win(0));
    let c = s.accept(l);
    s.send_n(c, 100);
    s.expect_none();
    // The first probe after one RTO (1 s: no RTT measured), then 2 s, 4 s.
    s.expect_after(1000, seg().ack(1).seq(0).len(0));
    s.inject(seg().ack(1).seq(1).win(0));
    s.expect_after(2000, seg().ack(1).seq(0).len(0));
    s.inject(seg().ack(1).seq(1).win(0));
    s.expect_after(4000, seg().ack(1).seq(0).len(0));
    s.inject(seg().ack(1).seq(1).win(1000));
    s.expect(seg().ack(1).seq(1).len(100));
    s.expect_state(c, TcpState::Established);
}

/// RFC 1122 4.2.2.17: the connection stays open as long as the peer
/// answers the zero-window probes, however many (the interval backs off
/// to the RTO ceiling, 60 s; retransmission limits do not apply).
#[test]
pub fn zero_window_probes_never_give_up() {
    let mut s = Script::with_config(|c| c.tcp.max_retries = 3);
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1).win(0));
    let c = s.accept(l);
    s.send_n(c, 100);
    let mut interval = 1000;
    for _ in 0..12 {
        s.expect_after(interval, seg().ack(1).seq(0).len(0));
        s.inject(seg().ack(1).seq(1).win(0));
        interval = (interval * 2).min(60_000);
    }
    s.expect_state(c, TcpState::Established);
    s.inject(seg().ack(1).seq(1).win(500));
    s.expect(seg().ack(1).seq(1).len(100));
}

/// RFC 5482 3 (MUST-21): with a user timeout (TCP_USER_TIMEOUT, 10 s)
/// a window that stays closed ends the connection even though the peer
/// answers every probe: the first probe (1 s) starts the clock, the
/// probes back off (3 s, 7 s), the next one is cut short to the timeout
/// (11 s), where a RST goes and the connection fails with ETIMEDOUT
/// (Linux's `tcp_probe_timer`).
#[test]
pub fn user_timeout_bounds_zero_window_probes() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1).win(0));
    let c = s.accept(l);
    s.set_user_timeout(c, 10_000);
    s.send_n(c, 100);
    for interval in [1000, 2000, 4000] {
        s.expect_after(interval, seg().ack(1).seq(0).len(0));
        s.inject(seg().ack(1).seq(1).win(0));
    }
    s.expect_after(4000, seg().rst().ack(1).seq(1));
    s.expect_timed_out(c);
}

/// RFC 5482 3 (MUST-21): with a user timeout keep-alive gives up when the
/// peer has been silent that long (15.5 s here), not after `keepcnt` (3)
/// probes: probes every second from 10 s to 15 s, the RST at 16 s
/// (Linux's `tcp_keepalive_timer`).
#[test]
pub fn user_timeout_replaces_the_keepalive_count() {
    let mut s = Script::with_config(|c| {
        c.tcp.keepidle = Duration::from_secs(10);
        c.tcp.keepintvl = Duration::from_secs(1);
        c.tcp.keepcnt = 3;
    });
    let (_, c) = s.passive_open();
    s.set_user_timeout(c, 15_500);
    s.set_keepalive(c, true);
    s.expect_after(10_000, seg().ack(1).seq(0).len(0));
    for _ in 0..5 {
        s.expect_after(1000, seg().ack(1).seq(0).len(0));
    }
    s.expect_after(1000, seg().rst().ack(1).seq(1));
    s.expect_timed_out(c);
}

/// RFC 9293 3.8.6.1: a window that closes while data is in flight: once the
/// data is ACKed with a zero window, the rest waits and probes go out.
#[test]
pub fn window_closes_mid_transfer() {
    let mut s = Script::new();
    let (_, c) = s.passive_open();
    s.send_n(c, 3000);
    s.expect(seg().ack(1).seq(1).len(1460));
    s.expect(seg().ack(1).seq(1461).len(1460));
    s.inject(seg().ack(2921).seq(1).win(0));
    s.expect_none();
    s.expect_within(200, 1000, seg().ack(1).seq(2920).len(0));
    s.inject(seg().ack(2921).seq(1).win(100));
    s.expect(seg().ack(1).seq(2921).len(80));
}

/// RFC 9293 3.8.4: keep-alives: after `keepidle` of silence a probe (one
/// below SND.NXT, no data), then one every `keepintvl`; after `keepcnt`
/// unanswered probes the connection is reset with ETIMEDOUT.
#[test]
pub fn keepalive_probes_then_reset() {
    let mut s = Script::with_config(|c| {
        c.tcp.keepidle = Duration::from_secs(10);
        c.tcp.keepintvl = Duration::from_secs(1);
        c.tcp.keepcnt = 3;
    });
    let (_, c) = s.passive_open();
    s.set_keepalive(c, true);
    s.expect_after(10_000, seg().ack(1).seq(0).len(0));
    s.expect_after(1000, seg().ack(1).seq(0).len(0));
    s.expect_after(1000, seg().ack(1).seq(0).len(0));
    s.expect_after(1000, seg().rst().ack(1).seq(1));
    s.expect_timed_out(c);
}

/// RFC 9293 3.8.4: an answered keep-alive (or any segment) restarts the
/// idle time: the next probe comes `keepidle` later.
#[test]
pub fn keepalive_answered() {
    let mut s = Script::with_config(|c| {
        c.tcp.keepidle = Duration::from_secs(10);
        c.tcp.keepintvl = Duration::from_secs(1);
        c.tcp.keepcnt = 3;
    });
    let (_, c) = s.passive_open();
    s.set_keepalive(c, true);
    s.expect_after(10_000, seg().ack(1).seq(0).len(0));
    s.expect_after(1000, seg().ack(1).seq(0).len(0));
    s.inject(seg().ack(1).seq(1));
    s.expect_after(10_000, seg().ack(1).seq(0).len(0));
    s.expect_state(c, TcpState::Established);
}

/// RFC 9293 3.8.4: keep-alives are off unless asked for.
#[test]
pub fn keepalive_off_by_default() {
    let mut s = Script::with_config(|c| c.tcp.keepidle = Duration::from_secs(10));
    let (_, c) = s.passive_open();
    s.expect_silence(100_000);
    s.expect_state(c, TcpState::Established);
}
