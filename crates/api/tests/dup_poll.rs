//! dup, dup2, dup3, F_DUPFD and poll: the same scenarios against ustack
//! and against the Linux kernel, compared result by result; then what
//! only ustack can show (kqueue's knotes per number, a socket moving to
//! another number when its first one closes, calls from another thread,
//! numbers given back when the worker ends).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use api::consts::*;
use api::{epoll_event, Errno, KEvent, Result};
use common::net::{compare, get_int, set_int, Kernel, Net, Trace, Ustack};
use common::*;

/// The tests of this file one at a time: they close numbers and look at
/// them again, which another test's thread could take meanwhile.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calls of this file beside [`Net`]'s.
trait Fds: Net {
    fn dup(&mut self, fd: i32) -> Result<i32>;
    fn dup2(&mut self, fd: i32, newfd: i32) -> Result<i32>;
    fn dup3(&mut self, fd: i32, newfd: i32, flags: i32) -> Result<i32>;
    fn dupfd(&mut self, fd: i32, min: i32, cloexec: bool) -> Result<i32>;
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize>;
}

impl Fds for Ustack {
    fn dup(&mut self, fd: i32) -> Result<i32> {
        api::dup(fd)
    }
    fn dup2(&mut self, fd: i32, newfd: i32) -> Result<i32> {
        api::dup2(fd, newfd)
    }
    fn dup3(&mut self, fd: i32, newfd: i32, flags: i32) -> Result<i32> {
        api::dup3(fd, newfd, flags)
    }
    fn dupfd(&mut self, fd: i32, min: i32, cloexec: bool) -> Result<i32> {
        let cmd = if cloexec { F_DUPFD_CLOEXEC } else { F_DUPFD };
        api::fcntl(fd, cmd, min)
    }
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize> {
        api::poll(fds, timeout)
    }
}

fn cvt(r: i32) -> Result<i32> {
    if r < 0 {
        Err(Errno::last_os_error())
    } else {
        Ok(r)
    }
}

// SAFETY (for every call below): no pointers but the caller's slice, with
// its true length.
impl Fds for Kernel {
    fn dup(&mut self, fd: i32) -> Result<i32> {
        cvt(unsafe { libc::dup(fd) })
    }
    fn dup2(&mut self, fd: i32, newfd: i32) -> Result<i32> {
        cvt(unsafe { libc::dup2(fd, newfd) })
    }
    fn dup3(&mut self, fd: i32, newfd: i32, flags: i32) -> Result<i32> {
        cvt(unsafe { libc::dup3(fd, newfd, flags) })
    }
    fn dupfd(&mut self, fd: i32, min: i32, cloexec: bool) -> Result<i32> {
        let cmd = if cloexec { F_DUPFD_CLOEXEC } else { F_DUPFD };
        cvt(unsafe { libc::fcntl(fd, cmd, min) })
    }
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout: i32) -> Result<usize> {
        cvt(unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) })
            .map(|n| n as usize)
    }
}

/// Runs `scenario` on Linux and on ustack and compares the records.
fn both(scenario: fn(&mut dyn Fds, &mut Trace)) {
    let mut k = Kernel::new();
    let mut linux = Trace::new(&k);
    scenario(&mut k, &mut linux);
    let ustack = {
        let _engines = two_engines();
        let mut u = Ustack;
        let mut t = Trace::new(&u);
        scenario(&mut u, &mut t);
        t
    };
    compare(&ustack, &linux);
}

fn at(n: &dyn Fds, port: u16) -> SocketAddr {
    SocketAddr::from((n.server_ip(), port))
}

/// A listener on `port` and a connected pair: (listener, client, server).
fn pair(n: &mut dyn Fds, port: u16) -> (i32, i32, i32) {
    let l = n.socket(AF_INET, SOCK_STREAM, 0).expect("socket");
    set_int(n, l, SOL_SOCKET, SO_REUSEADDR, 1).expect("SO_REUSEADDR");
    n.bind(l, &at(n, port)).expect("bind");
    n.listen(l, 8).expect("listen");
    let c = n.socket(AF_INET, SOCK_STREAM, 0).expect("socket");
    n.connect(c, &at(n, port)).expect("connect");
    let (s, _) = n.accept4(l, 0).expect("accept");
    (l, c, s)
}

