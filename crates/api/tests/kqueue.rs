//! kqueue with FreeBSD's semantics over two ustack engines: the filters'
//! `data`, EV_CLEAR, EV_ONESHOT, EV_DISPATCH, EV_ENABLE/EV_DISABLE, EV_EOF
//! with pending data and with an error, and EV_ERROR receipts.

mod common;

use api::consts::*;
use api::{Errno, KEvent};
use common::*;

fn change(fd: i32, filter: i16, flags: u16) -> KEvent {
    KEvent {
        ident: fd as usize,
        filter,
        flags,
        udata: 1000 + fd as usize,
        ..KEvent::default()
    }
}

/// What kevent reports now: (ident, filter, flags, fflags, data).
fn poll(kq: i32) -> Vec<(i32, i16, u16, u32, i64)> {
    let mut out = [KEvent::default(); 8];
    let n = api::kevent(kq, &[], &mut out, Some(std::time::Duration::ZERO)).unwrap();
    let mut v: Vec<_> = out[..n]
        .iter()
        .map(|e| {
            assert_eq!(e.udata, 1000 + e.ident, "udata comes back");
            (e.ident as i32, e.filter, e.flags, e.fflags, e.data)
        })
        .collect();
    v.sort();
    v
}

fn apply(kq: i32, changes: &[KEvent]) {
    let n = api::kevent(kq, changes, &mut [], Some(std::time::Duration::ZERO)).unwrap();
    assert_eq!(n, 0);
}

/// A connected pair (client, server side), both non-blocking.
fn pair(port: u16) -> (i32, i32, i32) {
    let l = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    api::bind(l, &server(port)).unwrap();
    api::listen(l, 8).unwrap();
    let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::connect(c, &server(port)).unwrap();
    api::setsockopt_int(c, IPPROTO_TCP, TCP_NODELAY, 1).unwrap();
    settle_ms(5);
    let (s, _) = api::accept4(l, SOCK_NONBLOCK).unwrap();
    (l, c, s)
}

#[test]
fn change_errors_are_receipts() {
    let _e = two_engines();
    let kq = api::kqueue().unwrap();
    let s = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    let mut out = [KEvent::default(); 4];
    assert_eq!(api::kevent(s, &[], &mut out, None), Err(Errno::EBADF));
    let bad = [
        change(9999, EVFILT_READ, EV_ADD),
        change(s, 42, EV_ADD),
        change(s, EVFILT_READ, EV_DELETE),
        change(s, EVFILT_WRITE, EV_ENABLE),
    ];
    let n = api::kevent(kq, &bad, &mut out, None).unwrap();
    assert_eq!(
        n, 4,
        "every error comes back as an event, and kevent returns"
    );
    let errs: Vec<(u16, i64)> = out[..n].iter().map(|e| (e.flags, e.data)).collect();
    assert_eq!(
        errs,
        vec![
            (EV_ERROR, i64::from(libc::EBADF)),
            (EV_ERROR, i64::from(libc::EINVAL)),
            (EV_ERROR, i64::from(libc::ENOENT)),
            (EV_ERROR, i64::from(libc::ENOENT)),
        ]
    );
    // No room for the error: kevent itself fails.
    assert_eq!(api::kevent(kq, &bad[..1], &mut [], None), Err(Errno::EBADF));
    // EV_RECEIPT: a receipt with data 0 for a change that worked.
    let n = api::kevent(
        kq,
        &[change(s, EVFILT_READ, EV_ADD | EV_RECEIPT)],
        &mut out,
        None,
    )
    .unwrap();
    assert_eq!(n, 1);
    assert_eq!((out[0].flags & EV_ERROR, out[0].data), (EV_ERROR, 0));
    api::close(kq).unwrap();
}

