//! Workers: the engines of one thread and every object (socket, epoll,
//! kqueue) that lives on them, plus the request queue through which other
//! threads reach them.
//!
//! A worker belongs to the thread that attached its first engine: that
//! thread calls into it directly (run to completion).  Another thread
//! calls into it directly too when nobody holds it at that moment (the
//! worker sits behind a lock, which its own thread takes for each call,
//! step and sleep); else it posts a job on the worker's request queue and
//! waits for it (run to wait): the holder runs posted jobs when it lets
//! the worker go and on every step.  The job borrows the caller's
//! buffers: the caller waits until the job has run or been dropped, so
//! the borrow outlives every use (see [`run_on`]).
//!
//! Adoption: a worker whose thread has not held it for [`ADOPT_AFTER`]
//! (blocked outside the socket layer: in a join, a sleep, a file) is
//! driven by a thread that waits on one of its objects (a blocking call,
//! an epoll or poll wait): that thread steps it and sleeps on its links
//! in its place, never blocking on the lock to do so.  So no engine is
//! left without a driver while a thread waits for it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use stack::SocketHandle;

use crate::driver::Driver;
use crate::dup::Dups;
use crate::epoll::Epoll;
use crate::errno::{Errno, Result};
use crate::fdtable::{self, Entry, Kind};
use crate::int_map::IntMap;
use crate::kqueue::Kqueue;
use crate::os;
use crate::socket::Socket;
use crate::stack_ip;

/// One engine of a worker and the socket layer's view of its sockets.
pub(crate) struct EngineSlot {
    pub driver: Box<dyn Driver>,
    /// The fds of each stack socket (several for a SO_REUSEPORT group).
    pub fds: IntMap<SocketHandle, Vec<RawFd>>,
    /// TCP sockets holding a port by bind(), listen() or connect() from a
    /// bound address: port -> fds.
    pub tcp_binds: HashMap<u16, Vec<RawFd>>,
    /// Bound UDP sockets by local address (for SO_REUSEADDR/PORT groups).
    pub udp_binds: HashMap<SocketAddr, SocketHandle>,
    /// TCP connections holding a local port outside `tcp_binds`: port ->
    /// holds (see [`PortHold`]).  Dead ones are swept as the list grows.
    pub conn_ports: HashMap<u16, Vec<PortHold>>,
}

/// A connection that holds its local port against bind() as Linux's do
/// (they stay in their port's bind bucket until the stack frees them,
/// after TIME-WAIT): an accepted one, which holds its listener's port
/// also after the listener and its own fd are closed, and a connection
/// from a bound port after its fd is closed.  The SO_REUSEADDR and
/// SO_REUSEPORT it had then decide whether a later bind may share it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortHold {
    pub h: SocketHandle,
    pub at: crate::family::Binding,
    pub reuseaddr: bool,
    pub reuseport: bool,
}

/// A ustack object behind an fd.
pub(crate) enum Object {
    Socket(Box<Socket>),
    Epoll(Box<Epoll>),
    Kqueue(Box<Kqueue>),
}

/// The caller's closure as a posted job sees it (its lifetime erased:
/// see [`JobSlot`]).
type Lent = *mut (dyn FnMut(&mut Worker) + Send);

/// Where a posted job's closure waits to run.  The closure lives on the
/// poster's stack: the worker that runs it holds `run`'s lock for the
/// whole call, and the poster empties the slot under that lock (waiting
/// for a call under way to end) before its closure goes out of scope,
/// whichever way it leaves [`run_on`] (a return or an unwind).  So no
/// pointer to the closure is used after the closure is gone.
struct JobSlot {
    /// The closure while it may run; `None` once it ran or its poster left.
    run: Mutex<Option<Lent>>,
}

// SAFETY: the pointer is dereferenced only under the slot's lock, by the
// worker running the job, while the poster (which empties the slot under
// the same lock before the closure dies) still waits; the closure is
// `Send` (run_on requires it).
unsafe impl Send for JobSlot {}
// SAFETY: as above: every use of the pointer is under the lock.
unsafe impl Sync for JobSlot {}

/// How a posted job ended: `Err` holds the payload of a panic in it, for
/// its poster to raise again (a panic in a job is the poster's, not the
/// thread's that happened to run it).
type Outcome = std::thread::Result<()>;

/// A job posted by another thread.
struct Job {
    slot: Arc<JobSlot>,
    /// Dropped unsent when the job is dropped unrun (its caller: EBADF).
    done: SyncSender<Outcome>,
}

/// Empties a job's slot when its poster leaves [`run_on`], however it
/// leaves: from then on the worker skips the job.
struct Revoke<'a>(&'a JobSlot);

