//! Options: the MSS (RFC 9293 3.7.1, RFC 6691), window scaling and
//! timestamps (RFC 7323).

use stack::{Duration, SocketError, SocketHandle};

use crate::harness::{check, over_v6, pattern, seg, Script, STACK_PORT};

/// Passive open with every option: MSS 1460, SACK-permitted, timestamps
/// (peer TSval 100) and window scale `peer_shift`.
fn open_with_options(s: &mut Script, peer_shift: u8) -> SocketHandle {
    let l = s.listen(STACK_PORT, 8);
    s.inject(
        seg()
            .syn()
            .seq(0)
            .win(65535)
            .mss(1460)
            .sack_perm()
            .ts(100, 0)
            .wscale(peer_shift),
    );
    s.expect(seg().syn().ack(1).seq(0).ts_ecr(100));
    s.inject(seg().ack(1).seq(1).win(65535).ts_echo(101));
    s.expect_none();
    s.accept(l)
}

/// RFC 9293 3.7.1: the MSS offered is the route's MTU minus 40 (interface
/// MTU 1400: MSS 1360), in SYN and SYN-ACK alike.
#[test]
pub fn mss_from_interface_mtu() {
    let mut s = Script::with_mtu(1400, |_| {});
    s.connect();
    s.expect(seg().syn().seq(0).mss(1360));
    s.listen(STACK_PORT, 4);
    s.flow = (STACK_PORT, 50000);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0).mss(1360));
}

/// RFC 9293 3.7.1: the stack never sends segments larger than the MSS the
/// peer announced, and sends the MSS option in SYNs only (MUST-65).
#[test]
pub fn peer_mss_limits_segments() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(536));
    s.expect(seg().syn().ack(1).seq(0).mss(1460));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    s.set_nodelay(c, true);
    s.send_n(c, 1200);
    s.expect(seg().ack(1).seq(1).len(536).no_mss());
    s.expect(seg().ack(1).seq(537).len(536).no_mss());
    s.expect(seg().ack(1).seq(1073).len(128).no_mss());
    s.expect_none();
}

/// RFC 9293 3.7.1 (MUST-15): without an MSS option the send MSS is 536
/// over IPv4, 1220 over IPv6.
#[test]
pub fn default_send_mss() {
    let mss = if over_v6() { 1220 } else { 536 };
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).no_mss());
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    s.send_n(c, 2 * mss);
    s.expect(seg().ack(1).seq(1).len(mss));
    s.expect(seg().ack(1).seq(1 + mss as u32).len(mss));
}

/// RFC 6691 2: the MSS counts no TCP options, so with timestamps (12
/// bytes) the payload of a full segment is MSS - 12.
#[test]
pub fn timestamps_reduce_payload() {
    let mut s = Script::new();
    let c = open_with_options(&mut s, 7);
    s.send_n(c, 3000);
    s.expect(seg().ack(1).seq(1).len(1448).ts_ecr(101));
    s.expect(seg().ack(1).seq(1449).len(1448).ts_ecr(101));
}

/// RFC 7323 2.2 (with RFC 2018 2): the SYN-ACK answers the options of
/// the SYN: window scale, SACK-permitted and timestamps (TSecr = the SYN's
/// TSval); its window is not scaled.
#[test]
pub fn syn_ack_answers_offered_options() {
    let mut s = Script::new();
    s.listen(STACK_PORT, 4);
    s.inject(
        seg()
            .syn()
            .seq(0)
            .win(65535)
            .mss(1460)
            .sack_perm()
            .ts(100, 0)
            .wscale(7),
    );
    s.expect(
        seg()
            .syn()
            .ack(1)
            .seq(0)
            .win(65535)
            .mss(1460)
            .sack_perm()
            .ts_ecr(100)
            .wscale(6),
    );
}

/// RFC 7323 2.2: no window scale option in a SYN-ACK unless the SYN had
/// one, and then no scaling either way.
#[test]
pub fn no_window_scale_unless_offered() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).win(1000).mss(1460).ts(100, 0));
    s.expect(seg().syn().ack(1).seq(0).ts_ecr(100).no_wscale());
    s.inject(seg().ack(1).seq(1).win(1000).ts_echo(101));
    let c = s.accept(l);
    check!(s, s.info(c).snd_wnd == 1000, "the peer's window unscaled");
    s.inject(seg().ack(1).seq(1).len(100).ts_echo(102));
    s.expect_after(40, seg().ack(101).seq(1).win(65435).ts_ecr(102));
}

/// RFC 7323 2.3: after the handshake the windows are scaled: ours is sent
/// shifted right by our shift (6), the peer's is shifted left by its own.
#[test]
pub fn windows_scaled_after_handshake() {
    let mut s = Script::new();
    let c = open_with_options(&mut s, 2);
    s.set_nodelay(c, true);
    s.inject(seg().ack(1).seq(1).win(100).ts_echo(102));
    check!(s, s.info(c).snd_wnd == 400, "100 << 2: {:?}", s.info(c));
    s.send_n(c, 1000);
    s.expect(seg().ack(1).seq(1).len(400).win(1024));
    s.expect_none();
    s.inject(seg().ack(401).seq(1).win(150).ts_echo(103));
    s.expect(seg().ack(1).seq(401).len(600).win(1024));
}

