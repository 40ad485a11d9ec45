//! Sockets used from threads other than the engine's (run to wait): the
//! engine thread runs its loop; other threads make blocking and
//! non-blocking calls, epoll_wait with a timeout, on their own sockets and
//! on sockets the engine thread also uses.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use api::consts::*;
use api::{epoll_event, Errno};
use common::*;

#[test]
fn calls_from_other_threads_reach_the_engine_thread() {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let engine = {
        let stop = stop.clone();
        thread::spawn(move || {
            let _e = two_engines();
            // The engine thread serves an echo itself (run to completion)
            // on port 9001, with epoll, inside the loop.
            let l = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
            api::bind(l, &server(9001)).unwrap();
            api::listen(l, 64).unwrap();
            let ep = api::epoll_create1(0).unwrap();
            let ev = epoll_event {
                events: EPOLLIN as u32,
                u64: l as u64,
            };
            api::epoll_ctl(ep, EPOLL_CTL_ADD, l, Some(&ev)).unwrap();
            ready_tx.send(()).unwrap();
            let mut events = [epoll_event { events: 0, u64: 0 }; 16];
            api::run(|| {
                let n = api::epoll_wait(ep, &mut events, 0).unwrap();
                for e in &events[..n] {
                    let fd = e.u64 as i32;
                    if fd == l {
                        while let Ok((s, _)) = api::accept4(l, SOCK_NONBLOCK) {
                            let ev = epoll_event {
                                events: EPOLLIN as u32,
                                u64: s as u64,
                            };
                            api::epoll_ctl(ep, EPOLL_CTL_ADD, s, Some(&ev)).unwrap();
                        }
                        continue;
                    }
                    let mut buf = [0u8; 4096];
                    match api::recv(fd, &mut buf, 0) {
                        Ok(0) | Err(_) => {
                            api::close(fd).unwrap();
                        }
                        Ok(n) => {
                            assert_eq!(api::send(fd, &buf[..n], 0), Ok(n));
                        }
                    }
                }
                !stop.load(Ordering::Relaxed)
            })
            .unwrap();
        })
    };
    ready_rx.recv().unwrap();

    // Several threads, each its own connections, all blocking calls
    // posted to the engine thread.
    let clients: Vec<_> = (0..4u8)
        .map(|i| {
            thread::spawn(move || {
                for round in 0..5u8 {
                    let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
                    api::connect(c, &server(9001)).unwrap();
                    let msg = vec![i * 16 + round; 1000 + usize::from(i) * 100];
                    assert_eq!(api::write(c, &msg), Ok(msg.len()));
                    let mut got = vec![0u8; msg.len()];
                    let mut have = 0;
                    while have < got.len() {
                        let n = api::read(c, &mut got[have..]).unwrap();
                        assert!(n > 0);
                        have += n;
                    }
                    assert_eq!(got, msg);
                    api::close(c).unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }

    // A listener and a connection owned by the engine thread's worker but
    // used only from this thread: blocking accept, epoll_wait with a
    // timeout, SO_RCVTIMEO.
    let l = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::bind(l, &server(9002)).unwrap();
    api::listen(l, 4).unwrap();
    let connector = thread::spawn(|| {
        let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
        api::connect(c, &server(9002)).unwrap();
        c
    });
    let (s, peer) = api::accept(l).unwrap();
    assert_eq!(peer.ip(), std::net::IpAddr::V4(CLIENT));
    let c = connector.join().unwrap();
    let ep = api::epoll_create1(0).unwrap();
    let ev = epoll_event {
        events: (EPOLLIN | EPOLLET) as u32,
        u64: 7,
    };
    api::epoll_ctl(ep, EPOLL_CTL_ADD, s, Some(&ev)).unwrap();
    let mut events = [epoll_event { events: 0, u64: 0 }; 4];
    let t0 = std::time::Instant::now();
    assert_eq!(api::epoll_wait(ep, &mut events, 30), Ok(0));
    assert!(t0.elapsed() >= std::time::Duration::from_millis(30));
    let writer = thread::spawn(move || api::write(c, b"over"));
    assert_eq!(api::epoll_wait(ep, &mut events, 5000), Ok(1));
    assert_eq!((events[0].u64, events[0].events), (7, EPOLLIN as u32));
    assert_eq!(writer.join().unwrap(), Ok(4));
    let tv: Vec<u8> = [0i64, 20_000]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    api::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(api::read(s, &mut buf), Ok(4));
    let t0 = std::time::Instant::now();
    assert_eq!(
        api::read(s, &mut buf),
        Err(Errno::EAGAIN),
        "SO_RCVTIMEO passes"
    );
    assert!(t0.elapsed() >= std::time::Duration::from_millis(20));
    for fd in [s, c, l, ep] {
        api::close(fd).unwrap();
    }

    stop.store(true, Ordering::Relaxed);
    engine.join().unwrap();
    // The worker is gone: its fds with it.
    assert_eq!(api::socket(AF_INET, SOCK_STREAM, 0), Err(Errno::ENODEV));
}