impl Drop for Revoke<'_> {
    fn drop(&mut self) {
        *self.0.run.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The part of a worker other threads see.
pub(crate) struct WorkerShared {
    pub id: u32,
    /// Posted jobs; `None` once the worker is gone (detached, or its
    /// thread ended): a post then fails at once instead of waiting for
    /// a worker that will never run it.
    jobs: Mutex<Option<Vec<Job>>>,
    has_jobs: AtomicBool,
    /// Bumped after each step of the worker's loop that did something,
    /// when other threads wait for progress.
    progress: Mutex<u64>,
    progressed: Condvar,
    waiters: AtomicUsize,
    /// Threads waiting on [`WorkerShared::wake`] (their own poll, beside
    /// other fds: the LD_PRELOAD library's waits on another thread's
    /// engine).
    pollers: AtomicUsize,
    /// An eventfd (semaphore mode) written once per poller after each step
    /// of the worker that did something; -1 if it could not be made.
    wake: RawFd,
    /// The worker sleeps (in its idle wait) with [`WorkerShared::jobs_wake`]
    /// among the fds it waits on: a job posted now must write it.
    pub(crate) sleeping: AtomicBool,
    /// An eventfd that ends the worker's idle sleep when a job is posted;
    /// -1 if it could not be made (the sleep then ends by its timeout).
    pub(crate) jobs_wake: RawFd,
    /// The worker itself, held by whichever thread calls into it, steps
    /// it or sleeps on it (see [`WorkerShared::hold`]).  `None` once
    /// detached.
    home: Mutex<Option<Box<Worker>>>,
    /// The owning thread waits for [`WorkerShared::home`]: its holder,
    /// if asleep on the worker, wakes (as for a posted job) and lets go.
    pub(crate) owner_waiting: AtomicBool,
    /// Counts the owning thread's holds (only that thread writes it: a
    /// plain store, no clock read on the fast path).
    owner_holds: AtomicU64,
    /// What a waiting thread last saw of [`WorkerShared::owner_holds`],
    /// and when (microseconds since [`epoch`]): unchanged for
    /// [`ADOPT_AFTER`], the owner is away and a waiting thread drives the
    /// worker.
    holds_seen: AtomicU64,
    holds_seen_at: AtomicU64,
}

/// How long a worker's own thread may be away (not in a call, step or
/// sleep on it) before a thread waiting on the worker drives it.
pub const ADOPT_AFTER: Duration = Duration::from_millis(1);

/// The origin of [`WorkerShared::holds_seen_at`].
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn micros_now() -> u64 {
    epoch().elapsed().as_micros() as u64
}

impl Drop for WorkerShared {
    fn drop(&mut self) {
        for fd in [self.wake, self.jobs_wake] {
            if fd >= 0 {
                // SAFETY: the eventfd is this worker's, named nowhere else.
                unsafe { libc::close(fd) };
            }
        }
    }
}

impl WorkerShared {
    /// Queues `job`; EBADF when the worker is gone.
    fn post(&self, job: Job) -> Result<()> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.as_mut().ok_or(Errno::EBADF)?.push(job);
        self.has_jobs.store(true, Ordering::SeqCst);
        drop(jobs);
        // The worker sets `sleeping` before it looks at `has_jobs` a last
        // time and sleeps: either it sees the job, or this sees it asleep.
        if self.sleeping.load(Ordering::SeqCst) && self.jobs_wake >= 0 {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a live u64 to the worker's eventfd.
            unsafe { libc::write(self.jobs_wake, (&one as *const u64).cast(), 8) };
        }
        Ok(())
    }

    /// The worker is gone: jobs queued are dropped unrun (their callers
    /// see EBADF) and no more are taken.
    fn close_jobs(&self) {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.has_jobs.store(false, Ordering::SeqCst);
        drop(jobs);
    }

    /// Whether a job waits.
    pub(crate) fn has_jobs(&self) -> bool {
        self.has_jobs.load(Ordering::SeqCst)
    }

    /// Empties the jobs eventfd after a sleep.
    pub(crate) fn drain_jobs_wake(&self) {
        if self.jobs_wake >= 0 {
            let mut v = 0u64;
            // SAFETY: reads 8 bytes into a live u64 (non-blocking).
            unsafe { libc::read(self.jobs_wake, (&mut v as *mut u64).cast(), 8) };
        }
    }

    pub(crate) fn progress(&self) -> u64 {
        *self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the worker makes progress past `seen` or `until`.
    pub(crate) fn wait_progress(&self, seen: u64, until: Option<Instant>) {
        // A bounded wait: a progress bump that raced with the caller's
        // last look costs at most this much.
        let cap = Instant::now() + Duration::from_millis(5);
        let until = until.map_or(cap, |u| u.min(cap));
        self.waiters.fetch_add(1, Ordering::AcqRel);
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        while *p == seen {
            let now = Instant::now();
            if now >= until {
                break;
            }
            p = match self.progressed.wait_timeout(p, until - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        drop(p);
        self.waiters.fetch_sub(1, Ordering::AcqRel);
    }

    /// Wakes the threads polling [`WorkerShared::wake`] after a step that
    /// did something.
    fn wake_pollers(&self) {
        let n = self.pollers.load(Ordering::Acquire);
        if n > 0 && self.wake >= 0 {
            let v = n as u64;
            // SAFETY: writes 8 bytes from a live u64 to the worker's eventfd.
            unsafe { libc::write(self.wake, (&v as *const u64).cast(), 8) };
        }
    }

    /// Takes the worker for a call, a step or a sleep.  `owner`: the
    /// worker's own thread, which waits for the lock (waking a thread that
    /// sleeps on the worker in its place); another thread only tries
    /// (`Ok(None)`: someone holds it).  EDEADLK for the owner already
    /// holding a worker (a call from inside a call); another thread that
    /// does gets `Ok(None)`.
    pub(crate) fn hold(&self, owner: bool) -> Result<Option<Held<'_>>> {
        // One thread-local lookup per hold (the flag is set, and cleared
        // when the hold ends, through this address).
        let holding = THREAD.with(|t| &t.holding as *const Cell<bool>);
        // SAFETY: the calling thread's flag, which lives as long as the
        // thread (a const thread-local without a destructor).
        self.hold_as(unsafe { &*holding }, owner)
    }

    /// [`hold`](Self::hold) with the calling thread's `holding` flag
    /// already found.
    #[inline]
    fn hold_as<'a>(&'a self, holding: &'a Cell<bool>, owner: bool) -> Result<Option<Held<'a>>> {
        if holding.get() {
            return if owner {
                Err(Errno(libc::EDEADLK))
            } else {
                Ok(None)
            };
        }
        let guard = match self.home.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) if !owner => return Ok(None),
            Err(TryLockError::WouldBlock) => {
                self.owner_waiting.store(true, Ordering::SeqCst);
                self.wake_sleeper();
                let g = self.home.lock().unwrap_or_else(|e| e.into_inner());
                self.owner_waiting.store(false, Ordering::SeqCst);
                g
            }
        };
        if owner {
            let n = self.owner_holds.load(Ordering::Relaxed);
            self.owner_holds.store(n.wrapping_add(1), Ordering::Relaxed);
        }
        holding.set(true);
        Ok(Some(Held { guard, holding }))
    }

    /// Ends the idle sleep of the thread holding the worker, if it sleeps.
    fn wake_sleeper(&self) {
        if self.sleeping.load(Ordering::SeqCst) && self.jobs_wake >= 0 {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a live u64 to the worker's eventfd.
            unsafe { libc::write(self.jobs_wake, (&one as *const u64).cast(), 8) };
        }
    }

    /// A thread waiting on one of the worker's objects drives it if its
    /// own thread has been away for [`ADOPT_AFTER`] and nobody holds it:
    /// a step, and if that found nothing, a sleep on the worker's links
    /// and `extra` (as [`crate::idle_wait`]) up to `timeout`, then a step
    /// for what woke it.  See [`Drive`].
    pub(crate) fn drive_if_left(
        &self,
        extra: &mut [libc::pollfd],
        timeout: Option<Duration>,
    ) -> Result<Drive> {
        let now = micros_now();
        let holds = self.owner_holds.load(Ordering::Relaxed);
        let after = ADOPT_AFTER.as_micros() as u64;
        if self.holds_seen.swap(holds, Ordering::Relaxed) != holds {
            // The owner was there since the last look: from now on.
            self.holds_seen_at.store(now, Ordering::Relaxed);
            return Ok(Drive::Later(Some(ADOPT_AFTER)));
        }
        let away = now.saturating_sub(self.holds_seen_at.load(Ordering::Relaxed));
        if away < after {
            return Ok(Drive::Later(Some(Duration::from_micros(after - away))));
        }
        let Some(mut held) = self.hold(false)? else {
            return Ok(Drive::Later(None));
        };
        let w = held.worker()?;
        if w.step() {
            return Ok(Drive::Drove(0));
        }
        let ready = crate::poll::sleep(w, extra, timeout)?;
        w.step();
        drop(held);
        // Another waiting thread takes over while this one goes back to
        // its program.
        self.wake_pollers();
        Ok(Drive::Drove(ready))
    }

    fn bump(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            *self.progress.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            self.progressed.notify_all();
        }
    }
}

