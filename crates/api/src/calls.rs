//! The public calls.  Each finds the worker that owns the fd: the calling
//! thread's own (run to completion: a direct call), or another thread's
//! (run to wait: the call is posted there and the caller waits).  A call
//! that would block, on a blocking socket, drives the engine (its own
//! worker) or waits for the owner's progress (another worker) and tries
//! again, until it can go on or SO_RCVTIMEO / SO_SNDTIMEO pass.

use std::io::{IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use link::Link;
use runtime::Engine;

use crate::consts::*;
use crate::epoll::epoll_event;
use crate::errno::{Errno, Result};
use crate::fdtable;
use crate::io::{RecvMsg, SendMsg};
use crate::kqueue::KEvent;
use crate::os;
use crate::worker::{self, Worker, WorkerShared};

/// Who runs a call: this thread's worker or another's.
pub(crate) enum Owner {
    Local,
    Remote(Arc<WorkerShared>),
}

impl Owner {
    pub(crate) fn of(fd: RawFd) -> Result<Owner> {
        match fdtable::lookup(fd) {
            None if os::kernel_fd_open(fd) => Err(Errno::ENOTSOCK),
            None => Err(Errno::EBADF),
            Some(e) if e.worker == worker::current_id() => Ok(Owner::Local),
            Some(e) => worker::shared(e.worker)
                .map(Owner::Remote)
                .ok_or(Errno::EBADF),
        }
    }

    /// The worker that takes a new object: this thread's, else the first.
    fn for_new() -> Result<Owner> {
        if worker::current_id() != 0 {
            return Ok(Owner::Local);
        }
        worker::default_worker()
            .map(Owner::Remote)
            .ok_or(Errno::ENODEV)
    }

    pub(crate) fn exec<R: Send>(&self, f: impl FnOnce(&mut Worker) -> R + Send) -> Result<R> {
        match self {
            Owner::Local => worker::with_current(f),
            Owner::Remote(s) => worker::run_on(s, f),
        }
    }

    pub(crate) fn progress(&self) -> u64 {
        match self {
            Owner::Local => 0,
            Owner::Remote(s) => s.progress(),
        }
    }

    /// Lets time pass towards `deadline`: drives the engines (our own
    /// worker) or waits for the owner to make progress.
    pub(crate) fn wait(&self, seen: u64, deadline: Option<Instant>) {
        match self {
            Owner::Local => {
                let work = worker::with_current(|w| w.step()).unwrap_or(false);
                if !work {
                    let _ = worker::with_current(|w| w.idle());
                }
            }
            Owner::Remote(s) => match s.drive_if_left(
                &mut [],
                deadline.map(|d| d.saturating_duration_since(Instant::now())),
            ) {
                Ok(worker::Drive::Drove(_)) => {}
                Ok(worker::Drive::Later(Some(d))) => {
                    let soon = Instant::now() + d;
                    s.wait_progress(seen, Some(deadline.map_or(soon, |dl| dl.min(soon))))
                }
                Ok(worker::Drive::Later(None)) | Err(_) => s.wait_progress(seen, deadline),
            },
        }
    }
}

/// Which timeout a blocked call honours, and what it returns when it passes.
#[derive(Clone, Copy)]
pub(crate) enum Dir {
    Read,
    Write,
    Connect,
}

impl Worker {
    /// `None`: the call must not block (O_NONBLOCK, MSG_DONTWAIT);
    /// `Some(timeout)` otherwise.
    fn wait_info(&self, fd: RawFd, dir: Dir, flags: i32) -> Option<Option<Duration>> {
        let s = self.socket(fd).ok()?;
        if s.nonblock || flags & MSG_DONTWAIT != 0 {
            return None;
        }
        Some(match dir {
            Dir::Read => s.opts.rcvtimeo,
            Dir::Write | Dir::Connect => s.opts.sndtimeo,
        })
    }
}

/// Runs `op` until it does not say EAGAIN, or says it on a socket that
/// must not block, or the socket's timeout passes.
pub(crate) fn blocking<T: Send>(
    owner: &Owner,
    fd: RawFd,
    dir: Dir,
    flags: i32,
    mut op: impl FnMut(&mut Worker) -> Result<T> + Send,
) -> Result<T> {
    let mut deadline: Option<Option<Instant>> = None;
    loop {
        let seen = owner.progress();
        let (r, wait) = owner.exec(|w| {
            let r = op(w);
            let wait = match r {
                Err(Errno::EAGAIN) => w.wait_info(w.key(fd), dir, flags),
                _ => None,
            };
            (r, wait)
        })?;
        let Some(timeout) = wait else { return r };
        let dl = *deadline.get_or_insert_with(|| timeout.map(|t| Instant::now() + t));
        if dl.is_some_and(|d| Instant::now() >= d) {
            return Err(match dir {
                Dir::Connect => Errno::EINPROGRESS,
                Dir::Read | Dir::Write => Errno::EAGAIN,
            });
        }
        owner.wait(seen, dl);
    }
}

/// Makes the calling thread an engine thread: `engine` joins its worker
/// (the first engine creates it).  Sockets made on this thread, and by
/// threads without a worker, live on this worker's engines.  Returns the
/// worker's id.
pub fn attach<L: Link + Send + 'static>(engine: Engine<L>) -> u32 {
    worker::attach(Box::new(engine))
}

