//! TCP: a listener that accepts, a stream that connects, reads, writes
//! and shuts down; `futures-io`'s `AsyncRead`/`AsyncWrite` on the stream
//! (and on `&TcpStream`, so one task can read while another writes).

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use api::consts::*;
use api::{Errno, SendMsg};
use futures_io::{AsyncRead, AsyncWrite};

use super::Socket;
use crate::reactor::Dir;

/// How many connections may wait to be accepted (the stack caps it at
/// `kern.ipc.somaxconn`).
const BACKLOG: i32 = 1024;

/// A listening TCP socket.
pub struct TcpListener {
    sock: Socket,
}

impl TcpListener {
    /// Listens on `addr` (port 0: an ephemeral port; address 0.0.0.0: every
    /// IPv4 address of the engines; `[::]`: every address, IPv4 ones too,
    /// whose peers are then shown IPv4-mapped).  SO_REUSEADDR is set, as
    /// servers do, so a restarted server does not wait for old
    /// connections' TIME-WAIT.
    pub fn bind(addr: impl Into<SocketAddr>) -> io::Result<TcpListener> {
        let addr = addr.into();
        let sock = Socket::new(SOCK_STREAM, &addr)?;
        api::setsockopt_int(sock.fd(), SOL_SOCKET, SO_REUSEADDR, 1)?;
        api::bind(sock.fd(), &addr)?;
        api::listen(sock.fd(), BACKLOG)?;
        Ok(TcpListener { sock })
    }

    /// The next connection and its peer's address.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let r = self.sock.poll_io(cx, Dir::Read, |fd| {
            api::accept4(fd, SOCK_NONBLOCK | SOCK_CLOEXEC)
        });
        r.map(|r| {
            let (fd, peer) = r?;
            let stream = TcpStream {
                sock: Socket::adopt(fd)?,
            };
            Ok((stream, peer))
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }
}

/// A TCP connection.
pub struct TcpStream {
    sock: Socket,
}

impl TcpStream {
    /// Opens a connection to `addr`: the handshake runs in the engine
    /// while the task waits.  A refused connection is
    /// `ErrorKind::ConnectionRefused`; one nobody answers ends when the
    /// stack gives up on its SYNs (`ErrorKind::TimedOut`): wrap the call in
    /// [`crate::timeout`] to give up sooner.
    pub async fn connect(addr: impl Into<SocketAddr>) -> io::Result<TcpStream> {
        let addr = addr.into();
        let sock = Socket::new(SOCK_STREAM, &addr)?;
        match api::connect(sock.fd(), &addr) {
            Ok(()) => return Ok(TcpStream { sock }),
            Err(Errno::EINPROGRESS) => {}
            Err(e) => return Err(e.into()),
        }
        // Asked again, connect reports how the handshake stands: EALREADY
        // while it runs, then success or the connection's error.
        sock.io(Dir::Write, |fd| match api::connect(fd, &addr) {
            Err(Errno::EALREADY) => Err(Errno::EAGAIN),
            Err(Errno::EISCONN) => Ok(()),
            r => r,
        })
        .await?;
        Ok(TcpStream { sock })
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.peer_addr()
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Shuts down the reading side, the writing side (the peer gets a FIN
    /// once what is queued has gone), or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let how = match how {
            Shutdown::Read => SHUT_RD,
            Shutdown::Write => SHUT_WR,
            Shutdown::Both => SHUT_RDWR,
        };
        Ok(api::shutdown(self.sock.fd(), how)?)
    }

    /// TCP_NODELAY: small writes leave at once instead of waiting for the
    /// ACK of what is in flight (Nagle).
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        Ok(api::setsockopt_int(
            self.sock.fd(),
            IPPROTO_TCP,
            TCP_NODELAY,
            i32::from(on),
        )?)
    }

    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(api::getsockopt_int(self.sock.fd(), IPPROTO_TCP, TCP_NODELAY)? != 0)
    }

    /// Reads what has arrived, up to `buf.len()` bytes, waiting until
    /// something has; 0 is the end of the stream.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.io(Dir::Read, |fd| api::recv(fd, buf, 0)).await
    }

    /// Writes as much of `buf` as the send buffer takes, waiting until it
    /// takes something.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock
            .io(Dir::Write, |fd| api::send(fd, buf, MSG_NOSIGNAL))
            .await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf).await?;
            buf = &buf[n..];
        }
        Ok(())
    }

    fn poll_read_priv(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.sock.poll_io(cx, Dir::Read, |fd| api::recv(fd, buf, 0))
    }

    fn poll_read_vectored_priv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        self.sock.poll_io(cx, Dir::Read, |fd| api::readv(fd, bufs))
    }

    fn poll_write_priv(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.sock
            .poll_io(cx, Dir::Write, |fd| api::send(fd, buf, MSG_NOSIGNAL))
    }

    fn poll_write_vectored_priv(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.sock.poll_io(cx, Dir::Write, |fd| {
            api::sendmsg(fd, bufs, MSG_NOSIGNAL, &SendMsg::default())
        })
    }

    /// The close of `AsyncWrite`: the writing side is shut down (a FIN).
    fn poll_close_priv(&self) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(Shutdown::Write))
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_priv(cx, buf)
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_vectored_priv(cx, bufs)
    }
}

impl AsyncRead for &TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_priv(cx, buf)
    }

    fn poll_read_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_vectored_priv(cx, bufs)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_priv(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored_priv(cx, bufs)
    }

    /// Nothing is buffered above the socket: what was written is the
    /// stack's to send.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_close_priv()
    }
}

impl AsyncWrite for &TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_priv(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored_priv(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_close_priv()
    }
}

#[cfg(feature = "tokio-io")]
mod tokio_io {
    //! tokio's `AsyncRead`/`AsyncWrite` (cargo feature `tokio-io`), for
    //! code written against tokio's traits.

    use super::*;

    impl tokio::io::AsyncRead for TcpStream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let n = std::task::ready!(self.poll_read_priv(cx, buf.initialize_unfilled()))?;
            buf.advance(n);
            Poll::Ready(Ok(()))
        }
    }

    impl tokio::io::AsyncWrite for TcpStream {
        fn poll_write(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.poll_write_priv(cx, buf)
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            self.poll_write_vectored_priv(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.poll_close_priv()
        }
    }
}
