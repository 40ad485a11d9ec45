//! SACK: the receiver's blocks (RFC 2018) and the sender's loss recovery
//! from them (RFC 6675).

use crate::harness::{check, seg, Script, STACK_PORT};
use stack::SocketHandle;

/// Passive open with MSS 1000 and SACK-permitted, no timestamps.
pub fn open_sack(s: &mut Script) -> SocketHandle {
    let l = s.listen(STACK_PORT, 8);
    s.inject(seg().syn().seq(0).win(65535).mss(1000).sack_perm());
    s.expect(seg().syn().ack(1).seq(0).sack_perm());
    s.inject(seg().ack(1).seq(1).win(65535));
    s.accept(l)
}

/// Queues `n` segments of 1000 bytes and checks they all leave at once.
pub fn send_segments(s: &mut Script, c: SocketHandle, n: u32) {
    s.send_n(c, n as usize * 1000);
    for i in 0..n {
        s.expect(seg().ack(1).seq(1 + 1000 * i).len(1000));
    }
    s.expect_none();
}

/// RFC 2018 4: out-of-order data is ACKed at once with SACK blocks, the
/// block holding the newest segment first, then the most recently
/// reported others; blocks merge as holes fill and vanish when RCV.NXT
/// passes them.
#[test]
pub fn sack_blocks_for_out_of_order_data() {
    let mut s = Script::new();
    open_sack(&mut s);
    s.inject(seg().ack(1).seq(1).len(100));
    s.inject(seg().ack(1).seq(201).len(100));
    s.expect(seg().ack(101).seq(1).sack(&[(201, 301)]));
    s.inject(seg().ack(1).seq(401).len(100));
    s.expect(seg().ack(101).seq(1).sack(&[(401, 501), (201, 301)]));
    s.inject(seg().ack(1).seq(601).len(100));
    s.expect(
        seg()
            .ack(101)
            .seq(1)
            .sack(&[(601, 701), (401, 501), (201, 301)]),
    );
    s.inject(seg().ack(1).seq(301).len(100));
    s.expect(seg().ack(101).seq(1).sack(&[(201, 501), (601, 701)]));
    s.inject(seg().ack(1).seq(101).len(100));
    s.expect(seg().ack(501).seq(1).sack(&[(601, 701)]));
    s.inject(seg().ack(1).seq(501).len(100));
    s.expect(seg().ack(701).seq(1).no_sack());
    s.expect_none();
}

/// RFC 6675 5: SACK-based recovery retransmits the segments SACK shows
/// lost (the first on the third duplicate ACK, the next once three
/// segments above it are SACKed) and never the SACKed ones.
#[test]
pub fn sack_recovery_retransmits_only_holes() {
    let mut s = Script::new();
    let c = open_sack(&mut s);
    send_segments(&mut s, c, 10);
    // Segments 1:1001 and 3001:4001 are lost.
    s.inject(seg().ack(1).seq(1).sack(&[(1001, 2001)]));
    s.inject(seg().ack(1).seq(1).sack(&[(1001, 3001)]));
    s.expect_none();
    s.inject(seg().ack(1).seq(1).sack(&[(4001, 5001), (1001, 3001)]));
    s.expect(seg().ack(1).seq(1).len(1000));
    s.expect_none();
    s.inject(seg().ack(1).seq(1).sack(&[(4001, 6001), (1001, 3001)]));
    s.expect_none();
    s.inject(seg().ack(1).seq(1).sack(&[(4001, 7001), (1001, 3001)]));
    s.expect(seg().ack(1).seq(3001).len(1000));
    s.expect_none();
    s.inject(seg().ack(1).seq(1).sack(&[(4001, 10001), (1001, 3001)]));
    s.inject(seg().ack(3001).seq(1).sack(&[(4001, 10001)]));
    s.expect_none();
    s.inject(seg().ack(10001).seq(1));
    s.expect_none();
    let info = s.info(c);
    check!(
        s,
        info.total_retrans == 2 && info.unacked == 0,
        "two retransmissions: {info:?}"
    );
}

/// RFC 6675 5: recovery starts before the third duplicate ACK when SACK
/// already shows the first segment lost (more than 2 * SMSS SACKed above).
#[test]
pub fn sack_loss_detected_before_three_dupacks() {
    let mut s = Script::new();
    let c = open_sack(&mut s);
    send_segments(&mut s, c, 10);
    s.inject(seg().ack(1).seq(1).sack(&[(1001, 4001)]));
    s.expect(seg().ack(1).seq(1).len(1000));
    s.expect_none();
}