/// RFC 7323 2.2: a SYN-ACK's window is never scaled, so a 256 KiB buffer
/// is offered as 65535; the handshake's last ACK gets no ACK of its own
/// (no window update for what the SYN could not say), and the next
/// segment advertises the whole buffer, scaled by our shift (6).
#[test]
pub fn large_buffer_offered_unscaled_then_whole_without_an_ack_for_the_ack() {
    let mut s = Script::with_config(|c| c.tcp.recv_space = 256 << 10);
    // The handshake expects nothing after its last ACK.
    open_with_options(&mut s, 2);
    s.inject(seg().ack(1).seq(1).len(1000).ts_echo(102));
    s.expect_after(
        40,
        seg()
            .ack(1001)
            .seq(1)
            .win((((256 << 10) - 1000) >> 6) as u16),
    );
}

/// RFC 7323 4.3: TSecr echoes TS.Recent, which only an in-order segment
/// (SEG.SEQ <= Last.ACK.sent) updates: out-of-order data keeps the old
/// value, the segment that fills the hole sets it.
#[test]
pub fn timestamp_echo_rules() {
    let mut s = Script::new();
    open_with_options(&mut s, 7);
    s.inject(seg().ack(1).seq(1).len(100).ts_echo(200));
    s.inject(seg().ack(1).seq(201).len(100).ts_echo(300));
    s.expect(seg().ack(101).seq(1).ts_ecr(200).sack(&[(201, 301)]));
    s.inject(seg().ack(1).seq(101).len(100).ts_echo(250));
    s.expect(seg().ack(301).seq(1).ts_ecr(250).no_sack());
}

/// RFC 7323 4.1 (with RFC 6298 2.2, 2.3): RTT measurement from TSecr: a
/// 50 ms handshake gives SRTT 50 ms, RTTVAR 25 ms, RTO 200 ms; then a
/// 100 ms sample gives SRTT 56.25 ms.
#[test]
pub fn rtt_measured_from_timestamps() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0).ts_ecr(0));
    s.advance(50);
    s.inject(
        seg()
            .syn()
            .ack(1)
            .seq(0)
            .mss(1460)
            .sack_perm()
            .wscale(7)
            .ts_echo(500),
    );
    s.expect(seg().ack(1).seq(1).ts_ecr(500));
    let i = s.info(c);
    check!(
        s,
        i.srtt == Duration::from_millis(50)
            && i.rttvar == Duration::from_millis(25)
            && i.rto == Duration::from_millis(200),
        "after the handshake: {i:?}"
    );
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100).ts_ecr(500));
    s.advance(100);
    s.inject(seg().ack(101).seq(1).ts_echo(600));
    let i = s.info(c);
    check!(
        s,
        i.srtt == Duration::from_micros(56_250) && i.rttvar == Duration::from_micros(31_250),
        "after a 100 ms sample: {i:?}"
    );
}

/// RFC 7323 5.3: PAWS: a segment whose TSval is older than TS.Recent is
/// dropped and answered with an ACK; a RST is exempt.
#[test]
pub fn paws_drops_old_timestamps() {
    let mut s = Script::new();
    let c = open_with_options(&mut s, 7);
    s.inject(seg().ack(1).seq(1).len(100).ts_echo(90));
    s.expect(seg().ack(1).seq(1).ts_ecr(101));
    check!(
        s,
        s.recv(c, 1000) == Err(SocketError::WouldBlock),
        "old data dropped"
    );
    s.inject(seg().ack(1).seq(1).len(100).ts_echo(110));
    s.expect_after(40, seg().ack(101).seq(1).ts_ecr(110));
    check!(
        s,
        s.recv(c, 1000) == Ok(pattern(1, 100)),
        "fresh data taken"
    );
    s.inject(seg().rst().seq(101).ts(5, 0));
    s.expect_none();
    check!(
        s,
        s.take_error(c) == Some(SocketError::ConnectionReset),
        "RST taken whatever its timestamp"
    );
}

/// RFC 7323 2.2: the window of a SYN-ACK is never scaled; the peer's
/// shift applies from the next segment on.
#[test]
pub fn syn_ack_window_not_scaled() {
    let mut s = Script::new();
    let c = s.connect();
    s.expect(seg().syn().seq(0).wscale(6));
    s.inject(seg().syn().ack(1).seq(0).win(1000).mss(1460).wscale(7));
    s.expect(seg().ack(1).seq(1).win(1024));
    check!(s, s.info(c).snd_wnd == 1000, "unscaled: {:?}", s.info(c));
    s.inject(seg().ack(1).seq(1).win(1000));
    check!(s, s.info(c).snd_wnd == 128_000, "scaled: {:?}", s.info(c));
}

