//! The executor: tasks, their wakers, and the loop that runs them between
//! turns of the engine.
//!
//! One executor per engine thread, kept in a thread local while its
//! [`Runtime`] lives.  A task is a boxed future in a slab; its waker puts
//! the task's key on the run queue (once, until it is polled again).  The
//! loop of [`Runtime::block_on`]: poll the tasks queued now, fire the
//! timers that expired, then let the socket layer run the engine and report
//! readiness (`epoll_wait`, which steps the engine and sleeps as its loop
//! would when there is nothing to do), waking the tasks that wait on the
//! sockets that became ready.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::reactor::Reactor;
use crate::time::Timers;

/// How long the loop waits in the socket layer at most when no task or
/// timer is due: the bound on how late a wakeup from another thread (a
/// waker sent elsewhere) is seen.
const MAX_WAIT: Duration = Duration::from_millis(5);

/// The key of a task: its slot and the slot's generation, so that a waker
/// that outlives its task cannot wake the slot's next tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskKey {
    index: u32,
    generation: u32,
}

/// The key of the future given to `block_on`, which is not in the slab.
const MAIN: TaskKey = TaskKey {
    index: u32::MAX,
    generation: 0,
};

/// Keys of the tasks to poll.  Behind a mutex because a waker may be sent
/// to, and woken on, another thread.
#[derive(Default)]
struct RunQueue {
    keys: Mutex<VecDeque<TaskKey>>,
}

impl RunQueue {
    fn push(&self, key: TaskKey) {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(key);
    }

    fn pop(&self) -> Option<TaskKey> {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }

    fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A task's waker.
struct TaskWaker {
    key: TaskKey,
    /// On the run queue and not yet polled: further wakes add nothing.
    queued: AtomicBool,
    queue: Arc<RunQueue>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.queue.push(self.key);
        }
    }
}

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

struct Slot {
    generation: u32,
    /// `None` while the task is being polled, and when the slot is free.
    future: Option<BoxFuture>,
    waker: Option<Arc<TaskWaker>>,
    /// Aborted while being polled: dropped after the poll.
    aborted: bool,
}

/// The tasks of an executor.
#[derive(Default)]
struct Tasks {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

impl Tasks {
    fn insert(&mut self, future: BoxFuture, queue: &Arc<RunQueue>) -> Arc<TaskWaker> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    future: None,
                    waker: None,
                    aborted: false,
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 tasks")
            }
        };
        let slot = &mut self.slots[index as usize];
        let waker = Arc::new(TaskWaker {
            key: TaskKey {
                index,
                generation: slot.generation,
            },
            queued: AtomicBool::new(false),
            queue: queue.clone(),
        });
        slot.future = Some(future);
        slot.waker = Some(waker.clone());
        slot.aborted = false;
        self.live += 1;
        waker
    }

    fn slot(&mut self, key: TaskKey) -> Option<&mut Slot> {
        self.slots
            .get_mut(key.index as usize)
            .filter(|s| s.generation == key.generation && s.waker.is_some())
    }

    /// Frees the slot of a finished or aborted task.
    fn remove(&mut self, key: TaskKey) -> Option<BoxFuture> {
        let slot = self.slot(key)?;
        let future = slot.future.take();
        slot.waker = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(key.index);
        self.live -= 1;
        future
    }
}

/// The executor state of a thread.
pub(crate) struct Core {
    tasks: RefCell<Tasks>,
    queue: Arc<RunQueue>,
    pub(crate) reactor: RefCell<Reactor>,
    pub(crate) timers: RefCell<Timers>,
    /// Inside `block_on` (it does not nest).
    running: Cell<bool>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
}

/// The calling thread's executor, if it has one.
pub(crate) fn current() -> Option<Rc<Core>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The calling thread's executor; panics without one (as spawning or
/// sleeping outside a runtime is a programming error).
pub(crate) fn expect_current(what: &str) -> Rc<Core> {
    current().unwrap_or_else(|| {
        panic!("rt::{what} needs an rt::Runtime on this thread (an engine thread: api::attach, then Runtime::new)")
    })
}

