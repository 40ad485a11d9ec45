//! Zero-copy send: the application writes its data straight into a TCP
//! connection's send buffer ([`zc_send_reserve`]) and then says how much
//! it wrote ([`zc_send_commit`]), instead of handing a buffer that `write`
//! copies.
//!
//! Run to completion only: the region is memory of the engine's stack, so
//! only code on the engine's own thread may hold it; from any other
//! thread both calls fail with EOPNOTSUPP.
//!
//! The region stays valid, in place, until the commit, the next
//! reservation, a `write`/`send` on the socket, or its `close`; segments
//! arriving and leaving meanwhile (engine steps) do not move it.

use std::os::fd::RawFd;
use std::ptr::NonNull;

use stack::{SocketError, SocketHandle, TcpState};

use crate::calls::{blocking, Dir, Owner};
use crate::driver;
use crate::errno::{Errno, Result};
use crate::sock_ops::parts;
use crate::socket::{self, State};
use crate::worker::Worker;

/// A writable region of a connection's send buffer (see the module docs
/// for how long it stays valid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZcSendBuf {
    /// The first byte.
    pub ptr: NonNull<u8>,
    /// Bytes that may be written (at least one, unless zero were asked).
    pub len: usize,
}

// SAFETY: a ZcSendBuf is an address and a length; the socket layer only
// makes one for a caller on the engine's own thread (the run-to-completion
// path), and the bytes it names are only touched by that caller.  Send is
// needed to carry it out of the worker call that made it.
unsafe impl Send for ZcSendBuf {}

/// Lends a writable region of at most `want` bytes of the send buffer of
/// TCP socket `fd`, right after the data already queued (shorter than
/// asked when the buffer's free room wraps around its end: commit, then
/// ask again for the rest).  Write the data there, then [`zc_send_commit`].
///
/// Errors: EBADF (no such fd), ENOTSOCK (a kernel fd), EOPNOTSUPP (a UDP
/// socket, or a thread that is not the socket's engine thread), ENOTCONN
/// (not connected), EPIPE (after shutdown(SHUT_WR) or the connection's
/// end; no SIGPIPE), the pending error (ECONNRESET, ...), EAGAIN (still
/// connecting, or the send buffer is full, on a non-blocking socket; a
/// blocking one drives the engine until there is room, or SO_SNDTIMEO
/// passes).
pub fn zc_send_reserve(fd: RawFd, want: usize) -> Result<ZcSendBuf> {
    let owner = Owner::of(fd)?;
    if !matches!(owner, Owner::Local) {
        return Err(Errno::EOPNOTSUPP);
    }
    blocking(&owner, fd, Dir::Write, 0, |w| w.zc_reserve(w.key(fd), want))
}

/// Sends the first `n` bytes of the region [`zc_send_reserve`] lent:
/// they join the stream as if written, and the region is given back.
/// Returns `n`.  EINVAL when `n` is more than was lent (or nothing was:
/// the loan ended with a `write`, another reservation, or a commit); the
/// errors of [`zc_send_reserve`] otherwise (nothing is sent).
pub fn zc_send_commit(fd: RawFd, n: usize) -> Result<usize> {
    let owner = Owner::of(fd)?;
    if !matches!(owner, Owner::Local) {
        return Err(Errno::EOPNOTSUPP);
    }
    owner.exec(|w| w.zc_commit(w.key(fd), n))?
}

/// [`zc_send_reserve`] of at most `want` bytes, `fill` on the region (it
/// writes there and says how many bytes it wrote) and [`zc_send_commit`]
/// of those bytes, in one hold of the worker: sendfile's path, a file read
/// straight into the send buffer with one look at the socket, not two.
/// Returns what was sent (0 when `fill` wrote nothing); the errors of
/// [`zc_send_reserve`] (a blocking socket waits for room as there), or
/// `fill`'s error, with nothing sent, as `Ok(Err(..))`.
pub fn zc_send_fill(
    fd: RawFd,
    want: usize,
    mut fill: impl FnMut(&mut [u8]) -> Result<usize> + Send,
) -> Result<Result<usize>> {
    let owner = Owner::of(fd)?;
    if !matches!(owner, Owner::Local) {
        return Err(Errno::EOPNOTSUPP);
    }
    blocking(&owner, fd, Dir::Write, 0, |w| {
        w.zc_fill(w.key(fd), want, &mut fill)
    })
}

