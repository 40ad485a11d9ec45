//! From "the stack says this socket may have changed" to epoll and kqueue
//! wakeups.
//!
//! Linux wakes a socket's waiters on events, not on states: data arriving
//! (even on a socket that was already readable), send space freed, a state
//! change (connected, FIN, reset: every waiter).  Edge-triggered epoll and
//! EV_CLEAR report again only after such a wakeup.  The socket layer gets
//! "may have changed" from the stack's ready list and from its own calls;
//! it tells events apart by comparing with what it saw last: the totals of
//! what ever arrived (queued now + taken by the application) and of send
//! space ever made available, the state, and the readiness mask.

use std::os::fd::RawFd;

use crate::os;
use crate::socket::{self, State, Status};
use crate::worker::{Object, Worker};

/// A wakeup for every waiter (a state change).
pub(crate) const WAKE_ALL: u32 = u32::MAX;

impl Worker {
    /// The status of socket `fd` now.
    pub(crate) fn status_of(&mut self, fd: RawFd) -> Option<Status> {
        let Worker {
            objects, engines, ..
        } = self;
        let sock = match objects.get(usize::try_from(fd).ok()?)? {
            Some(Object::Socket(s)) => s,
            _ => return None,
        };
        let stack = sock.engine.map(|e| &*engines[e].driver.stack_mut());
        Some(socket::status(sock, stack))
    }

    /// Takes the stack's ready lists and our own, and wakes the watchers of
    /// every socket that changed.  Returns whether any socket changed.
    /// Called at least once every turn, mostly to find nothing: that case
    /// is kept to a test per engine, the work out of line.
    pub(crate) fn pump(&mut self) -> bool {
        for e in 0..self.engines.len() {
            if self.engines[e].driver.stack_mut().has_ready() {
                self.take_ready(e);
            }
        }
        if self.dirty.is_empty() {
            return false;
        }
        self.refresh_dirty();
        true
    }

    /// The fds of the sockets on engine `e`'s ready list join `dirty`.
    #[inline(never)]
    fn take_ready(&mut self, e: usize) {
        let mut handles = std::mem::take(&mut self.ready_scratch);
        handles.clear();
        let slot = &mut self.engines[e];
        slot.driver.stack_mut().drain_ready(&mut handles);
        for h in &handles {
            if let Some(fds) = slot.fds.get(h) {
                self.dirty.extend_from_slice(fds);
            }
        }
        self.ready_scratch = handles;
    }

    /// Wakes the watchers of every socket in `dirty`, and empties it.  A
    /// socket named more than once (by a call of ours and by the stack's
    /// ready list: nginx's write, then its sendfile) is looked at once:
    /// nothing changes it between the looks.
    #[inline(never)]
    fn refresh_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        self.refresh_round += 1;
        let round = self.refresh_round;
        for &fd in &dirty {
            if self.socket(fd).is_ok_and(|s| s.refreshed_in == round) {
                continue;
            }
            self.signal_urgent(fd);
            self.refresh(fd, round);
        }
        dirty.clear();
        self.dirty = dirty;
        self.seen_current = Some(round);
    }

    /// RFC 9293 MUST-32: a new urgent pointer on socket `fd` sends SIGURG
    /// to its F_SETOWN owner (once per pointer, as `tcp_check_urg`).
    fn signal_urgent(&mut self, fd: RawFd) {
        let Worker {
            objects, engines, ..
        } = self;
        let Some(Some(Object::Socket(sock))) =
            usize::try_from(fd).ok().and_then(|i| objects.get_mut(i))
        else {
            return;
        };
        // Most sockets have no owner: no look at the stack for them.
        let (State::Tcp { h, .. }, Some(e), true) = (sock.state, sock.engine, sock.owner != 0)
        else {
            return;
        };
        let Ok(notices) = engines[e].driver.stack_mut().tcp_urgent_notices(h) else {
            return;
        };
        if notices != sock.urgent_seen {
            sock.urgent_seen = notices;
            os::send_sigurg(sock.owner);
        }
    }

    /// Compares socket `fd` with what was seen last and wakes its watchers
    /// (its `seen` is brought up to date in refresh round `round`).
    fn refresh(&mut self, fd: RawFd, round: u64) {
        match self.socket(fd) {
            Ok(s) if !s.watchers.is_empty() => {}
            _ => return,
        }
        let Some(st) = self.status_of(fd) else { return };
        let Ok(sock) = self.socket_mut(fd) else {
            return;
        };
        let seen = sock.seen;
        // Readiness that appeared, and data that arrived, wake as Linux's
        // sk_data_ready does.  Send space freed on a socket that stays
        // writable wakes only kqueue (FreeBSD's sowwakeup on every ACK);
        // Linux wakes writers only when the socket had run out of space,
        // which shows here as EPOLLOUT appearing.
        let mut key = st.mask & !seen.mask;
        if st.in_total > seen.in_total {
            key |= (libc::EPOLLIN | libc::EPOLLRDNORM) as u32;
        }
        let space_freed = st.out_total > seen.out_total;
        if st.state != seen.state || std::mem::take(&mut sock.state_changed) {
            key = WAKE_ALL;
        }
        sock.seen = socket::Seen {
            mask: st.mask,
            in_total: st.in_total,
            out_total: st.out_total,
            state: st.state,
        };
        sock.refreshed_in = round;
        if key == 0 && !space_freed {
            return;
        }
        let watchers = std::mem::take(&mut sock.watchers);
        for &w in &watchers {
            match self.object_mut(w) {
                Some(Object::Epoll(ep)) if key != 0 => ep.wake(fd, key),
                Some(Object::Kqueue(kq)) => kq.wake(fd, key, space_freed, &st),
                _ => {}
            }
        }
        if let Ok(sock) = self.socket_mut(fd) {
            sock.watchers = watchers;
        }
    }

    /// After this layer's send on TCP socket `fd`, which the stack's
    /// ready list does not name (`Stack::tcp_send`): a send takes
    /// readiness away at most (EPOLLOUT, the buffer filled), never gives
    /// any, so the socket's seen readiness is looked at again only then,
    /// for the edge to come when space frees, or after an error (`still`
    /// is [`socket::writable_after_send`]).  A send that leaves the socket
    /// writable (nginx's every response) costs no readiness look that
    /// would find nothing.
    #[inline(always)]
    pub(crate) fn touch_after_send(&mut self, fd: RawFd, still: bool) {
        if !still {
            self.touch(fd);
        }
    }

    /// Records the current status as seen (a new watcher starts from now).
    pub(crate) fn mark_seen(&mut self, fd: RawFd) -> Option<Status> {
        let st = self.status_of(fd)?;
        if let Ok(sock) = self.socket_mut(fd) {
            sock.state_changed = false;
            sock.seen = socket::Seen {
                mask: st.mask,
                in_total: st.in_total,
                out_total: st.out_total,
                state: st.state,
            };
        }
        Some(st)
    }

    /// Adds instance `watcher` to socket `fd`'s watchers (once).
    pub(crate) fn watch(&mut self, fd: RawFd, watcher: RawFd) {
        if let Ok(s) = self.socket_mut(fd) {
            if !s.watchers.contains(&watcher) {
                s.watchers.push(watcher);
            }
        }
    }
}
