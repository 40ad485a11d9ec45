//! Sockets for tasks: [`TcpListener`], [`TcpStream`], [`UdpSocket`].
//!
//! Each is a non-blocking socket of the socket layer (`api`), watched by
//! the runtime's reactor.  An operation calls the socket layer at once;
//! when it says EAGAIN the task waits for the socket's next event in that
//! direction and tries again.  Errors are the socket layer's Linux errno
//! values as `io::Error`, so their `kind()` is what std gives for the
//! kernel's (ECONNREFUSED: `ConnectionRefused`, ...).

mod tcp;
mod udp;

pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;

use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::task::{Context, Poll};

use api::consts::*;
use api::Errno;

use crate::executor;
use crate::reactor::Dir;

/// A socket-layer fd owned by a task's socket object: registered with the
/// thread's reactor, closed on drop.  Not `Send`: its waiters live in this
/// thread's reactor.
pub(crate) struct Socket {
    fd: RawFd,
    _thread_bound: PhantomData<*const ()>,
}

impl Socket {
    /// A new non-blocking socket of type `ty` (SOCK_STREAM, SOCK_DGRAM)
    /// for addresses like `addr`: AF_INET for IPv4, AF_INET6 for IPv6
    /// (which reaches IPv4 too, through IPv4-mapped addresses).
    pub(crate) fn new(ty: i32, addr: &SocketAddr) -> io::Result<Socket> {
        let domain = if addr.is_ipv4() { AF_INET } else { AF_INET6 };
        let fd = api::socket(domain, ty | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)?;
        Socket::adopt(fd)
    }

    /// Takes `fd` (a non-blocking socket of this thread's worker) and
    /// registers it; closes it when that fails.
    pub(crate) fn adopt(fd: RawFd) -> io::Result<Socket> {
        let sock = Socket {
            fd,
            _thread_bound: PhantomData,
        };
        let core = executor::current().ok_or_else(no_runtime)?;
        core.reactor.borrow_mut().register(fd)?;
        Ok(sock)
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    /// Runs `op` now; when it says EAGAIN, leaves the task's waker for the
    /// socket's next event in direction `dir`.
    pub(crate) fn poll_io<T>(
        &self,
        cx: &mut Context<'_>,
        dir: Dir,
        op: impl FnOnce(RawFd) -> api::Result<T>,
    ) -> Poll<io::Result<T>> {
        match op(self.fd) {
            Err(Errno::EAGAIN) => {
                let Some(core) = executor::current() else {
                    return Poll::Ready(Err(no_runtime()));
                };
                core.reactor.borrow_mut().wait_for(self.fd, dir, cx.waker());
                Poll::Pending
            }
            r => Poll::Ready(r.map_err(io::Error::from)),
        }
    }

    /// `op` until it does not say EAGAIN, waiting for events in `dir`.
    pub(crate) async fn io<T>(
        &self,
        dir: Dir,
        mut op: impl FnMut(RawFd) -> api::Result<T>,
    ) -> io::Result<T> {
        std::future::poll_fn(|cx| self.poll_io(cx, dir, &mut op)).await
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(api::getsockname(self.fd)?)
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(api::getpeername(self.fd)?)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Some(core) = executor::current() {
            if let Ok(mut r) = core.reactor.try_borrow_mut() {
                r.deregister(self.fd);
            }
        }
        // Nothing to tell anyone about a failed close: the fd is gone.
        let _ = api::close(self.fd);
    }
}

fn no_runtime() -> io::Error {
    io::Error::other("no rt::Runtime on this thread")
}