/// RFC 7323 2.3: a window scale above 14 is taken as 14.
#[test]
pub fn window_scale_above_14_is_14() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460).wscale(15));
    s.expect(seg().syn().ack(1).seq(0).wscale(6));
    s.inject(seg().ack(1).seq(1).win(1));
    let c = s.accept(l);
    let i = s.info(c);
    check!(
        s,
        i.snd_wscale == 14 && i.snd_wnd == 1 << 14,
        "shift 14: {i:?}"
    );
}

/// RFC 9293 3.1 (MUST-5, MUST-6): a SYN carrying options the stack does
/// not know (an experimental option, MPTCP's capable option, Fast Open's
/// cookie request) is answered, the unknown options ignored and the known
/// ones (MSS 1000) taken; a data segment with an unknown option is taken.
#[test]
pub fn unknown_options_ignored() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    let opts = [
        254, 6, 0xf9, 0x89, 0, 0, // RFC 6994 experimental, ExID 0xf989
        30, 4, 0x00, 0x81, // MPTCP MP_CAPABLE (RFC 8684), version 1
        34, 2, // TCP Fast Open cookie request (RFC 7413)
        2, 4, 0x03, 0xe8, // MSS 1000
    ];
    s.inject(seg().syn().seq(0).raw_options(&opts));
    s.expect(seg().syn().ack(1).seq(0).no_ts().no_sack_perm().no_wscale());
    s.inject(seg().ack(1).seq(1).raw_options(&[77, 3, 9, 1]));
    let c = s.accept(l);
    s.inject(seg().ack(1).seq(1).len(10).raw_options(&[1, 253, 4, 0, 0]));
    s.expect_within(0, 500, seg().ack(11).seq(1));
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(1, 10)),
        "the data of the segment with an unknown option"
    );
    s.set_nodelay(c, true);
    s.send_n(c, 1500);
    s.expect(seg().ack(11).seq(1).len(1000));
    s.expect(seg().ack(11).seq(1001).len(500));
}

/// RFC 9293 3.2 (MUST-64): options that do not begin on a word boundary
/// are read: MSS 1000 after one NOP, window scale after three.
#[test]
pub fn unaligned_options_read() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    s.inject(
        seg()
            .syn()
            .seq(0)
            .win(100)
            .raw_options(&[1, 2, 4, 0x03, 0xe8, 1, 1, 1, 3, 3, 2]),
    );
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1).win(100));
    let c = s.accept(l);
    check!(
        s,
        s.info(c).snd_wscale == 2 && s.info(c).snd_wnd == 400,
        "window scale 2 read: {:?}",
        s.info(c)
    );
    s.set_nodelay(c, true);
    s.send_n(c, 400);
    s.expect(seg().ack(1).seq(1).len(400));
    s.inject(seg().ack(401).seq(1).win(1000));
    s.send_n(c, 1500);
    s.expect(seg().ack(1).seq(401).len(1000));
    s.expect(seg().ack(1).seq(1401).len(500));
}

/// RFC 9293 3.1 (MUST-7): an option whose length is zero, one, or reaches
/// past the header cannot be read, nor can the options after it: the
/// segment is dropped and counted (a reset would let a forged segment end
/// a connection), and the stack carries on: the same SYN without the bad
/// option is answered, and on the connection a data segment with a bad
/// option is dropped while its clean retransmission is taken.
#[test]
pub fn illegal_option_length_dropped() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    let before = s.stack.counters().rx_drop_tcp_malformed;
    for bad in [
        &[2, 4, 5, 180, 99, 0][..],
        &[2, 4, 5, 180, 99, 1],
        &[2, 4, 5, 180, 99, 40],
        &[2, 0, 5, 180],
        &[8, 10, 0, 0],
    ] {
        s.inject(seg().syn().seq(0).raw_options(bad));
        s.expect_none();
    }
    check!(
        s,
        s.stack.counters().rx_drop_tcp_malformed == before + 5,
        "five dropped as malformed: {}",
        s.stack.counters().rx_drop_tcp_malformed - before
    );
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    s.inject(seg().ack(1).seq(1).len(10).raw_options(&[1, 1, 5, 0]));
    s.expect_none();
    s.inject(seg().ack(1).seq(1).len(10));
    s.expect_within(0, 500, seg().ack(11).seq(1));
    check!(
        s,
        s.recv(c, 100) == Ok(pattern(1, 10)),
        "the clean copy's data"
    );
}

/// RFC 9293 3.7.1 (MUST-16): the segment size is bounded by the local
/// MTU as well as the peer's MSS: a peer announcing 1460 over a link of
/// MTU 1300 gets segments of 1260 bytes.
#[test]
pub fn local_mtu_bounds_segments() {
    let mut s = Script::with_mtu(1300, |_| {});
    let l = s.listen(STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0).mss(1260));
    s.inject(seg().ack(1).seq(1));
    let c = s.accept(l);
    s.set_nodelay(c, true);
    s.send_n(c, 2600);
    s.expect(seg().ack(1).seq(1).len(1260));
    s.expect(seg().ack(1).seq(1261).len(1260));
    s.expect(seg().ack(1).seq(2521).len(80));
}
