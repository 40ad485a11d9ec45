//! Several numbers for one object: [`dup`], [`dup2`], [`dup3`] and
//! fcntl's F_DUPFD ([`dup_from`]), with POSIX's semantics.
//!
//! A duplicate is a second number for the same open socket (or epoll, or
//! kqueue): what the object holds is shared (its connection, its options,
//! its file status flags such as O_NONBLOCK), while FD_CLOEXEC belongs to
//! the number (the kernel keeps it: every ustack number is a kernel fd
//! reserved for it).  The object closes when its last number is closed.
//!
//! # How the worker keeps them
//!
//! An object lives in its worker's `objects` under one of its numbers,
//! its *key*; everything that refers to the object (the engine's tables
//! of stack sockets and bound ports, the watchers of a socket, the items
//! of an epoll, the readiness work list) uses the key.  [`Dups`] maps each
//! other number to its key.  Each call resolves its number to the key on
//! the worker's thread ([`Worker::key`], one hash lookup, none while no
//! object has two numbers), so a number closed by another thread
//! meanwhile is never mistaken for another object.  When the key's own
//! number is closed while others remain, the object moves to the lowest
//! of them, and every reference moves with it ([`Worker::rekey`]).
//!
//! # epoll and kqueue
//!
//! As in Linux, an epoll item belongs to a (socket, number) pair: both
//! numbers of a socket may be added, each is its own item, and an item
//! stays (and reports) after its number is closed as long as another
//! number holds the socket; it goes with the socket.  As in FreeBSD, a
//! knote belongs to its number (its ident): closing the number drops its
//! knotes, the socket's others stay.
//!
//! # Numbers that are kernel fds
//!
//! These calls deal in ustack fds only.  `dup2`/`dup3` onto a number that
//! is an open kernel fd (not one of ustack's) fail with EBADF: replacing a
//! kernel fd is the caller's business (close it first, or leave the call
//! to the kernel).  A ustack number as `newfd` is closed first, as POSIX
//! says, and keeps its place in the kernel's table throughout, so the
//! replacement is atomic to other threads' open().

use std::collections::HashMap;
use std::os::fd::RawFd;

use crate::calls::Owner;
use crate::consts::*;
use crate::errno::{Errno, Result};
use crate::fdtable::{self, Entry, Kind, MAX_FDS};
use crate::os;
use crate::worker::{Object, Worker};

/// The numbers of objects that have more than one.
#[derive(Debug, Default)]
pub(crate) struct Dups {
    /// Every extra number -> the key of its object.
    key_of: HashMap<RawFd, RawFd>,
    /// Key -> its extra numbers, in the order they came.
    numbers: HashMap<RawFd, Vec<RawFd>>,
}

impl Dups {
    fn key(&self, fd: RawFd) -> RawFd {
        if self.key_of.is_empty() {
            return fd;
        }
        self.key_of.get(&fd).copied().unwrap_or(fd)
    }
}

/// How many numbers a ustack fd may have: the process's RLIMIT_NOFILE
/// (the kernel hands out no number at or above it), at most what the fd
/// table holds.  F-Stack's `ff_getmaxfd`.
pub fn fd_limit() -> RawFd {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit for the call.
    let cur = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        MAX_FDS as libc::rlim_t
    };
    cur.min(MAX_FDS as libc::rlim_t)
        .min(RawFd::MAX as libc::rlim_t) as RawFd
}

/// The worker of ustack fd `fd`; EBADF for anything else (a kernel fd
/// too: these calls deal in ustack fds).
fn owner(fd: RawFd) -> Result<Owner> {
    if fdtable::lookup(fd).is_none() {
        return Err(Errno::EBADF);
    }
    Owner::of(fd)
}

/// dup(2): a new number for the object behind ustack fd `fd`, the lowest
/// free one, without FD_CLOEXEC.
///
/// Errors: EBADF (`fd` is not a ustack fd), EMFILE (no number left).
pub fn dup(fd: RawFd) -> Result<RawFd> {
    dup_from(fd, 0, false)
}

/// fcntl(2)'s F_DUPFD (`cloexec` false) and F_DUPFD_CLOEXEC (true): a new
/// number for the object behind ustack fd `fd`, the lowest free one at
/// `min` or above.
///
/// Errors: EBADF (`fd` is not a ustack fd), EINVAL (`min` negative or not
/// below [`fd_limit`]), EMFILE (no number left).
pub fn dup_from(fd: RawFd, min: RawFd, cloexec: bool) -> Result<RawFd> {
    let owner = owner(fd)?;
    if min < 0 || min >= fd_limit() {
        return Err(Errno::EINVAL);
    }
    let n = os::reserve_fd_from(min, cloexec)?;
    if n as usize >= MAX_FDS {
        os::release_fd(n);
        return Err(Errno(libc::EMFILE));
    }
    match owner.exec(move |w| w.add_number(fd, n)) {
        Ok(Ok(())) => Ok(n),
        Ok(Err(e)) | Err(e) => {
            os::release_fd(n);
            Err(e)
        }
    }
}