fn pfd(fd: i32, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// poll bits by name, so a difference reads.
fn bits(revents: i16) -> String {
    let names = [
        (libc::POLLIN, "IN"),
        (libc::POLLPRI, "PRI"),
        (libc::POLLOUT, "OUT"),
        (libc::POLLERR, "ERR"),
        (libc::POLLHUP, "HUP"),
        (libc::POLLNVAL, "NVAL"),
        (libc::POLLRDNORM, "RDNORM"),
        (libc::POLLWRNORM, "WRNORM"),
        (libc::POLLRDHUP, "RDHUP"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| revents & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "0".to_string()
    } else {
        v.join("|")
    }
}

fn rec_poll(n: &mut dyn Fds, t: &mut Trace, what: &str, fds: &mut [libc::pollfd], timeout: i32) {
    let r = n.poll(fds, timeout);
    let shown: Vec<String> = fds.iter().map(|p| bits(p.revents)).collect();
    t.rec(what, &r, |_, k| format!("{k} [{}]", shown.join(", ")));
}

/// A number that names nothing: a duplicate, closed.
fn closed_number(n: &mut dyn Fds, fd: i32) -> i32 {
    let d = n.dup(fd).expect("dup");
    n.close(d).expect("close");
    d
}

#[test]
fn dup_shares_the_socket_and_closes_with_the_last_number() {
    let _serial = serial();
    both(|n, t| {
        let (l, c, s) = pair(n, 7301);
        let d = n.dup(c);
        t.ok("dup", &d);
        let d = d.unwrap();
        t.note(format!("new number: {}", d != c));
        t.val("send through the duplicate", &n.send(d, b"abc", 0));
        let mut buf = [0u8; 16];
        t.val("recv", &n.recv(s, &mut buf, 0));
        // File status flags are the socket's, FD_CLOEXEC the number's.
        t.val("F_SETFL O_NONBLOCK", &n.fcntl(c, F_SETFL, O_NONBLOCK));
        let fl = n.fcntl(d, F_GETFL, 0).map(|f| f & O_NONBLOCK != 0);
        t.val("the duplicate is non-blocking", &fl);
        t.val("recv on the duplicate", &n.recv(d, &mut buf, 0));
        t.val(
            "dup3 onto the duplicate",
            &n.dup3(c, d, O_CLOEXEC).map(|x| x == d),
        );
        t.val("F_GETFD duplicate", &n.fcntl(d, F_GETFD, 0));
        t.val("F_GETFD first", &n.fcntl(c, F_GETFD, 0));
        t.val("F_SETFD", &n.fcntl(c, F_SETFD, FD_CLOEXEC));
        t.val("F_GETFD first", &n.fcntl(c, F_GETFD, 0));
        t.val("F_GETFD duplicate", &n.fcntl(d, F_GETFD, 0));
        // The first number goes; the socket stays.
        t.ok("close first", &n.close(c));
        t.val("send after", &n.send(d, b"x", 0));
        n.settle();
        t.val("recv", &n.recv(s, &mut buf, 0));
        t.val("getpeername", &n.getpeername(d).map(|a| a.port()));
        t.val("dup of the closed number", &n.dup(c));
        t.ok("close duplicate", &n.close(d));
        n.settle();
        t.val("EOF", &n.recv(s, &mut buf, 0));
        t.val("close again", &n.close(d));
        // dup2 and dup3 edge cases.
        t.val("dup2 onto itself", &n.dup2(s, s).map(|x| x == s));
        t.val("dup3 onto itself", &n.dup3(s, s, 0));
        let free = closed_number(n, s);
        t.val("dup3 bad flags", &n.dup3(s, free, 0x40));
        t.val("dup2 of a closed number", &n.dup2(c, free));
        t.val(
            "dup2 onto a free number",
            &n.dup2(s, free).map(|x| x == free),
        );
        t.val("F_GETFD", &n.fcntl(free, F_GETFD, 0));
        t.val("dup2 onto -1", &n.dup2(s, -1));
        t.val("dup2 onto a huge number", &n.dup2(s, i32::MAX));
        t.val("F_DUPFD from 200", &n.dupfd(s, 200, true).map(|x| x >= 200));
        t.val("F_DUPFD negative", &n.dupfd(s, -1, false));
        for fd in [free, s, l] {
            t.ok("close", &n.close(fd));
        }
    });
}

#[test]
fn dup2_onto_a_socket_closes_it_first() {
    let _serial = serial();
    both(|n, t| {
        let u = n.socket(AF_INET, SOCK_DGRAM, 0).unwrap();
        let l = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        set_int(n, l, SOL_SOCKET, SO_REUSEADDR, 1).unwrap();
        n.bind(l, &at(n, 7302)).unwrap();
        n.listen(l, 8).unwrap();
        t.val("dup2 UDP onto the listener", &n.dup2(u, l).map(|x| x == l));
        t.val("SO_TYPE", &get_int(n, l, SOL_SOCKET, SO_TYPE));
        // The listener is gone: its port is free again.
        let l2 = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        t.ok("bind its port", &n.bind(l2, &at(n, 7302)));
        t.ok("close UDP's first number", &n.close(u));
        t.val("SO_TYPE", &get_int(n, l, SOL_SOCKET, SO_TYPE));
        t.ok("close", &n.close(l));
        t.ok("close", &n.close(l2));
        // Onto a number of the same socket: nothing closes.
        let (l, c, s) = pair(n, 7303);
        let d = n.dup(s).unwrap();
        t.val("dup2 onto its own duplicate", &n.dup2(s, d).map(|x| x == d));
        t.val("send", &n.send(c, b"ab", 0));
        n.settle();
        let mut buf = [0u8; 4];
        t.val("recv on the duplicate", &n.recv(d, &mut buf, 0));
        for fd in [d, s, c, l] {
            t.ok("close", &n.close(fd));
        }
    });
}

#[test]
fn epoll_items_belong_to_socket_and_number() {
    let _serial = serial();
    both(|n, t| {
        let (l, c, s) = pair(n, 7304);
        let d = n.dup(s).unwrap();
        let ep = n.epoll_create1(0).unwrap();
        for (fd, data) in [(s, 1u64), (d, 2)] {
            let ev = epoll_event {
                events: EPOLLIN as u32,
                u64: data,
            };
            t.ok(
                "EPOLL_CTL_ADD",
                &n.epoll_ctl(ep, EPOLL_CTL_ADD, fd, Some(&ev)),
            );
        }
        let ev = epoll_event {
            events: EPOLLIN as u32,
            u64: 3,
        };
        t.val(
            "EPOLL_CTL_ADD again",
            &n.epoll_ctl(ep, EPOLL_CTL_ADD, d, Some(&ev)),
        );
        let mut evs = [epoll_event { events: 0, u64: 0 }; 8];
        let mut wait = |n: &mut dyn Fds, t: &mut Trace, what: &str| {
            let r = n.epoll_wait(ep, &mut evs, 0);
            let mut got: Vec<u64> = evs[..*r.as_ref().unwrap_or(&0)]
                .iter()
                .map(|e| e.u64)
                .collect();
            got.sort_unstable();
            t.rec(what, &r, |_, k| format!("{k} {got:?}"));
        };
        wait(n, t, "nothing yet");
        n.send(c, b"x", 0).unwrap();
        n.settle();
        wait(n, t, "both items");
        // The first number closes: its item stays while the socket lives.
        t.ok("close first", &n.close(s));
        wait(n, t, "after close");
        t.val(
            "EPOLL_CTL_DEL closed number",
            &n.epoll_ctl(ep, EPOLL_CTL_DEL, s, None),
        );
        t.ok(
            "EPOLL_CTL_DEL duplicate",
            &n.epoll_ctl(ep, EPOLL_CTL_DEL, d, None),
        );
        wait(n, t, "the closed number's item");
        t.ok("close duplicate", &n.close(d));
        wait(n, t, "the socket is gone");
        for fd in [ep, c, l] {
            t.ok("close", &n.close(fd));
        }
    });
}

#[test]
fn poll_reports_as_linux() {
    let _serial = serial();
    both(|n, t| {
        let (l, c, s) = pair(n, 7305);
        let gone = closed_number(n, s);
        let ev = libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP;
        let mut fds = [
            pfd(s, libc::POLLIN),
            pfd(c, libc::POLLOUT),
            pfd(-1, libc::POLLIN),
            pfd(gone, libc::POLLIN),
            pfd(l, libc::POLLIN),
        ];
        rec_poll(n, t, "poll", &mut fds, 0);
        n.send(c, b"hi", 0).unwrap();
        n.settle();
        rec_poll(n, t, "data", &mut fds, 0);
        let mut fds = [pfd(s, ev), pfd(c, 0), pfd(s, 0)];
        rec_poll(n, t, "all bits", &mut fds, 0);
        n.shutdown(c, SHUT_WR).unwrap();
        n.settle();
        rec_poll(n, t, "peer's FIN", &mut fds, 0);
        let mut buf = [0u8; 8];
        n.recv(s, &mut buf, 0).unwrap();
        n.shutdown(s, SHUT_WR).unwrap();
        n.settle();
        rec_poll(n, t, "both shut", &mut fds, 0);
        // A reset: POLLERR with no event asked.
        let (l2, c2, s2) = pair(n, 7306);
        n.setsockopt(c2, SOL_SOCKET, SO_LINGER, &[1, 0, 0, 0, 0, 0, 0, 0])
            .unwrap();
        n.close(c2).unwrap();
        n.settle();
        let mut fds = [pfd(s2, 0)];
        rec_poll(n, t, "reset", &mut fds, 0);
        // A wait that times out, and one that data ends.
        let mut fds = [pfd(l2, libc::POLLIN)];
        let start = Instant::now();
        rec_poll(n, t, "timeout", &mut fds, 60);
        t.note(format!(
            "waited the timeout: {}",
            start.elapsed() >= Duration::from_millis(55)
        ));
        let c3 = n.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        n.connect(c3, &at(n, 7306)).unwrap();
        rec_poll(n, t, "a connection", &mut fds, 2000);
        // An epoll instance polls readable when a wait would report.
        let ep = n.epoll_create1(0).unwrap();
        let (s3, _) = n.accept4(l2, 0).unwrap();
        let e = epoll_event {
            events: EPOLLIN as u32,
            u64: 0,
        };
        n.epoll_ctl(ep, EPOLL_CTL_ADD, s3, Some(&e)).unwrap();
        let mut fds = [pfd(ep, libc::POLLIN)];
        rec_poll(n, t, "epoll, nothing", &mut fds, 0);
        n.send(c3, b"z", 0).unwrap();
        n.settle();
        rec_poll(n, t, "epoll, data", &mut fds, 0);
        for fd in [ep, s3, c3, s2, l2, s, c, l] {
            t.ok("close", &n.close(fd));
        }
    });
}

fn kev(ident: i32, filter: i16, flags: u16, udata: usize) -> KEvent {
    KEvent {
        ident: ident as usize,
        filter,
        flags,
        udata,
        ..KEvent::default()
    }
}

fn kevents(kq: i32) -> Vec<(usize, usize)> {
    let mut out = [KEvent::default(); 8];
    let n = api::kevent(kq, &[], &mut out, Some(Duration::ZERO)).unwrap();
    let mut v: Vec<(usize, usize)> = out[..n].iter().map(|k| (k.ident, k.udata)).collect();
    v.sort_unstable();
    v
}

fn ustack_pair(port: u16) -> (i32, i32, i32) {
    pair(&mut Ustack, port)
}

#[test]
fn kqueue_knotes_belong_to_their_number() {
    let _serial = serial();
    let _e = two_engines();
    let (l, c, s) = ustack_pair(7310);
    let d = api::dup(s).unwrap();
    let kq = api::kqueue().unwrap();
    let add = [
        kev(s, EVFILT_READ, EV_ADD, 1),
        kev(d, EVFILT_READ, EV_ADD, 2),
    ];
    api::kevent(kq, &add, &mut [], None).unwrap();
    api::write(c, b"x").unwrap();
    settle_ms(20);
    let (s_, d_) = (s as usize, d as usize);
    let mut both = vec![(s_, 1), (d_, 2)];
    both.sort_unstable();
    assert_eq!(kevents(kq), both);
    // Closing a number drops its knotes (knote_fdclose), not the others.
    api::close(d).unwrap();
    assert_eq!(kevents(kq), vec![(s_, 1)]);
    // The first number closes while a duplicate holds the socket: its
    // knote goes, the socket moves to the duplicate's number.
    let d2 = api::dup(s).unwrap();
    api::close(s).unwrap();
    assert_eq!(kevents(kq), vec![]);
    let mut buf = [0u8; 4];
    assert_eq!(api::read(d2, &mut buf).unwrap(), 1);
    api::kevent(kq, &[kev(d2, EVFILT_READ, EV_ADD, 3)], &mut [], None).unwrap();
    api::write(c, b"y").unwrap();
    settle_ms(20);
    assert_eq!(kevents(kq), vec![(d2 as usize, 3)]);
    assert_eq!(
        api::kevent(kq, &[kev(s, EVFILT_READ, EV_ADD, 4)], &mut [], None),
        Err(Errno::EBADF),
        "a closed number"
    );
    for fd in [kq, d2, c, l] {
        api::close(fd).unwrap();
    }
}

#[test]
fn a_listener_moves_to_its_duplicate() {
    let _serial = serial();
    let _e = two_engines();
    let l = api::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0).unwrap();
    // SO_REUSEADDR here and on `other` below: the accepted connection
    // holds the port too (as on Linux) but shares it then, so that only
    // the listener's hold is what the binds below see.
    api::setsockopt_int(l, SOL_SOCKET, SO_REUSEADDR, 1).unwrap();
    api::bind(l, &server(7311)).unwrap();
    api::listen(l, 8).unwrap();
    let ep = api::epoll_create1(0).unwrap();
    let ev = epoll_event {
        events: EPOLLIN as u32,
        u64: 11,
    };
    api::epoll_ctl(ep, EPOLL_CTL_ADD, l, Some(&ev)).unwrap();
    // A duplicate of the epoll instance too: its first number goes.
    let ep2 = api::dup(ep).unwrap();
    api::close(ep).unwrap();
    let d = api::fcntl(l, F_DUPFD, 100).unwrap();
    assert!(d >= 100);
    api::close(l).unwrap();
    assert_eq!(api::getsockname(d).unwrap(), server(7311));
    let c = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::connect(c, &server(7311)).unwrap();
    let mut evs = [epoll_event { events: 0, u64: 0 }; 4];
    assert_eq!(api::epoll_wait(ep2, &mut evs, 1000).unwrap(), 1);
    assert_eq!({ evs[0].u64 }, 11, "the item of the closed number reports");
    let (s, _) = api::accept(d).unwrap();
    // The port stays held by the socket, whatever its number.
    let other = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
    api::setsockopt_int(other, SOL_SOCKET, SO_REUSEADDR, 1).unwrap();
    assert_eq!(api::bind(other, &server(7311)), Err(Errno::EADDRINUSE));
    api::close(d).unwrap();
    assert_eq!(api::epoll_wait(ep2, &mut evs, 0).unwrap(), 0);
    api::bind(other, &server(7311)).unwrap();
    for fd in [other, s, c, ep2] {
        api::close(fd).unwrap();
    }
}

#[test]
fn kernel_numbers_are_the_callers_business() {
    let _serial = serial();
    let _e = two_engines();
    let s = api::socket(AF_INET, SOCK_DGRAM, 0).unwrap();
    let mut p = [0i32; 2];
    // SAFETY: `p` holds the two fds pipe writes.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    assert_eq!(api::dup(p[0]), Err(Errno::EBADF), "dup of a kernel fd");
    assert_eq!(
        api::dup2(s, p[1]),
        Err(Errno::EBADF),
        "dup2 onto a kernel fd"
    );
    assert_eq!(api::dup2(p[0], s), Err(Errno::EBADF), "dup2 of a kernel fd");
    // The kernel fd is untouched.
    // SAFETY: plain fcntl on our own fds.
    assert!(unsafe { libc::fcntl(p[1], libc::F_GETFD) } >= 0);
    let mut fds = [pfd(p[0], libc::POLLIN), pfd(s, libc::POLLOUT)];
    assert_eq!(api::poll(&mut fds, 0).unwrap(), 2);
    assert_eq!(
        fds[0].revents,
        libc::POLLNVAL,
        "a kernel fd is not ustack's"
    );
    assert_eq!(fds[1].revents, libc::POLLOUT);
    // SAFETY: closing our own pipe.
    unsafe {
        libc::close(p[0]);
        libc::close(p[1]);
    }
    api::close(s).unwrap();
}

#[test]
fn other_threads_dup_and_poll() {
    let _serial = serial();
    let _e = two_engines();
    let (l, c, s) = ustack_pair(7312);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let th = std::thread::spawn(move || {
        // No worker here: every call goes to the engines' thread.
        let d = api::dup(s).unwrap();
        let free = api::dup(d).unwrap();
        api::close(free).unwrap();
        assert_eq!(api::dup2(d, free).unwrap(), free);
        api::close(d).unwrap();
        let mut fds = [pfd(free, libc::POLLIN)];
        let start = Instant::now();
        let n = api::poll(&mut fds, 5000).unwrap();
        let waited = start.elapsed();
        st.store(true, std::sync::atomic::Ordering::SeqCst);
        (n, fds[0].revents, waited, free)
    });
    // The engines' thread steps; the data comes after the other thread
    // has started waiting.
    let start = Instant::now();
    let mut sent = false;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        api::step().unwrap();
        if !sent && start.elapsed() > Duration::from_millis(100) {
            api::write(c, b"wake").unwrap();
            sent = true;
        }
        std::thread::sleep(Duration::from_micros(200));
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the poll never returned"
        );
    }
    let (n, revents, waited, free) = th.join().unwrap();
    assert_eq!((n, revents), (1, libc::POLLIN));
    assert!(
        waited >= Duration::from_millis(50),
        "poll returned before the data: {waited:?}"
    );
    let mut buf = [0u8; 8];
    assert_eq!(api::read(free, &mut buf).unwrap(), 4);
    for fd in [free, s, c, l] {
        api::close(fd).unwrap();
    }
}

