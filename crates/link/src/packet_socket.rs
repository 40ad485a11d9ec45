//! AF_PACKET sockets made ahead of need.  Making one takes CAP_NET_RAW;
//! binding it to an interface and joining a fanout group do not.  A
//! program that drops its privileges before it first uses the network
//! (nginx's workers switch user, Knot drops its capabilities) gets its
//! packet sockets made just before the drop and used afterwards.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;

use crate::ifreq::cvt;

static STASH: Mutex<Vec<OwnedFd>> = Mutex::new(Vec::new());

fn stash() -> std::sync::MutexGuard<'static, Vec<OwnedFd>> {
    STASH.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new AF_PACKET raw socket with protocol 0 (it receives nothing until
/// bound), close-on-exec and non-blocking.
fn new_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: `raw` is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Makes packet sockets now, until `n` wait, for links opened later by
/// this process.
pub fn stash_packet_sockets(n: usize) -> io::Result<()> {
    let mut s = stash();
    while s.len() < n {
        s.push(new_socket()?);
    }
    Ok(())
}

/// Closes the sockets made ahead: a child after fork must make its own
/// (a socket shared with its parent would be one fanout member for both).
pub fn clear_packet_socket_stash() {
    stash().clear();
}

/// A packet socket with protocol 0: one made ahead if there is one, else
/// a new one.
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    match stash().pop() {
        Some(fd) => Ok(fd),
        None => new_socket(),
    }
}