/// What a thread waiting on a worker did about driving it ([`ProgressWatch::drive`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drive {
    /// It drove the worker; so many of the extra fds are ready.
    Drove(usize),
    /// Not now: its own thread was there within this time (look again
    /// then), or (`None`) another thread holds it (its steps wake the
    /// progress watch).
    Later(Option<Duration>),
}

/// A worker held by the calling thread (see [`WorkerShared::hold`]).
/// Jobs posted meanwhile by threads that found it held run when it is
/// let go.
pub(crate) struct Held<'a> {
    guard: MutexGuard<'a, Option<Box<Worker>>>,
    /// The holding thread's [`ThreadWorker::holding`] (a `Held` is not
    /// `Send`: the guard ties it to that thread).
    holding: &'a Cell<bool>,
}

impl Held<'_> {
    /// The worker; EBADF once detached.
    pub(crate) fn worker(&mut self) -> Result<&mut Worker> {
        self.guard.as_deref_mut().ok_or(Errno::EBADF)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.guard.as_deref_mut() {
            w.run_jobs();
            w.seen_current = None;
        }
        self.holding.set(false);
    }
}

/// The engines of one thread and the objects on them.
pub(crate) struct Worker {
    pub shared: Arc<WorkerShared>,
    pub engines: Vec<EngineSlot>,
    /// Objects by fd number (each under one of its numbers, its key:
    /// see `dup.rs`).
    pub objects: Vec<Option<Object>>,
    /// The other numbers of objects that have several (dup).
    pub dups: Dups,
    /// Sockets whose readiness may have changed by a call of ours (the
    /// stack's own list covers what it does).
    pub dirty: Vec<RawFd>,
    pub(crate) ready_scratch: Vec<SocketHandle>,
    /// Counts the rounds of `refresh_dirty` (see `Socket::refreshed_in`).
    pub(crate) refresh_round: u64,
    /// The last refresh round, while the statuses it saw are still the
    /// sockets' own: until an engine turn, a posted job or the end of the
    /// hold (the only ways a socket changes between a round and an epoll
    /// wait's look in the same hold).
    pub(crate) seen_current: Option<u64>,
    pub(crate) scratch: Vec<u8>,
}

