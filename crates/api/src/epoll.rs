//! epoll with Linux's semantics.
//!
//! An item is on the ready list after a wakeup whose events it wants (or
//! when EPOLL_CTL_ADD/MOD find it ready).  epoll_wait polls each item on
//! the list: not ready any more, it leaves; ready, it is reported, and then
//! a level-triggered item goes back to the tail, an edge-triggered one
//! waits for the next wakeup, a one-shot one is disarmed (its events
//! cleared, as Linux does) until EPOLL_CTL_MOD re-arms it.  EPOLLERR and
//! EPOLLHUP are always wanted.
//!
//! An item is keyed by the socket and the number it was added under, as
//! Linux keys it by (file, fd): two numbers of one socket (dup) are two
//! items, and an item outlives the closing of its number while another
//! number holds the socket (it goes with the socket's last number).

use std::collections::VecDeque;
use std::os::fd::RawFd;

use crate::consts::*;
use crate::errno::{Errno, Result};
use crate::events::WAKE_ALL;
use crate::int_map::IntMap;
use crate::os;
use crate::worker::{Object, Worker};

pub use libc::epoll_event;

/// Bits that say how to report, not what.
const PRIVATE: u32 = (EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE) as u32;

#[derive(Debug)]
struct Item {
    events: u32,
    data: u64,
    queued: bool,
}

/// An item's key: the socket (its key in the worker, see `dup.rs`) and
/// the number it was added under.
type Reg = (RawFd, RawFd);

#[derive(Debug, Default)]
pub(crate) struct Epoll {
    items: IntMap<Reg, Item>,
    /// The numbers of items whose number is not their socket's key (a
    /// dup), by socket; most sockets have none.
    others: IntMap<RawFd, Vec<RawFd>>,
    ready: VecDeque<Reg>,
}

impl Epoll {
    /// A wakeup of socket `target` with events `key`.
    pub(crate) fn wake(&mut self, target: RawFd, key: u32) {
        Self::wake_item(&mut self.items, &mut self.ready, (target, target), key);
        if let Some(numbers) = self.others.get(&target) {
            for &n in numbers {
                Self::wake_item(&mut self.items, &mut self.ready, (target, n), key);
            }
        }
    }

    fn wake_item(items: &mut IntMap<Reg, Item>, ready: &mut VecDeque<Reg>, reg: Reg, key: u32) {
        let Some(it) = items.get_mut(&reg) else {
            return;
        };
        if it.events & !PRIVATE == 0 || (key != WAKE_ALL && key & it.events == 0) {
            return;
        }
        if !it.queued {
            it.queued = true;
            ready.push_back(reg);
        }
    }

    /// Socket `target` was closed (its last number): its items go, and
    /// their places on the ready list (an item added again later under
    /// the same key must be listed once: see [`Epoll::remove`]).
    pub(crate) fn forget(&mut self, target: RawFd) {
        let queued = self
            .items
            .remove(&(target, target))
            .is_some_and(|it| it.queued);
        let mut any = queued;
        for n in self.others.remove(&target).unwrap_or_default() {
            any |= self.items.remove(&(target, n)).is_some_and(|it| it.queued);
        }
        if any {
            self.ready.retain(|r| r.0 != target);
        }
    }

    /// The sockets watched.
    pub(crate) fn targets(&self) -> Vec<RawFd> {
        let mut v: Vec<RawFd> = self.items.keys().map(|k| k.0).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether an item watches socket `target`.
    pub(crate) fn watches(&self, target: RawFd) -> bool {
        self.items.contains_key(&(target, target)) || self.others.contains_key(&target)
    }

    /// Socket `old` is now kept under key `new` (its number `old` was
    /// closed while `new` named it too): its items follow, keeping the
    /// numbers they were added under.
    pub(crate) fn retarget(&mut self, old: RawFd, new: RawFd) {
        let mut numbers = self.others.remove(&old).unwrap_or_default();
        numbers.push(old);
        let mut others = Vec::new();
        for n in numbers {
            if let Some(it) = self.items.remove(&(old, n)) {
                self.items.insert((new, n), it);
                if n != new {
                    others.push(n);
                }
            }
        }
        if !others.is_empty() {
            self.others.entry(new).or_default().extend(others);
        }
        for r in &mut self.ready {
            if r.0 == old {
                r.0 = new;
            }
        }
    }

    fn insert(&mut self, reg: Reg, it: Item) {
        self.items.insert(reg, it);
        if reg.0 != reg.1 {
            self.others.entry(reg.0).or_default().push(reg.1);
        }
    }

    /// Removes an item, and its place on the ready list: an item added
    /// again under the same key (a number closed and given back for the
    /// next connection) would otherwise be listed twice and reported twice
    /// in one wait, which Linux never does.
    fn remove(&mut self, reg: Reg) -> Option<Item> {
        let it = self.items.remove(&reg)?;
        if it.queued {
            self.ready.retain(|r| *r != reg);
        }
        if reg.0 != reg.1 {
            if let Some(v) = self.others.get_mut(&reg.0) {
                v.retain(|&n| n != reg.1);
                if v.is_empty() {
                    self.others.remove(&reg.0);
                }
            }
        }
        Some(it)
    }

    fn queue(&mut self, reg: Reg) {
        if let Some(it) = self.items.get_mut(&reg) {
            if !it.queued {
                it.queued = true;
                self.ready.push_back(reg);
            }
        }
    }

    /// Whether an epoll_wait now would report something (poll on the
    /// epoll fd: Linux's ep_eventpoll_poll).
    pub(crate) fn has_ready(&self, w: &mut Worker) -> bool {
        self.ready.iter().any(|reg| {
            self.items.get(reg).is_some_and(|it| {
                it.queued
                    && w.status_of(reg.0)
                        .is_some_and(|st| st.mask & it.events != 0)
            })
        })
    }
}

impl Worker {
    pub(crate) fn epoll_create(&mut self, flags: i32) -> Result<RawFd> {
        if flags & !EPOLL_CLOEXEC != 0 {
            return Err(Errno::EINVAL);
        }
        self.add_object(Object::Epoll(Box::default()), flags & EPOLL_CLOEXEC != 0)
    }

