//! kqueue with FreeBSD's semantics for socket filters.
//!
//! A knote (ident, filter) becomes active when a wakeup of its socket finds
//! the filter true (EV_ADD and EV_ENABLE look at once), and is queued unless
//! disabled.  kevent re-runs the filter of each queued knote: false, it
//! leaves the queue; true, it is reported with fresh `data`, then a plain
//! knote stays queued (level triggered), EV_CLEAR waits for the next
//! wakeup, EV_DISPATCH disables it, EV_ONESHOT deletes it (reported as it
//! was when it fired, as FreeBSD does).  Errors in the changelist are
//! reported as EV_ERROR events while there is room, else kevent fails; a
//! call that reported any returns without collecting events.
//!
//! Filters: EVFILT_READ (`data`: bytes readable, or connections waiting
//! on a listener; EV_EOF once nothing more will arrive, with `fflags` the
//! pending error; true with EV_OOBAND, as Darwin's, while an urgent byte
//! waits for `recv(MSG_OOB)`, which FreeBSD does not report) and EVFILT_WRITE (`data`: send space; true at the low
//! water mark, 2048 bytes, once connected; EV_EOF once nothing more may be
//! sent).
//!
//! A knote's ident is the number it was added under, as in FreeBSD: two
//! numbers of one socket (dup) have knotes of their own, and closing a
//! number drops its knotes (knote_fdclose) while the socket lives on.

use std::collections::VecDeque;
use std::os::fd::RawFd;

use crate::consts::*;
use crate::errno::{Errno, Result};
use crate::events::WAKE_ALL;
use crate::int_map::IntMap;
use crate::socket::Status;
use crate::worker::{Object, Worker};

/// FreeBSD's `struct kevent` (the fields a socket filter uses).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KEvent {
    /// The fd.
    pub ident: usize,
    pub filter: i16,
    pub flags: u16,
    pub fflags: u32,
    pub data: i64,
    pub udata: usize,
}

/// FreeBSD's default send low water mark (MCLBYTES).
const SEND_LOWAT: i64 = 2048;

const READ_KEY: u32 = (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP | EPOLLHUP | EPOLLERR) as u32;
const WRITE_KEY: u32 = (EPOLLOUT | EPOLLWRNORM | EPOLLHUP | EPOLLERR) as u32;

#[derive(Debug)]
struct Knote {
    /// The socket (its key in the worker, see `dup.rs`).
    target: RawFd,
    /// The flags as registered (EV_ONESHOT, EV_CLEAR, ...), kept for
    /// every report.
    flags: u16,
    udata: usize,
    disabled: bool,
    queued: bool,
    /// What the filter said when it last fired (EV_ONESHOT reports this).
    fired: (i64, u16, u32),
}

/// What a filter says about a socket: (true?, data, EV_EOF or
/// EV_OOBAND, fflags).
fn filter(filter: i16, st: &Status) -> (bool, i64, u16, u32) {
    let eof_err = st.error as u32;
    if filter == EVFILT_READ {
        if st.listening {
            return (st.readable > 0, st.readable, 0, 0);
        }
        let oob = if st.mask & EPOLLPRI as u32 != 0 {
            EV_OOBAND
        } else {
            0
        };
        if st.cant_recv_more {
            return (true, st.readable, EV_EOF | oob, eof_err);
        }
        return (
            st.error != 0 || st.readable >= 1 || oob != 0,
            st.readable,
            oob,
            0,
        );
    }
    if st.listening {
        return (false, 0, 0, 0);
    }
    if st.cant_send_more {
        return (true, st.writable, EV_EOF, eof_err);
    }
    if st.error != 0 {
        return (true, st.writable, 0, 0);
    }
    let lowat = SEND_LOWAT.min(st.writable.max(1));
    (st.connected && st.writable >= lowat, st.writable, 0, 0)
}

#[derive(Debug, Default)]
pub(crate) struct Kqueue {
    /// Keyed by numbers the process chose (fd, filter): hashed by a
    /// multiply, not SipHash (`int_map`); looked up several times per
    /// request (each wakeup, each knote kevent reports).
    notes: IntMap<(RawFd, i16), Knote>,
    queue: VecDeque<(RawFd, i16)>,
    /// The idents of knotes whose ident is not their socket's key (a
    /// dup), by socket; most sockets have none.
    others: IntMap<RawFd, Vec<RawFd>>,
}

impl Kqueue {
    fn activate(&mut self, key: (RawFd, i16), st: &Status) {
        let Some(kn) = self.notes.get_mut(&key) else {
            return;
        };
        let (on, data, eof, fflags) = filter(key.1, st);
        if !on {
            return;
        }
        kn.fired = (data, eof, fflags);
        if !kn.disabled && !kn.queued {
            kn.queued = true;
            self.queue.push_back(key);
        }
    }

