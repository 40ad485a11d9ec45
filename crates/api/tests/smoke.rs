//! The calls work end to end over two engines.

mod common;

use api::consts::*;
use api::Errno;
use common::*;
use std::net::IpAddr;

#[test]
fn tcp_connect_accept_echo_close() {
    let _e = two_engines();
    let l = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::bind(l, &server(7000)).unwrap();
    api::listen(l, 16).unwrap();
    let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::connect(c, &server(7000)).unwrap();
    let (s, peer) = api::accept(l).unwrap();
    assert_eq!(peer.ip(), IpAddr::V4(CLIENT));
    assert_eq!(api::getpeername(c).unwrap(), server(7000));
    assert_eq!(api::getsockname(s).unwrap(), server(7000));
    assert_eq!(api::write(c, b"hello").unwrap(), 5);
    let mut buf = [0u8; 16];
    assert_eq!(api::read(s, &mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"hello");
    // A big transfer: non-blocking writes on one side, blocking reads on
    // the other (both sides are on this thread).
    api::fcntl(s, F_SETFL, O_NONBLOCK).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    while got.len() < big.len() {
        match api::write(s, &big[sent..]) {
            Ok(n) => sent += n,
            Err(e) => assert_eq!(e, Errno::EAGAIN),
        }
        let mut b = vec![0u8; 65536];
        let n = api::read(c, &mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
    }
    assert_eq!(got, big);
    api::close(c).unwrap();
    api::fcntl(s, F_SETFL, 0).unwrap();
    assert_eq!(
        api::read(s, &mut buf).unwrap(),
        0,
        "EOF after the peer's close"
    );
    api::close(s).unwrap();
    api::close(l).unwrap();
    assert_eq!(api::close(l), Err(Errno::EBADF));
}

#[test]
fn udp_sendto_recvfrom() {
    let _e = two_engines();
    let a = api::socket(AF_INET, SOCK_DGRAM, 0).unwrap();
    api::bind(a, &server(5353)).unwrap();
    let b = api::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0).unwrap();
    assert_eq!(api::sendto(b, b"ping", 0, Some(&server(5353))).unwrap(), 4);
    let mut buf = [0u8; 16];
    let (n, from) = api::recvfrom(a, &mut buf, 0).unwrap();
    assert_eq!((n, from.unwrap().ip()), (4, IpAddr::V4(CLIENT)));
    assert_eq!(api::sendto(a, b"pong", 0, from.as_ref()).unwrap(), 4);
    // `b` is non-blocking: wait for the reply as long as a loaded machine
    // needs (a fixed pause failed now and then under load).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (n, from) = loop {
        settle_ms(5);
        match api::recvfrom(b, &mut buf, 0) {
            Err(Errno::EAGAIN) if std::time::Instant::now() < deadline => continue,
            r => break r.unwrap(),
        }
    };
    assert_eq!((n, from), (4, Some(server(5353))));
    assert_eq!(api::recv(b, &mut buf, 0), Err(Errno::EAGAIN));
}