impl Worker {
    /// The connection of a TCP socket `fd` that may send, with the
    /// errors of a zero-copy call that finds it may not.
    fn zc_connection(&mut self, fd: RawFd) -> Result<SocketHandle> {
        let sock = self.socket(fd)?;
        if !sock.stream {
            return Err(Errno::EOPNOTSUPP);
        }
        let h = match sock.state {
            State::Tcp { h, .. } => h,
            _ => return Err(Errno::ENOTCONN),
        };
        let shut_wr = sock.shut_wr;
        let (_, d) = parts(self, fd)?;
        let stack = d.stack_mut();
        if let Some(e) = stack.tcp_peek_error(h)? {
            let _ = stack.tcp_take_error(h);
            return Err(e.into());
        }
        if shut_wr {
            return Err(Errno::EPIPE);
        }
        match stack.tcp_state(h)? {
            TcpState::SynSent | TcpState::SynReceived => Err(Errno::EAGAIN),
            TcpState::Closed => Err(Errno::EPIPE),
            _ => Ok(h),
        }
    }

    fn zc_reserve(&mut self, fd: RawFd, want: usize) -> Result<ZcSendBuf> {
        let h = self.zc_connection(fd)?;
        let (_, d) = parts(self, fd)?;
        match d.stack_mut().tcp_send_reserve(h, want) {
            Ok(region) => Ok(ZcSendBuf {
                ptr: NonNull::new(region.as_mut_ptr()).unwrap_or(NonNull::dangling()),
                len: region.len(),
            }),
            Err(e) => Err(send_errno(e)),
        }
    }

    /// See [`zc_send_fill`]: the outer error is the socket's (EAGAIN
    /// waits), the inner one `fill`'s.
    fn zc_fill(
        &mut self,
        fd: RawFd,
        want: usize,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<Result<usize>> {
        let h = self.zc_connection(fd)?;
        let (sock, d) = parts(self, fd)?;
        let region = d
            .stack_mut()
            .tcp_send_reserve(h, want)
            .map_err(send_errno)?;
        let lent = region.len();
        let got = match fill(region) {
            Ok(g) if g <= lent => g,
            r => {
                // Nothing sent: the loan given back.
                let _ = driver::call(d, |now, stack, sink| stack.tcp_send_commit(now, h, 0, sink));
                return Ok(Err(r.err().unwrap_or(Errno::EINVAL)));
            }
        };
        let r = commit(d, h, got);
        if let Ok(n) = r {
            sock.totals.written += n as u64;
        }
        let still = socket::writable_after_send(d.stack_mut(), h, r.is_ok());
        self.touch_after_send(fd, still);
        Ok(Ok(r.map_err(send_errno)?))
    }

    fn zc_commit(&mut self, fd: RawFd, n: usize) -> Result<usize> {
        let h = self.zc_connection(fd)?;
        let (sock, d) = parts(self, fd)?;
        let r = commit(d, h, n);
        if let Ok(n) = r {
            sock.totals.written += n as u64;
        }
        let still = socket::writable_after_send(d.stack_mut(), h, r.is_ok());
        self.touch_after_send(fd, still);
        r.map_err(send_errno)
    }
}

/// A stack error of a send as write(2) reports it.
fn send_errno(e: SocketError) -> Errno {
    match e {
        SocketError::NotConnected => Errno::EPIPE,
        e => e.into(),
    }
}

/// `Stack::tcp_send_commit`, reading the clock only when output follows
/// (not while TCP_CORK holds the data: nginx's sendfile).
fn commit(
    d: &mut dyn driver::Driver,
    h: SocketHandle,
    n: usize,
) -> std::result::Result<usize, SocketError> {
    match driver::call_stack(d, |stack| stack.tcp_send_commit_queue(h, n)) {
        Ok((n, true)) => driver::call(d, |now, stack, sink| {
            stack.tcp_send_commit_push(now, h, sink)
        })
        .map(|()| n),
        r => r.map(|(n, _)| n),
    }
}
