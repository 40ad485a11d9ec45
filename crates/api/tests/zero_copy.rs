//! Zero-copy send (zc_send_reserve / zc_send_commit) over two engines on
//! the test's thread: data written in place arrives intact, and the errno
//! values of each refusal.

mod common;

use std::thread;

use api::consts::*;
use api::{Errno, ZcSendBuf};
use common::*;

/// The lent region as a slice.
fn region(b: &ZcSendBuf) -> &'static mut [u8] {
    // SAFETY: the socket layer lent `len` writable bytes at `ptr`, valid
    // until the commit; each test writes them before its next call on the
    // socket and never keeps the slice past that.
    unsafe { std::slice::from_raw_parts_mut(b.ptr.as_ptr(), b.len) }
}

/// A connected pair: (client, accepted server side).
fn pair(port: u16) -> (i32, i32) {
    let l = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::bind(l, &server(port)).unwrap();
    api::listen(l, 4).unwrap();
    let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::connect(c, &server(port)).unwrap();
    let (s, _) = api::accept(l).unwrap();
    api::close(l).unwrap();
    (c, s)
}

#[test]
fn data_written_in_place_arrives_intact() {
    let _e = two_engines();
    let (c, s) = pair(7100);
    api::fcntl(s, F_SETFL, O_NONBLOCK).unwrap();

    // In place: the next region starts where the committed bytes end.
    let first = api::zc_send_reserve(s, 1000).unwrap();
    assert_eq!(first.len, 1000);
    region(&first)[..600].fill(b'a');
    assert_eq!(api::zc_send_commit(s, 600), Ok(600));
    let second = api::zc_send_reserve(s, 100).unwrap();
    assert_eq!(
        second.ptr.as_ptr() as usize,
        first.ptr.as_ptr() as usize + 600
    );
    region(&second).fill(b'b');
    assert_eq!(api::zc_send_commit(s, 100), Ok(100));
    let mut got = vec![0u8; 700];
    assert_eq!(api::recv(c, &mut got, MSG_WAITALL), Ok(700));
    assert!(got[..600].iter().all(|&x| x == b'a') && got[600..].iter().all(|&x| x == b'b'));

    // A big transfer through reserve/commit only.
    let big: Vec<u8> = (0..500_000u32).map(|i| (i * 31 + i / 977) as u8).collect();
    let (mut sent, mut got) = (0, Vec::new());
    while got.len() < big.len() {
        if sent < big.len() {
            match api::zc_send_reserve(s, (big.len() - sent).min(40_000)) {
                Ok(b) => {
                    region(&b).copy_from_slice(&big[sent..sent + b.len]);
                    assert_eq!(api::zc_send_commit(s, b.len), Ok(b.len));
                    sent += b.len;
                }
                Err(e) => assert_eq!(e, Errno::EAGAIN),
            }
        }
        let mut b = vec![0u8; 65536];
        let n = api::read(c, &mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
    }
    assert!(got == big, "bytes intact");
}

#[test]
fn refusals_have_linux_errno_values() {
    let _e = two_engines();
    let (c, s) = pair(7101);

    let closed = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::close(closed).unwrap();
    assert_eq!(api::zc_send_reserve(closed, 10), Err(Errno::EBADF));
    assert_eq!(api::zc_send_commit(closed, 10), Err(Errno::EBADF));

    let udp = api::socket(AF_INET, SOCK_DGRAM, 0).unwrap();
    assert_eq!(api::zc_send_reserve(udp, 10), Err(Errno::EOPNOTSUPP));
    assert_eq!(api::zc_send_commit(udp, 10), Err(Errno::EOPNOTSUPP));

    let fresh = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    assert_eq!(api::zc_send_reserve(fresh, 10), Err(Errno::ENOTCONN));

    // More than lent, or nothing lent.
    let b = api::zc_send_reserve(c, 10).unwrap();
    region(&b).fill(b'x');
    assert_eq!(api::zc_send_commit(c, 11), Err(Errno::EINVAL));
    assert_eq!(api::zc_send_commit(c, 10), Ok(10));
    assert_eq!(api::zc_send_commit(c, 1), Err(Errno::EINVAL));
    // A write between reserve and commit ends the loan.
    api::zc_send_reserve(c, 10).unwrap();
    assert_eq!(api::write(c, b"yz"), Ok(2));
    assert_eq!(api::zc_send_commit(c, 1), Err(Errno::EINVAL));
    let mut got = [0u8; 12];
    assert_eq!(api::recv(s, &mut got, MSG_WAITALL), Ok(12));
    assert_eq!(&got, b"xxxxxxxxxxyz");

    // Full send buffer on a non-blocking socket: EAGAIN.
    api::fcntl(s, F_SETFL, O_NONBLOCK).unwrap();
    let chunk = vec![7u8; 65536];
    while api::write(s, &chunk).is_ok() {}
    assert_eq!(api::zc_send_reserve(s, 1), Err(Errno::EAGAIN));

    // Not on the engine's thread: EOPNOTSUPP.
    let other = thread::spawn(move || (api::zc_send_reserve(c, 1), api::zc_send_commit(c, 0)));
    assert_eq!(
        other.join().unwrap(),
        (Err(Errno::EOPNOTSUPP), Err(Errno::EOPNOTSUPP))
    );

    // After shutdown(SHUT_WR): EPIPE, before and after a loan.
    let b = api::zc_send_reserve(c, 5).unwrap();
    region(&b).fill(b'q');
    api::shutdown(c, SHUT_WR).unwrap();
    assert_eq!(api::zc_send_commit(c, 5), Err(Errno::EPIPE));
    assert_eq!(api::zc_send_reserve(c, 5), Err(Errno::EPIPE));
}

#[test]
fn fill_sends_what_it_wrote_and_nothing_on_its_error() {
    let _e = two_engines();
    let (c, s) = pair(7102);

    // What fill writes in the region is sent, in order with a write.
    assert_eq!(api::write(s, b"head:"), Ok(5));
    let sent = api::zc_send_fill(s, 600, |dst| {
        assert_eq!(dst.len(), 600);
        dst[..4].copy_from_slice(b"body");
        Ok(4)
    });
    assert_eq!(sent, Ok(Ok(4)));
    // fill's own error: nothing sent, the loan given back (a write
    // follows at once), and the error returned as fill's.
    assert_eq!(
        api::zc_send_fill(s, 10, |dst| {
            dst.fill(b'!');
            Err(Errno(libc::EIO))
        }),
        Ok(Err(Errno(libc::EIO)))
    );
    // More than lent: EINVAL as fill's error, nothing sent.
    assert_eq!(
        api::zc_send_fill(s, 3, |dst| Ok(dst.len() + 1)),
        Ok(Err(Errno::EINVAL))
    );
    // Nothing written: 0, nothing sent.
    assert_eq!(api::zc_send_fill(s, 3, |_| Ok(0)), Ok(Ok(0)));
    assert_eq!(api::write(s, b":tail"), Ok(5));
    let mut got = [0u8; 14];
    assert_eq!(api::recv(c, &mut got, MSG_WAITALL), Ok(14));
    assert_eq!(&got, b"head:body:tail");

    // The socket's refusals as zc_send_reserve's, fill never called.
    let udp = api::socket(AF_INET, SOCK_DGRAM, 0).unwrap();
    let never = |_: &mut [u8]| -> Result<usize, Errno> { panic!("fill called") };
    assert_eq!(api::zc_send_fill(udp, 1, never), Err(Errno::EOPNOTSUPP));
    api::shutdown(s, SHUT_WR).unwrap();
    assert_eq!(api::zc_send_fill(s, 1, never), Err(Errno::EPIPE));
}

/// Fills `s`'s send buffer by `send` until it says EAGAIN, then reads `c`
/// while waiting on an edge-triggered EPOLLOUT watch of `s`: the send that
/// took EPOLLOUT away must be seen (the stack's ready list does not name
/// a socket for its application's own send), or no edge comes when space
/// frees.  Returns the bytes sent.
fn edge_after_full(c: i32, s: i32, mut send: impl FnMut() -> Result<usize, Errno>) -> usize {
    api::fcntl(s, F_SETFL, O_NONBLOCK).unwrap();
    api::fcntl(c, F_SETFL, O_NONBLOCK).unwrap();
    let ep = api::epoll_create1(0).unwrap();
    let watch = api::epoll_event {
        events: (EPOLLOUT | EPOLLET) as u32,
        u64: 9,
    };
    api::epoll_ctl(ep, EPOLL_CTL_ADD, s, Some(&watch)).unwrap();
    let mut evs = [api::epoll_event { events: 0, u64: 0 }; 4];
    assert_eq!(api::epoll_wait(ep, &mut evs, 0), Ok(1), "writable at first");
    assert_eq!(
        api::epoll_wait(ep, &mut evs, 0),
        Ok(0),
        "edge reported once"
    );
    let mut sent = 0;
    loop {
        match send() {
            Ok(n) => sent += n,
            Err(e) => {
                assert_eq!(e, Errno::EAGAIN);
                break;
            }
        }
    }
    let mut got = 0;
    let mut b = vec![0u8; 65536];
    for _ in 0..10_000 {
        if api::epoll_wait(ep, &mut evs, 0) == Ok(1) {
            let (data, events) = (evs[0].u64, evs[0].events);
            assert_eq!(data, 9);
            assert_ne!(events & EPOLLOUT as u32, 0);
            api::close(ep).unwrap();
            return sent;
        }
        match api::read(c, &mut b) {
            Ok(n) => got += n,
            Err(e) => assert_eq!(e, Errno::EAGAIN),
        }
    }
    panic!("no EPOLLOUT edge after the buffer filled ({sent} sent, {got} read)");
}

#[test]
fn an_edge_triggered_writer_hears_space_freed_after_a_send_filled_the_buffer() {
    let _e = two_engines();
    let (c, s) = pair(7103);
    let chunk = [7u8; 16384];
    assert!(edge_after_full(c, s, || api::send(s, &chunk, 0)) > 0);
    let (c, s) = pair(7104);
    let filled = edge_after_full(c, s, || {
        api::zc_send_fill(s, 16384, |dst| {
            dst.fill(7);
            Ok(dst.len())
        })
        .and_then(|r| r)
    });
    assert!(filled > 0);
}
