//! Workers: the engines of one thread and every object (socket, epoll,
//! kqueue) that lives on them, plus the request queue through which other
//! threads reach them.
//!
//! A worker is thread-local: its thread calls into it directly (run to
//! completion).  Another thread posts a job on the worker's request queue
//! and waits for it (run to wait); the worker runs posted jobs on every
//! step of its loop.  The job borrows the caller's buffers: the caller
//! waits until the job has run or been dropped, so the borrow outlives
//! every use (see [`run_on`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use stack::SocketHandle;

use crate::driver::Driver;
use crate::dup::Dups;
use crate::epoll::Epoll;
use crate::errno::{Errno, Result};
use crate::fdtable::{self, Entry, Kind};
use crate::kqueue::Kqueue;
use crate::os;
use crate::socket::Socket;
use crate::stack_ip;

/// One engine of a worker and the socket layer's view of its sockets.
pub(crate) struct EngineSlot {
    pub driver: Box<dyn Driver>,
    /// The fds of each stack socket (several for a SO_REUSEPORT group).
    pub fds: HashMap<SocketHandle, Vec<RawFd>>,
    /// TCP sockets holding a port by bind(), listen() or connect() from a
    /// bound address: port -> fds.
    pub tcp_binds: HashMap<u16, Vec<RawFd>>,
    /// Bound UDP sockets by local address (for SO_REUSEADDR/PORT groups).
    pub udp_binds: HashMap<SocketAddr, SocketHandle>,
}

/// A ustack object behind an fd.
pub(crate) enum Object {
    Socket(Box<Socket>),
    Epoll(Box<Epoll>),
    Kqueue(Box<Kqueue>),
}

/// A job posted by another thread.
struct Job {
    /// The caller's closure; the caller waits until `done` is sent or
    /// dropped, so the pointer stays valid while the job exists.
    run: *mut (dyn FnMut(&mut Worker) + Send),
    done: SyncSender<()>,
}

// SAFETY: the closure behind `run` is `Send` (run_on requires it) and is
// called only by the worker that receives the job, while its owner waits.
unsafe impl Send for Job {}

/// The part of a worker other threads see.
pub(crate) struct WorkerShared {
    pub id: u32,
    jobs: Mutex<Vec<Job>>,
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
    fn post(&self, job: Job) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.push(job);
        self.has_jobs.store(true, Ordering::SeqCst);
        drop(jobs);
        // The worker sets `sleeping` before it looks at `has_jobs` a last
        // time and sleeps: either it sees the job, or this sees it asleep.
        if self.sleeping.load(Ordering::SeqCst) && self.jobs_wake >= 0 {
            let one = 1u64;
            // SAFETY: writes 8 bytes from a live u64 to the worker's eventfd.
            unsafe { libc::write(self.jobs_wake, (&one as *const u64).cast(), 8) };
        }
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

    fn bump(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            *self.progress.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            self.progressed.notify_all();
        }
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
    pub(crate) scratch: Vec<u8>,
}

static REGISTRY: Mutex<Vec<Option<Arc<WorkerShared>>>> = Mutex::new(Vec::new());

thread_local! {
    static CURRENT: RefCell<Option<Box<Worker>>> = const { RefCell::new(None) };
    static CURRENT_ID: Cell<u32> = const { Cell::new(0) };
}

fn registry() -> std::sync::MutexGuard<'static, Vec<Option<Arc<WorkerShared>>>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of the calling thread's worker (0: none).
pub(crate) fn current_id() -> u32 {
    CURRENT_ID.try_with(|c| c.get()).unwrap_or(0)
}

/// The worker with `id`, if it is alive.
pub(crate) fn shared(id: u32) -> Option<Arc<WorkerShared>> {
    registry()
        .get((id as usize).checked_sub(1)?)
        .and_then(|w| w.clone())
}

/// The worker that takes objects created by threads that have none.
pub(crate) fn default_worker() -> Option<Arc<WorkerShared>> {
    registry().iter().flatten().next().cloned()
}

/// Runs `f` on the calling thread's worker.
pub(crate) fn with_current<R>(f: impl FnOnce(&mut Worker) -> R) -> Result<R> {
    // A thread past its thread-locals' end (an exit handler) has no
    // worker any more.
    CURRENT
        .try_with(|c| {
            let mut w = c.try_borrow_mut().map_err(|_| Errno(libc::EDEADLK))?;
            match w.as_mut() {
                Some(w) => Ok(f(w)),
                None => Err(Errno::EBADF),
            }
        })
        .unwrap_or(Err(Errno::EBADF))
}

