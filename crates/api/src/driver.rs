//! What the socket layer needs of an engine, as a trait object so one
//! worker can hold engines over different links.

use std::any::Any;

use link::Link;
use runtime::{AppContext, Application, Engine, IdlePlan};
use stack::{FrameSink, Instant, Stack};

/// An engine the socket layer drives.  `Send`: a worker whose thread has
/// left it (blocked outside the socket layer) is driven by another thread
/// waiting on it (see `worker.rs`).
pub trait Driver: Send {
    /// The stack, for calls that send nothing.
    fn stack_mut(&mut self) -> &mut Stack;
    /// Runs `f` with the clock, the stack and the transmit queues.
    fn with(&mut self, f: &mut dyn FnMut(Instant, &mut Stack, &mut dyn FrameSink));
    /// Runs `f` with the stack, no clock read, for a call that sends
    /// nothing but may release frames lent by the link (a read: see
    /// `runtime::Engine::with_stack`).
    fn with_stack(&mut self, f: &mut dyn FnMut(&mut Stack));
    /// One loop turn (rx, stack, timers, tx); whether anything happened.
    fn turn(&mut self) -> bool;
    /// [`Driver::turn`] at a reading of `runtime::clock::monotonic_micros`
    /// the caller took just before (see `runtime::Engine::turn_at_monotonic`).
    fn turn_at_monotonic(&mut self, monotonic_us: u64) -> bool;
    /// Waits as the engine's own loop does after a turn without work.
    fn idle(&mut self);
    /// What the engine would wait for if idle now (see
    /// [`runtime::IdlePlan`]), for a wait on other fds beside it.
    fn idle_plan(&self) -> IdlePlan;
    /// Counts a sleep taken by [`Driver::idle_plan`].
    fn note_idle_sleep(&mut self);
    /// Sends what is queued now if the engine sends at once (see
    /// `runtime::Engine::flush_if_immediate`).
    fn flush_if_immediate(&mut self);
    /// Whether a fork child may drop its copy of the engine (see
    /// `runtime::Engine::droppable_in_fork_child`).
    fn droppable_in_fork_child(&self) -> bool;
    /// The fds the engine holds open and waits on (see
    /// `runtime::Engine::wait_fds`).
    fn wait_fds(&self) -> Vec<std::os::fd::RawFd>;
    /// Sends the gratuitous ARPs of the engine's addresses.
    fn announce(&mut self);
    /// The engine itself, for a caller that knows its link type (its
    /// counters and link statistics: see [`crate::with_engine`]).
    fn as_any(&mut self) -> &mut dyn Any;
}

/// The application of a turn the socket layer drives: the application
/// runs between turns, not inside them.
struct BetweenTurns;

impl Application for BetweenTurns {
    fn poll(&mut self, _ctx: &mut AppContext<'_>) -> bool {
        false
    }
}

impl<L: Link + Send + 'static> Driver for Engine<L> {
    fn stack_mut(&mut self) -> &mut Stack {
        &mut self.stack
    }

    fn with(&mut self, f: &mut dyn FnMut(Instant, &mut Stack, &mut dyn FrameSink)) {
        self.with_context(|ctx| f(ctx.now, ctx.stack, ctx.sink))
    }

    fn with_stack(&mut self, f: &mut dyn FnMut(&mut Stack)) {
        Engine::with_stack(self, |stack| f(stack))
    }

    fn turn(&mut self) -> bool {
        Engine::turn(self, &mut BetweenTurns)
    }

    fn turn_at_monotonic(&mut self, monotonic_us: u64) -> bool {
        Engine::turn_at_monotonic(self, monotonic_us, &mut BetweenTurns)
    }

    fn idle(&mut self) {
        // A failed wait (a link error) only shortens the sleep; the next
        // turn counts the link's error.
        let _ = self.idle_wait();
    }

    fn idle_plan(&self) -> IdlePlan {
        Engine::idle_plan(self)
    }

    fn note_idle_sleep(&mut self) {
        Engine::note_idle_sleep(self)
    }

    fn wait_fds(&self) -> Vec<std::os::fd::RawFd> {
        Engine::wait_fds(self)
    }

    fn flush_if_immediate(&mut self) {
        Engine::flush_if_immediate(self)
    }

    fn droppable_in_fork_child(&self) -> bool {
        Engine::droppable_in_fork_child(self)
    }

    fn announce(&mut self) {
        Engine::announce(self)
    }

    fn as_any(&mut self) -> &mut dyn Any {
        self
    }
}

/// Calls `f` through [`Driver::with`] and returns its result.
pub(crate) fn call<R>(
    d: &mut dyn Driver,
    f: impl FnOnce(Instant, &mut Stack, &mut dyn FrameSink) -> R,
) -> R {
    let mut f = Some(f);
    let mut out = None;
    d.with(&mut |now, stack, sink| {
        if let Some(f) = f.take() {
            out = Some(f(now, stack, sink));
        }
    });
    out.expect("Driver::with calls its closure exactly once")
}

/// Calls `f` through [`Driver::with_stack`] and returns its result.
pub(crate) fn call_stack<R>(d: &mut dyn Driver, f: impl FnOnce(&mut Stack) -> R) -> R {
    let mut f = Some(f);
    let mut out = None;
    d.with_stack(&mut |stack| {
        if let Some(f) = f.take() {
            out = Some(f(stack));
        }
    });
    out.expect("Driver::with_stack calls its closure exactly once")
}