    /// epoll_ctl on instance `epfd` (its key) for number `fd`.
    pub(crate) fn epoll_ctl(
        &mut self,
        epfd: RawFd,
        op: i32,
        fd: RawFd,
        event: Option<&epoll_event>,
    ) -> Result<()> {
        let target = self.key(fd);
        let ep_kind = self.object(epfd).map(|o| matches!(o, Object::Epoll(_)));
        let target_kind = self.object(target).map(|o| matches!(o, Object::Socket(_)));
        match (ep_kind, target_kind) {
            (None, _) => return Err(Errno::EBADF),
            (_, None) if os::kernel_fd_open(fd) => return Err(Errno::EPERM),
            (_, None) => return Err(Errno::EBADF),
            _ => {}
        }
        if ep_kind != Some(true) || target == epfd {
            return Err(Errno::EINVAL);
        }
        if target_kind != Some(true) {
            // Nested epoll and kqueue in epoll are not supported.
            return Err(Errno::EPERM);
        }
        let Some(Object::Epoll(mut ep)) = self.take(epfd) else {
            return Err(Errno::EBADF);
        };
        let r = self.epoll_ctl_in(&mut ep, epfd, op, (target, fd), event);
        self.put(epfd, Object::Epoll(ep));
        r
    }

    fn epoll_ctl_in(
        &mut self,
        ep: &mut Epoll,
        epfd: RawFd,
        op: i32,
        reg: Reg,
        event: Option<&epoll_event>,
    ) -> Result<()> {
        let wanted = |e: &epoll_event| e.events | (EPOLLERR | EPOLLHUP) as u32;
        let target = reg.0;
        match op {
            EPOLL_CTL_ADD => {
                let e = event.ok_or(Errno(libc::EFAULT))?;
                if ep.items.contains_key(&reg) {
                    return Err(Errno::EEXIST);
                }
                let events = wanted(e);
                ep.insert(
                    reg,
                    Item {
                        events,
                        data: e.u64,
                        queued: false,
                    },
                );
                self.watch(target, epfd);
                if let Some(st) = self.mark_seen(target) {
                    if st.mask & events != 0 {
                        ep.queue(reg);
                    }
                }
                Ok(())
            }
            EPOLL_CTL_MOD => {
                let e = event.ok_or(Errno(libc::EFAULT))?;
                if e.events & EPOLLEXCLUSIVE as u32 != 0 {
                    return Err(Errno::EINVAL);
                }
                let it = ep.items.get_mut(&reg).ok_or(Errno::ENOENT)?;
                it.events = wanted(e);
                it.data = e.u64;
                let events = it.events;
                if let Some(st) = self.status_of(target) {
                    if st.mask & events != 0 {
                        ep.queue(reg);
                    }
                }
                Ok(())
            }
            EPOLL_CTL_DEL => {
                ep.remove(reg).ok_or(Errno::ENOENT)?;
                if !ep.watches(target) {
                    self.unwatch(target, epfd);
                }
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// Reports what is ready now, without waiting.
    pub(crate) fn epoll_collect(&mut self, epfd: RawFd, out: &mut [epoll_event]) -> Result<usize> {
        match self.object(epfd) {
            Some(Object::Epoll(_)) => {}
            Some(_) => return Err(Errno::EINVAL),
            None => return Err(Errno::EBADF),
        }
        if out.is_empty() {
            return Err(Errno::EINVAL);
        }
        self.pump();
        // The sockets the last refresh round looked at have their mask
        // in `seen` while nothing changed them since.
        let fresh = self.seen_current;
        // Nothing queued (most turns of a busy loop): no need to take the
        // epoll out and put it back.
        if matches!(self.object(epfd), Some(Object::Epoll(ep)) if ep.ready.is_empty()) {
            return Ok(0);
        }
        let Some(Object::Epoll(mut ep)) = self.take(epfd) else {
            return Err(Errno::EBADF);
        };
        let mut n = 0;
        let mut again = Vec::new();
        for _ in 0..ep.ready.len() {
            if n == out.len() {
                break;
            }
            let Some(reg) = ep.ready.pop_front() else {
                break;
            };
            let Some(events) = ep
                .items
                .get(&reg)
                .filter(|it| it.queued)
                .map(|it| it.events)
            else {
                continue;
            };
            let mask = match self.socket(reg.0) {
                Ok(s) if fresh == Some(s.refreshed_in) => s.seen.mask,
                _ => self.status_of(reg.0).map_or(0, |st| st.mask),
            };
            let Some(it) = ep.items.get_mut(&reg) else {
                continue;
            };
            it.queued = false;
            let revents = mask & events;
            if revents == 0 {
                continue;
            }
            out[n] = epoll_event {
                events: revents,
                u64: it.data,
            };
            n += 1;
            if events & EPOLLONESHOT as u32 != 0 {
                it.events &= PRIVATE;
            } else if events & EPOLLET as u32 == 0 {
                it.queued = true;
                again.push(reg);
            }
        }
        // An empty extend is still a call: a wait that found nothing
        // level-triggered (the usual turn) skips it.
        if !again.is_empty() {
            ep.ready.extend(again);
        }
        self.put(epfd, Object::Epoll(ep));
        Ok(n)
    }
}