/// An executor on the calling thread, inside its engines' poll loop.
///
/// The thread must be an engine thread (`api::attach`).  One runtime per
/// thread; it is not `Send`.  While it exists, [`spawn`], the timers and
/// the socket types work on this thread; [`Runtime::block_on`] runs them.
/// Dropping it drops the tasks still pending (closing their sockets).
pub struct Runtime {
    core: Rc<Core>,
}

impl Runtime {
    /// An executor for the calling engine thread.  Fails when the thread
    /// is not an engine thread or already has a runtime.
    pub fn new() -> io::Result<Runtime> {
        if current().is_some() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "this thread already has an rt::Runtime",
            ));
        }
        // A step fails with EBADF on a thread that has no worker.
        api::step().map_err(|_| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "not an engine thread: attach an engine first (api::attach)",
            )
        })?;
        let core = Rc::new(Core {
            tasks: RefCell::new(Tasks::default()),
            queue: Arc::new(RunQueue::default()),
            reactor: RefCell::new(Reactor::new()?),
            timers: RefCell::new(Timers::default()),
            running: Cell::new(false),
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(core.clone()));
        Ok(Runtime { core })
    }

    /// Spawns a task on this runtime (see [`spawn`]).
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_on(&self.core, future)
    }

    /// Runs `future` to completion, and the spawned tasks beside it, inside
    /// the engine loop.  Tasks still pending when it returns stay pending
    /// (a later `block_on` goes on with them).
    ///
    /// Panics when called from inside a task (it does not nest), or when
    /// the thread's engines were detached meanwhile.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let core = &self.core;
        assert!(
            !core.running.replace(true),
            "rt::Runtime::block_on called inside block_on"
        );
        struct Running<'a>(&'a Core);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.running.set(false);
            }
        }
        let _running = Running(core);
        let mut future = std::pin::pin!(future);
        let main = Arc::new(TaskWaker {
            key: MAIN,
            queued: AtomicBool::new(true),
            queue: core.queue.clone(),
        });
        let main_waker = Waker::from(main.clone());
        let mut main_due = true;
        let mut woken = Vec::new();
        loop {
            if main_due {
                main_due = false;
                main.queued.store(false, Ordering::Release);
                if let Poll::Ready(out) =
                    future.as_mut().poll(&mut Context::from_waker(&main_waker))
                {
                    return out;
                }
            }
            // The tasks queued now; those they wake run after the engine's
            // next turn, so a busy task cannot starve the network.
            for _ in 0..core.queue.len() {
                let Some(key) = core.queue.pop() else { break };
                if key == MAIN {
                    main_due = true;
                } else {
                    poll_task(core, key);
                }
            }
            core.fire_timers(Instant::now());
            let wait = if main_due || core.queue.len() > 0 {
                Duration::ZERO
            } else {
                core.timers.borrow().next_deadline().map_or(MAX_WAIT, |d| {
                    d.saturating_duration_since(Instant::now()).min(MAX_WAIT)
                })
            };
            core.reactor
                .borrow_mut()
                .wait(wait, &mut woken)
                .expect("the engine thread's worker is gone (api::detach while a runtime runs)");
            for w in woken.drain(..) {
                w.wake();
            }
            core.fire_timers(Instant::now());
        }
    }

    /// How many spawned tasks have not finished.
    pub fn tasks(&self) -> usize {
        self.core.tasks.borrow().live
    }
}