/// The live workers.  Ids are never reused, so an fd whose worker is gone
/// names no other worker (its calls: EBADF).
static REGISTRY: Mutex<Vec<Arc<WorkerShared>>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// The calling thread's own worker; when the thread ends, so does the
/// worker (its engines dropped; its objects' numbers stay held until
/// closed): it leaves the registry, and calls on its objects fail with
/// EBADF instead of waiting for it.
struct Own(Arc<WorkerShared>);

impl Drop for Own {
    fn drop(&mut self) {
        let _ = THREAD.try_with(|t| {
            if t.shared.get() == Arc::as_ptr(&self.0) {
                t.id.set(0);
                t.shared.set(std::ptr::null());
            }
        });
        unregister(self.0.id);
        self.0.close_jobs();
        if let Ok(Some(mut held)) = self.0.hold(true) {
            let w = held.guard.take();
            drop(held);
            drop(w);
        }
        // Posted while the worker was being taken out.
        self.0.close_jobs();
    }
}

/// Takes worker `id` out of the registry.
fn unregister(id: u32) {
    registry().retain(|w| w.id != id);
}

/// What a call needs of the calling thread's worker, in one thread-local
/// without a destructor: a library loaded by the dynamic linker reaches
/// each thread-local through a call (`__tls_get_addr`), so a call on the
/// thread's own worker makes one such lookup here, not one per field; and
/// it stays readable while the thread's other thread-locals are torn down.
struct ThreadWorker {
    /// The worker's id (0: none).
    id: Cell<u32>,
    /// The worker (null: none): the `Arc` that [`CURRENT`] holds, which
    /// clears this before it lets the worker go.
    shared: Cell<*const WorkerShared>,
    /// Whether the thread holds a worker now (inside a call on it).
    holding: Cell<bool>,
}

thread_local! {
    static CURRENT: RefCell<Option<Own>> = const { RefCell::new(None) };
    static THREAD: ThreadWorker = const {
        ThreadWorker {
            id: Cell::new(0),
            shared: Cell::new(std::ptr::null()),
            holding: Cell::new(false),
        }
    };
}

/// Makes `own` (or none) the calling thread's worker in [`THREAD`].
fn set_thread_worker(own: Option<&Own>) {
    let _ = THREAD.try_with(|t| {
        t.id.set(own.map_or(0, |o| o.0.id));
        t.shared
            .set(own.map_or(std::ptr::null(), |o| Arc::as_ptr(&o.0)));
    });
}

fn registry() -> std::sync::MutexGuard<'static, Vec<Arc<WorkerShared>>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of the calling thread's worker (0: none).
pub(crate) fn current_id() -> u32 {
    THREAD.try_with(|t| t.id.get()).unwrap_or(0)
}

/// The worker with `id`, if it is alive.
pub(crate) fn shared(id: u32) -> Option<Arc<WorkerShared>> {
    registry().iter().find(|w| w.id == id).cloned()
}

/// The worker that takes objects created by threads that have none.
pub(crate) fn default_worker() -> Option<Arc<WorkerShared>> {
    registry().first().cloned()
}

/// Runs `f` on the calling thread's worker.
pub(crate) fn with_current<R>(f: impl FnOnce(&mut Worker) -> R) -> Result<R> {
    // A thread past its worker's end (an exit handler) has none any more.
    THREAD
        .try_with(|t| {
            let shared = t.shared.get();
            if shared.is_null() {
                return Err(Errno::EBADF);
            }
            // SAFETY: set, the pointer is to the `Arc` in this thread's
            // `CURRENT`, which only this thread lets go, and not inside a
            // call on the worker (`detach`, `forget_after_fork`, the
            // thread's end: each clears the pointer first).
            let shared = unsafe { &*shared };
            let mut held = shared
                .hold_as(&t.holding, true)?
                .ok_or(Errno(libc::EDEADLK))?;
            Ok(f(held.worker()?))
        })
        .unwrap_or(Err(Errno::EBADF))
}

/// Adds an engine to the calling thread's worker (creating the worker on
/// the first one).  Returns the worker's id.
pub(crate) fn attach(mut driver: Box<dyn Driver>) -> u32 {
    driver.announce();
    let slot = EngineSlot {
        driver,
        fds: IntMap::default(),
        tcp_binds: HashMap::new(),
        conn_ports: HashMap::new(),
        udp_binds: HashMap::new(),
    };
    CURRENT.with(|c| {
        let mut cur = c.borrow_mut();
        if let Some(own) = cur.as_ref() {
            let mut held = own.0.hold(true).ok().flatten();
            if let Some(w) = held.as_mut().and_then(|h| h.worker().ok()) {
                w.engines.push(slot);
                return own.0.id;
            }
            // Its worker went with a detach or a fork: a new one.
        }
        let mut reg = registry();
        let shared = Arc::new(WorkerShared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            jobs: Mutex::new(Some(Vec::new())),
            has_jobs: AtomicBool::new(false),
            progress: Mutex::new(0),
            progressed: Condvar::new(),
            waiters: AtomicUsize::new(0),
            pollers: AtomicUsize::new(0),
            sleeping: AtomicBool::new(false),
            // SAFETY: eventfd takes no pointers; -1 is kept as "none".
            jobs_wake: unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) },
            // SAFETY: eventfd takes no pointers; -1 is kept as "none".
            wake: unsafe {
                libc::eventfd(
                    0,
                    libc::EFD_NONBLOCK | libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE,
                )
            },
            home: Mutex::new(None),
            owner_waiting: AtomicBool::new(false),
            owner_holds: AtomicU64::new(0),
            holds_seen: AtomicU64::new(u64::MAX),
            holds_seen_at: AtomicU64::new(micros_now()),
        });
        reg.push(shared.clone());
        let id = shared.id;
        *shared.home.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(Worker {
            shared: shared.clone(),
            engines: vec![slot],
            objects: Vec::new(),
            dups: Dups::default(),
            dirty: Vec::new(),
            ready_scratch: Vec::new(),
            refresh_round: 0,
            seen_current: None,
            scratch: Vec::new(),
        }));
        *cur = Some(Own(shared));
        set_thread_worker(cur.as_ref());
        id
    })
}

