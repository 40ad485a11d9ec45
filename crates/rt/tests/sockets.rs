//! TcpListener, TcpStream and UdpSocket over two engines in memory.

mod common;

use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use futures_util::io::{AsyncReadExt, AsyncWriteExt};

/// An echo server task: echoes each connection in chunks of at most
/// `chunk` bytes, each written back in pieces of random size, until EOF,
/// then closes.
fn echo_server(listener: rt::TcpListener, chunk: usize) -> rt::JoinHandle<()> {
    rt::spawn(async move {
        let mut seed = 1;
        loop {
            let (mut conn, _) = listener.accept().await.expect("accept");
            seed += 1;
            rt::spawn(async move {
                let mut rng = Rng(seed * 0x9e37_79b9);
                let mut buf = vec![0u8; chunk];
                loop {
                    let want = rng.size(chunk);
                    let n = woken("data at the server", conn.read(&mut buf[..want]))
                        .await
                        .expect("server read");
                    if n == 0 {
                        break;
                    }
                    let mut off = 0;
                    while off < n {
                        let piece = rng.size(n - off);
                        let w = AsyncWriteExt::write(&mut conn, &buf[off..off + piece])
                            .await
                            .expect("server write");
                        assert!(w > 0);
                        off += w;
                    }
                }
                conn.close().await.expect("shutdown");
            });
        }
    })
}

#[test]
fn concurrent_echo_with_partial_reads_and_writes() {
    let net = net();
    const CONNS: usize = 40;
    const SIZE: usize = 200_000;
    let results = net.block_on(async {
        let listener = rt::TcpListener::bind(server(7)).unwrap();
        assert_eq!(listener.local_addr().unwrap(), SocketAddr::V4(server(7)));
        let srv = echo_server(listener, 1000);
        let clients: Vec<_> = (0..CONNS)
            .map(|i| {
                rt::spawn(async move {
                    let conn = Rc::new(rt::TcpStream::connect(server(7)).await.unwrap());
                    assert_eq!(conn.peer_addr().unwrap(), SocketAddr::V4(server(7)));
                    let data = pattern(i as u64 + 1, SIZE);
                    // The writer and the reader are separate tasks over one
                    // stream, so neither waits for the other.
                    let writer = rt::spawn({
                        let conn = conn.clone();
                        let data = data.clone();
                        async move {
                            let mut rng = Rng(i as u64 + 77);
                            let mut off = 0;
                            while off < data.len() {
                                let end = (off + rng.size(7000)).min(data.len());
                                let n = woken(
                                    "send space",
                                    AsyncWriteExt::write(&mut &*conn, &data[off..end]),
                                )
                                .await
                                .unwrap();
                                off += n;
                            }
                            conn.shutdown(Shutdown::Write).unwrap();
                        }
                    });
                    let mut got = Vec::with_capacity(SIZE);
                    let mut rng = Rng(i as u64 + 991);
                    let mut buf = vec![0u8; 9000];
                    loop {
                        let want = rng.size(buf.len());
                        let n = woken(
                            "echoed data",
                            AsyncReadExt::read(&mut &*conn, &mut buf[..want]),
                        )
                        .await
                        .unwrap();
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                    writer.await;
                    got == data
                })
            })
            .collect();
        let mut ok = Vec::new();
        for c in clients {
            ok.push(c.await);
        }
        srv.abort();
        ok
    });
    let bad: Vec<usize> = (0..CONNS).filter(|&i| !results[i]).collect();
    assert!(bad.is_empty(), "connections not echoed intact: {bad:?}");
}

#[test]
fn connect_refused_is_connection_refused() {
    let net = net();
    let e = net
        .block_on(woken("the refusal", rt::TcpStream::connect(server(9))))
        .err()
        .expect("nothing listens on port 9");
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
    assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED));
}

#[test]
fn connect_to_nobody_times_out() {
    let net = net();
    let start = Instant::now();
    let r = net.block_on(rt::timeout(
        Duration::from_millis(300),
        rt::TcpStream::connect(([10, 99, 1, 77], 7)),
    ));
    assert!(r.is_err(), "no host at 10.99.1.77");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "took {took:?}"
    );
}

#[test]
fn eof_after_shutdown_and_a_reply_after_it() {
    let net = net();
    net.block_on(async {
        let listener = rt::TcpListener::bind(server(8000)).unwrap();
        let srv = rt::spawn(async move {
            let (mut conn, peer) = listener.accept().await.unwrap();
            assert_eq!(peer.ip(), CLIENT);
            let mut all = Vec::new();
            woken("the question", conn.read_to_end(&mut all))
                .await
                .unwrap();
            assert_eq!(all, b"question");
            // Reading at EOF stays at EOF.
            let mut b = [0u8; 8];
            assert_eq!(conn.read(&mut b).await.unwrap(), 0);
            conn.write_all(b"answer").await.unwrap();
        });
        let mut c = rt::TcpStream::connect(server(8000)).await.unwrap();
        c.set_nodelay(true).unwrap();
        assert!(c.nodelay().unwrap());
        c.write_all(b"question").await.unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut reply = Vec::new();
        woken("the answer", c.read_to_end(&mut reply))
            .await
            .unwrap();
        assert_eq!(reply, b"answer");
        srv.await;
    });
}

#[test]
fn a_read_dropped_by_a_timeout_leaves_the_stream_usable() {
    let net = net();
    net.block_on(async {
        let listener = rt::TcpListener::bind(server(8001)).unwrap();
        let c = rt::TcpStream::connect(server(8001)).await.unwrap();
        let (s, _) = listener.accept().await.unwrap();
        let mut b = [0u8; 16];
        // Nothing to read: the read is dropped mid-wait.
        let r = rt::timeout(Duration::from_millis(20), s.read(&mut b)).await;
        assert!(r.is_err());
        c.write_all(b"late").await.unwrap();
        let n = woken("the data", s.read(&mut b)).await.unwrap();
        assert_eq!(&b[..n], b"late");
    });
}

