//! Sockets: the state the application reads and writes through.

mod conn_table;
pub mod datagram_ring;
pub mod listing;
mod posix;
pub(crate) mod table;
pub mod udp;

use core::fmt;

/// A socket's handle: a slot index and the slot's generation, so that a
/// handle to a closed socket never reaches the socket that reused its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketHandle {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl SocketHandle {
    /// The socket's place in the table: unique among open sockets and
    /// reused after a close (as a file descriptor is), so that a program
    /// can keep its per-socket state in an array indexed by it.
    pub fn slot(self) -> usize {
        self.index as usize
    }
}

impl fmt::Display for SocketHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sock{}.{}", self.index, self.generation)
    }
}

/// Why a socket call failed.  [`SocketError::errno`] gives the Linux value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketError {
    /// Nothing to read now (EAGAIN).
    WouldBlock,
    /// The handle names no open socket (EBADF).
    BadHandle,
    /// The local address is taken (EADDRINUSE).
    AddrInUse,
    /// The local address is not one of ours (EADDRNOTAVAIL).
    AddrNotAvailable,
    /// The address family is not handled yet (EAFNOSUPPORT).
    AddrFamilyNotSupported,
    /// No ephemeral port is free (EAGAIN on Linux for connect; EADDRINUSE for bind).
    NoFreePort,
    /// The datagram is larger than the protocol allows (EMSGSIZE).
    MessageTooLong,
    /// No route to the destination (ENETUNREACH).
    NetworkUnreachable,
    /// A router or the destination said the host cannot be reached
    /// (EHOSTUNREACH).
    HostUnreachable,
    /// Out of buffers (ENOBUFS).
    NoBufferSpace,
    /// An argument is invalid (EINVAL).
    InvalidArgument,
    /// The socket table is full (EMFILE).
    TooManySockets,
    /// The peer refused the connection (ECONNREFUSED).
    ConnectionRefused,
    /// The peer reset the connection (ECONNRESET).
    ConnectionReset,
    /// The connection timed out (ETIMEDOUT).
    TimedOut,
    /// The socket is not connected (ENOTCONN).
    NotConnected,
    /// Writing after shutdown or to a closed connection (EPIPE).
    BrokenPipe,
    /// The socket is already connected (EISCONN).
    IsConnected,
    /// The connection was aborted locally (ECONNABORTED).
    ConnectionAborted,
    /// The operation does not apply to this kind of socket (EOPNOTSUPP).
    NotSupported,
}

impl SocketError {
    /// The Linux errno of this error.
    pub fn errno(self) -> i32 {
        match self {
            SocketError::WouldBlock => 11,
            SocketError::BadHandle => 9,
            SocketError::AddrInUse => 98,
            SocketError::AddrNotAvailable => 99,
            SocketError::AddrFamilyNotSupported => 97,
            SocketError::NoFreePort => 98,
            SocketError::MessageTooLong => 90,
            SocketError::NetworkUnreachable => 101,
            SocketError::HostUnreachable => 113,
            SocketError::NoBufferSpace => 105,
            SocketError::InvalidArgument => 22,
            SocketError::TooManySockets => 24,
            SocketError::ConnectionRefused => 111,
            SocketError::ConnectionReset => 104,
            SocketError::TimedOut => 110,
            SocketError::NotConnected => 107,
            SocketError::BrokenPipe => 32,
            SocketError::IsConnected => 106,
            SocketError::ConnectionAborted => 103,
            SocketError::NotSupported => 95,
        }
    }
}

impl fmt::Display for SocketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SocketError::WouldBlock => "operation would block",
            SocketError::BadHandle => "bad socket handle",
            SocketError::AddrInUse => "address in use",
            SocketError::AddrNotAvailable => "address not available",
            SocketError::AddrFamilyNotSupported => "address family not supported",
            SocketError::NoFreePort => "no free local port",
            SocketError::MessageTooLong => "message too long",
            SocketError::NetworkUnreachable => "network unreachable",
            SocketError::HostUnreachable => "no route to host",
            SocketError::NoBufferSpace => "no buffer space",
            SocketError::InvalidArgument => "invalid argument",
            SocketError::TooManySockets => "too many sockets",
            SocketError::ConnectionRefused => "connection refused",
            SocketError::ConnectionReset => "connection reset by peer",
            SocketError::TimedOut => "connection timed out",
            SocketError::NotConnected => "socket is not connected",
            SocketError::BrokenPipe => "broken pipe",
            SocketError::IsConnected => "socket is already connected",
            SocketError::ConnectionAborted => "connection aborted",
            SocketError::NotSupported => "operation not supported",
        })
    }
}
