//! F-Stack's `ff_*` API (include/fstack/ff_api.h, ff_epoll.h) over the
//! native calls.
//!
//! F-Stack's calls take Linux's values (its wrappers convert them to
//! FreeBSD's before they reach its stack), Linux's `struct sockaddr`
//! layout (`struct linux_sockaddr`) and set Linux errno values; ustack's
//! native calls take the same, so most `ff_*` calls are the native ones.
//! What differs, as in F-Stack:
//!
//! - `ff_kevent`, `ff_kevent_do_each`, `ff_epoll_wait`, `ff_poll` and
//!   `ff_select` never block inside `ff_run`'s loop: the timeout is
//!   ignored there (outside it, it is honoured).
//! - `ff_accept` gives a socket that inherits the listener's O_NONBLOCK
//!   (FreeBSD's accept does; Linux's does not).
//! - `ff_epoll_create` takes any size (F-Stack's examples pass 0).
//! - IP_RECVDSTADDR / IP_SENDSRCADDR have FreeBSD's number, 7, at level
//!   IPPROTO_IP in `ff_setsockopt` and in cmsgs.
//! - An AF_INET6 socket from `ff_socket` is v6-only (IPV6_V6ONLY on until
//!   the program turns it off): FreeBSD's default (`net.inet6.ip6.v6only`
//!   is 1), which F-Stack's own example relies on when it binds `[::]:80`
//!   beside `0.0.0.0:80`.  Addresses are Linux's `sockaddr_in6` (AF_INET6
//!   10, F-Stack's AF_INET6_LINUX); IPV6_PKTINFO cmsgs have Linux's
//!   numbers too.
//! - `ff_init` exits the process when it fails, as F-Stack's does.
//! - `ff_run` returns only after `ff_stop_run`; the loop's result is not
//!   looked at.
//!
//! Message flags (MSG_DONTWAIT, MSG_PEEK, ...) are Linux's, as the
//! program's `<sys/socket.h>` defines them.  `ff_ioctl`, `ff_fcntl` and
//! the log of ff_log.h are variadic in C: `ff_variadic.c` defines them
//! (over `ustack_ioctl` and `ustack_fcntl`).  The waits over several fds
//! are in `wait.rs`, `ff_sysctl` in `sysctl.rs`, `ff_route_ctl` in
//! `route.rs`, `ff_get_traffic` in `stats.rs`.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use libc::{iovec, msghdr, sockaddr, socklen_t, timespec, timeval};
use runtime::engine::HookVerdict;

use crate::events::{self, CKevent};
use crate::init::{self, LoopFn, IN_FF_LOOP};
use crate::msg::{self, CmsgNames};
use crate::sockets::*;
use crate::{ret_int, set_errno};

/// FreeBSD's IP_RECVDSTADDR and IP_SENDSRCADDR (both 7).
pub const FREEBSD_IP_RECVDSTADDR: c_int = 7;

const FSTACK_CMSGS: CmsgNames = CmsgNames {
    recvdstaddr: FREEBSD_IP_RECVDSTADDR,
    sendsrcaddr: FREEBSD_IP_RECVDSTADDR,
};

/// An F-Stack option number as the socket layer knows it.
fn option(level: c_int, name: c_int) -> c_int {
    if level == libc::IPPROTO_IP && name == FREEBSD_IP_RECVDSTADDR {
        api::consts::IP_RECVDSTADDR
    } else {
        name
    }
}

pub(crate) fn in_loop() -> bool {
    IN_FF_LOOP.with(|c| c.get())
}

/// `ff_init(argc, argv)`: `--conf FILE`, `--proc-type`, `--proc-id`.
///
/// # Safety
/// `argv` points to `argc` readable C strings.
#[no_mangle]
pub unsafe extern "C" fn ff_init(argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: passed on from the caller.
    let args = unsafe { init::args_of(argc, argv) };
    match init::init(&args) {
        Ok(()) => 0,
        Err((msg, _)) => {
            eprintln!("{msg}");
            std::process::exit(1);
        }
    }
}

/// `ff_run(loop, arg)`: the engine loop, `loop(arg)` after each step,
/// until `ff_stop_run`.
///
/// # Safety
/// `f` is null or a function that may be called with `arg`.
#[no_mangle]
pub unsafe extern "C" fn ff_run(f: Option<LoopFn>, arg: *mut c_void) {
    if let Err(e) = init::run_loop(f, arg, true) {
        eprintln!("ff_run: {e} (was ff_init called on this thread?)");
        set_errno(e);
    }
}