#[test]
fn a_task_aborted_mid_read_closes_its_socket() {
    let net = net();
    net.block_on(async {
        let listener = rt::TcpListener::bind(server(8002)).unwrap();
        let c = rt::TcpStream::connect(server(8002)).await.unwrap();
        let (s, _) = listener.accept().await.unwrap();
        let reader = rt::spawn(async move {
            let mut b = [0u8; 16];
            let n = s.read(&mut b).await;
            panic!("the read must not finish: {n:?}");
        });
        rt::sleep(Duration::from_millis(10)).await;
        assert!(!reader.is_finished());
        reader.abort();
        // Its stream was dropped with it: the peer sees the close.
        let mut b = [0u8; 16];
        let n = woken("EOF after the abort", c.read(&mut b)).await.unwrap();
        assert_eq!(n, 0);
    });
    assert_eq!(net.rt().tasks(), 0);
}

#[test]
fn a_big_write_waits_for_space_and_completes() {
    let net = net();
    net.block_on(async {
        let listener = rt::TcpListener::bind(server(8003)).unwrap();
        let mut c = rt::TcpStream::connect(server(8003)).await.unwrap();
        let (mut s, _) = listener.accept().await.unwrap();
        let data = pattern(5, 3_000_000);
        let expect = data.clone();
        // The writer fills the send buffer and must wait for the reader,
        // which starts late.
        let writer = rt::spawn(async move {
            c.write_all(&data).await.unwrap();
            c.close().await.unwrap();
        });
        rt::sleep(Duration::from_millis(20)).await;
        assert!(!writer.is_finished(), "3 MB fit no send buffer");
        let mut got = Vec::new();
        woken("3 MB", s.read_to_end(&mut got)).await.unwrap();
        assert!(got == expect, "{} bytes of {}", got.len(), expect.len());
        writer.await;
    });
}

#[test]
fn reset_by_peer_is_an_error() {
    let net = net();
    net.block_on(async {
        let listener = rt::TcpListener::bind(server(8004)).unwrap();
        let c = rt::TcpStream::connect(server(8004)).await.unwrap();
        let (s, _) = listener.accept().await.unwrap();
        // Closing with unread data sends a reset.
        s.write_all(b"unread").await.unwrap();
        rt::sleep(Duration::from_millis(10)).await;
        drop(c);
        let mut b = [0u8; 16];
        let mut e = None;
        for _ in 0..100 {
            match woken("the reset", s.read(&mut b)).await {
                Ok(0) => break,
                Ok(_) => continue,
                Err(err) => {
                    e = Some(err);
                    break;
                }
            }
        }
        let e = e.expect("a reset, not an EOF");
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
    });
}

#[test]
fn udp_echo_round_trips() {
    let net = net();
    net.block_on(async {
        let srv = rt::UdpSocket::bind(server(5353)).unwrap();
        let echo = rt::spawn(async move {
            let mut buf = [0u8; 2048];
            for _ in 0..20 {
                let (n, from) = srv.recv_from(&mut buf).await.unwrap();
                srv.send_to(&buf[..n], from).await.unwrap();
            }
        });
        let c = rt::UdpSocket::bind(([10, 99, 1, 1], 0)).unwrap();
        let local = c.local_addr().unwrap();
        assert_ne!(local.port(), 0);
        let mut buf = [0u8; 2048];
        for i in 0..10usize {
            let msg = pattern(i as u64, 1 + i * 100);
            c.send_to(&msg, server(5353)).await.unwrap();
            let (n, from) = woken("the echo", c.recv_from(&mut buf)).await.unwrap();
            assert_eq!(from, SocketAddr::V4(server(5353)));
            assert_eq!(&buf[..n], &msg[..]);
        }
        // Connected: send and recv.
        c.connect(server(5353)).unwrap();
        assert_eq!(c.peer_addr().unwrap(), SocketAddr::V4(server(5353)));
        for i in 0..10u8 {
            c.send(&[i; 3]).await.unwrap();
            let n = woken("the echo", c.recv(&mut buf)).await.unwrap();
            assert_eq!(&buf[..n], &[i; 3]);
        }
        echo.await;
    });
}

#[test]
fn many_tasks_accept_on_one_listener() {
    let net = net();
    net.block_on(async {
        let listener = Rc::new(rt::TcpListener::bind(server(8005)).unwrap());
        let acceptors: Vec<_> = (0..4)
            .map(|_| {
                let l = listener.clone();
                rt::spawn(async move {
                    let (mut s, _) = l.accept().await.unwrap();
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).await.unwrap();
                    b[0]
                })
            })
            .collect();
        let mut conns = Vec::new();
        for i in 0..4u8 {
            let c = rt::TcpStream::connect(server(8005)).await.unwrap();
            c.write_all(&[i]).await.unwrap();
            conns.push(c);
        }
        let mut got = Vec::new();
        for a in acceptors {
            got.push(woken("an acceptor", a).await);
        }
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3]);
    });
}

#[test]
fn with_engine_reads_an_attached_engines_counters() {
    let net = net();
    net.block_on(rt::sleep(Duration::from_millis(2)));
    let loops = api::with_engine::<link::MemoryLink, _>(1, |e| e.counters().loops)
        .unwrap()
        .expect("engine 1 is an Engine<MemoryLink>");
    assert!(loops > 0);
    assert!(api::with_engine::<link::MemoryLink, _>(2, |_| ())
        .unwrap()
        .is_none());
}
