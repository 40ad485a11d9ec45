//! A server that closes first keeps TIME-WAIT; a client that reconnects
//! from the same port (wrk with `Connection: close` does, thousands of
//! times a second) must get a new connection at once (RFC 6191, RFC 1122
//! 4.2.2.13), not a challenge ACK, a reset and a SYN retransmitted later.

mod common;

use common::{addr, config, Net};
use stack::TcpState;

/// One connection from `local` that the server closes first.
fn server_closes_first(n: &mut Net, local: std::net::SocketAddr, l: stack::SocketHandle) {
    let c =
        n.a.tcp_connect(n.now, addr(2, 80), Some(local), &mut n.sa)
            .unwrap();
    n.run(5);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Established);
    let (s, _) = n.b.tcp_accept(l).unwrap();
    n.b.tcp_close(n.now, s, &mut n.sb).unwrap();
    n.run(5);
    let mut buf = [0u8; 16];
    assert_eq!(n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa), Ok(0));
    n.a.tcp_close(n.now, c, &mut n.sa).unwrap();
    n.run(5);
    assert_eq!(n.a.socket_count(), 0, "the client's side is gone");
    assert_eq!(n.b.socket_count(), 2, "the listener and a TIME-WAIT");
}

fn reconnect(timestamps: bool) {
    let mut client = config(1);
    client.tcp.rfc1323 = timestamps;
    let mut n = Net::new(client, config(2));
    let l = n.b.tcp_listen(addr(2, 80), 16).unwrap();
    let local = addr(1, 40000);
    server_closes_first(&mut n, local, l);
    n.run(1000);
    let c =
        n.a.tcp_connect(n.now, addr(2, 80), Some(local), &mut n.sa)
            .unwrap();
    n.run(5);
    assert_eq!(
        n.a.tcp_state(c).unwrap(),
        TcpState::Established,
        "a SYN newer than the TIME-WAIT opens a new connection; client counters {:?}",
        n.a.counters()
    );
    assert!(n.b.tcp_accept(l).is_ok());
    assert_eq!(n.a.counters().tcp_resets_sent, 0);
    assert_eq!(n.b.counters().tcp_resets_received, 0);
}

#[test]
fn syn_with_a_higher_sequence_number_reopens_time_wait() {
    reconnect(false);
}
