//! A worker whose thread ends without `detach`: it leaves the registry
//! (new sockets of threads without a worker go to a live one), and its
//! fds fail with EBADF until closed, which gives their numbers back.

mod common;

use std::sync::mpsc;
use std::thread;

use api::consts::*;
use api::Errno;
use common::*;

#[test]
fn a_thread_that_ends_without_detach_leaves_no_worker_behind() {
    // The first worker: a socket, then the thread ends without detach.
    let orphan = thread::spawn(|| {
        std::mem::forget(two_engines());
        api::socket(AF_INET, SOCK_STREAM, 0).unwrap()
    })
    .join()
    .unwrap();
    // A second worker that stays.
    let (ready_tx, ready_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let live = thread::spawn(move || {
        let _e = two_engines();
        ready_tx.send(()).unwrap();
        stop_rx.recv().unwrap();
    });
    ready_rx.recv().unwrap();

    // This thread has no worker: its socket goes to the live one.
    let s = api::socket(AF_INET, SOCK_DGRAM, 0).expect("a live worker takes the socket");
    api::bind(s, &server(9100)).unwrap();
    api::close(s).unwrap();

    // The orphan's calls fail, blocking ones included, without waiting.
    let mut buf = [0u8; 8];
    assert_eq!(api::recv(orphan, &mut buf, 0), Err(Errno::EBADF));
    assert_eq!(api::getsockname(orphan), Err(Errno::EBADF));
    // Its number goes back on close, once.
    assert_eq!(api::close(orphan), Ok(()));
    assert_eq!(api::close(orphan), Err(Errno::EBADF));

    stop_tx.send(()).unwrap();
    live.join().unwrap();
}
