//! epoll with Linux's semantics.
//!
//! An item is on the ready list after a wakeup whose events it wants (or
//! when EPOLL_CTL_ADD/MOD find it ready).  epoll_wait polls each item on
//! the list: not ready any more, it leaves; ready, it is reported, and then
//! a level-triggered item goes back to the tail, an edge-triggered one
//! waits for the next wakeup, a one-shot one is disarmed (its events
//! cleared, as Linux does) until EPOLL_CTL_MOD re-arms it.  EPOLLERR and
//! EPOLLHUP are always wanted.

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;

use crate::consts::*;
use crate::errno::{Errno, Result};
use crate::events::WAKE_ALL;
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

#[derive(Debug, Default)]
pub(crate) struct Epoll {
    items: HashMap<RawFd, Item>,
    ready: VecDeque<RawFd>,
}

impl Epoll {
    /// A wakeup of socket `fd` with events `key`.
    pub(crate) fn wake(&mut self, fd: RawFd, key: u32) {
        let Some(it) = self.items.get_mut(&fd) else {
            return;
        };
        if it.events & !PRIVATE == 0 || (key != WAKE_ALL && key & it.events == 0) {
            return;
        }
        if !it.queued {
            it.queued = true;
            self.ready.push_back(fd);
        }
    }

    /// Socket `fd` was closed.
    pub(crate) fn forget(&mut self, fd: RawFd) {
        self.items.remove(&fd);
    }

    /// The sockets watched.
    pub(crate) fn targets(&self) -> Vec<RawFd> {
        self.items.keys().copied().collect()
    }

    fn queue(&mut self, fd: RawFd) {
        if let Some(it) = self.items.get_mut(&fd) {
            if !it.queued {
                it.queued = true;
                self.ready.push_back(fd);
            }
        }
    }
}

impl Worker {
    pub(crate) fn epoll_create(&mut self, flags: i32) -> Result<RawFd> {
        if flags & !EPOLL_CLOEXEC != 0 {
            return Err(Errno::EINVAL);
        }
        self.add_object(Object::Epoll(Box::default()), flags & EPOLL_CLOEXEC != 0)
    }

    pub(crate) fn epoll_ctl(
        &mut self,
        epfd: RawFd,
        op: i32,
        fd: RawFd,
        event: Option<&epoll_event>,
    ) -> Result<()> {
        let ep_kind = self.object(epfd).map(|o| matches!(o, Object::Epoll(_)));
        let target_kind = self.object(fd).map(|o| matches!(o, Object::Socket(_)));
        match (ep_kind, target_kind) {
            (None, _) => return Err(Errno::EBADF),
            (_, None) if os::kernel_fd_open(fd) => return Err(Errno::EPERM),
            (_, None) => return Err(Errno::EBADF),
            _ => {}
        }
        if ep_kind != Some(true) || fd == epfd {
            return Err(Errno::EINVAL);
        }
        if target_kind != Some(true) {
            // Nested epoll and kqueue in epoll are not supported.
            return Err(Errno::EPERM);
        }
        let Some(Object::Epoll(mut ep)) = self.take(epfd) else {
            return Err(Errno::EBADF);
        };
        let r = self.epoll_ctl_in(&mut ep, epfd, op, fd, event);
        self.put(epfd, Object::Epoll(ep));
        r
    }

    fn epoll_ctl_in(
        &mut self,
        ep: &mut Epoll,
        epfd: RawFd,
        op: i32,
        fd: RawFd,
        event: Option<&epoll_event>,
    ) -> Result<()> {
        let wanted = |e: &epoll_event| e.events | (EPOLLERR | EPOLLHUP) as u32;
        match op {
            EPOLL_CTL_ADD => {
                let e = event.ok_or(Errno(libc::EFAULT))?;
                if ep.items.contains_key(&fd) {
                    return Err(Errno::EEXIST);
                }
                let events = wanted(e);
                ep.items.insert(
                    fd,
                    Item {
                        events,
                        data: e.u64,
                        queued: false,
                    },
                );
                self.watch(fd, epfd);
                if let Some(st) = self.mark_seen(fd) {
                    if st.mask & events != 0 {
                        ep.queue(fd);
                    }
                }
                Ok(())
            }
            EPOLL_CTL_MOD => {
                let e = event.ok_or(Errno(libc::EFAULT))?;
                if e.events & EPOLLEXCLUSIVE as u32 != 0 {
                    return Err(Errno::EINVAL);
                }
                let it = ep.items.get_mut(&fd).ok_or(Errno::ENOENT)?;
                it.events = wanted(e);
                it.data = e.u64;
                let events = it.events;
                if let Some(st) = self.status_of(fd) {
                    if st.mask & events != 0 {
                        ep.queue(fd);
                    }
                }
                Ok(())
            }
            EPOLL_CTL_DEL => {
                ep.items.remove(&fd).ok_or(Errno::ENOENT)?;
                self.unwatch(fd, epfd);
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
        let Some(Object::Epoll(mut ep)) = self.take(epfd) else {
            return Err(Errno::EBADF);
        };
        let mut n = 0;
        let mut again = Vec::new();
        for _ in 0..ep.ready.len() {
            if n == out.len() {
                break;
            }
            let Some(fd) = ep.ready.pop_front() else {
                break;
            };
            let Some(events) = ep.items.get(&fd).filter(|it| it.queued).map(|it| it.events) else {
                continue;
            };
            let mask = self.status_of(fd).map_or(0, |st| st.mask);
            let Some(it) = ep.items.get_mut(&fd) else {
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
                again.push(fd);
            }
        }
        ep.ready.extend(again);
        self.put(epfd, Object::Epoll(ep));
        Ok(n)
    }
}
