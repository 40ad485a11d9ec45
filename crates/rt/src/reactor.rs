//! From socket readiness to task wakeups, through the socket layer's own
//! epoll.
//!
//! Every socket of the runtime is in one epoll instance, edge-triggered
//! for input, output and the peer's half-close, with its fd as the data.
//! A socket operation is always tried first; only when it says EAGAIN does
//! the task leave its waker here, for the direction it waits on.  The
//! socket layer's edge-triggered epoll reports a socket again only after a
//! new event (data arriving, space freed after running out, a state
//! change), which is exactly when a task that saw EAGAIN can go on.  So
//! the loop never looks at a socket nobody waits on, nor at one where
//! nothing happened.

use std::io;
use std::os::fd::RawFd;
use std::task::Waker;
use std::time::Duration;

use api::consts::*;
use api::epoll_event;

/// Which way a task waits on a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

#[derive(Default)]
struct Waiters {
    readers: Vec<Waker>,
    writers: Vec<Waker>,
}

/// What wakes readers: data, the peer's FIN, and errors.
const READ_EVENTS: u32 = (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR) as u32;
/// What wakes writers: space, the end of a handshake, and errors.
const WRITE_EVENTS: u32 = (EPOLLOUT | EPOLLHUP | EPOLLERR) as u32;

/// Events collected per wait; more stay on epoll's ready list.
const EVENTS: usize = 256;

pub(crate) struct Reactor {
    /// The epoll instance (-1 once closed).
    epfd: RawFd,
    /// The waiters of each registered socket, by fd.
    slots: Vec<Option<Waiters>>,
    events: Vec<epoll_event>,
}

impl Reactor {
    pub(crate) fn new() -> io::Result<Reactor> {
        let epfd = api::epoll_create1(EPOLL_CLOEXEC)?;
        Ok(Reactor {
            epfd,
            slots: Vec::new(),
            events: vec![epoll_event { events: 0, u64: 0 }; EVENTS],
        })
    }

    /// Watches socket `fd` (a new socket of this thread).
    pub(crate) fn register(&mut self, fd: RawFd) -> io::Result<()> {
        let index = usize::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        let ev = epoll_event {
            events: (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) as u32,
            u64: index as u64,
        };
        api::epoll_ctl(self.epfd, EPOLL_CTL_ADD, fd, Some(&ev))?;
        if self.slots.len() <= index {
            self.slots.resize_with(index + 1, || None);
        }
        self.slots[index] = Some(Waiters::default());
        Ok(())
    }

    /// Forgets socket `fd` and its waiters (it is being closed, which
    /// takes it out of the epoll instance).
    pub(crate) fn deregister(&mut self, fd: RawFd) {
        if let Some(slot) = usize::try_from(fd).ok().and_then(|i| self.slots.get_mut(i)) {
            *slot = None;
        }
    }

    /// Leaves `waker` to be woken at the next event of socket `fd` in
    /// direction `dir`.
    pub(crate) fn wait_for(&mut self, fd: RawFd, dir: Dir, waker: &Waker) {
        let Some(Some(w)) = usize::try_from(fd).ok().and_then(|i| self.slots.get_mut(i)) else {
            // Not registered: wake at once rather than never; the task
            // tries again and gets the socket's error.
            waker.wake_by_ref();
            return;
        };
        let list = match dir {
            Dir::Read => &mut w.readers,
            Dir::Write => &mut w.writers,
        };
        if !list.iter().any(|x| x.will_wake(waker)) {
            list.push(waker.clone());
        }
    }

    /// Collects the events of our sockets and lets the socket layer run
    /// the engine (at least one turn); waits up to `timeout`, turning the
    /// engine, when none is ready.  The wakers of the tasks waiting on them go to `woken`.
    pub(crate) fn wait(&mut self, timeout: Duration, woken: &mut Vec<Waker>) -> io::Result<usize> {
        // Whole milliseconds, rounded up: never back before the deadline.
        let ms = timeout.as_nanos().div_ceil(1_000_000);
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        let n = api::epoll_wait(self.epfd, &mut self.events, ms)?;
        if n > 0 {
            // epoll_wait turns the engine only while it finds nothing
            // ready; events from the tasks' own calls (a new connection, a
            // shutdown) must not cost the engine its turn.
            api::step()?;
        }
        for ev in &self.events[..n] {
            let Some(Some(w)) = usize::try_from(ev.u64)
                .ok()
                .and_then(|i| self.slots.get_mut(i))
            else {
                continue;
            };
            if ev.events & READ_EVENTS != 0 {
                woken.append(&mut w.readers);
            }
            if ev.events & WRITE_EVENTS != 0 {
                woken.append(&mut w.writers);
            }
        }
        Ok(n)
    }

    /// Closes the epoll instance.
    pub(crate) fn close(&mut self) {
        if self.epfd >= 0 {
            let _ = api::close(self.epfd);
            self.epfd = -1;
        }
        self.slots.clear();
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        self.close();
    }
}