impl Core {
    fn fire_timers(&self, now: Instant) {
        let due = self.timers.borrow_mut().expired(now);
        for w in due {
            w.wake();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Tasks are dropped outside every borrow: their sockets close and
        // leave the reactor as they go.
        let futures: Vec<BoxFuture> = {
            let mut tasks = self.core.tasks.borrow_mut();
            let futures = tasks
                .slots
                .iter_mut()
                .filter_map(|s| s.future.take())
                .collect();
            *tasks = Tasks::default();
            futures
        };
        drop(futures);
        CURRENT.with(|c| c.borrow_mut().take());
        self.core.reactor.borrow_mut().close();
    }
}

fn poll_task(core: &Core, key: TaskKey) {
    let (mut future, waker) = {
        let mut tasks = core.tasks.borrow_mut();
        let Some(slot) = tasks.slot(key) else {
            return; // finished or aborted since it was woken
        };
        let Some(future) = slot.future.take() else {
            return;
        };
        let waker = slot.waker.clone().expect("a live slot has a waker");
        (future, waker)
    };
    waker.queued.store(false, Ordering::Release);
    let done = future
        .as_mut()
        .poll(&mut Context::from_waker(&Waker::from(waker)))
        .is_ready();
    let mut tasks = core.tasks.borrow_mut();
    let Some(slot) = tasks.slot(key) else { return };
    if done || slot.aborted {
        tasks.remove(key);
        drop(tasks);
        drop(future);
    } else {
        slot.future = Some(future);
    }
}

/// What a task leaves for its [`JoinHandle`].
struct JoinState<T> {
    output: RefCell<Option<T>>,
    finished: Cell<bool>,
    waiter: RefCell<Option<Waker>>,
}

/// Awaits a spawned task's output.  Dropping it detaches the task (it runs
/// on); [`JoinHandle::abort`] drops the task instead.
pub struct JoinHandle<T> {
    key: TaskKey,
    state: Rc<JoinState<T>>,
    core: std::rc::Weak<Core>,
}

impl<T> JoinHandle<T> {
    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.state.finished.get()
    }

    /// Drops the task's future where it stands (at its last `.await`):
    /// its sockets close, its timers are cancelled.  A task aborting itself
    /// is dropped when its current poll returns.
    pub fn abort(self) {
        let Some(core) = self.core.upgrade() else {
            return;
        };
        let future = {
            let mut tasks = core.tasks.borrow_mut();
            match tasks.slot(self.key) {
                // Being polled: dropped when the poll returns.
                Some(slot) if slot.future.is_none() => {
                    slot.aborted = true;
                    None
                }
                Some(_) => tasks.remove(self.key),
                None => None,
            }
        };
        drop(future);
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let Some(out) = self.state.output.borrow_mut().take() {
            return Poll::Ready(out);
        }
        assert!(
            !self.state.finished.get(),
            "JoinHandle polled after it returned the output"
        );
        let mut waiter = self.state.waiter.borrow_mut();
        match waiter.as_ref() {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *waiter = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

fn spawn_on<F>(core: &Rc<Core>, future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let state = Rc::new(JoinState {
        output: RefCell::new(None),
        finished: Cell::new(false),
        waiter: RefCell::new(None),
    });
    let task_state = state.clone();
    let task = async move {
        let out = future.await;
        *task_state.output.borrow_mut() = Some(out);
        task_state.finished.set(true);
        let waiter = task_state.waiter.borrow_mut().take();
        if let Some(w) = waiter {
            w.wake();
        }
    };
    let waker = core.tasks.borrow_mut().insert(Box::pin(task), &core.queue);
    let key = waker.key;
    waker.wake_by_ref();
    JoinHandle {
        key,
        state,
        core: Rc::downgrade(core),
    }
}

/// Spawns a task on the calling thread's runtime: it runs inside the
/// engine loop, beside the others, whenever the runtime's `block_on`
/// runs.  The future need not be `Send` (it never leaves the thread).
///
/// Panics when the thread has no [`Runtime`].
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    spawn_on(&expect_current("spawn"), future)
}

/// Runs `future` on a new runtime of the calling engine thread (see
/// [`Runtime::block_on`]); the runtime and the tasks still pending are
/// dropped when it returns.
///
/// Panics when the thread is not an engine thread or already has a
/// runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let rt = Runtime::new().unwrap_or_else(|e| panic!("rt::block_on: {e}"));
    rt.block_on(future)
}

/// Lets the other tasks, and a turn of the engine, run before this task
/// goes on.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}