/// Tears down the calling thread's worker: every object on it is closed
/// (its fd number goes back to the kernel) and its engines are dropped.
pub(crate) fn detach() {
    set_thread_worker(None);
    let own = CURRENT.with(|c| c.borrow_mut().take());
    let Some(own) = own else { return };
    unregister(own.0.id);
    let worker = own.0.home.lock().unwrap_or_else(|e| e.into_inner()).take();
    // Jobs still queued are dropped unrun: their callers see EBADF.
    own.0.close_jobs();
    let Some(mut w) = worker else { return };
    w.close_all();
}

/// An fd number from the kernel that the fd table can hold.
pub(crate) fn reserve(cloexec: bool) -> Result<RawFd> {
    let fd = os::reserve_fd(cloexec)?;
    if fd as usize >= fdtable::MAX_FDS {
        os::release_fd(fd);
        return Err(Errno(libc::EMFILE));
    }
    Ok(fd)
}

/// Runs `f` on the worker of `target` (another thread) and waits for it.
pub(crate) fn run_on<R: Send>(
    target: &WorkerShared,
    f: impl FnOnce(&mut Worker) -> R + Send,
) -> Result<R> {
    // Nobody holds the worker: the call runs here, now.
    if let Some(mut held) = target.hold(false)? {
        let w = held.worker()?;
        let r = f(w);
        for e in &mut w.engines {
            e.driver.flush_if_immediate();
        }
        return Ok(r);
    }
    let mut f = Some(f);
    let mut out: Option<R> = None;
    let slot = Arc::new(JobSlot {
        run: Mutex::new(None),
    });
    let (done, finished) = sync_channel(1);
    let outcome = {
        let mut job = |w: &mut Worker| {
            if let Some(f) = f.take() {
                out = Some(f(w));
            }
        };
        let job: &mut (dyn FnMut(&mut Worker) + Send + '_) = &mut job;
        // SAFETY: only the lifetime is erased.  The pointer is used only
        // through `slot`, which `revoke` (dropped before the closure, on
        // a return or an unwind alike) empties under the slot's lock,
        // after any call of it under way has ended.
        let run: Lent =
            unsafe { std::mem::transmute(job as *mut (dyn FnMut(&mut Worker) + Send + '_)) };
        *slot.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(run);
        let revoke = Revoke(&slot);
        target.post(Job {
            slot: Arc::clone(&slot),
            done,
        })?;
        let outcome = loop {
            match finished.recv_timeout(Duration::from_millis(1)) {
                Ok(outcome) => break Some(outcome),
                Err(RecvTimeoutError::Disconnected) => break None,
                Err(RecvTimeoutError::Timeout) => {
                    // A worker thread waiting on another keeps serving its
                    // own queue, so two workers calling each other do not
                    // wait for ever.
                    let _ = with_current(|w| w.run_jobs());
                    // The worker is free now but the job did not run (it
                    // was posted as its holder let go): run it.
                    if let Ok(Some(mut held)) = target.hold(false) {
                        if let Ok(w) = held.worker() {
                            w.step();
                        }
                    }
                }
            }
        };
        drop(revoke);
        outcome
    };
    match outcome {
        Some(Ok(())) => out.ok_or(Errno::EBADF),
        // The job panicked on the thread that ran it: the panic is ours.
        Some(Err(payload)) => std::panic::resume_unwind(payload),
        // Dropped unrun: the worker is gone.
        None => Err(Errno::EBADF),
    }
}

impl Worker {
    /// Closes every object of the worker (each number goes back).
    pub(crate) fn close_all(&mut self) {
        self.release_dups();
        for fd in 0..self.objects.len() as RawFd {
            if self.objects[fd as usize].is_some() {
                let _ = self.close(fd);
            }
        }
    }

    /// Closed connections of this worker's engines that still deliver
    /// what they hold (`Stack::tcp_unfinished_closes`).
    pub(crate) fn unfinished_closes(&mut self) -> usize {
        self.engines
            .iter_mut()
            .map(|e| e.driver.stack_mut().tcp_unfinished_closes())
            .sum()
    }

    /// Resets what [`Worker::unfinished_closes`] counts; returns how many.
    pub(crate) fn abort_unfinished_closes(&mut self) -> usize {
        let mut n = 0;
        for e in &mut self.engines {
            e.driver.with(&mut |now, stack, sink| {
                n += stack.tcp_abort_unfinished_closes(now, sink);
            });
        }
        n
    }

    /// Runs the jobs other threads posted.  A job that panics does not
    /// unwind this thread (which may be waiting on a job of its own
    /// elsewhere): its panic goes back to its poster.
    ///
    /// Called at the end of every hold and every step, mostly to find
    /// nothing: that test is inlined into the caller, the work kept out of
    /// line (a call to the whole function cost ~25 instructions each time
    /// in saving and restoring registers).
    #[inline(always)]
    pub(crate) fn run_jobs(&mut self) -> bool {
        if !self.shared.has_jobs.load(Ordering::Acquire) {
            return false;
        }
        self.run_posted_jobs();
        true
    }

    #[inline(never)]
    fn run_posted_jobs(&mut self) {
        self.seen_current = None;
        let jobs = {
            let mut q = self.shared.jobs.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.has_jobs.store(false, Ordering::Release);
            q.as_mut().map(std::mem::take).unwrap_or_default()
        };
        for job in jobs {
            let outcome = {
                let mut lent = job.slot.run.lock().unwrap_or_else(|e| e.into_inner());
                match lent.take() {
                    Some(run) => std::panic::catch_unwind(AssertUnwindSafe(|| {
                        // SAFETY: the slot still held the closure, so its
                        // poster has not left `run_on` (it empties the
                        // slot under this lock first), and the lock held
                        // across the call keeps it from leaving meanwhile.
                        unsafe { (*run)(self) }
                    })),
                    // The poster left: nothing to run.
                    None => Ok(()),
                }
            };
            let _ = job.done.send(outcome);
        }
    }

    /// One step of the loop: a turn of every engine, posted jobs, and the
    /// readiness of the sockets that changed.  Returns whether anything
    /// happened.
    pub(crate) fn step(&mut self) -> bool {
        self.step_with_clock(None)
    }

    /// [`step`](Self::step) whose turns take `monotonic_us`, a reading of
    /// `runtime::clock::monotonic_micros` the caller took just before,
    /// instead of reading the clock again.
    pub(crate) fn step_at(&mut self, monotonic_us: u64) -> bool {
        self.step_with_clock(Some(monotonic_us))
    }

    fn step_with_clock(&mut self, monotonic_us: Option<u64>) -> bool {
        self.seen_current = None;
        let mut turned = false;
        for e in &mut self.engines {
            turned |= match monotonic_us {
                Some(t) => e.driver.turn_at_monotonic(t),
                None => e.driver.turn(),
            };
        }
        let jobs = self.run_jobs();
        let changed = self.pump();
        self.shared.bump();
        // Pollers look at readiness by posting calls: a step that only ran
        // such calls must not wake them again, or they would spin.
        if turned || changed {
            self.shared.wake_pollers();
        }
        turned || jobs || changed
    }

    /// Sleeps as the engines' own loops do when a step found nothing, for
    /// `idle_sleep` at most: the loop this serves (`api::run` under
    /// `ff_run`/`ustack_run` with the program's callback, a blocking call
    /// looking at its deadline) may have work the engines cannot see.
    pub(crate) fn idle(&mut self) {
        let cap = self
            .engines
            .iter()
            .map(|e| e.driver.idle_plan().idle_sleep)
            .min();
        let _ = crate::poll::sleep(self, &mut [], cap);
    }

    /// A new fd for `object`, reserved from the kernel.
    pub(crate) fn add_object(&mut self, object: Object, cloexec: bool) -> Result<RawFd> {
        let fd = reserve(cloexec)?;
        self.install(fd, object);
        Ok(fd)
    }

    /// Puts `object` behind a number from [`reserve`].
    pub(crate) fn install(&mut self, fd: RawFd, object: Object) {
        let kind = match &object {
            Object::Socket(_) => Kind::Socket,
            Object::Epoll(_) => Kind::Epoll,
            Object::Kqueue(_) => Kind::Kqueue,
        };
        fdtable::insert(
            fd,
            Entry {
                worker: self.shared.id,
                kind,
            },
        );
        let i = fd as usize;
        if self.objects.len() <= i {
            self.objects.resize_with(i + 1, || None);
        }
        self.objects[i] = Some(object);
    }

    pub(crate) fn object(&self, fd: RawFd) -> Option<&Object> {
        self.objects.get(usize::try_from(fd).ok()?)?.as_ref()
    }

    pub(crate) fn object_mut(&mut self, fd: RawFd) -> Option<&mut Object> {
        self.objects.get_mut(usize::try_from(fd).ok()?)?.as_mut()
    }

    pub(crate) fn socket(&self, fd: RawFd) -> Result<&Socket> {
        match self.object(fd) {
            Some(Object::Socket(s)) => Ok(s),
            Some(_) => Err(Errno::ENOTSOCK),
            None => Err(Errno::EBADF),
        }
    }

    pub(crate) fn socket_mut(&mut self, fd: RawFd) -> Result<&mut Socket> {
        match self.object_mut(fd) {
            Some(Object::Socket(s)) => Ok(s),
            Some(_) => Err(Errno::ENOTSOCK),
            None => Err(Errno::EBADF),
        }
    }

    /// Takes an object out of its slot (to use it beside the others); put
    /// it back with [`Worker::put`].
    pub(crate) fn take(&mut self, fd: RawFd) -> Option<Object> {
        self.objects.get_mut(usize::try_from(fd).ok()?)?.take()
    }

    pub(crate) fn put(&mut self, fd: RawFd, object: Object) {
        self.objects[fd as usize] = Some(object);
    }

    /// Marks a socket's readiness as possibly changed by a call.
    pub(crate) fn touch(&mut self, fd: RawFd) {
        self.dirty.push(fd);
    }

    /// Forgets an object and gives its number back to the kernel.
    pub(crate) fn release(&mut self, fd: RawFd) {
        if let Some(slot) = self.objects.get_mut(fd as usize) {
            *slot = None;
        }
        fdtable::remove(fd);
        os::release_fd(fd);
    }

    /// The engine whose stack owns `ip`; for the any address, the first.
    pub(crate) fn engine_for_local(&mut self, ip: IpAddr) -> Option<usize> {
        if ip.is_unspecified() {
            return (!self.engines.is_empty()).then_some(0);
        }
        self.engines
            .iter_mut()
            .position(|e| stack_ip::is_local_ip(e.driver.stack_mut(), ip))
    }

    /// The engine that reaches `dst`: one with a route that does not own
    /// the address itself (a stack does not talk to itself).
    pub(crate) fn engine_for_remote(&mut self, dst: IpAddr) -> Option<usize> {
        let routed = |e: &mut EngineSlot| stack_ip::source_for(e.driver.stack_mut(), dst).is_some();
        self.engines
            .iter_mut()
            .position(|e| routed(e) && !stack_ip::is_local_ip(e.driver.stack_mut(), dst))
            .or_else(|| self.engines.iter_mut().position(routed))
    }
}

/// A thread's watch on another thread's worker: [`ProgressWatch::fd`]
/// becomes readable after each step of that worker that did something, so
/// a wait on the worker's sockets can sleep in its own poll beside other
/// fds (see [`crate::watch_progress`]).
pub struct ProgressWatch {
    shared: Arc<WorkerShared>,
}

impl ProgressWatch {
    pub(crate) fn new(shared: Arc<WorkerShared>) -> Option<ProgressWatch> {
        if shared.wake < 0 {
            return None;
        }
        shared.pollers.fetch_add(1, Ordering::AcqRel);
        Some(ProgressWatch { shared })
    }

    /// The fd to poll for POLLIN.
    pub fn fd(&self) -> RawFd {
        self.shared.wake
    }

    /// Drives the watched worker from this thread if its own thread has
    /// left it (after `ADOPT_AFTER` away; see the module): a wait on its
    /// objects calls this before it sleeps on [`ProgressWatch::fd`].
    pub fn drive(&self, extra: &mut [libc::pollfd], timeout: Option<Duration>) -> Result<Drive> {
        self.shared.drive_if_left(extra, timeout)
    }

    /// Takes one wakeup (after the fd polled readable).
    pub fn clear(&self) {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from the worker's eventfd
        // (non-blocking: nothing to take is EAGAIN, ignored).
        unsafe { libc::read(self.shared.wake, (&mut v as *mut u64).cast(), 8) };
    }
}

impl Drop for ProgressWatch {
    fn drop(&mut self) {
        self.shared.pollers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket a child inherited by fork: a TCP listener or a bound UDP
/// socket, which it can set up again on an engine of its own; or a TCP
/// connection (`connection`), which stays the parent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inherited {
    pub fd: RawFd,
    /// A TCP connection (connected or connecting).
    pub connection: bool,
    /// AF_INET or AF_INET6.
    pub domain: i32,
    pub stream: bool,
    /// As the socket shows it (IPv4-mapped on an AF_INET6 socket).
    pub local: SocketAddr,
    /// IPV6_V6ONLY (AF_INET6).
    pub v6only: bool,
    pub nonblock: bool,
    pub reuseaddr: bool,
    pub reuseport: bool,
    /// SO_MARK (0: none).
    pub mark: u32,
}

/// In a child after fork: every worker (and its engines) is the parent's.
/// They are dropped or forgotten without a step or a close (nothing is
/// sent, no shared ring written); the fd table forgets their numbers,
/// which stay held (duplicates of the placeholder) for the program to
/// close.  Returns the fds of the engines that could not be dropped (for
/// the child to close) and the listeners and bound UDP sockets of the
/// calling thread's worker and of the workers `held` before the fork
/// ([`hold_for_fork`]), to be set up again.
pub(crate) fn forget_after_fork(held: Option<ForkHold>) -> (Vec<RawFd>, Vec<Inherited>) {
    let mut fds = Vec::new();
    let mut inherited = Vec::new();
    set_thread_worker(None);
    let _ = THREAD.try_with(|t| t.holding.set(false));
    let own = CURRENT.try_with(|c| c.borrow_mut().take()).ok().flatten();
    // The forking thread held no worker (a thread adopting its own one at
    // the fork exists no more in the child: then the worker is forgotten
    // whole, its lock never released).
    let worker = own.and_then(|own| {
        let w = match own.0.home.try_lock() {
            Ok(mut g) => g.take(),
            Err(TryLockError::Poisoned(e)) => e.into_inner().take(),
            Err(TryLockError::WouldBlock) => None,
        };
        // Its drop would take the worker out again.
        std::mem::forget(own);
        w
    });
    if let Some(mut w) = worker {
        take_apart(&mut w, &mut fds, &mut inherited);
        // Its drop would close sockets and engines: the parent's.
        std::mem::forget(w);
    }
    if let Some(hold) = held {
        for slot in &hold.slots {
            let at = slot.worker.load(Ordering::Acquire);
            if at.is_null() {
                continue;
            }
            // SAFETY: the thread that ran the job (the worker's own, or
            // the helper when it found the worker free) published this
            // pointer to the worker it held and then waited, touching
            // nothing, until released; the fork came in that wait, so the
            // child's copy of the worker is whole, and its thread does not
            // exist here: this is the only reference.  The worker stays
            // where it is (its thread's slot is never dropped in the
            // child); only what `take_apart` takes leaves it.
            let w = unsafe { &mut *at };
            take_apart(w, &mut fds, &mut inherited);
        }
        // The helper threads are the parent's: their handles are not
        // joined or detached here.
        std::mem::forget(hold);
    }
    // The other workers' threads did not survive the fork.  A registry
    // lock held by one of them at the fork is never released: then it
    // is left as it is (their jobs would never run anyway).
    if let Ok(mut reg) = REGISTRY.try_lock() {
        std::mem::forget(std::mem::take(&mut *reg));
    }
    fdtable::clear();
    (fds, inherited)
}

/// Takes a parent's worker apart in the child: an engine whose links the
/// child may drop is dropped (its packet rings unmapped: a ring still
/// mapped in the child would keep the parent's socket, and its place in a
/// fanout group, alive after the parent ends); the others are forgotten,
/// their fds added to `fds`.  Its listeners, bound UDP sockets and TCP
/// connections go to `inherited` (a connection's local address read from
/// the stack first).
fn take_apart(w: &mut Worker, fds: &mut Vec<RawFd>, inherited: &mut Vec<Inherited>) {
    let mut connections = Vec::new();
    for (fd, o) in w.objects.iter().enumerate() {
        let Some(Object::Socket(s)) = o else { continue };
        if matches!(s.state, crate::socket::State::Tcp { .. }) {
            connections.push(fd as RawFd);
        }
    }
    for fd in connections {
        let Ok(local) = w.getsockname(fd) else {
            continue;
        };
        let Ok(s) = w.socket(fd) else { continue };
        inherited.push(Inherited {
            fd,
            connection: true,
            domain: s.domain.af(),
            stream: true,
            local,
            v6only: s.opts.v6only,
            nonblock: s.nonblock,
            reuseaddr: s.opts.reuseaddr,
            reuseport: s.opts.reuseport,
            mark: s.opts.mark,
        });
    }
    for e in std::mem::take(&mut w.engines) {
        if e.driver.droppable_in_fork_child() {
            drop(e);
        } else {
            fds.extend(e.driver.wait_fds());
            std::mem::forget(e);
        }
    }
    for (fd, o) in w.objects.iter().enumerate() {
        let Some(Object::Socket(s)) = o else { continue };
        let local = match s.state {
            crate::socket::State::Listening { local, .. } => local,
            crate::socket::State::Udp { .. } => match s.bound {
                Some(b) => b,
                None => continue,
            },
            _ => continue,
        };
        inherited.push(Inherited {
            fd: fd as RawFd,
            connection: false,
            domain: s.domain.af(),
            stream: s.stream,
            local: crate::family::present(s.domain, local),
            v6only: s.opts.v6only,
            nonblock: s.nonblock,
            reuseaddr: s.opts.reuseaddr,
            reuseport: s.opts.reuseport,
            mark: s.opts.mark,
        });
    }
}

/// The workers of other threads, each stopped between two steps while
/// this thread forks (run to wait: the engine's thread is not the one
/// that forks).  See [`hold_for_fork`].
pub struct ForkHold {
    slots: Vec<Arc<HoldSlot>>,
    helpers: Vec<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct HoldSlot {
    /// The held worker, published by its own thread from inside a job.
    worker: std::sync::atomic::AtomicPtr<Worker>,
    release: AtomicBool,
}

/// How long a held worker waits for its release before it goes on by
/// itself (a fork that never returned to the parent's handler).
const HOLD_LIMIT: Duration = Duration::from_secs(2);
/// How long the forking thread waits for the workers to stop.
const HOLD_WAIT: Duration = Duration::from_millis(200);

/// Before fork, on a thread without a worker: asks every worker to stop
/// between two steps, and waits (up to 200 ms) until they have, so that
/// the child finds each whole and can take it apart
/// ([`crate::forget_after_fork`]); the parent lets them go on with
/// [`ForkHold::release`].  A worker that does not stop in time (its
/// thread blocked elsewhere) is not held: the child forgets it without
/// taking it apart.  Nothing is held when the calling thread has a worker
/// (it is the one that forks; run to completion).
pub fn hold_for_fork() -> Option<ForkHold> {
    if current_id() != 0 {
        return None;
    }
    let workers: Vec<Arc<WorkerShared>> = registry().clone();
    if workers.is_empty() {
        return None;
    }
    let mut hold = ForkHold {
        slots: Vec::new(),
        helpers: Vec::new(),
    };
    for shared in workers {
        let slot = Arc::new(HoldSlot::default());
        let mine = Arc::clone(&slot);
        // A helper posts the job and waits for it, as any other thread's
        // call would; the job holds the worker.
        let helper = std::thread::Builder::new()
            .name("ustack-fork-hold".into())
            .spawn(move || {
                let _ = run_on(&shared, |w| {
                    mine.worker.store(w as *mut Worker, Ordering::Release);
                    let end = Instant::now() + HOLD_LIMIT;
                    while !mine.release.load(Ordering::Acquire) && Instant::now() < end {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                });
            });
        if let Ok(h) = helper {
            hold.helpers.push(h);
            hold.slots.push(slot);
        }
    }
    let end = Instant::now() + HOLD_WAIT;
    while hold
        .slots
        .iter()
        .any(|s| s.worker.load(Ordering::Acquire).is_null())
        && Instant::now() < end
    {
        std::thread::sleep(Duration::from_micros(20));
    }
    Some(hold)
}

impl ForkHold {
    /// In the parent after fork: the workers go on.
    pub fn release(self) {
        for s in &self.slots {
            s.release.store(true, Ordering::Release);
        }
        for h in self.helpers {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests;