#[test]
fn read_and_write_filters_report_bytes_and_connections() {
    let _e = two_engines();
    let kq = api::kqueue().unwrap();
    let l = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    api::bind(l, &server(8101)).unwrap();
    api::listen(l, 8).unwrap();
    apply(kq, &[change(l, EVFILT_READ, EV_ADD)]);
    assert_eq!(poll(kq), vec![]);
    let c1 = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    let c2 = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    // A connecting socket is not writable yet (BSD: PR_CONNREQUIRED).
    apply(kq, &[change(c1, EVFILT_WRITE, EV_ADD)]);
    assert_eq!(api::connect(c1, &server(8101)), Err(Errno::EINPROGRESS));
    assert_eq!(api::connect(c2, &server(8101)), Err(Errno::EINPROGRESS));
    assert_eq!(poll(kq), vec![]);
    settle_ms(10);
    let ev = poll(kq);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(
        ev[0],
        (l, EVFILT_READ, 0, 0, 2),
        "data: two connections wait"
    );
    assert_eq!((ev[1].0, ev[1].1), (c1, EVFILT_WRITE));
    assert!(ev[1].4 >= 2048, "data: the send space ({})", ev[1].4);
    let (s, _) = api::accept(l).unwrap();
    apply(
        kq,
        &[
            change(l, EVFILT_READ, EV_DELETE),
            change(c1, EVFILT_WRITE, EV_DELETE),
        ],
    );
    apply(kq, &[change(s, EVFILT_READ, EV_ADD)]);
    api::send(c1, &[1; 100], 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, 0, 0, 100)]);
    let mut buf = [0u8; 30];
    api::recv(s, &mut buf, 0).unwrap();
    assert_eq!(
        poll(kq),
        vec![(s, EVFILT_READ, 0, 0, 70)],
        "level: still there, data now 70"
    );
    let mut buf = [0u8; 100];
    api::recv(s, &mut buf, 0).unwrap();
    assert_eq!(poll(kq), vec![]);
    // Closing the fd deletes its knotes.
    api::close(s).unwrap();
    api::send(c1, &[1; 10], 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![]);
}

#[test]
fn ev_clear_needs_new_data() {
    let _e = two_engines();
    let kq = api::kqueue().unwrap();
    let (_l, c, s) = pair(8102);
    apply(kq, &[change(s, EVFILT_READ, EV_ADD | EV_CLEAR)]);
    assert_eq!(poll(kq), vec![]);
    api::send(c, &[1; 100], 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_CLEAR, 0, 100)]);
    assert_eq!(poll(kq), vec![], "cleared: nothing until new data");
    let mut buf = [0u8; 10];
    api::recv(s, &mut buf, 0).unwrap();
    assert_eq!(poll(kq), vec![], "a partial read is no new data");
    api::send(c, &[2; 50], 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_CLEAR, 0, 140)]);
}

#[test]
fn oneshot_dispatch_disable_enable() {
    let _e = two_engines();
    let kq = api::kqueue().unwrap();
    let (_l, c, s) = pair(8103);
    apply(kq, &[change(s, EVFILT_READ, EV_ADD | EV_ONESHOT)]);
    api::send(c, &[1; 10], 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_ONESHOT, 0, 10)]);
    assert_eq!(poll(kq), vec![]);
    let mut out = [KEvent::default(); 2];
    let n = api::kevent(kq, &[change(s, EVFILT_READ, EV_DELETE)], &mut out, None).unwrap();
    assert_eq!(
        (n, out[0].data),
        (1, i64::from(libc::ENOENT)),
        "a one-shot knote is gone"
    );

    apply(kq, &[change(s, EVFILT_READ, EV_ADD | EV_DISPATCH)]);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_DISPATCH, 0, 10)]);
    assert_eq!(poll(kq), vec![], "dispatch: disabled after one report");
    apply(kq, &[change(s, EVFILT_READ, EV_ENABLE)]);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_DISPATCH, 0, 10)]);

    apply(kq, &[change(s, EVFILT_READ, EV_DELETE)]);
    apply(kq, &[change(s, EVFILT_READ, EV_ADD | EV_DISABLE)]);
    assert_eq!(poll(kq), vec![], "added disabled");
    api::send(c, &[1; 5], 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![], "still disabled");
    apply(kq, &[change(s, EVFILT_READ, EV_ENABLE)]);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, 0, 0, 15)]);
    apply(kq, &[change(s, EVFILT_READ, EV_DISABLE)]);
    assert_eq!(poll(kq), vec![]);
}

