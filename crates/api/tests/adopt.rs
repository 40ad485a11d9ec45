//! A worker whose thread left the socket layer (blocked elsewhere, as a
//! program's main thread in a join) is driven by the threads that wait on
//! its sockets (adoption, see the socket layer's `worker.rs`).  A file of
//! its own: objects made by threads without a worker go to the process's
//! first worker, which another test's engines would be.

mod common;

use std::sync::mpsc;
use std::thread;

use api::consts::*;
use api::epoll_event;
use common::*;

/// The engine's thread leaves the socket layer (blocked in a channel, as
/// a program's main thread in a join) while other threads use its
/// sockets: the threads waiting on them drive the engine in its place,
/// and the engine's thread, back, takes its worker again from a thread
/// asleep on it.
#[test]
fn threads_waiting_on_a_worker_its_thread_left_drive_it() {
    let (ready_tx, ready_rx) = mpsc::channel();
    let (back_tx, back_rx) = mpsc::channel::<i32>();
    let (done_tx, done_rx) = mpsc::channel();
    let engine = thread::spawn(move || {
        let _e = two_engines();
        let l = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
        api::bind(l, &server(9003)).unwrap();
        api::listen(l, 16).unwrap();
        ready_tx.send(l).unwrap();
        // Away: no call, no step, until told to come back.
        let quiet = back_rx.recv().unwrap();
        // Back while another thread sleeps on the worker (a blocking
        // read with nothing to read): this call must not wait for that
        // sleep, and what it sends ends it.
        api::step().unwrap();
        assert_eq!(api::write(quiet, b"back"), Ok(4));
        done_rx.recv().unwrap();
    });
    let l = ready_rx.recv().unwrap();

    // An echo server thread (blocking accept, read, write) and client
    // threads, every socket on the engine thread's worker.
    let (finished_tx, finished_rx) = mpsc::channel();
    let echo = thread::spawn(move || {
        for _ in 0..3 {
            let (s, _) = api::accept(l).unwrap();
            let mut buf = [0u8; 4096];
            loop {
                match api::read(s, &mut buf).unwrap() {
                    0 => break,
                    n => assert_eq!(api::write(s, &buf[..n]), Ok(n)),
                }
            }
            api::close(s).unwrap();
        }
    });
    for i in 0..3u8 {
        let finished_tx = finished_tx.clone();
        thread::spawn(move || {
            let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
            api::connect(c, &server(9003)).unwrap();
            // epoll with a timeout on a socket of the worker.
            let ep = api::epoll_create1(0).unwrap();
            let ev = epoll_event {
                events: EPOLLIN as u32,
                u64: 1,
            };
            api::epoll_ctl(ep, EPOLL_CTL_ADD, c, Some(&ev)).unwrap();
            let msg = vec![i; 3000];
            assert_eq!(api::write(c, &msg), Ok(msg.len()));
            let mut got = Vec::new();
            let mut events = [epoll_event { events: 0, u64: 0 }; 4];
            while got.len() < msg.len() {
                assert_eq!(api::epoll_wait(ep, &mut events, 10_000), Ok(1));
                let mut buf = [0u8; 4096];
                let n = api::recv(c, &mut buf, MSG_DONTWAIT).unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, msg);
            api::close(c).unwrap();
            api::close(ep).unwrap();
            finished_tx.send(i).unwrap();
        });
    }
    for _ in 0..3 {
        // A worker nobody drives would leave them waiting for ever.
        finished_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("a client thread finished: the waiting threads drove the engine");
    }
    echo.join().unwrap();

    // A connection whose reader blocks (adopting the worker, asleep on
    // it) until the engine's thread, back, writes to its peer.
    let (a_tx, a_rx) = mpsc::channel();
    let acceptor = thread::spawn(move || a_tx.send(api::accept(l).unwrap().0).unwrap());
    let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::connect(c, &server(9003)).unwrap();
    acceptor.join().unwrap();
    let s = a_rx.recv().unwrap();
    let reader = thread::spawn(move || {
        let mut buf = [0u8; 8];
        let n = api::read(c, &mut buf).unwrap();
        buf[..n].to_vec()
    });
    thread::sleep(std::time::Duration::from_millis(20));
    back_tx.send(s).unwrap();
    assert_eq!(reader.join().unwrap(), b"back");
    for fd in [s, c, l] {
        api::close(fd).unwrap();
    }
    done_tx.send(()).unwrap();
    engine.join().unwrap();
}