/// dup2(2): makes `newfd` a number of the object behind ustack fd `fd`,
/// without FD_CLOEXEC, and returns it.  `newfd` may be free (it is taken)
/// or a ustack fd (what it named is closed first, as by [`close`]: the
/// object goes if that was its last number).  `fd == newfd` returns
/// `newfd` when `fd` is valid and changes nothing.
///
/// Errors: EBADF (`fd` is not a ustack fd; `newfd` negative, not below
/// [`fd_limit`], or an open kernel fd: see the module's doc), EBUSY
/// (other threads kept taking the number `newfd` while this call tried).
///
/// [`close`]: crate::close
pub fn dup2(fd: RawFd, newfd: RawFd) -> Result<RawFd> {
    if fd == newfd {
        owner(fd)?;
        return Ok(newfd);
    }
    dup_onto(fd, newfd, false)
}

/// dup3(2): [`dup2`] with `flags` O_CLOEXEC (FD_CLOEXEC on `newfd`) or 0.
///
/// Errors: those of [`dup2`], and EINVAL (`fd == newfd`, or other flags).
pub fn dup3(fd: RawFd, newfd: RawFd, flags: i32) -> Result<RawFd> {
    if flags & !O_CLOEXEC != 0 || fd == newfd {
        return Err(Errno::EINVAL);
    }
    dup_onto(fd, newfd, flags & O_CLOEXEC != 0)
}

fn dup_onto(fd: RawFd, newfd: RawFd, cloexec: bool) -> Result<RawFd> {
    let owner = owner(fd)?;
    if newfd < 0 || newfd >= fd_limit() {
        return Err(Errno::EBADF);
    }
    // A few rounds: another thread may close or take `newfd` between a
    // look at it and the step that follows.
    for _ in 0..8 {
        let held = match fdtable::lookup(newfd) {
            // A ustack number: close what it names, keeping the number.
            Some(target) => {
                let same = fdtable::lookup(fd).map(|e| e.worker) == Some(target.worker);
                let closed = if same {
                    owner.exec(move |w| match w.close_number(newfd, false) {
                        Ok(()) => Ok(w.add_number(fd, newfd)),
                        Err(e) => Err(e),
                    })?
                } else {
                    match Owner::of(newfd)
                        .and_then(|o| o.exec(move |w| w.close_number(newfd, false)))
                    {
                        Ok(Ok(())) => {
                            Ok(owner.exec(move |w| w.add_number(fd, newfd)).and_then(|r| r))
                        }
                        Ok(Err(e)) | Err(e) => Err(e),
                    }
                };
                match closed {
                    Ok(added) => added,
                    // It changed under us (closed, or between workers):
                    // look again.
                    Err(_) => {
                        std::thread::yield_now();
                        continue;
                    }
                }
            }
            None if os::kernel_fd_open(newfd) => return Err(Errno::EBADF),
            // Free: take exactly that number.
            None => {
                let n = os::reserve_fd_from(newfd, cloexec).map_err(|e| match e {
                    Errno::EINVAL => Errno::EBADF,
                    e => e,
                })?;
                if n != newfd {
                    // Someone took `newfd` first: look at what it is now.
                    os::release_fd(n);
                    continue;
                }
                owner.exec(move |w| w.add_number(fd, newfd)).and_then(|r| r)
            }
        };
        // The number is ours now: it names `fd`'s object, or (`fd` was
        // closed meanwhile) nothing, and goes back.
        return match held {
            Ok(()) => {
                os::fd_flags(newfd, F_SETFD, if cloexec { FD_CLOEXEC } else { 0 })?;
                Ok(newfd)
            }
            Err(e) => {
                fdtable::remove(newfd);
                os::release_fd(newfd);
                Err(e)
            }
        };
    }
    Err(Errno(libc::EBUSY))
}

impl Worker {
    /// The key of the object that number `fd` names (`fd` itself unless
    /// it is a duplicate).
    pub(crate) fn key(&self, fd: RawFd) -> RawFd {
        self.dups.key(fd)
    }