    /// A wakeup of socket `target` with events `key` (and send space
    /// freed).
    pub(crate) fn wake(&mut self, target: RawFd, key: u32, space_freed: bool, st: &Status) {
        let idents = self.others.get(&target).cloned().unwrap_or_default();
        for ident in std::iter::once(target).chain(idents) {
            if key == WAKE_ALL || key & READ_KEY != 0 {
                self.activate((ident, EVFILT_READ), st);
            }
            if key == WAKE_ALL || key & WRITE_KEY != 0 || space_freed {
                self.activate((ident, EVFILT_WRITE), st);
            }
        }
    }

    /// Socket `target` was closed (its last number): its knotes go, and
    /// their places on the queue (see [`Kqueue::remove`]).
    pub(crate) fn forget(&mut self, target: RawFd) {
        let mut gone = Vec::new();
        for ident in std::iter::once(target).chain(self.others.remove(&target).unwrap_or_default())
        {
            for f in [EVFILT_READ, EVFILT_WRITE] {
                if self.notes.remove(&(ident, f)).is_some_and(|kn| kn.queued) {
                    gone.push((ident, f));
                }
            }
        }
        if !gone.is_empty() {
            self.queue.retain(|k| !gone.contains(k));
        }
    }

    /// Number `ident` was closed: its knotes go (FreeBSD's
    /// knote_fdclose), the socket's others stay.
    pub(crate) fn forget_ident(&mut self, ident: RawFd) {
        for f in [EVFILT_READ, EVFILT_WRITE] {
            self.remove((ident, f));
        }
    }

    /// Socket `old` is now kept under key `new`: its knotes follow.
    pub(crate) fn retarget(&mut self, old: RawFd, new: RawFd) {
        let mut idents = self.others.remove(&old).unwrap_or_default();
        idents.push(old);
        let mut others = Vec::new();
        for ident in idents {
            let mut any = false;
            for f in [EVFILT_READ, EVFILT_WRITE] {
                if let Some(kn) = self.notes.get_mut(&(ident, f)) {
                    kn.target = new;
                    any = true;
                }
            }
            if any && ident != new && !others.contains(&ident) {
                others.push(ident);
            }
        }
        if !others.is_empty() {
            self.others.entry(new).or_default().extend(others);
        }
    }

    pub(crate) fn targets(&self) -> Vec<RawFd> {
        let mut v: Vec<RawFd> = self.notes.values().map(|k| k.target).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether a knote watches socket `target`.
    pub(crate) fn watches(&self, target: RawFd) -> bool {
        self.notes.contains_key(&(target, EVFILT_READ))
            || self.notes.contains_key(&(target, EVFILT_WRITE))
            || self.others.contains_key(&target)
    }

    fn insert(&mut self, key: (RawFd, i16), kn: Knote) {
        let (ident, target) = (key.0, kn.target);
        self.notes.insert(key, kn);
        if ident != target {
            let v = self.others.entry(target).or_default();
            if !v.contains(&ident) {
                v.push(ident);
            }
        }
    }

    /// Removes a knote, and its place on the queue: a knote added again
    /// under the same key (EV_DELETE then EV_ADD, or a number closed and
    /// given back) would otherwise be queued twice and reported twice in
    /// one kevent, which FreeBSD never does.
    fn remove(&mut self, key: (RawFd, i16)) -> Option<Knote> {
        let kn = self.notes.remove(&key)?;
        if kn.queued {
            self.queue.retain(|k| *k != key);
        }
        let ident = key.0;
        let other = (
            ident,
            if key.1 == EVFILT_READ {
                EVFILT_WRITE
            } else {
                EVFILT_READ
            },
        );
        if ident != kn.target && !self.notes.contains_key(&other) {
            if let Some(v) = self.others.get_mut(&kn.target) {
                v.retain(|&i| i != ident);
                if v.is_empty() {
                    self.others.remove(&kn.target);
                }
            }
        }
        Some(kn)
    }

    /// Whether a kevent now would report something (poll on the kqueue
    /// fd: FreeBSD's kqueue_poll).
    pub(crate) fn has_ready(&self, w: &mut Worker) -> bool {
        self.queue.iter().any(|key| {
            self.notes.get(key).is_some_and(|kn| {
                kn.queued
                    && !kn.disabled
                    && (kn.flags & EV_ONESHOT != 0
                        || w.status_of(kn.target)
                            .is_some_and(|st| filter(key.1, &st).0))
            })
        })
    }
}

impl Worker {
    pub(crate) fn kqueue_create(&mut self) -> Result<RawFd> {
        // kqueue descriptors are not inherited by fork; close-on-exec.
        self.add_object(Object::Kqueue(Box::default()), true)
    }