#[no_mangle]
pub extern "C" fn ff_stop_run() {
    init::ustack_stop()
}

#[no_mangle]
pub extern "C" fn ff_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let fd = ustack_socket(domain, ty, protocol);
    if fd >= 0 && domain == libc::AF_INET6 {
        // A fresh socket takes the option; nothing can refuse it.
        let _ = api::setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1);
    }
    fd
}

/// # Safety
/// As bind(2).
#[no_mangle]
pub unsafe extern "C" fn ff_bind(s: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_bind(s, addr, len) }
}

#[no_mangle]
pub extern "C" fn ff_listen(s: c_int, backlog: c_int) -> c_int {
    ustack_listen(s, backlog)
}

/// # Safety
/// As accept(2).
#[no_mangle]
pub unsafe extern "C" fn ff_accept(s: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ff_accept4(s, addr, len, 0) }
}

/// # Safety
/// As accept4(2).
#[no_mangle]
pub unsafe extern "C" fn ff_accept4(
    s: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // FreeBSD: the new socket inherits the listener's O_NONBLOCK.
    let inherit = match api::fcntl(s, libc::F_GETFL, 0) {
        Ok(fl) if fl & libc::O_NONBLOCK != 0 => libc::SOCK_NONBLOCK,
        _ => 0,
    };
    // SAFETY: passed on from the caller.
    unsafe { ustack_accept4(s, addr, len, flags | inherit) }
}

/// # Safety
/// As connect(2).
#[no_mangle]
pub unsafe extern "C" fn ff_connect(s: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_connect(s, addr, len) }
}

#[no_mangle]
pub extern "C" fn ff_close(fd: c_int) -> c_int {
    ustack_close(fd)
}

#[no_mangle]
pub extern "C" fn ff_shutdown(s: c_int, how: c_int) -> c_int {
    ustack_shutdown(s, how)
}

/// # Safety
/// As getpeername(2).
#[no_mangle]
pub unsafe extern "C" fn ff_getpeername(
    s: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_getpeername(s, addr, len) }
}

/// # Safety
/// As getsockname(2).
#[no_mangle]
pub unsafe extern "C" fn ff_getsockname(
    s: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_getsockname(s, addr, len) }
}

/// # Safety
/// As getsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn ff_getsockopt(
    s: c_int,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_getsockopt(s, level, option(level, name), val, len) }
}

/// # Safety
/// As setsockopt(2).
#[no_mangle]
pub unsafe extern "C" fn ff_setsockopt(
    s: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { ustack_setsockopt(s, level, option(level, name), val, len) }
}

/// # Safety
/// As read(2).
#[no_mangle]
pub unsafe extern "C" fn ff_read(fd: c_int, buf: *mut c_void, n: usize) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_read(fd, buf, n) }
}

/// # Safety
/// As readv(2).
#[no_mangle]
pub unsafe extern "C" fn ff_readv(fd: c_int, iov: *const iovec, count: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_readv(fd, iov, count) }
}

/// write(2); a buffer of `ff_zc_mbuf_get` (`m->bsd_mbuf`) is recognised
/// and its bytes sent, as F-Stack's `ff_write` takes its zero-copy mbufs.
///
/// # Safety
/// As write(2).
#[no_mangle]
pub unsafe extern "C" fn ff_write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    if let Some(r) = crate::zero_copy::ff_write_staged(fd, buf, n) {
        return r;
    }
    // SAFETY: passed on from the caller.
    unsafe { ustack_write(fd, buf, n) }
}

/// # Safety
/// As writev(2).
#[no_mangle]
pub unsafe extern "C" fn ff_writev(fd: c_int, iov: *const iovec, count: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_writev(fd, iov, count) }
}

/// # Safety
/// As send(2).
#[no_mangle]
pub unsafe extern "C" fn ff_send(s: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_send(s, buf, n, flags) }
}

/// # Safety
/// As sendto(2).
#[no_mangle]
pub unsafe extern "C" fn ff_sendto(
    s: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    to: *const sockaddr,
    tolen: socklen_t,
) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_sendto(s, buf, n, flags, to, tolen) }
}

/// # Safety
/// As sendmsg(2).
#[no_mangle]
pub unsafe extern "C" fn ff_sendmsg(s: c_int, m: *const msghdr, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { msg::sendmsg_with(s, m, flags, FSTACK_CMSGS) }
}