    /// Makes `number`, held from the kernel for this, a name of the
    /// object behind number `fd` (fd table included).
    pub(crate) fn add_number(&mut self, fd: RawFd, number: RawFd) -> Result<()> {
        let key = self.key(fd);
        let kind = match self.object(key) {
            Some(Object::Socket(_)) => Kind::Socket,
            Some(Object::Epoll(_)) => Kind::Epoll,
            Some(Object::Kqueue(_)) => Kind::Kqueue,
            None => return Err(Errno::EBADF),
        };
        fdtable::insert(
            number,
            Entry {
                worker: self.shared.id,
                kind,
            },
        );
        self.dups.key_of.insert(number, key);
        self.dups.numbers.entry(key).or_default().push(number);
        Ok(())
    }

    /// close(2) of number `fd`: the object goes with its last number
    /// (see [`Worker::close`]); before that only the number goes, with
    /// its knotes.  `release` false keeps the number held from the kernel
    /// and in the fd table, for dup2 to take over.
    pub(crate) fn close_number(&mut self, fd: RawFd, release: bool) -> Result<()> {
        let key = self.key(fd);
        if self.object(key).is_none() {
            return Err(Errno::EBADF);
        }
        let live = if key != fd {
            self.dups.key_of.remove(&fd);
            if let Some(v) = self.dups.numbers.get_mut(&key) {
                v.retain(|&n| n != fd);
                if v.is_empty() {
                    self.dups.numbers.remove(&key);
                }
            }
            key
        } else if let Some(&new) = self.dups.numbers.get(&key).and_then(|v| v.iter().min()) {
            self.rekey(key, new);
            new
        } else if release {
            return self.close(key);
        } else {
            return self.dispose(key);
        };
        self.forget_ident(live, fd);
        if release {
            fdtable::remove(fd);
            os::release_fd(fd);
        }
        Ok(())
    }

    /// Number `ident` of socket `target` was closed: the knotes of that
    /// ident go from every kqueue watching the socket.
    fn forget_ident(&mut self, target: RawFd, ident: RawFd) {
        let watchers = match self.socket(target) {
            Ok(s) => s.watchers.clone(),
            Err(_) => return,
        };
        for w in watchers {
            if let Some(Object::Kqueue(kq)) = self.object_mut(w) {
                kq.forget_ident(ident);
                if !kq.watches(target) {
                    self.unwatch(target, w);
                }
            }
        }
    }

    /// Moves the object kept under key `old` to key `new`, one of its
    /// other numbers (number `old` is being closed), with everything that
    /// refers to it by key.
    fn rekey(&mut self, old: RawFd, new: RawFd) {
        let Some(obj) = self.take(old) else { return };
        let mut numbers = self.dups.numbers.remove(&old).unwrap_or_default();
        numbers.retain(|&n| n != new);
        self.dups.key_of.remove(&new);
        for &n in &numbers {
            self.dups.key_of.insert(n, new);
        }
        if !numbers.is_empty() {
            self.dups.numbers.insert(new, numbers);
        }
        let swap = |v: &mut Vec<RawFd>| {
            for x in v.iter_mut().filter(|x| **x == old) {
                *x = new;
            }
        };
        match &obj {
            Object::Socket(s) => {
                if let Some(slot) = s.engine.and_then(|e| self.engines.get_mut(e)) {
                    if let Some(v) = s.handle().and_then(|h| slot.fds.get_mut(&h)) {
                        swap(v);
                    }
                    if let Some(v) = s.bound.and_then(|b| slot.tcp_binds.get_mut(&b.port())) {
                        swap(v);
                    }
                }
                for &w in &s.watchers {
                    match self.object_mut(w) {
                        Some(Object::Epoll(ep)) => ep.retarget(old, new),
                        Some(Object::Kqueue(kq)) => kq.retarget(old, new),
                        _ => {}
                    }
                }
            }
            Object::Epoll(ep) => {
                for t in ep.targets() {
                    if let Ok(s) = self.socket_mut(t) {
                        swap(&mut s.watchers);
                    }
                }
            }
            Object::Kqueue(kq) => {
                for t in kq.targets() {
                    if let Ok(s) = self.socket_mut(t) {
                        swap(&mut s.watchers);
                    }
                }
            }
        }
        swap(&mut self.dirty);
        self.install(new, obj);
    }

    /// Gives every extra number back to the kernel (the worker ends).
    pub(crate) fn release_dups(&mut self) {
        for (n, _) in self.dups.key_of.drain() {
            fdtable::remove(n);
            os::release_fd(n);
        }
        self.dups.numbers.clear();
    }
}
