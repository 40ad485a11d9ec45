//! UDP: datagrams to and from any peer, or a connected peer.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::task::{Context, Poll};

use api::consts::*;

use super::Socket;
use crate::reactor::Dir;

/// A UDP socket.
pub struct UdpSocket {
    sock: Socket,
}

/// The sender of a datagram (the socket layer always knows it for UDP).
fn source(from: Option<SocketAddr>) -> SocketAddr {
    from.unwrap_or(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
}

impl UdpSocket {
    /// A socket bound to `addr` (port 0: an ephemeral port).  Bound to
    /// an IPv6 address it is AF_INET6: on `[::]` it takes IPv4 datagrams
    /// too (their senders IPv4-mapped) and sends to IPv4 peers given
    /// either way.
    pub fn bind(addr: impl Into<SocketAddr>) -> io::Result<UdpSocket> {
        let addr = addr.into();
        let sock = Socket::new(SOCK_DGRAM, &addr)?;
        api::bind(sock.fd(), &addr)?;
        Ok(UdpSocket { sock })
    }

    /// Sends `buf` as one datagram to `target`.
    pub async fn send_to(&self, buf: &[u8], target: impl Into<SocketAddr>) -> io::Result<usize> {
        let target = target.into();
        self.sock
            .io(Dir::Write, |fd| api::sendto(fd, buf, 0, Some(&target)))
            .await
    }

    /// The next datagram, into `buf` (the rest of a longer one is lost, as
    /// with the kernel's recvfrom), and its sender.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.sock
            .poll_io(cx, Dir::Read, |fd| api::recvfrom(fd, buf, 0))
            .map(|r| r.map(|(n, from)| (n, source(from))))
    }

    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        self.sock
            .poll_io(cx, Dir::Write, |fd| api::sendto(fd, buf, 0, Some(&target)))
    }

    /// Sets the peer: [`send`](Self::send) goes there and only its
    /// datagrams are received.
    pub fn connect(&self, addr: impl Into<SocketAddr>) -> io::Result<()> {
        let addr = addr.into();
        Ok(api::connect(self.sock.fd(), &addr)?)
    }

    /// Sends to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.io(Dir::Write, |fd| api::send(fd, buf, 0)).await
    }

    /// Receives from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.io(Dir::Read, |fd| api::recv(fd, buf, 0)).await
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.sock.peer_addr()
    }
}
