//! Addresses (RFC 9293 3.9.1.1, 3.9.2.1, 3.10.7.2): segments to broadcast
//! or multicast addresses and SYNs from invalid sources are dropped; the
//! source address of every segment is the connection's.  Over IPv6 the
//! scripts' broadcast and multicast addresses stand for all nodes
//! (ff02::1).

use std::net::Ipv4Addr;

use stack::SocketError;

use crate::harness::{check, seg, Script, PEER_IP, STACK_PORT};

/// A second address of the stack's interface.
const VIP: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 3);

/// RFC 9293 3.9.2.1, 3.10.7.2 (MUST-57): a SYN to a broadcast or
/// multicast address is dropped silently, even by a listener on every
/// address: no SYN-ACK, no RST, no connection; the same SYN to the
/// stack's own address is answered.
#[test]
pub fn syn_to_broadcast_or_multicast_dropped() {
    let mut s = Script::new();
    let l = s.listen_on(Ipv4Addr::UNSPECIFIED, STACK_PORT, 4);
    for to in [
        Ipv4Addr::new(10, 99, 1, 255),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 1),
    ] {
        s.inject(seg().syn().seq(0).mss(1460).stack_ip(to));
        s.expect_silence(100);
    }
    // Nor a segment of no connection: no RST to a broadcast.
    s.inject(seg().ack(5).seq(9).stack_ip(Ipv4Addr::new(10, 99, 1, 255)));
    s.expect_silence(100);
    check!(
        s,
        s.try_accept(l) == Err(SocketError::WouldBlock),
        "no connection"
    );
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
}

/// RFC 9293 3.9.1.1 (MUST-63), RFC 1122 4.2.3.10: a SYN from a source
/// that is no host's (broadcast, multicast) is dropped without an answer;
/// a SYN from the peer is answered.
#[test]
pub fn syn_from_invalid_source_dropped() {
    let mut s = Script::new();
    let l = s.listen(STACK_PORT, 4);
    for from in [
        Ipv4Addr::new(10, 99, 1, 255),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 5),
    ] {
        s.inject(seg().syn().seq(0).mss(1460).peer_ip(from));
        s.expect_silence(100);
    }
    check!(
        s,
        s.try_accept(l) == Err(SocketError::WouldBlock),
        "no connection"
    );
    s.inject(seg().syn().seq(0).mss(1460).peer_ip(PEER_IP));
    s.expect(seg().syn().ack(1).seq(0));
}

/// RFC 9293 3.9.1.1, 3.10.1 (MUST-44, MUST-45): a connection opened from
/// the interface's second address (a VIP) sends every segment from it:
/// SYN, ACK, data, FIN; one opened without a local address gets the
/// address IP chooses, and keeps it.
#[test]
pub fn active_open_keeps_its_source_address() {
    let mut s = Script::with_vip(VIP);
    let c = s.connect_bound(VIP);
    s.expect(seg().syn().seq(0).stack_ip(VIP));
    s.inject(seg().syn().ack(1).seq(0).win(65535).mss(1460).stack_ip(VIP));
    s.expect(seg().ack(1).seq(1).stack_ip(VIP));
    s.send_n(c, 100);
    s.expect(seg().ack(1).seq(1).len(100).stack_ip(VIP));
    s.expect_after(200, seg().ack(1).seq(1).len(100).stack_ip(VIP));
    s.inject(seg().ack(101).seq(1).stack_ip(VIP));
    s.close(c);
    s.expect(seg().fin().ack(1).seq(101).stack_ip(VIP));
    // Either address will do (over IPv6 both match the peer's prefix
    // as well, RFC 6724 rule 8); the one chosen stays.
    let d = s.connect();
    let src = s
        .expect(seg().syn().seq(0).stack_ip(Ipv4Addr::UNSPECIFIED))
        .stack_ip;
    let syn_ack = seg().syn().ack(1).seq(0).win(65535).mss(1460);
    s.inject(syn_ack.stack_ip(src));
    s.expect(seg().ack(1).seq(1).stack_ip(src));
    s.send_n(d, 10);
    s.expect(seg().ack(1).seq(1).len(10).stack_ip(src));
}

/// RFC 9293 3.9.1.1, 3.10.7.2 (MUST-45): a listener on every address
/// answers a SYN to the VIP from the VIP, and the connection keeps it for
/// its data and for the RST of an abort; a SYN to the primary address is
/// answered from that one.
#[test]
pub fn passive_open_answers_from_the_address_called() {
    let mut s = Script::with_vip(VIP);
    let l = s.listen_on(Ipv4Addr::UNSPECIFIED, STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460).stack_ip(VIP));
    s.expect(seg().syn().ack(1).seq(0).stack_ip(VIP));
    s.inject(seg().ack(1).seq(1).stack_ip(VIP));
    let c = s.accept(l);
    s.send_n(c, 10);
    s.expect(seg().ack(1).seq(1).len(10).stack_ip(VIP));
    s.inject(seg().ack(11).seq(1).stack_ip(VIP));
    s.set_linger_zero(c);
    s.close(c);
    s.expect(seg().rst().ack(1).seq(11).stack_ip(VIP));
    s.flow.1 = 40001;
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
}

/// RFC 9293 3.9.1.1 (MUST-42): listeners on one port of two local
/// addresses live side by side, each answering the SYNs to its address.
#[test]
pub fn listens_on_one_port_per_address() {
    let mut s = Script::with_vip(VIP);
    let a = s.listen_on(crate::harness::STACK_IP, STACK_PORT, 4);
    let b = s.listen_on(VIP, STACK_PORT, 4);
    s.inject(seg().syn().seq(0).mss(1460));
    s.expect(seg().syn().ack(1).seq(0));
    s.inject(seg().ack(1).seq(1));
    s.flow.1 = 40001;
    s.inject(seg().syn().seq(0).mss(1460).stack_ip(VIP));
    s.expect(seg().syn().ack(1).seq(0).stack_ip(VIP));
    s.inject(seg().ack(1).seq(1).stack_ip(VIP));
    s.accept(a);
    s.accept(b);
}

/// RFC 9293 3.9.1.1 (MUST-46): an OPEN to a broadcast (the subnet's or
/// the limited one) or multicast address is refused (EINVAL) and sends
/// nothing.
#[test]
pub fn connect_to_broadcast_or_multicast_refused() {
    let mut s = Script::new();
    for to in [
        Ipv4Addr::new(10, 99, 1, 255),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::new(224, 0, 0, 1),
    ] {
        check!(
            s,
            s.try_connect_to(to, 80) == Err(SocketError::InvalidArgument),
            "connect to {to} refused"
        );
        s.expect_none();
    }
}