/// # Safety
/// As recv(2).
#[no_mangle]
pub unsafe extern "C" fn ff_recv(s: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_recv(s, buf, n, flags) }
}

/// # Safety
/// As recvfrom(2).
#[no_mangle]
pub unsafe extern "C" fn ff_recvfrom(
    s: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    from: *mut sockaddr,
    fromlen: *mut socklen_t,
) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { ustack_recvfrom(s, buf, n, flags, from, fromlen) }
}

/// # Safety
/// As recvmsg(2).
#[no_mangle]
pub unsafe extern "C" fn ff_recvmsg(s: c_int, m: *mut msghdr, flags: c_int) -> isize {
    // SAFETY: passed on from the caller.
    unsafe { msg::recvmsg_with(s, m, flags, FSTACK_CMSGS) }
}

#[no_mangle]
pub extern "C" fn ff_kqueue() -> c_int {
    events::ustack_kqueue()
}

/// kevent; inside `ff_run`'s loop it never blocks, whatever `timeout`.
///
/// # Safety
/// As kevent(2).
#[no_mangle]
pub unsafe extern "C" fn ff_kevent(
    kq: c_int,
    changes: *const CKevent,
    nchanges: c_int,
    events: *mut CKevent,
    nevents: c_int,
    timeout: *const timespec,
) -> c_int {
    let t = if in_loop() {
        Ok(Some(Duration::ZERO))
    } else {
        // SAFETY: passed on from the caller.
        unsafe { events::kevent_timeout(timeout) }
    };
    match t {
        // SAFETY: passed on from the caller.
        Ok(t) => unsafe { events::kevent(kq, changes, nchanges, events, nevents, t) },
        Err(e) => ret_int(Err(e)),
    }
}

/// epoll_create; the size is not looked at.
#[no_mangle]
pub extern "C" fn ff_epoll_create(_size: c_int) -> c_int {
    events::ustack_epoll_create1(0)
}

/// # Safety
/// As epoll_ctl(2).
#[no_mangle]
pub unsafe extern "C" fn ff_epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    ev: *mut api::epoll_event,
) -> c_int {
    // SAFETY: passed on from the caller.
    unsafe { events::ustack_epoll_ctl(epfd, op, fd, ev) }
}

/// epoll_wait; inside `ff_run`'s loop it never blocks, whatever `timeout`.
///
/// # Safety
/// As epoll_wait(2).
#[no_mangle]
pub unsafe extern "C" fn ff_epoll_wait(
    epfd: c_int,
    events: *mut api::epoll_event,
    maxevents: c_int,
    timeout: c_int,
) -> c_int {
    let timeout = if in_loop() { 0 } else { timeout };
    // SAFETY: passed on from the caller.
    unsafe { events::epoll_wait(epfd, events, maxevents, timeout) }
}

/// Where the engine's clock started, as the wall clock and as the
/// monotonic one: `ff_gettimeofday` is the first plus the time the second
/// has run since.
static ENGINE_EPOCH: Mutex<Option<(SystemTime, Instant)>> = Mutex::new(None);

/// Notes the start of the engine's clock (`ustack_init`): `running` is
/// the engine's time now (its `Engine::now`).
pub(crate) fn note_engine_clock(running: Duration) {
    let wall = SystemTime::now().checked_sub(running).unwrap_or(UNIX_EPOCH);
    let mono = Instant::now()
        .checked_sub(running)
        .unwrap_or_else(Instant::now);
    *ENGINE_EPOCH.lock().unwrap_or_else(|e| e.into_inner()) = Some((wall, mono));
}

