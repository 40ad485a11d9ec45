//! The executor and its timers, inside the engine loop.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn runtime_needs_an_engine_thread() {
    let e = rt::Runtime::new().err().expect("no engine attached");
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
}

#[test]
fn one_runtime_per_thread() {
    let net = net();
    let e = rt::Runtime::new().err().expect("a second runtime");
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
    assert_eq!(net.block_on(async { 7 }), 7);
}

#[test]
fn spawn_many_tasks_and_join_them() {
    let net = net();
    let polls = Rc::new(Cell::new(0u64));
    let total = net.block_on({
        let polls = polls.clone();
        async move {
            let handles: Vec<_> = (0..2000u64)
                .map(|i| {
                    let polls = polls.clone();
                    rt::spawn(async move {
                        // Each task is suspended a few times.
                        for _ in 0..(i % 4) {
                            polls.set(polls.get() + 1);
                            rt::yield_now().await;
                        }
                        i * 3
                    })
                })
                .collect();
            let mut sum = 0;
            for h in handles {
                sum += h.await;
            }
            sum
        }
    });
    assert_eq!(total, (0..2000u64).map(|i| i * 3).sum::<u64>());
    assert_eq!(polls.get(), (0..2000u64).map(|i| i % 4).sum::<u64>());
    assert_eq!(net.rt().tasks(), 0, "every task finished and was freed");
}

#[test]
fn spawned_tasks_run_while_block_on_waits_on_something_else() {
    let net = net();
    let log = Rc::new(RefCell::new(Vec::new()));
    let l = log.clone();
    net.rt().spawn(async move {
        l.borrow_mut().push("task ran");
    });
    // Not awaited by the main future: it runs because the loop runs it.
    net.block_on(rt::sleep(Duration::from_millis(5)));
    assert_eq!(*log.borrow(), vec!["task ran"]);
}

#[test]
fn sleeps_wake_in_deadline_order_and_not_early() {
    let net = net();
    let order = Rc::new(RefCell::new(Vec::new()));
    let start = Instant::now();
    net.block_on({
        let order = order.clone();
        async move {
            let handles: Vec<_> = [40u64, 10, 30, 0, 20, 10]
                .into_iter()
                .enumerate()
                .map(|(i, ms)| {
                    let order = order.clone();
                    rt::spawn(async move {
                        rt::sleep(Duration::from_millis(ms)).await;
                        let at = start.elapsed();
                        assert!(
                            at >= Duration::from_millis(ms),
                            "a {ms} ms sleep woke after {at:?}"
                        );
                        order.borrow_mut().push((ms, i));
                    })
                })
                .collect();
            for h in handles {
                h.await;
            }
        }
    });
    // Equal deadlines wake in the order they were set.
    assert_eq!(
        *order.borrow(),
        vec![(0, 3), (10, 1), (10, 5), (20, 4), (30, 2), (40, 0)]
    );
}

#[test]
fn timeout_fires_and_drops_the_future() {
    let net = net();
    let dropped = Rc::new(Cell::new(false));
    struct Flag(Rc<Cell<bool>>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let start = Instant::now();
    let r = net.block_on({
        let flag = Flag(dropped.clone());
        async move {
            rt::timeout(Duration::from_millis(20), async move {
                let _flag = flag;
                rt::sleep(Duration::from_secs(10)).await;
                "finished"
            })
            .await
        }
    });
    let took = start.elapsed();
    assert_eq!(r, Err(rt::Elapsed));
    assert!(dropped.get(), "the timed-out future was dropped");
    assert!(
        took >= Duration::from_millis(20) && took < Duration::from_secs(5),
        "took {took:?}"
    );
    let e: std::io::Error = rt::Elapsed.into();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
}

#[test]
fn timeout_does_not_fire_when_the_future_finishes_first() {
    let net = net();
    let r = net.block_on(async {
        let a = rt::timeout(Duration::from_secs(5), async {
            rt::sleep(Duration::from_millis(5)).await;
            1
        })
        .await;
        // A future that is ready at once never sees its timer.
        let b = rt::timeout(Duration::ZERO, async { 2 }).await;
        (a, b)
    });
    assert_eq!(r, (Ok(1), Ok(2)));
    // The 5 s timer was cancelled with its timeout: nothing keeps the
    // loop waiting for it (this would take 5 s otherwise).
    let start = Instant::now();
    net.block_on(rt::sleep(Duration::from_millis(1)));
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_yielding_task_does_not_starve_the_others() {
    let net = net();
    let spins = Rc::new(Cell::new(0u64));
    let stop = Rc::new(Cell::new(false));
    let spinner = net.rt().spawn({
        let (spins, stop) = (spins.clone(), stop.clone());
        async move {
            while !stop.get() {
                spins.set(spins.get() + 1);
                rt::yield_now().await;
            }
        }
    });
    // A sleeper and a network round trip both finish while it spins.
    net.block_on(async {
        rt::sleep(Duration::from_millis(10)).await;
        let sock = rt::UdpSocket::bind(server(9000)).unwrap();
        let peer = rt::UdpSocket::bind(([0, 0, 0, 0], 0)).unwrap();
        peer.send_to(b"x", server(9000)).await.unwrap();
        let mut b = [0u8; 4];
        let (n, _) = woken(
            "a datagram while another task spins",
            sock.recv_from(&mut b),
        )
        .await
        .unwrap();
        assert_eq!(&b[..n], b"x");
        stop.set(true);
        spinner.await;
    });
    assert!(spins.get() > 1, "the spinner ran {} times", spins.get());
}

#[test]
fn abort_drops_a_task_and_its_timer() {
    let net = net();
    let ran_on = Rc::new(Cell::new(false));
    let h = net.rt().spawn({
        let ran_on = ran_on.clone();
        async move {
            rt::sleep(Duration::from_secs(30)).await;
            ran_on.set(true);
        }
    });
    net.block_on(rt::sleep(Duration::from_millis(2)));
    assert_eq!(net.rt().tasks(), 1);
    assert!(!h.is_finished());
    h.abort();
    assert_eq!(net.rt().tasks(), 0);
    let start = Instant::now();
    net.block_on(rt::sleep(Duration::from_millis(2)));
    assert!(!ran_on.get());
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_waker_from_another_thread_wakes_its_task() {
    let net = net();
    let woke = net.block_on(async {
        let (tx, rx) = std::sync::mpsc::channel::<std::task::Waker>();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f2 = flag.clone();
        let t = std::thread::spawn(move || {
            let w = rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            f2.store(true, std::sync::atomic::Ordering::Release);
            w.wake();
        });
        let mut sent = Some(tx);
        std::future::poll_fn(|cx| {
            if flag.load(std::sync::atomic::Ordering::Acquire) {
                return std::task::Poll::Ready(());
            }
            if let Some(tx) = sent.take() {
                tx.send(cx.waker().clone()).unwrap();
            }
            std::task::Poll::Pending
        })
        .await;
        t.join().unwrap();
        true
    });
    assert!(woke);
}
