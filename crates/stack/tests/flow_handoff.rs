//! Flows shared between processes (`Stack::set_flow_handoff`): two stacks
//! with one address, as two processes on one AF_PACKET fanout group, and
//! a segment of one's connection reaching the other.

use stack::{IfaceId, Instant, RxMeta, SocketHandle, Stack, TcpState, VecSink};

mod common;
use common::{addr, seeded_stack_on_subnet as stack};

const IF0: IfaceId = IfaceId(0);

/// The TCP flags of an IPv4 frame.
fn tcp_flags(frame: &[u8]) -> u8 {
    assert_eq!(&frame[12..14], &[0x08, 0x00], "an IPv4 frame");
    frame[14 + 20 + 13]
}

/// Lets `b` learn `a`'s address (`b`'s frames wait for it): delivers `b`'s
/// ARP request to `a` and the reply back, and returns what `b` sends then.
fn resolve(a: &mut Stack, b: &mut Stack, out: VecSink, now: Instant) -> Vec<Vec<u8>> {
    let mut back = VecSink::default();
    for (_, f) in out.frames {
        a.receive(now, IF0, &f, RxMeta::default(), &mut back);
    }
    let mut sent = VecSink::default();
    for (_, f) in back.frames {
        b.receive(now, IF0, &f, RxMeta::default(), &mut sent);
    }
    sent.frames.into_iter().map(|(_, f)| f).collect()
}

const RST: u8 = 0x04;

/// The client `a`, and the two processes `b1` (which gets the handshake)
/// and `b2` (which does not), both listening on 10.99.1.2:80, both with
/// handoff on.  Returns the stacks, a's connection and b1's.
fn setup() -> (Stack, Stack, Stack, SocketHandle, SocketHandle, Instant) {
    let now = Instant::from_secs(1);
    let mut a = stack(1, 1);
    let mut b1 = stack(2, 2);
    let mut b2 = stack(2, 3);
    b1.set_flow_handoff(true);
    b2.set_flow_handoff(true);
    let l1 = b1.tcp_listen(addr(2, 80), 16).unwrap();
    b2.tcp_listen(addr(2, 80), 16).unwrap();
    let (mut sa, mut sb) = (VecSink::default(), VecSink::default());
    let c = a.tcp_connect(now, addr(2, 80), None, &mut sa).unwrap();
    for _ in 0..10 {
        for (_, f) in std::mem::take(&mut sa.frames) {
            b1.receive(now, IF0, &f, RxMeta::default(), &mut sb);
        }
        for (_, f) in std::mem::take(&mut sb.frames) {
            a.receive(now, IF0, &f, RxMeta::default(), &mut sa);
        }
    }
    assert_eq!(a.tcp_state(c).unwrap(), TcpState::Established);
    let (s, _) = b1.tcp_accept(l1).unwrap();
    (a, b1, b2, c, s, now)
}

/// A data segment from `a` on its connection.
fn data_segment(a: &mut Stack, c: SocketHandle, now: Instant) -> Vec<u8> {
    let mut sa = VecSink::default();
    a.tcp_send(now, c, b"hello", &mut sa).unwrap();
    assert_eq!(sa.frames.len(), 1);
    sa.frames.remove(0).1
}

