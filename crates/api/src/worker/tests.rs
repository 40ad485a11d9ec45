//! Posted jobs across threads: a panicking job, a poster that leaves, a
//! worker whose thread ended without `detach`.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use link::MemoryLink;
use runtime::{Engine, EngineConfig};
use stack::{Stack, StackConfig};

use super::*;

/// An engine with nothing on its link: enough to own a worker.
fn engine() -> Box<dyn Driver> {
    let (a, _b) = MemoryLink::pair(1500, 64);
    Box::new(Engine::new(
        Stack::new(StackConfig::default()),
        vec![a],
        EngineConfig::default(),
    ))
}

/// The thread that ran a panicking job goes on (it may itself be waiting
/// on a job posted elsewhere, whose closure lives on its stack: unwound,
/// that closure would be freed while the other worker still points to
/// it); the panic is raised again in the job's poster.
#[test]
fn a_panic_in_a_posted_job_reaches_its_poster_not_the_thread_that_ran_it() {
    // B owns W1 and holds it until released: A's call on W1 is posted and
    // waits.
    let (w1_tx, w1_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let b = thread::spawn(move || {
        attach(engine());
        with_current(|w| {
            w1_tx.send(Arc::clone(&w.shared)).unwrap();
            release_rx.recv().unwrap();
        })
        .unwrap();
        detach();
    });
    let w1 = w1_rx.recv().unwrap();
    // A owns WA and, while it waits on W1, serves WA's queue.
    let (wa_tx, wa_rx) = mpsc::channel();
    let a = thread::spawn(move || {
        attach(engine());
        wa_tx.send(shared(current_id()).unwrap()).unwrap();
        let r = run_on(&w1, |_| 7);
        detach();
        r
    });
    let wa = wa_rx.recv().unwrap();
    // C posts a panicking job to WA from inside a call on its own worker
    // (so it is queued, never run in place): A runs it.
    let c = thread::spawn(move || {
        attach(engine());
        let _ = with_current(|_| run_on(&wa, |_| -> u8 { panic!("the job's own panic") }));
    });
    let payload = c.join().expect_err("the poster sees its job's panic");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the job's own panic"));
    release_tx.send(()).unwrap();
    assert_eq!(
        a.join().expect("the thread that ran the job goes on"),
        Ok(7)
    );
    b.join().unwrap();
}

/// A job whose poster has left (returned or unwound) is skipped: its
/// closure is never called.
#[test]
fn a_job_whose_poster_left_is_not_run() {
    attach(engine());
    let called = AtomicBool::new(false);
    with_current(|w| {
        let mut job = |_: &mut Worker| called.store(true, Ordering::Relaxed);
        let job: &mut (dyn FnMut(&mut Worker) + Send + '_) = &mut job;
        // SAFETY: only the lifetime is erased; the slot is emptied (the
        // revoke below) before the closure goes out of scope.
        let run: Lent =
            unsafe { std::mem::transmute(job as *mut (dyn FnMut(&mut Worker) + Send + '_)) };
        let slot = Arc::new(JobSlot {
            run: Mutex::new(Some(run)),
        });
        let (done, finished) = sync_channel(1);
        w.shared
            .post(Job {
                slot: Arc::clone(&slot),
                done,
            })
            .unwrap();
        drop(Revoke(&slot));
        assert!(w.run_jobs());
        assert!(matches!(finished.try_recv(), Ok(Ok(()))));
    })
    .unwrap();
    assert!(!called.load(Ordering::Relaxed));
    detach();
}

/// A worker whose thread ended without `detach` leaves the registry, and a
/// call posted to it fails at once (EBADF) instead of waiting for ever.
#[test]
fn a_worker_whose_thread_ended_without_detach_takes_no_calls() {
    let dead = thread::spawn(|| {
        attach(engine());
        shared(current_id()).unwrap()
    })
    .join()
    .unwrap();
    assert!(shared(dead.id).is_none(), "left the registry");
    assert!(registry().iter().all(|w| w.id != dead.id));
    // From inside a call on a worker of its own, a thread posts (it never
    // runs another worker in place): the post must fail, not wait.
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        attach(engine());
        let r = with_current(|_| run_on(&dead, |_| 1u8));
        detach();
        tx.send(r).unwrap();
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a call on a gone worker returns");
    assert_eq!(r, Ok(Err(Errno::EBADF)));
}