#[test]
fn eof_with_pending_data_and_after_reset() {
    let _e = two_engines();
    let kq = api::kqueue().unwrap();
    let (_l, c, s) = pair(8104);
    apply(
        kq,
        &[
            change(s, EVFILT_READ, EV_ADD),
            change(s, EVFILT_WRITE, EV_ADD),
        ],
    );
    let ev = poll(kq);
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].1, ev[0].2), (EVFILT_WRITE, 0), "connected: writable");
    apply(kq, &[change(s, EVFILT_WRITE, EV_DELETE)]);
    api::send(c, b"tail", 0).unwrap();
    api::shutdown(c, SHUT_WR).unwrap();
    settle_ms(10);
    assert_eq!(
        poll(kq),
        vec![(s, EVFILT_READ, EV_EOF, 0, 4)],
        "EOF and data to read"
    );
    let mut buf = [0u8; 16];
    assert_eq!(api::recv(s, &mut buf, 0), Ok(4));
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_EOF, 0, 0)]);

    // The peer resets: EV_EOF with the error in fflags, on both filters.
    apply(kq, &[change(c, EVFILT_READ, EV_ADD | EV_CLEAR)]);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_EOF, 0, 0)]);
    api::setsockopt(s, SOL_SOCKET, SO_LINGER, &[1, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    api::close(s).unwrap();
    settle_ms(10);
    apply(kq, &[change(c, EVFILT_WRITE, EV_ADD)]);
    let ev = poll(kq);
    assert_eq!(
        ev,
        vec![
            (c, EVFILT_WRITE, EV_EOF, libc::ECONNRESET as u32, ev[0].4),
            (
                c,
                EVFILT_READ,
                EV_CLEAR | EV_EOF,
                libc::ECONNRESET as u32,
                0
            ),
        ]
    );
}

/// A knote deleted while it waits on the queue and added again (a number
/// closed and given back for the next connection) is reported once per
/// kevent, as FreeBSD reports it; so is a knote whose socket was closed
/// while it waited.
#[test]
fn a_knote_added_again_is_reported_once() {
    let _e = two_engines();
    let (l, c, s) = pair(7611);
    let kq = api::kqueue().unwrap();
    // Writable at once: queued by the EV_ADD.
    apply(kq, &[change(c, EVFILT_WRITE, EV_ADD)]);
    apply(kq, &[change(c, EVFILT_WRITE, EV_DELETE)]);
    apply(kq, &[change(c, EVFILT_WRITE, EV_ADD)]);
    let got = poll(kq);
    assert_eq!(got.len(), 1, "one report of the write filter: {got:?}");
    assert_eq!((got[0].0, got[0].1), (c, EVFILT_WRITE));
    // Closed while queued; the number comes back for a new socket, whose
    // knote reports the new socket's state alone.
    apply(kq, &[change(s, EVFILT_WRITE, EV_ADD)]);
    api::close(s).unwrap();
    let again = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    assert_eq!(again, s, "the lowest free number comes back");
    apply(kq, &[change(again, EVFILT_READ, EV_ADD)]);
    let got = poll(kq);
    assert!(
        got.iter().all(|e| e.0 != again || e.1 == EVFILT_READ),
        "no write report of the closed socket under its number: {got:?}"
    );
    assert!(got.iter().filter(|e| e.0 == again).count() <= 1, "{got:?}");
    for fd in [again, c, l, kq] {
        api::close(fd).unwrap();
    }
}

/// Urgent data: EVFILT_READ reports EV_OOBAND (Darwin's flag) while the
/// urgent byte waits for recv(MSG_OOB), with the normal bytes before the
/// mark as `data`; once it is read, a plain read report.
#[test]
fn urgent_data_reports_ev_ooband() {
    let _e = two_engines();
    let kq = api::kqueue().unwrap();
    let (_l, c, s) = pair(8107);
    apply(kq, &[change(s, EVFILT_READ, EV_ADD)]);
    api::send(c, b"ab", 0).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, 0, 0, 2)]);
    api::send(c, b"!", MSG_OOB).unwrap();
    settle_ms(10);
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, EV_OOBAND, 0, 3)]);
    let mut buf = [0u8; 8];
    assert_eq!(api::recv(s, &mut buf, MSG_OOB), Ok(1));
    assert_eq!(buf[0], b'!');
    assert_eq!(poll(kq), vec![(s, EVFILT_READ, 0, 0, 3)]);
}