    /// Applies the changes and reports what is ready, without waiting.
    /// `collect` false: apply only.
    pub(crate) fn kevent_nb(
        &mut self,
        kq: RawFd,
        changes: &[KEvent],
        out: &mut [KEvent],
        collect: bool,
    ) -> Result<usize> {
        match self.object(kq) {
            Some(Object::Kqueue(_)) => {}
            _ => return Err(Errno::EBADF),
        }
        self.pump();
        // No changes and nothing queued (most turns of a busy loop): no
        // need to take the kqueue out and put it back.
        if changes.is_empty()
            && matches!(self.object(kq), Some(Object::Kqueue(q)) if q.queue.is_empty())
        {
            return Ok(0);
        }
        let Some(Object::Kqueue(mut q)) = self.take(kq) else {
            return Err(Errno::EBADF);
        };
        let r = self.kevent_in(&mut q, kq, changes, out, collect);
        self.put(kq, Object::Kqueue(q));
        r
    }

    fn kevent_in(
        &mut self,
        q: &mut Kqueue,
        kq: RawFd,
        changes: &[KEvent],
        out: &mut [KEvent],
        collect: bool,
    ) -> Result<usize> {
        let mut n = 0;
        let mut receipts = 0;
        for ch in changes {
            let r = self.kevent_change(q, kq, ch);
            if r.is_err() || ch.flags & EV_RECEIPT != 0 {
                if n < out.len() {
                    out[n] = KEvent {
                        flags: EV_ERROR,
                        data: r.err().map_or(0, |e| i64::from(e.0)),
                        ..*ch
                    };
                    n += 1;
                    receipts += 1;
                } else {
                    r?;
                }
            }
        }
        if receipts > 0 || !collect {
            return Ok(n);
        }
        for _ in 0..q.queue.len() {
            if n == out.len() {
                break;
            }
            let Some(key) = q.queue.pop_front() else {
                break;
            };
            let Some(kn) = q.notes.get_mut(&key).filter(|k| k.queued) else {
                continue;
            };
            kn.queued = false;
            if kn.disabled {
                continue;
            }
            let target = kn.target;
            let (data, eof, fflags) = if kn.flags & EV_ONESHOT != 0 {
                kn.fired
            } else {
                let Some(st) = self.status_of(target) else {
                    continue;
                };
                let (on, data, eof, fflags) = filter(key.1, &st);
                if !on {
                    continue;
                }
                (data, eof, fflags)
            };
            let Some(kn) = q.notes.get_mut(&key) else {
                continue;
            };
            out[n] = KEvent {
                ident: key.0 as usize,
                filter: key.1,
                flags: kn.flags | eof,
                fflags,
                data,
                udata: kn.udata,
            };
            n += 1;
            if kn.flags & EV_ONESHOT != 0 {
                q.remove(key);
                if !q.watches(target) {
                    self.unwatch(target, kq);
                }
            } else if kn.flags & EV_CLEAR != 0 {
                // Reported: waits for the next wakeup.
            } else if kn.flags & EV_DISPATCH != 0 {
                kn.disabled = true;
            } else {
                kn.queued = true;
                q.queue.push_back(key);
            }
        }
        Ok(n)
    }

    fn kevent_change(&mut self, q: &mut Kqueue, kq: RawFd, ch: &KEvent) -> Result<()> {
        if ch.filter != EVFILT_READ && ch.filter != EVFILT_WRITE {
            return Err(Errno::EINVAL);
        }
        let fd = RawFd::try_from(ch.ident).map_err(|_| Errno::EBADF)?;
        let target = self.key(fd);
        match self.object(target) {
            Some(Object::Socket(_)) => {}
            _ => return Err(Errno::EBADF),
        }
        let key = (fd, ch.filter);
        if ch.flags & EV_ADD != 0 {
            match q.notes.get_mut(&key) {
                Some(kn) => kn.udata = ch.udata,
                None => {
                    q.insert(
                        key,
                        Knote {
                            target,
                            flags: ch.flags
                                & !(EV_ADD | EV_DELETE | EV_ENABLE | EV_DISABLE | EV_ERROR),
                            udata: ch.udata,
                            disabled: false,
                            queued: false,
                            fired: (0, 0, 0),
                        },
                    );
                    self.watch(target, kq);
                    self.mark_seen(target);
                }
            }
        } else if ch.flags & EV_DELETE != 0 {
            q.remove(key).ok_or(Errno::ENOENT)?;
            if !q.watches(target) {
                self.unwatch(target, kq);
            }
            return Ok(());
        }
        let kn = q.notes.get_mut(&key).ok_or(Errno::ENOENT)?;
        if ch.flags & EV_DISABLE != 0 {
            kn.disabled = true;
        }
        if ch.flags & EV_ENABLE != 0 {
            kn.disabled = false;
        }
        if ch.flags & (EV_ADD | EV_ENABLE) != 0 {
            if let Some(st) = self.status_of(target) {
                q.activate(key, &st);
            }
        }
        Ok(())
    }
}