#[test]
fn a_segment_of_another_process_is_offered_not_reset() {
    let (mut a, mut b1, mut b2, c, s, now) = setup();
    let seg = data_segment(&mut a, c, now);
    // b2 has a listener but not the connection: it sends nothing and says
    // the frame is to be offered.
    let mut out = VecSink::default();
    b2.receive(now, IF0, &seg, RxMeta::default(), &mut out);
    assert!(
        out.frames.is_empty(),
        "no reset from the process without the flow"
    );
    assert!(b2.take_handoff());
    assert!(!b2.take_handoff(), "asking clears it");
    assert_eq!(b2.counters().tcp_handoff_offered, 1);
    // b1 has it: it takes the frame (and acknowledges the data).
    let mut out1 = VecSink::default();
    assert!(b1.receive_handed_over(now, IF0, &seg, RxMeta::default(), &mut out1));
    assert!(!b1.take_handoff());
    let mut buf = [0u8; 16];
    assert_eq!(b1.tcp_recv(now, s, &mut buf, &mut out1), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(b1.counters().tcp_handoff_taken, 1);
}

#[test]
fn an_offered_segment_of_nobody_is_dropped_then_reset_by_the_offerer() {
    let (mut a, _b1, mut b2, c, _s, now) = setup();
    let seg = data_segment(&mut a, c, now);
    let mut b3 = stack(2, 4);
    b3.set_flow_handoff(true);
    // Offered to a process that does not have it either: dropped, counted,
    // not offered again, no reset.
    let mut out = VecSink::default();
    assert!(!b3.receive_handed_over(now, IF0, &seg, RxMeta::default(), &mut out));
    assert!(out.frames.is_empty());
    assert!(!b3.take_handoff());
    assert_eq!(b3.counters().rx_drop_tcp_handoff_unclaimed, 1);
    // Nobody claimed it: the offerer answers as if the ports were not
    // shared, with a reset.
    let mut out2 = VecSink::default();
    b2.receive_unclaimed(now, IF0, &seg, RxMeta::default(), &mut out2);
    assert!(!b2.take_handoff());
    let sent = resolve(&mut a, &mut b2, out2, now);
    assert_eq!(sent.len(), 1);
    assert_ne!(tcp_flags(&sent[0]) & RST, 0, "a reset");
}

#[test]
fn without_handoff_a_segment_of_no_connection_is_reset() {
    let (mut a, _b1, mut b2, c, _s, now) = setup();
    b2.set_flow_handoff(false);
    let seg = data_segment(&mut a, c, now);
    let mut out = VecSink::default();
    b2.receive(now, IF0, &seg, RxMeta::default(), &mut out);
    assert!(!b2.take_handoff());
    let sent = resolve(&mut a, &mut b2, out, now);
    assert_eq!(sent.len(), 1);
    assert_ne!(tcp_flags(&sent[0]) & RST, 0, "a reset");
}

/// A SYN from `a` to 10.99.1.2:`port` (a new connection's first segment).
fn syn_segment(a: &mut Stack, port: u16, now: Instant) -> Vec<u8> {
    let mut sa = VecSink::default();
    a.tcp_connect(now, addr(2, port), None, &mut sa).unwrap();
    assert_eq!(sa.frames.len(), 1);
    let syn = sa.frames.remove(0).1;
    assert_eq!(tcp_flags(&syn) & 0x12, 0x02, "a SYN without ACK");
    syn
}

/// The client `a` (10.99.1.1) and a process `b` (10.99.1.2), each
/// knowing the other's address (`setup`'s `a` and `b1`), `b` with handoff
/// `on`, which listened on port 8080 and closed that listener.
fn closed_listener(on: bool) -> (Stack, Stack, Instant) {
    let (a, mut b, _, _, _, now) = setup();
    b.set_flow_handoff(on);
    let l = b.tcp_listen(addr(2, 8080), 16).unwrap();
    let mut out = VecSink::default();
    b.tcp_close(now, l, &mut out).unwrap();
    assert!(out.frames.is_empty());
    (a, b, now)
}

#[test]
fn a_syn_nobody_took_to_a_port_whose_listener_closed_while_shared_is_dropped_not_refused() {
    let (mut a, mut b, now) = closed_listener(true);
    // b closed its listener (an old nginx worker at a reload); a new
    // connection's SYN reaches it and is offered ...
    let syn = syn_segment(&mut a, 8080, now);
    let mut out = VecSink::default();
    b.receive(now, IF0, &syn, RxMeta::default(), &mut out);
    assert!(out.frames.is_empty());
    assert!(b.take_handoff(), "offered to the group");
    // ... and nobody takes it (the new workers do not receive yet):
    // dropped, counted, no reset; the client's next SYN finds the
    // listener that takes the port over.
    b.receive_unclaimed(now, IF0, &syn, RxMeta::default(), &mut out);
    assert!(
        out.frames.is_empty(),
        "no reset: {} frames",
        out.frames.len()
    );
    assert_eq!(b.counters().rx_drop_tcp_syn_listener_moved, 1);
    assert_eq!(b.counters().rx_drop_tcp_no_socket, 0);
    // A SYN to a port nobody listened on here is refused, as before.
    let other = syn_segment(&mut a, 8081, now);
    let mut refused = VecSink::default();
    b.receive_unclaimed(now, IF0, &other, RxMeta::default(), &mut refused);
    assert_eq!(refused.frames.len(), 1);
    assert_ne!(tcp_flags(&refused.frames[0].1) & RST, 0, "a reset");
    assert_eq!(b.counters().rx_drop_tcp_syn_listener_moved, 1);
}

#[test]
fn a_listener_closed_without_sharing_leaves_its_port_refused() {
    let (mut a, mut b, now) = closed_listener(false);
    let syn = syn_segment(&mut a, 8080, now);
    let mut out = VecSink::default();
    b.receive(now, IF0, &syn, RxMeta::default(), &mut out);
    assert!(!b.take_handoff());
    assert_eq!(out.frames.len(), 1);
    assert_ne!(tcp_flags(&out.frames[0].1) & RST, 0, "a reset");
    assert_eq!(b.counters().rx_drop_tcp_syn_listener_moved, 0);
}
