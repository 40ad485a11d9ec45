//! ustack's async Rust API: an executor per engine thread, running inside
//! the engine's poll loop, so that code reads straight-line (like Photon's
//! coroutines) while the stack runs to completion on the same thread.
//!
//! ```no_run
//! use futures_util::io::{AsyncReadExt, AsyncWriteExt};
//! # fn engine() -> runtime::Engine<link::MemoryLink> { unimplemented!() }
//!
//! api::attach(engine()); // this thread now drives the engine
//! rt::block_on(async {
//!     let listener = rt::TcpListener::bind(([0, 0, 0, 0], 7)).unwrap();
//!     loop {
//!         let (mut conn, _peer) = listener.accept().await.unwrap();
//!         rt::spawn(async move {
//!             let mut buf = [0u8; 4096];
//!             while let Ok(n @ 1..) = conn.read(&mut buf).await {
//!                 if conn.write_all(&buf[..n]).await.is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//! });
//! ```
//!
//! # One socket implementation
//!
//! The socket types are thin: every operation is a call of the socket
//! layer (`api`: POSIX semantics, Linux errno values), on a non-blocking
//! socket.  The executor learns which sockets became ready from the
//! socket layer's edge-triggered epoll, one instance per runtime, so a
//! turn costs nothing for sockets where nothing happened.
//!
//! # The loop
//!
//! [`Runtime::block_on`] alternates: poll the tasks that were woken, fire
//! the timers that expired, then `epoll_wait` on the socket layer, which
//! runs the engine (rx, stack, timers, tx) and, when no task is runnable,
//! waits as the engine's own loop does (`idle_sleep`) until the next
//! timer.  Tasks woken during a pass run after the engine's next turn, so
//! a task that never waits on the network (a `yield_now` loop) cannot
//! starve it.
//!
//! # Threads
//!
//! One [`Runtime`] per engine thread (a thread that called
//! `api::attach`); tasks, sockets and timers stay on it (they are not
//! `Send`).  Wakers are `Send`: a waker woken on another thread puts its
//! task on the run queue, seen within a few milliseconds (the loop's
//! longest wait).  With several engines (one per core), each engine's
//! thread runs a runtime of its own.
//!
//! # Traits
//!
//! [`TcpStream`] implements `futures-io`'s `AsyncRead` and `AsyncWrite`
//! (use `futures-util`'s `AsyncReadExt`/`AsyncWriteExt` for `read_exact`,
//! `write_all`, `copy`, `split`); with the cargo feature `tokio-io`, also
//! tokio's.  `&TcpStream` implements them too, so a reader and a writer
//! can share one stream.

#![forbid(unsafe_code)]

mod executor;
mod net;
mod reactor;
mod time;

pub use executor::{block_on, spawn, yield_now, JoinHandle, Runtime};
pub use net::{TcpListener, TcpStream, UdpSocket};
pub use time::{sleep, sleep_until, timeout, timeout_at, Elapsed, Sleep};
