//! The differential API fuzzer: a sequence of socket, epoll and poll
//! calls on IPv4 and IPv6 (dual-stack) sockets (decoded from bytes, see
//! [`ops`]) runs once against the Linux
//! kernel over loopback and once against ustack (two engines joined by a
//! memory link, through the socket layer every way in wraps), and what
//! each call returned (value, errno, bytes received, readiness) must be
//! the same.  `fuzz/fuzz_targets/api_diff.rs` runs it under libFuzzer;
//! `tests/corpus.rs` replays the kept corpus (`fuzz/seeds/api_diff`) on
//! stable Rust.  Both need root (a network namespace for the kernel's
//! side, so that its ports are the sequence's own).
//!
//! # What is compared, and what differs by design
//!
//! Each call's line in the trace (`run.rs`) is written in words both
//! implementations share; the list below is every place where the runner
//! looks away or steers, and why.  Everything else must match.
//!
//! - **Names, not numbers**: fds are handles (`s0`.., `e0`..), our
//!   addresses `LOCAL` (the kernel's 127.0.0.1, ustack's 10.99.1.x),
//!   `LOCAL6` (::1, fd99:1::x) and `::ffff:LOCAL` (mapped), the
//!   sequence's ports `P0`..`P2`, ephemeral ports `EPH` (each picks its
//!   own), bytes received a hash.  epoll's events are listed in handle
//!   order (each kernel orders its ready list its own way), and a wait
//!   asks for more events than there are handles, so none is left out by
//!   that order.
//! - **Buffer sizes**: SO_RCVBUF and SO_SNDBUF are set only to sizes no
//!   sequence fills and read back without their value (Linux doubles what
//!   it is given; the defaults differ); at most 64 calls of at most 255
//!   bytes never fill a default buffer on either side, so no send is cut
//!   short by a size.
//! - **Topology**: the kernel's client and server are one host (127.0.0.1),
//!   ustack's two (a host does not talk to itself).  A connect or a sendto
//!   to the server's address from a socket already on the server's side
//!   (bound, listening, accepted), and a sendto to the last peer seen from
//!   one on the client's side, are not made on either side; the trace says so.
//! - **A failed connection's port**: bind on a stream socket after a
//!   connect is made only once connect() reported the connection's failure.
//!   Linux frees the port when the connection ends, so its bind works
//!   before any report; ustack frees it when connect() reports the failure
//!   (the socket's pending error lives on the connection until then).
//! - **Open: a listener shut both ways before it listened**: shutdown()
//!   on an unconnected stream socket says ENOTCONN but takes effect, and
//!   the connections it accepts inherit it.  Data from the peer then
//!   resets such a connection on Linux; ustack queues it.  So accept is
//!   not made on such a listener (found by `make fuzz-short`'s run; to be
//!   fixed in the stack, then this steer goes).
//! - **Open, not steered** (libFuzzer, `make fuzz-api`, finds it within a
//!   minute): shutdown() of a socket in SYN-SENT disconnects it on both,
//!   but Linux's tcp_disconnect leaves ECONNRESET pending (poll says
//!   ERR|HUP), ustack no error (HUP).
//! - **A UDP port at the first datagram**: Linux gives a UDP socket a
//!   port before it looks at a send, so even a failed one (no
//!   destination, MSG_OOB) leaves it bound; ustack binds at the first
//!   datagram that goes out, on the engine that reaches the destination
//!   (a failed send must not pin a socket to one engine of several).  So
//!   bind and getsockname on such a socket are not made until a send
//!   succeeds.
//! - **TCP_MAXSEG of a connection**: Linux reports the MSS the
//!   connection sends, which the path's MTU decides (loopback's 65536,
//!   ustack's link 1500 here); on a socket that has had a connection it
//!   is compared only when it is a value the sequence set, before one
//!   always (the value set, or 536).
//! - **Blocking**: every socket is non-blocking (SOCK_NONBLOCK, accept4
//!   with it, F_SETFL keeping O_NONBLOCK): a blocking call with nothing
//!   to come waits for ever on both.  epoll_wait waits 0 or 1 ms.
//! - **Timing**: loopback delivers inside the sending call; ustack's
//!   engines are stepped after each call until quiet.  When the kernel
//!   defers its receive work (to ksoftirqd on a loaded machine) a call can
//!   see EAGAIN where it would have seen data; so a sequence that differs
//!   is run again on the kernel with 2 ms after every call, and only a
//!   difference from that run counts.
//! - **Settings, not behaviour**: ustack's engines here take Linux's
//!   TCP_KEEPCNT default (9; ustack's is FreeBSD's 8, `net.inet.tcp.keepcnt`)
//!   and acknowledge at once (`delayed_ack` off): loopback's TCP is in
//!   quick-ACK mode at a connection's start, so a second small write is
//!   not held by Nagle there, and here would be, for the delayed-ACK
//!   timeout.
//! - **TIME-WAIT across sequences**: every sequence gets ports no earlier
//!   one used on the kernel (a fresh namespace when they run out) and a
//!   fresh pair of ustack engines.

pub mod kernel;
pub mod ops;
mod run;
pub mod seeds;
pub mod sys;
pub mod ustack;

use std::cell::RefCell;
use std::fmt;

pub use ops::{decode, encode, Op, PORTS};

/// Where the two traces part.
#[derive(Debug)]
pub struct Divergence {
    pub ustack: Vec<String>,
    pub linux: Vec<String>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "ustack and Linux differ:")?;
        let n = self.ustack.len().max(self.linux.len());
        for i in 0..n {
            let u = self.ustack.get(i).map_or("(none)", |s| s.as_str());
            let l = self.linux.get(i).map_or("(none)", |s| s.as_str());
            if u == l {
                writeln!(f, "   {u}")?;
            } else {
                writeln!(f, "!! ustack: {u}\n!! linux:  {l}")?;
            }
        }
        Ok(())
    }
}

thread_local! {
    /// The kernel side: this thread's network namespace and its ports.
    static KERNEL: RefCell<Option<kernel::Kernel>> = const { RefCell::new(None) };
}

/// The trace of `ops` on the Linux kernel (in this thread's namespace).
pub fn run_linux(ops: &[Op], slow: bool) -> Vec<String> {
    KERNEL.with(|k| {
        let mut k = k.borrow_mut();
        let k = k.get_or_insert_with(kernel::Kernel::enter);
        k.begin();
        run::Runner::new(k, slow).run(ops)
    })
}

/// The trace of `ops` on a fresh pair of ustack engines.
pub fn run_ustack(ops: &[Op]) -> Vec<String> {
    let mut u = ustack::Ustack::begin();
    run::Runner::new(&mut u, false).run(ops)
}

/// Runs `ops` on both and compares (see the crate's documentation).
pub fn check(ops: &[Op]) -> Result<(), Divergence> {
    let linux = run_linux(ops, false);
    let ustack = run_ustack(ops);
    if linux == ustack {
        return Ok(());
    }
    let linux = run_linux(ops, true);
    if linux == ustack {
        return Ok(());
    }
    Err(Divergence { ustack, linux })
}
