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
//! pending error) and EVFILT_WRITE (`data`: send space; true at the low
//! water mark, 2048 bytes, once connected; EV_EOF once nothing more may be
//! sent).

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;

use crate::consts::*;
use crate::errno::{Errno, Result};
use crate::events::WAKE_ALL;
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
    /// The flags as registered (EV_ONESHOT, EV_CLEAR, ...), kept for
    /// every report.
    flags: u16,
    udata: usize,
    disabled: bool,
    queued: bool,
    /// What the filter said when it last fired (EV_ONESHOT reports this).
    fired: (i64, u16, u32),
}

/// What a filter says about a socket: (true?, data, EV_EOF, fflags).
fn filter(filter: i16, st: &Status) -> (bool, i64, u16, u32) {
    let eof_err = st.error as u32;
    if filter == EVFILT_READ {
        if st.listening {
            return (st.readable > 0, st.readable, 0, 0);
        }
        if st.cant_recv_more {
            return (true, st.readable, EV_EOF, eof_err);
        }
        return (st.error != 0 || st.readable >= 1, st.readable, 0, 0);
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
    notes: HashMap<(RawFd, i16), Knote>,
    queue: VecDeque<(RawFd, i16)>,
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

    /// A wakeup of socket `fd` with events `key` (and send space freed).
    pub(crate) fn wake(&mut self, fd: RawFd, key: u32, space_freed: bool, st: &Status) {
        if key == WAKE_ALL || key & READ_KEY != 0 {
            self.activate((fd, EVFILT_READ), st);
        }
        if key == WAKE_ALL || key & WRITE_KEY != 0 || space_freed {
            self.activate((fd, EVFILT_WRITE), st);
        }
    }

    /// Socket `fd` was closed: its knotes go.
    pub(crate) fn forget(&mut self, fd: RawFd) {
        self.notes.remove(&(fd, EVFILT_READ));
        self.notes.remove(&(fd, EVFILT_WRITE));
    }

    pub(crate) fn targets(&self) -> Vec<RawFd> {
        let mut v: Vec<RawFd> = self.notes.keys().map(|k| k.0).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn watches(&self, fd: RawFd) -> bool {
        self.notes.contains_key(&(fd, EVFILT_READ)) || self.notes.contains_key(&(fd, EVFILT_WRITE))
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
            let (data, eof, fflags) = if kn.flags & EV_ONESHOT != 0 {
                kn.fired
            } else {
                let Some(st) = self.status_of(key.0) else {
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
                q.notes.remove(&key);
                if !q.watches(key.0) {
                    self.unwatch(key.0, kq);
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
        match self.object(fd) {
            Some(Object::Socket(_)) => {}
            _ => return Err(Errno::EBADF),
        }
        let key = (fd, ch.filter);
        if ch.flags & EV_ADD != 0 {
            match q.notes.get_mut(&key) {
                Some(kn) => kn.udata = ch.udata,
                None => {
                    q.notes.insert(
                        key,
                        Knote {
                            flags: ch.flags
                                & !(EV_ADD | EV_DELETE | EV_ENABLE | EV_DISABLE | EV_ERROR),
                            udata: ch.udata,
                            disabled: false,
                            queued: false,
                            fired: (0, 0, 0),
                        },
                    );
                    self.watch(fd, kq);
                    self.mark_seen(fd);
                }
            }
        } else if ch.flags & EV_DELETE != 0 {
            q.notes.remove(&key).ok_or(Errno::ENOENT)?;
            if !q.watches(fd) {
                self.unwatch(fd, kq);
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
            if let Some(st) = self.status_of(fd) {
                q.activate(key, &st);
            }
        }
        Ok(())
    }
}