#[test]
fn duplicates_go_back_when_the_worker_ends() {
    let _serial = serial();
    let d = {
        let _e = two_engines();
        let s = api::socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let d = api::dup(s).unwrap();
        api::close(s).unwrap();
        d
    };
    assert!(!api::is_ustack_fd(d));
    // SAFETY: F_GETFD on a number; it must be closed now.
    assert_eq!(unsafe { libc::fcntl(d, libc::F_GETFD) }, -1);
}

#[test]
fn poll_timeout_without_engines_sleeps() {
    let _serial = serial();
    // No worker, no valid fd: poll sleeps out its timeout.
    let mut fds = [pfd(-1, libc::POLLIN)];
    let start = Instant::now();
    assert_eq!(api::poll(&mut fds, 30).unwrap(), 0);
    assert!(start.elapsed() >= Duration::from_millis(30));
}

/// The kernel's socket inodes among this process's fds, each with how many
/// numbers refer to it (from /proc/self/fd).
fn socket_inodes() -> std::collections::HashMap<String, usize> {
    let mut out = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if let Ok(link) = std::fs::read_link(entry.path()) {
            let link = link.to_string_lossy().into_owned();
            if link.starts_with("socket:[") {
                *out.entry(link).or_insert(0) += 1;
            }
        }
    }
    out
}