/// `ff_gettimeofday(tv, tz)`: the engine's clock as the time of day (the
/// wall clock where the engine's clock started, plus the engine's
/// monotonic time since: it never steps back when the system's clock is
/// set, as F-Stack's own clock does not); before `ff_init`, the system's.
/// `tz` is not written.  0, or -1 with errno EFAULT (`tv` NULL).
///
/// # Safety
/// `tv` is null or a writable timeval.
#[no_mangle]
pub unsafe extern "C" fn ff_gettimeofday(tv: *mut timeval, _tz: *mut c_void) -> c_int {
    if tv.is_null() {
        return ret_int(Err(crate::EFAULT));
    }
    let epoch = *ENGINE_EPOCH.lock().unwrap_or_else(|e| e.into_inner());
    let now = match epoch {
        Some((wall, mono)) => wall + mono.elapsed(),
        None => SystemTime::now(),
    };
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let v = timeval {
        tv_sec: since.as_secs() as libc::time_t,
        tv_usec: since.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: a writable timeval (the caller's promise).
    unsafe { tv.write_unaligned(v) };
    0
}

/// `ff_dup(oldfd)`: see `api::dup`.
#[no_mangle]
pub extern "C" fn ff_dup(oldfd: c_int) -> c_int {
    ret_int(api::dup(oldfd))
}

/// `ff_dup2(oldfd, newfd)`: see `api::dup2`.
#[no_mangle]
pub extern "C" fn ff_dup2(oldfd: c_int, newfd: c_int) -> c_int {
    ret_int(api::dup2(oldfd, newfd))
}

/// `ff_getmaxfd()`: one past the highest number a ustack fd can have.
#[no_mangle]
pub extern "C" fn ff_getmaxfd() -> c_int {
    api::fd_limit()
}

/// A thread's start routine.
pub type ThreadFn = extern "C" fn(arg: *mut c_void) -> *mut c_void;

/// `ff_pthread_create`: pthread_create (any thread may make ustack's
/// calls; nothing to set up).  Returns an error number as pthread's do:
/// EINVAL for `thread` or `start` NULL.
///
/// # Safety
/// As pthread_create(3): `thread` is null or writable, `attr` null or an
/// initialised attribute object, `start` callable with `arg`.
#[no_mangle]
pub unsafe extern "C" fn ff_pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: Option<ThreadFn>,
    arg: *mut c_void,
) -> c_int {
    let Some(start) = start else {
        return libc::EINVAL;
    };
    if thread.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's pointers, checked for null above where
    // pthread_create does not accept it.
    unsafe { libc::pthread_create(thread, attr, start, arg) }
}

/// `ff_pthread_join`: pthread_join.
///
/// # Safety
/// As pthread_join(3): `thread` was made by `ff_pthread_create` (or
/// pthread_create) and not joined or detached; `retval` is null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn ff_pthread_join(
    thread: libc::pthread_t,
    retval: *mut *mut c_void,
) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { libc::pthread_join(thread, retval) }
}

/// Whether `fd` is one of ustack's: 1 or 0.
#[no_mangle]
pub extern "C" fn ff_fdisused(fd: c_int) -> c_int {
    ustack_is_fd(fd)
}

/// F-Stack's `dispatch_func_t`.
pub type FfDispatchFn =
    unsafe extern "C" fn(data: *mut c_void, len: *mut u16, queue_id: u16, nb_queues: u16) -> c_int;

/// `FF_DISPATCH_ERROR`: the application took the frame.
pub const FF_DISPATCH_ERROR: c_int = -1;
/// `FF_DISPATCH_RESPONSE`: the application answered in place.
pub const FF_DISPATCH_RESPONSE: c_int = -2;

/// Registers F-Stack's packet dispatcher: it sees each received frame
/// first and returns the queue to hand it to (this process has one, 0:
/// the stack), FF_DISPATCH_ERROR (taken) or FF_DISPATCH_RESPONSE
/// (answered in place, `*len` the answer's length).  Other queue numbers
/// drop the frame, as in F-Stack.
///
/// # Safety
/// `f` is null or a function that may be called on this thread while the
/// engine runs.
#[no_mangle]
pub unsafe extern "C" fn ff_regist_packet_dispatcher(f: Option<FfDispatchFn>) {
    let hook = f.map(|f| {
        Box::new(move |_port: u16, buf: &mut [u8], len: usize| {
            let Ok(mut len16) = u16::try_from(len) else {
                return HookVerdict::Pass;
            };
            // SAFETY: `buf` holds the frame's `len` bytes and is writable;
            // the callback is the application's.
            match unsafe { f(buf.as_mut_ptr().cast(), &mut len16, 0, 1) } {
                0 => HookVerdict::Pass,
                FF_DISPATCH_RESPONSE => HookVerdict::Answer(usize::from(len16)),
                _ => HookVerdict::Consume,
            }
        }) as Box<dyn runtime::engine::FrameHook>
    });
    if let Err(e) = crate::hook::install(hook) {
        eprintln!("ff_regist_packet_dispatcher: {e} (call it on the thread that called ff_init)");
        set_errno(e);
    }
}