/// Adds an engine to the calling thread's worker (creating the worker on
/// the first one).  Returns the worker's id.
pub(crate) fn attach(mut driver: Box<dyn Driver>) -> u32 {
    driver.announce();
    let slot = EngineSlot {
        driver,
        fds: HashMap::new(),
        tcp_binds: HashMap::new(),
        udp_binds: HashMap::new(),
    };
    CURRENT.with(|c| {
        let mut cur = c.borrow_mut();
        if let Some(w) = cur.as_mut() {
            w.engines.push(slot);
            return w.shared.id;
        }
        let mut reg = registry();
        let index = reg.iter().position(|w| w.is_none()).unwrap_or(reg.len());
        let shared = Arc::new(WorkerShared {
            id: index as u32 + 1,
            jobs: Mutex::new(Vec::new()),
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
        });
        if index == reg.len() {
            reg.push(Some(shared.clone()));
        } else {
            reg[index] = Some(shared.clone());
        }
        let id = shared.id;
        *cur = Some(Box::new(Worker {
            shared,
            engines: vec![slot],
            objects: Vec::new(),
            dups: Dups::default(),
            dirty: Vec::new(),
            ready_scratch: Vec::new(),
            scratch: Vec::new(),
        }));
        CURRENT_ID.with(|i| i.set(id));
        id
    })
}

/// Tears down the calling thread's worker: every object on it is closed
/// (its fd number goes back to the kernel) and its engines are dropped.
pub(crate) fn detach() {
    let worker = CURRENT.with(|c| c.borrow_mut().take());
    CURRENT_ID.with(|i| i.set(0));
    let Some(mut w) = worker else { return };
    registry()[w.shared.id as usize - 1] = None;
    w.close_all();
    // Jobs still queued are dropped unrun: their callers see EBADF.
    let jobs = std::mem::take(&mut *w.shared.jobs.lock().unwrap_or_else(|e| e.into_inner()));
    drop(jobs);
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
    let mut f = Some(f);
    let mut out: Option<R> = None;
    let (done, finished) = sync_channel(1);
    {
        let mut job = |w: &mut Worker| {
            if let Some(f) = f.take() {
                out = Some(f(w));
            }
        };
        let job: &mut (dyn FnMut(&mut Worker) + Send + '_) = &mut job;
        // SAFETY: only the lifetime is erased.  The worker calls the
        // closure only while the job exists, and this function does not
        // return (nor unwind: nothing below panics) before `finished`
        // reports that the job ran or was dropped.
        let run: *mut (dyn FnMut(&mut Worker) + Send + 'static) =
            unsafe { std::mem::transmute(job as *mut (dyn FnMut(&mut Worker) + Send + '_)) };
        target.post(Job { run, done });
        loop {
            match finished.recv_timeout(Duration::from_millis(1)) {
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    // A worker thread waiting on another keeps serving its
                    // own queue, so two workers calling each other do not
                    // wait for ever.
                    let _ = with_current(|w| w.run_jobs());
                }
            }
        }
    }
    out.ok_or(Errno::EBADF)
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

    /// Runs the jobs other threads posted.
    pub(crate) fn run_jobs(&mut self) -> bool {
        if !self.shared.has_jobs.load(Ordering::Acquire) {
            return false;
        }
        let jobs = {
            let mut q = self.shared.jobs.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.has_jobs.store(false, Ordering::Release);
            std::mem::take(&mut *q)
        };
        for job in jobs {
            // SAFETY: the poster waits on `done` (below) before its
            // closure goes out of scope; see `run_on`.
            unsafe { (*job.run)(self) };
            let _ = job.done.send(());
        }
        true
    }

    /// One step of the loop: a turn of every engine, posted jobs, and the
    /// readiness of the sockets that changed.  Returns whether anything
    /// happened.
    pub(crate) fn step(&mut self) -> bool {
        let mut turned = false;
        for e in &mut self.engines {
            turned |= e.driver.turn();
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

    /// Sleeps as the engines' own loops do when a step found nothing.
    pub(crate) fn idle(&mut self) {
        let _ = crate::poll::sleep(self, &mut [], None);
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

/// A socket a child inherited by fork that it can set up again on an
/// engine of its own: a TCP listener or a bound UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inherited {
    pub fd: RawFd,
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
    let worker = CURRENT.try_with(|c| c.borrow_mut().take()).ok().flatten();
    let _ = CURRENT_ID.try_with(|i| i.set(0));
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
            // SAFETY: the worker's thread published this pointer to its
            // own worker from inside a job and then waited, touching
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
/// their fds added to `fds`.  Its listeners and bound UDP sockets go to
/// `inherited`.
fn take_apart(w: &mut Worker, fds: &mut Vec<RawFd>, inherited: &mut Vec<Inherited>) {
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
            domain: s.domain.af(),
            stream: s.stream,
            local: crate::family::present(s.domain, local),
            v6only: s.opts.v6only,
            nonblock: s.nonblock,
            reuseaddr: s.opts.reuseaddr,
            reuseport: s.opts.reuseport,
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
    let workers: Vec<Arc<WorkerShared>> = registry().iter().flatten().cloned().collect();
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
