//! UDP sockets.

use core::net::SocketAddr;

use crate::iface::IfaceId;
use crate::socket::datagram_ring::DatagramRing;

/// Where a received datagram came from and was sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpMeta {
    pub src: SocketAddr,
    /// The destination address (IP_PKTINFO / IP_RECVDSTADDR).
    pub dst: SocketAddr,
    pub iface: IfaceId,
}

/// What [`crate::Stack::udp_recv_from`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRecv {
    /// Bytes copied into the caller's buffer.
    pub len: usize,
    /// The datagram's length: more than `len` when it was truncated.
    pub datagram_len: usize,
    pub meta: UdpMeta,
}

/// One UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    pub(crate) local: SocketAddr,
    pub(crate) rx: DatagramRing<UdpMeta>,
    /// Datagrams dropped because the receive queue was full.
    pub rx_dropped: u64,
    /// IP_TTL (`None`: the stack's) and IP_TOS of what the socket sends.
    pub(crate) ttl: Option<u8>,
    pub(crate) tos: u8,
    /// SO_MARK (0: none), which policy rules may route by.
    pub(crate) mark: u32,
    /// Bound to `[::]`: IPv6 only (IPV6_V6ONLY), or IPv4 too.
    pub(crate) v6only: bool,
    /// The peer connect() gave (the stack's form of its address): hard
    /// ICMP errors about datagrams to it are the socket's, as Linux's
    /// connected UDP sockets hear them (`None`: unconnected, errors
    /// ignored, as Linux without IP_RECVERR).
    pub(crate) peer: Option<SocketAddr>,
    /// A hard ICMP error not yet reported (the next send, receive or
    /// SO_ERROR takes it).
    pub(crate) error: Option<super::SocketError>,
}

impl UdpSocket {
    pub(crate) fn new(local: SocketAddr, recv_space: usize) -> Self {
        UdpSocket {
            local,
            rx: DatagramRing::new(recv_space, (recv_space / 64).max(16)),
            rx_dropped: 0,
            ttl: None,
            tos: 0,
            mark: 0,
            v6only: false,
            peer: None,
            error: None,
        }
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Datagrams waiting.
    pub fn rx_queued(&self) -> usize {
        self.rx.len()
    }
}

/// The ephemeral port range for UDP (RFC 6335 dynamic ports).
pub const EPHEMERAL_PORTS: core::ops::RangeInclusive<u16> = 49152..=65535;