/// Ends the calling thread's worker: its sockets, epoll and kqueue
/// instances are closed, its engines dropped.
pub fn detach() {
    worker::detach()
}

/// Closes every object of the calling thread's worker (a process about to
/// exit) and keeps its engines turning until the closes have gone out:
/// for `flush`, or until a few steps find nothing to do, and longer while
/// closed connections still deliver data or a FIN to their peers (the
/// kernel would carry those on after the process; here they need the
/// engine), but not past `linger`: those left then are reset.  Returns how
/// many were reset.
pub fn close_all(flush: Duration, linger: Duration) -> Result<usize> {
    worker::with_current(|w| w.close_all())?;
    finish_closes(flush, linger)
}

/// Keeps the calling thread's engines turning until the connections the
/// program closed have delivered their data and FIN (a process about to
/// replace its image with `exec`, after which no engine would carry them
/// on), as [`close_all`] does but closing nothing: for `flush`, or until a
/// few steps find nothing to do, and longer while closes are unfinished,
/// not past `linger`: those left then are reset.  Returns how many were
/// reset.
pub fn finish_closes(flush: Duration, linger: Duration) -> Result<usize> {
    let start = Instant::now();
    let mut quiet = 0;
    loop {
        let unfinished = worker::with_current(|w| w.unfinished_closes())?;
        let now = Instant::now();
        if unfinished == 0 && (quiet >= 3 || now >= start + flush) {
            return Ok(0);
        }
        if unfinished > 0 && now >= start + linger.max(flush) {
            let reset = worker::with_current(|w| w.abort_unfinished_closes())?;
            // The resets leave with these steps.
            for _ in 0..3 {
                worker::with_current(|w| w.step())?;
            }
            return Ok(reset);
        }
        if worker::with_current(|w| w.step())? {
            quiet = 0;
        } else {
            quiet += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// One step of the calling thread's worker: a turn of each engine (rx,
/// stack, timers, tx), the calls other threads posted, and readiness.
/// Returns whether anything happened.
pub fn step() -> Result<bool> {
    worker::with_current(|w| w.step())
}

/// The engine loop with the application inside (F-Stack's `ff_run`):
/// steps the worker and calls `app` after each step, until `app` returns
/// false.  A step that found nothing to do sleeps as the engine's
/// `idle_sleep` says.
pub fn run(mut app: impl FnMut() -> bool) -> Result<()> {
    loop {
        let work = worker::with_current(|w| w.step())?;
        if !app() {
            return Ok(());
        }
        if !work {
            worker::with_current(|w| w.idle())?;
        }
    }
}

/// Runs `f` with engine `index` (in [`attach`] order) of the calling
/// thread's worker, for what the socket layer does not show: its counters
/// and link statistics while the worker drives it.  `Ok(None)`: there is
/// no such engine, or its link type is not `L`; EBADF: the thread has no
/// worker.
pub fn with_engine<L: Link + 'static, R>(
    index: usize,
    f: impl FnOnce(&mut Engine<L>) -> R,
) -> Result<Option<R>> {
    worker::with_current(|w| {
        let slot = w.engines.get_mut(index)?;
        slot.driver.as_any().downcast_mut::<Engine<L>>().map(f)
    })
}

/// A watch on the worker that owns ustack fd `fd` when that is another
/// thread's (`None`: the calling thread's own, a kernel fd, or no eventfd
/// could be made): its fd turns readable after each step of the owner
/// that did something, for a wait that polls other fds beside.
pub fn watch_progress(fd: RawFd) -> Option<worker::ProgressWatch> {
    match Owner::of(fd).ok()? {
        Owner::Local => None,
        Owner::Remote(s) => worker::ProgressWatch::new(s),
    }
}

/// In a child after fork (call it first thing there): the engines and
/// sockets are the parent's, and are forgotten without a step or a close.
/// Returns the fds the engines held, for the child to close, and the
/// listeners and bound UDP sockets of the calling thread's engines, which
/// the child may set up again on an engine of its own (their numbers stay
/// held meanwhile).
pub fn forget_after_fork() -> (Vec<RawFd>, Vec<worker::Inherited>) {
    worker::forget_after_fork(None)
}

/// [`forget_after_fork`] for a child forked while other threads' workers
/// were held ([`hold_for_fork`], run to wait): their engines are taken
/// apart as the calling thread's would be, and their listeners and bound
/// UDP sockets are among those returned.
pub fn forget_after_fork_held(
    held: Option<worker::ForkHold>,
) -> (Vec<RawFd>, Vec<worker::Inherited>) {
    worker::forget_after_fork(held)
}

/// Sends what the calling thread's engines have queued, now, if they send
/// at once (`pkt_tx_delay` zero): for a program that drives its engine
/// only inside its calls and may block elsewhere next (the LD_PRELOAD
/// library calls it after each call that sends).  Nothing on a thread
/// without a worker.
pub fn flush_tx() {
    let _ = worker::with_current(|w| {
        for e in &mut w.engines {
            e.driver.flush_if_immediate();
        }
    });
}

/// Whether the calling thread has a worker (it drives engines).
pub fn attached() -> bool {
    worker::current_id() != 0
}

/// How many ustack fds (sockets, epoll and kqueue instances, and their
/// duplicates) the process holds, on every worker.
pub fn live_fds() -> usize {
    fdtable::live()
}

/// Whether `fd` is a ustack fd (socket, epoll or kqueue).
pub fn is_ustack_fd(fd: RawFd) -> bool {
    fdtable::lookup(fd).is_some()
}

pub fn socket(domain: i32, ty: i32, protocol: i32) -> Result<RawFd> {
    Owner::for_new()?.exec(|w| w.new_socket(domain, ty, protocol))?
}

/// A number from the kernel for a ustack object to come (see
/// [`socket_at`]): a duplicate of the placeholder socket, close-on-exec
/// if asked.  Give it back with [`release_fd`] if it is never used.
pub fn reserve_fd(cloexec: bool) -> Result<RawFd> {
    worker::reserve(cloexec)
}

/// Gives back a number from [`reserve_fd`] that holds no ustack object.
pub fn release_fd(fd: RawFd) -> Result<()> {
    if fdtable::lookup(fd).is_some() {
        return Err(Errno(libc::EBUSY));
    }
    os::release_fd(fd);
    Ok(())
}

/// socket() behind `fd`, a number from [`reserve_fd`] (whose close-on-exec
/// flag stands; SOCK_CLOEXEC in `ty` is ignored): the socket takes the
/// number, which its close gives back.  On an error the number stays the
/// caller's.
pub fn socket_at(fd: RawFd, domain: i32, ty: i32, protocol: i32) -> Result<()> {
    Owner::for_new()?.exec(|w| w.new_socket_at(fd, domain, ty, protocol))?
}

pub fn bind(fd: RawFd, addr: &SocketAddr) -> Result<()> {
    let addr = *addr;
    Owner::of(fd)?.exec(|w| w.bind(w.key(fd), addr))?
}

pub fn listen(fd: RawFd, backlog: i32) -> Result<()> {
    Owner::of(fd)?.exec(|w| w.listen(w.key(fd), backlog))?
}

pub fn accept(fd: RawFd) -> Result<(RawFd, SocketAddr)> {
    accept4(fd, 0)
}

/// accept4: `flags` may hold SOCK_NONBLOCK and SOCK_CLOEXEC.
pub fn accept4(fd: RawFd, flags: i32) -> Result<(RawFd, SocketAddr)> {
    let owner = Owner::of(fd)?;
    blocking(&owner, fd, Dir::Read, 0, |w| w.accept(w.key(fd), flags))
}

/// connect: a non-blocking TCP socket returns EINPROGRESS and completes in
/// the background (poll for writability, then SO_ERROR); a blocking one
/// drives the engine until the handshake ends.
pub fn connect(fd: RawFd, addr: &SocketAddr) -> Result<()> {
    let owner = Owner::of(fd)?;
    let addr = *addr;
    let (r, wait) = owner.exec(|w| {
        let r = w.connect(w.key(fd), addr);
        (r, w.wait_info(w.key(fd), Dir::Connect, 0))
    })?;
    match (r, wait) {
        (Err(Errno::EINPROGRESS) | Err(Errno::EALREADY), Some(_)) => {
            blocking(&owner, fd, Dir::Connect, 0, |w| w.connect_finish(w.key(fd)))
        }
        (r, _) => r,
    }
}

/// connect with AF_UNSPEC: dissolves a UDP socket's association, aborts a
/// TCP connection.
pub fn disconnect(fd: RawFd) -> Result<()> {
    Owner::of(fd)?.exec(|w| w.disconnect(w.key(fd)))?
}

pub fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize> {
    recv(fd, buf, 0)
}

pub fn write(fd: RawFd, buf: &[u8]) -> Result<usize> {
    send(fd, buf, 0)
}

pub fn readv(fd: RawFd, bufs: &mut [IoSliceMut<'_>]) -> Result<usize> {
    recv_with(fd, bufs, 0, |m| m.len, |&n| n, |_, n| n)
}

pub fn writev(fd: RawFd, bufs: &[IoSlice<'_>]) -> Result<usize> {
    sendmsg(fd, bufs, 0, &SendMsg::default())
}

pub fn recv(fd: RawFd, buf: &mut [u8], flags: i32) -> Result<usize> {
    recv_with(
        fd,
        &mut [IoSliceMut::new(buf)],
        flags,
        |m| m.len,
        |&n| n,
        |_, n| n,
    )
}

pub fn send(fd: RawFd, buf: &[u8], flags: i32) -> Result<usize> {
    sendmsg(fd, &[IoSlice::new(buf)], flags, &SendMsg::default())
}

pub fn recvfrom(fd: RawFd, buf: &mut [u8], flags: i32) -> Result<(usize, Option<SocketAddr>)> {
    recvmsg(fd, &mut [IoSliceMut::new(buf)], flags).map(|m| (m.len, m.addr))
}

pub fn sendto(fd: RawFd, buf: &[u8], flags: i32, addr: Option<&SocketAddr>) -> Result<usize> {
    let msg = SendMsg {
        addr: addr.copied(),
        ..SendMsg::default()
    };
    sendmsg(fd, &[IoSlice::new(buf)], flags, &msg)
}

/// recvmsg: flags MSG_PEEK, MSG_DONTWAIT, MSG_WAITALL, MSG_TRUNC, MSG_OOB
/// (the urgent octet, never waited for, as Linux's `tcp_recv_urg`).
pub fn recvmsg(fd: RawFd, bufs: &mut [IoSliceMut<'_>], flags: i32) -> Result<RecvMsg> {
    recv_with(
        fd,
        bufs,
        flags,
        |m| m,
        |m| m.len,
        |first, got| RecvMsg { len: got, ..first },
    )
}

/// recvmsg, keeping of each [`RecvMsg`] what `keep` takes (`len` gives
/// its byte count, `with_len` puts the total of a MSG_WAITALL read in):
/// read, recv and readv keep only the count, which is what travels back
/// through the worker's layers (a `RecvMsg`, ~100 bytes, was copied at
/// each: ~100 instructions a call).
fn recv_with<T: Send>(
    fd: RawFd,
    bufs: &mut [IoSliceMut<'_>],
    flags: i32,
    keep: impl Fn(RecvMsg) -> T + Copy + Send + Sync,
    len: impl Fn(&T) -> usize,
    with_len: impl FnOnce(T, usize) -> T,
) -> Result<T> {
    let owner = Owner::of(fd)?;
    if flags & MSG_OOB != 0 {
        return owner.exec(|w| w.recvmsg(w.key(fd), bufs, flags).map(keep))?;
    }
    let first = blocking(&owner, fd, Dir::Read, flags, |w| {
        w.recvmsg(w.key(fd), bufs, flags).map(keep)
    })?;
    let first_len = len(&first);
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    if flags & MSG_WAITALL == 0 || flags & MSG_PEEK != 0 || first_len == 0 || first_len >= want {
        return Ok(first);
    }
    let stream = owner.exec(|w| w.socket(w.key(fd)).map(|s| s.stream))??;
    if !stream {
        return Ok(first);
    }
    // MSG_WAITALL on a stream: go on until the buffers are full, the
    // stream ends, or an error or timeout (then what was read counts).
    let mut got = first_len;
    while got < want {
        let mut rest = remaining_mut(bufs, got);
        match blocking(&owner, fd, Dir::Read, flags, |w| {
            w.recvmsg(w.key(fd), &mut rest, flags).map(|m| m.len)
        }) {
            Ok(n) if n > 0 => got += n,
            _ => break,
        }
    }
    Ok(with_len(first, got))
}

fn remaining_mut<'a>(bufs: &'a mut [IoSliceMut<'_>], mut skip: usize) -> Vec<IoSliceMut<'a>> {
    let mut out = Vec::new();
    for b in bufs.iter_mut() {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        out.push(IoSliceMut::new(&mut b[skip..]));
        skip = 0;
    }
    out
}

fn remaining<'a>(bufs: &'a [IoSlice<'_>], mut skip: usize) -> Vec<IoSlice<'a>> {
    let mut out = Vec::new();
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        out.push(IoSlice::new(&b[skip..]));
        skip = 0;
    }
    out
}

/// sendmsg: flags MSG_DONTWAIT, MSG_OOB (the last octet sent is urgent)
/// and MSG_NOSIGNAL (without it, EPIPE also
/// raises SIGPIPE, as the kernel does).  A blocking stream socket sends
/// everything before it returns (unless SO_SNDTIMEO passes).
pub fn sendmsg(fd: RawFd, bufs: &[IoSlice<'_>], flags: i32, msg: &SendMsg) -> Result<usize> {
    let owner = Owner::of(fd)?;
    let r = send_all(&owner, fd, bufs, flags, msg);
    if r == Err(Errno::EPIPE) && flags & MSG_NOSIGNAL == 0 {
        os::raise_sigpipe();
    }
    r
}

fn send_all(
    owner: &Owner,
    fd: RawFd,
    bufs: &[IoSlice<'_>],
    flags: i32,
    msg: &SendMsg,
) -> Result<usize> {
    let first = blocking(owner, fd, Dir::Write, flags, |w| {
        w.sendmsg(w.key(fd), bufs, flags, msg)
    })?;
    let want: usize = bufs.iter().map(|b| b.len()).sum();
    if first >= want {
        return Ok(first);
    }
    let (stream, blocks) = owner.exec(|w| {
        (
            w.socket(w.key(fd)).map(|s| s.stream),
            w.wait_info(w.key(fd), Dir::Write, flags),
        )
    })?;
    if !stream? || blocks.is_none() {
        return Ok(first);
    }
    let mut sent = first;
    while sent < want {
        let rest = remaining(bufs, sent);
        match blocking(owner, fd, Dir::Write, flags, |w| {
            w.sendmsg(w.key(fd), &rest, flags, msg)
        }) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    Ok(sent)
}

/// shutdown: `how` is SHUT_RD, SHUT_WR or SHUT_RDWR.
pub fn shutdown(fd: RawFd, how: i32) -> Result<()> {
    Owner::of(fd)?.exec(|w| w.shutdown(w.key(fd), how))?
}

/// close: a socket, an epoll or a kqueue.  The object closes with its
/// last number (see [`dup`](crate::dup)); before that only `fd` goes.
pub fn close(fd: RawFd) -> Result<()> {
    match Owner::of(fd) {
        Ok(owner) => owner.exec(|w| w.close_number(fd, true))?,
        // Its worker's thread ended without `detach`: the object went with
        // the worker, the number is given back now.
        Err(Errno::EBADF) if fdtable::lookup(fd).is_some() => {
            fdtable::remove(fd);
            os::release_fd(fd);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

pub fn getsockname(fd: RawFd) -> Result<SocketAddr> {
    Owner::of(fd)?.exec(|w| w.getsockname(w.key(fd)))?
}

pub fn getpeername(fd: RawFd) -> Result<SocketAddr> {
    Owner::of(fd)?.exec(|w| w.getpeername(w.key(fd)))?
}

/// getsockopt: writes the value into `val` (truncated to its length, as
/// Linux does) and returns its length.
pub fn getsockopt(fd: RawFd, level: i32, name: i32, val: &mut [u8]) -> Result<usize> {
    Owner::of(fd)?.exec(|w| w.getsockopt(w.key(fd), level, name, val))?
}

/// setsockopt: `val` holds the option's C value (an int, `struct linger`,
/// `struct timeval`).
pub fn setsockopt(fd: RawFd, level: i32, name: i32, val: &[u8]) -> Result<()> {
    Owner::of(fd)?.exec(|w| w.setsockopt(w.key(fd), level, name, val))?
}

/// getsockopt of an int option.
pub fn getsockopt_int(fd: RawFd, level: i32, name: i32) -> Result<i32> {
    let mut b = [0u8; 4];
    getsockopt(fd, level, name, &mut b)?;
    Ok(i32::from_ne_bytes(b))
}

/// setsockopt of an int option.
pub fn setsockopt_int(fd: RawFd, level: i32, name: i32, val: i32) -> Result<()> {
    setsockopt(fd, level, name, &val.to_ne_bytes())
}

/// ioctl: FIONBIO reads `*arg`, FIONREAD writes it.
pub fn ioctl(fd: RawFd, request: u64, arg: &mut i32) -> Result<()> {
    Owner::of(fd)?.exec(|w| w.ioctl(w.key(fd), request, arg))?
}

/// fcntl: F_SETOWN and F_GETOWN (the SIGURG owner), F_GETFL, F_SETFL
/// (O_NONBLOCK: shared by every number of the
/// socket), F_GETFD, F_SETFD (FD_CLOEXEC: the number's own), F_DUPFD and
/// F_DUPFD_CLOEXEC (see [`dup_from`](crate::dup_from)).
pub fn fcntl(fd: RawFd, cmd: i32, arg: i32) -> Result<i32> {
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => crate::dup_from(fd, arg, cmd == F_DUPFD_CLOEXEC),
        F_GETFD | F_SETFD => Owner::of(fd)?.exec(|w| match w.object(w.key(fd)) {
            Some(_) => os::fd_flags(fd, cmd, arg),
            None => Err(Errno::EBADF),
        })?,
        _ => Owner::of(fd)?.exec(|w| w.fcntl(w.key(fd), cmd, arg))?,
    }
}

pub fn epoll_create(size: i32) -> Result<RawFd> {
    if size <= 0 {
        return Err(Errno::EINVAL);
    }
    epoll_create1(0)
}

pub fn epoll_create1(flags: i32) -> Result<RawFd> {
    Owner::for_new()?.exec(|w| w.epoll_create(flags))?
}

/// epoll_ctl: `event` may be `None` for EPOLL_CTL_DEL.
pub fn epoll_ctl(epfd: RawFd, op: i32, fd: RawFd, event: Option<&epoll_event>) -> Result<()> {
    let event = event.copied();
    Owner::of(epfd)?.exec(|w| w.epoll_ctl(w.key(epfd), op, fd, event.as_ref()))?
}

/// epoll_wait: `timeout_ms` 0 never blocks (it still runs one step of this
/// thread's engines when nothing was ready), -1 waits for ever; while it
/// waits it drives the engines.
pub fn epoll_wait(epfd: RawFd, events: &mut [epoll_event], timeout_ms: i32) -> Result<usize> {
    let owner = Owner::of(epfd)?;
    if timeout_ms == 0 && matches!(owner, Owner::Local) {
        // A look, a step if nothing was ready, and a look again, in one
        // hold of the worker (a program's busy loop calls this per turn).
        return worker::with_current(|w| {
            let n = w.epoll_collect(w.key(epfd), events)?;
            if n > 0 {
                return Ok(n);
            }
            w.step();
            w.epoll_collect(w.key(epfd), events)
        })?;
    }
    let deadline = u64::try_from(timeout_ms)
        .ok()
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let mut stepped = false;
    loop {
        let seen = owner.progress();
        let n = owner.exec(|w| w.epoll_collect(w.key(epfd), events))??;
        if n > 0 {
            return Ok(n);
        }
        if timeout_ms == 0 {
            if stepped || matches!(owner, Owner::Remote(_)) {
                return Ok(0);
            }
            worker::with_current(|w| w.step())?;
            stepped = true;
            continue;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
        owner.wait(seen, deadline);
    }
}

/// `epoll_wait(epfd, events, 0)` for a busy wait loop that read
/// `runtime::clock::monotonic_micros` just before (`monotonic_us`, for its
/// own deadline): a step it makes takes that reading instead of reading
/// the clock again.
pub fn epoll_wait_now_at(
    epfd: RawFd,
    events: &mut [epoll_event],
    monotonic_us: u64,
) -> Result<usize> {
    if !matches!(Owner::of(epfd)?, Owner::Local) {
        return epoll_wait(epfd, events, 0);
    }
    worker::with_current(|w| {
        let n = w.epoll_collect(w.key(epfd), events)?;
        if n > 0 {
            return Ok(n);
        }
        w.step_at(monotonic_us);
        w.epoll_collect(w.key(epfd), events)
    })?
}

/// [`step`] at `monotonic_us`, as [`epoll_wait_now_at`] steps.
pub fn step_at(monotonic_us: u64) -> Result<bool> {
    worker::with_current(|w| w.step_at(monotonic_us))
}

pub fn kqueue() -> Result<RawFd> {
    Owner::for_new()?.exec(|w| w.kqueue_create())?
}

/// kevent: applies `changes`, then reports up to `events.len()` events;
/// `timeout` `None` waits for ever, zero never blocks (it still runs one
/// step of this thread's engines when nothing was ready).
pub fn kevent(
    kq: RawFd,
    changes: &[KEvent],
    events: &mut [KEvent],
    timeout: Option<Duration>,
) -> Result<usize> {
    let owner = Owner::of(kq)?;
    if timeout == Some(Duration::ZERO) && matches!(owner, Owner::Local) {
        // As epoll_wait's: a look, a step if nothing was ready, and a
        // look again, in one hold of the worker (`ff_kevent` in a
        // program's `ff_run` loop calls this per turn).
        return worker::with_current(|w| {
            let n = w.kevent_nb(w.key(kq), changes, events, true)?;
            if n > 0 || events.is_empty() {
                return Ok(n);
            }
            w.step();
            w.kevent_nb(w.key(kq), &[], events, true)
        })?;
    }
    let n = owner.exec(|w| w.kevent_nb(w.key(kq), changes, events, true))??;
    if n > 0 || events.is_empty() {
        return Ok(n);
    }
    // Another thread's worker is not stepped from here: a zero wait
    // has had its look.
    if timeout == Some(Duration::ZERO) {
        return Ok(0);
    }
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(0);
        }
        let seen = owner.progress();
        owner.wait(seen, deadline);
        let n = owner.exec(|w| w.kevent_nb(w.key(kq), &[], events, true))??;
        if n > 0 {
            return Ok(n);
        }
    }
}
