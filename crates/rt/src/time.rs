//! Timers: [`sleep`], [`sleep_until`], [`timeout`].
//!
//! The executor keeps pending deadlines in an ordered map; each loop turn
//! wakes those that passed, and the loop waits in the socket layer no
//! longer than the next one.  Deadlines are wall-clock
//! (`std::time::Instant`) and a timer fires at or after its deadline,
//! never before (the wait is rounded up to whole milliseconds).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Weak;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::executor::{self, Core};

/// Pending timers: deadline and a sequence number (deadlines tie) ->
/// the waker of the task that waits.
#[derive(Default)]
pub(crate) struct Timers {
    pending: BTreeMap<(Instant, u64), Waker>,
    next_seq: u64,
}

impl Timers {
    fn insert(&mut self, deadline: Instant, waker: Waker) -> (Instant, u64) {
        let key = (deadline, self.next_seq);
        self.next_seq += 1;
        self.pending.insert(key, waker);
        key
    }

    /// The earliest deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending.keys().next().map(|k| k.0)
    }

    /// Takes the timers whose deadline is at or before `now`, in deadline
    /// order.
    pub(crate) fn expired(&mut self, now: Instant) -> Vec<Waker> {
        let mut due = Vec::new();
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            due.push(entry.remove());
        }
        due
    }
}

/// Completes at its deadline.  Dropping it cancels the timer.
#[must_use = "a Sleep does nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    /// The entry in the executor's timers, once polled.
    key: Option<(Instant, u64)>,
    core: Weak<Core>,
}

impl Sleep {
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the deadline (the timer is set again at the next poll).
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let (Some(key), Some(core)) = (self.key.take(), self.core.upgrade()) {
            core.timers.borrow_mut().pending.remove(&key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let Some(core) = self.core.upgrade() else {
            panic!("rt::sleep polled after its runtime was dropped");
        };
        let mut timers = core.timers.borrow_mut();
        match self.key.and_then(|k| timers.pending.get_mut(&k)) {
            Some(w) => {
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
            }
            // First poll (or first after a reset): a timer fires only
            // once its deadline passed, and then the check above holds.
            None => {
                let key = timers.insert(self.deadline, cx.waker().clone());
                drop(timers);
                self.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// Completes after `duration`.  Panics when the thread has no runtime.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Completes at `deadline`.  Panics when the thread has no runtime.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        key: None,
        core: std::rc::Rc::downgrade(&executor::expect_current("sleep")),
    }
}

/// The error of a [`timeout`] that passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for io::Error {
    fn from(e: Elapsed) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, e)
    }
}

/// Runs `future` for at most `duration`: its output, or [`Elapsed`] (and
/// the future is dropped where it stands).  Panics when the thread has no
/// runtime.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    timeout_at(Instant::now() + duration, future).await
}

/// [`timeout`] with a deadline.
pub async fn timeout_at<F: Future>(deadline: Instant, future: F) -> Result<F::Output, Elapsed> {
    let mut future = std::pin::pin!(future);
    let mut timer = sleep_until(deadline);
    std::future::poll_fn(|cx| {
        // The future first: one that is ready at the deadline wins.
        if let Poll::Ready(out) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        match Pin::new(&mut timer).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}