/// One fd namespace at O(bytes) per number: each ustack socket's number is
/// a real kernel fd (fstat says socket, the kernel will not hand it out
/// again), and every one is a duplicate of one kernel socket, so holding
/// a number costs a slot in the fd table, not a kernel object per socket.
/// Closing the ustack socket gives the number back.
#[test]
fn a_held_number_is_a_slot_not_a_kernel_object() {
    const SOCKETS: usize = 3000;
    let _serial = serial();
    let _e = two_engines();
    let before = socket_inodes();
    let fds: Vec<i32> = (0..SOCKETS)
        .map(|i| {
            api::socket(
                AF_INET,
                if i % 2 == 0 { SOCK_STREAM } else { SOCK_DGRAM },
                0,
            )
            .unwrap_or_else(|e| panic!("socket {i}: {e:?} (RLIMIT_NOFILE too low?)"))
        })
        .collect();
    let after = socket_inodes();
    let new: Vec<_> = after
        .iter()
        .filter(|(ino, n)| before.get(*ino) != Some(n))
        .collect();
    assert_eq!(
        new.len(),
        1,
        "{SOCKETS} ustack sockets took kernel socket objects {new:?}, want the one placeholder"
    );
    assert!(
        *new[0].1 >= SOCKETS,
        "the placeholder {} holds {} numbers, want at least {SOCKETS}",
        new[0].0,
        new[0].1
    );
    let mut first: Option<(u64, u64)> = None;
    for &fd in &fds {
        // SAFETY: a zeroed libc::stat is valid; fstat fills the one we own.
        let (rc, st) = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            (libc::fstat(fd, &mut st), st)
        };
        assert_eq!(rc, 0, "fstat({fd})");
        assert_eq!(
            st.st_mode & libc::S_IFMT,
            libc::S_IFSOCK,
            "fstat({fd}) is no socket"
        );
        let id = (st.st_dev, st.st_ino);
        assert_eq!(
            *first.get_or_insert(id),
            id,
            "number {fd} is another kernel object"
        );
    }
    for &fd in &fds {
        api::close(fd).unwrap();
        // SAFETY: F_GETFD on a number, no memory.
        assert_eq!(
            unsafe { libc::fcntl(fd, libc::F_GETFD) },
            -1,
            "number {fd} still held after its socket closed"
        );
    }
}
