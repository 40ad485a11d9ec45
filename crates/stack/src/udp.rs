//! UDP (RFC 768): delivery to sockets, port unreachable, and sending.

use core::net::{IpAddr, SocketAddr};

use wire::ip::IpProtocol;
use wire::udp::{self, UdpPacket, UdpRepr};
use wire::{ChecksumMode, Error as WireError};

use crate::ip::L4Datagram;
use crate::ipv4::{Ipv4Send, SendError};
use crate::ipv6::Ipv6Send;
use crate::sink::FrameSink;
use crate::socket::table::{LocalKey, Socket};
use crate::socket::udp::{UdpMeta, UdpRecv, UdpSocket, EPHEMERAL_PORTS};
use crate::socket::{SocketError, SocketHandle};
use crate::stack::Stack;
use crate::tcp::icmp_error::IcmpErrorKind;
use crate::time::Instant;

/// The largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65535 - 20 - 8;
/// The largest UDP payload over IPv6 (without jumbograms).
pub const MAX_UDP6_PAYLOAD: usize = 65535 - 8;

impl Stack {
    /// Delivers a datagram to its socket.  `false` when no socket has its
    /// port: the caller sends its family's port unreachable.
    pub(crate) fn udp_input(
        &mut self,
        _now: Instant,
        d: &L4Datagram<'_>,
        _sink: &mut dyn FrameSink,
    ) -> bool {
        let (src_ip, dst_ip) = (d.src, d.dst);
        let mode = if d.meta.csum_partial {
            ChecksumMode::Offload
        } else {
            ChecksumMode::Full
        };
        let packet = match UdpPacket::new_checked(d.payload) {
            Ok(p) => p,
            Err(_) => {
                self.ip.counters.rx_drop_udp_malformed += 1;
                return true;
            }
        };
        let repr = match UdpRepr::parse(&packet, &src_ip, &dst_ip, mode) {
            Ok(r) => r,
            Err(WireError::BadChecksum) => {
                self.ip.counters.rx_drop_udp_bad_checksum += 1;
                return true;
            }
            Err(_) => {
                self.ip.counters.rx_drop_udp_malformed += 1;
                return true;
            }
        };
        let meta = UdpMeta {
            src: SocketAddr::new(src_ip, repr.src_port),
            dst: SocketAddr::new(dst_ip, repr.dst_port),
            iface: d.iface,
        };
        match self.sockets.udp_lookup_index(meta.dst) {
            Some(index) => {
                let Some(Socket::Udp(socket)) = self.sockets.at_mut(index) else {
                    return true;
                };
                if socket.rx.push(packet.payload(), meta) {
                    self.sockets.notify(index);
                    self.ip.counters.rx_accept_udp += 1;
                    self.ip.counters.udp_datagrams_received += 1;
                } else {
                    socket.rx_dropped += 1;
                    self.ip.counters.rx_drop_udp_socket_full += 1;
                }
                true
            }
            None => {
                self.ip.counters.rx_drop_udp_no_socket += 1;
                false
            }
        }
    }

    /// An ICMP or ICMPv6 error quoting a datagram we sent from `src` to
    /// `dst` (`udp`: the bytes of its UDP header that the quote holds).
    /// A hard error (port or protocol unreachable, `IcmpErrorKind::Refused`)
    /// about a datagram to a connected socket's peer becomes that socket's
    /// pending error (ECONNREFUSED, as Linux's for port unreachable; Linux
    /// says ENOPROTOOPT for the rare protocol unreachable); soft errors, and errors
    /// for unconnected sockets, are counted and dropped (Linux keeps them
    /// only with IP_RECVERR, which ustack does not have).
    pub(crate) fn udp_icmp_error(
        &mut self,
        kind: IcmpErrorKind,
        src: IpAddr,
        dst: IpAddr,
        udp: &[u8],
    ) {
        let (Some(sport), Some(dport)) = (udp.get(0..2), udp.get(2..4)) else {
            self.ip.counters.udp_icmp_errors_ignored += 1;
            return;
        };
        let local = SocketAddr::new(src, u16::from_be_bytes([sport[0], sport[1]]));
        let remote = SocketAddr::new(dst, u16::from_be_bytes([dport[0], dport[1]]));
        // Only about datagrams we could have sent (a socket on the any
        // address would otherwise take a quote naming any source).
        if !self.is_local_ip(src) {
            self.ip.counters.udp_icmp_errors_ignored += 1;
            return;
        }
        let Some(index) = self.sockets.udp_lookup_index(local) else {
            self.ip.counters.udp_icmp_errors_ignored += 1;
            return;
        };
        let Some(Socket::Udp(socket)) = self.sockets.at_mut(index) else {
            self.ip.counters.udp_icmp_errors_ignored += 1;
            return;
        };
        if kind != IcmpErrorKind::Refused || socket.peer != Some(remote) {
            self.ip.counters.udp_icmp_errors_ignored += 1;
            return;
        }
        socket.error = Some(SocketError::ConnectionRefused);
        self.ip.counters.udp_icmp_errors_reported += 1;
        self.sockets.notify(index);
    }

    /// Sets the peer whose hard ICMP errors the socket hears (connect();
    /// `None`: disconnected).  A pending error stays, as Linux's does.
    pub fn udp_set_peer(
        &mut self,
        h: SocketHandle,
        peer: Option<SocketAddr>,
    ) -> Result<(), SocketError> {
        self.sockets.udp_mut(h)?.peer = peer;
        Ok(())
    }

    /// Takes the socket's pending ICMP error (the next send, receive or
    /// SO_ERROR reports it once).
    pub fn udp_take_error(&mut self, h: SocketHandle) -> Result<Option<SocketError>, SocketError> {
        Ok(self.sockets.udp_mut(h)?.error.take())
    }

    /// Whether an ICMP error waits to be reported (POLLERR).
    pub fn udp_error_pending(&self, h: SocketHandle) -> bool {
        self.sockets.udp(h).is_ok_and(|s| s.error.is_some())
    }

    /// Opens a UDP socket on `local` (port 0: an ephemeral port).
    pub fn udp_bind(&mut self, local: SocketAddr) -> Result<SocketHandle, SocketError> {
        self.udp_bind_v6only(local, false)
    }

    /// [`udp_bind`](Self::udp_bind) with IPV6_V6ONLY: a socket on `[::]`
    /// without it takes IPv4 datagrams too (Linux's default), whose
    /// addresses are IPv4.
    pub fn udp_bind_v6only(
        &mut self,
        mut local: SocketAddr,
        v6only: bool,
    ) -> Result<SocketHandle, SocketError> {
        if !local.ip().is_unspecified() && !self.is_local_ip(local.ip()) {
            return Err(SocketError::AddrNotAvailable);
        }
        let v6only = v6only && local.is_ipv6();
        if local.port() == 0 {
            let span = u32::from(EPHEMERAL_PORTS.end() - EPHEMERAL_PORTS.start()) + 1;
            let start = self.rng.below(u64::from(span)) as u32;
            let port = (0..span)
                .map(|i| EPHEMERAL_PORTS.start() + ((start + i) % span) as u16)
                .find(|&p| !self.sockets.udp_bind_clash(local.ip(), p, v6only))
                .ok_or(SocketError::NoFreePort)?;
            local.set_port(port);
        } else if self
            .sockets
            .udp_bind_clash(local.ip(), local.port(), v6only)
        {
            return Err(SocketError::AddrInUse);
        }
        let mut socket = UdpSocket::new(local, self.ip.cfg.udp_recv_space);
        socket.v6only = v6only;
        let h = self.sockets.insert(Socket::Udp(socket))?;
        self.sockets
            .udp_by_local
            .insert(LocalKey::new(local.ip(), local.port()), h.index);
        Ok(h)
    }

    pub fn udp_close(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        self.sockets.udp(h)?;
        self.sockets.remove(h.index);
        Ok(())
    }

    pub fn udp_local_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        self.sockets.udp(h).map(|s| s.local_addr())
    }

    /// Whether a datagram waits on the socket.
    pub fn udp_readable(&self, h: SocketHandle) -> bool {
        self.sockets.udp(h).is_ok_and(|s| s.rx_queued() > 0)
    }

    /// Takes the oldest datagram into `buf` (truncating it if `buf` is short).
    pub fn udp_recv_from(
        &mut self,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Result<UdpRecv, SocketError> {
        let socket = self.sockets.udp_mut(h)?;
        let (len, datagram_len, meta) = socket.rx.pop_into(buf).ok_or(SocketError::WouldBlock)?;
        Ok(UdpRecv {
            len,
            datagram_len,
            meta,
        })
    }

    /// Sends one datagram to `dst` from the socket's address, or from
    /// `src_ip` when given (IP_SENDSRCADDR; it must be ours).
    pub fn udp_send_to(
        &mut self,
        now: Instant,
        h: SocketHandle,
        dst: SocketAddr,
        src_ip: Option<IpAddr>,
        data: &[u8],
        sink: &mut dyn FrameSink,
    ) -> Result<usize, SocketError> {
        let (local, ttl, tos, mark) = {
            let s = self.sockets.udp(h)?;
            (s.local_addr(), s.ttl, s.tos, s.mark)
        };
        if dst.port() == 0 || dst.ip().is_unspecified() {
            return Err(SocketError::InvalidArgument);
        }
        // A socket on `[::]` that takes IPv4 sends IPv4 (the socket layer
        // unmaps `::ffff:a.b.c.d` before it calls); one bound to a
        // specific address sends only its own family.
        let family_ok = local.ip().is_ipv4() == dst.is_ipv4()
            || (local.ip() == IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED)
                && dst.is_ipv4()
                && !self.sockets.udp(h)?.v6only);
        if !family_ok {
            return Err(SocketError::AddrFamilyNotSupported);
        }
        let repr = UdpRepr {
            src_port: local.port(),
            dst_port: dst.port(),
        };
        let len = repr.buffer_len(data.len());
        let write = |buf: &mut [u8], src: IpAddr, mode: ChecksumMode| {
            // The payload goes in first: the view finds it by the length
            // field, which `emit` writes.
            buf[udp::HEADER_LEN..len].copy_from_slice(data);
            let mut packet = UdpPacket::new_unchecked(&mut buf[..len]);
            repr.emit(&mut packet, &src, &dst.ip(), data.len(), mode);
        };
        let result = match dst.ip() {
            IpAddr::V4(dst_ip) => {
                if data.len() > MAX_UDP_PAYLOAD {
                    return Err(SocketError::MessageTooLong);
                }
                let src = match (src_ip, local.ip()) {
                    (Some(IpAddr::V4(ip)), _) if self.ip.is_local_addr(ip) => Some(ip),
                    (Some(_), _) => return Err(SocketError::AddrNotAvailable),
                    (None, IpAddr::V4(ip)) if !ip.is_unspecified() => Some(ip),
                    _ => None,
                };
                let hdr = Ipv4Send {
                    src,
                    l4_checksum: true,
                    ttl,
                    dscp_ecn: tos,
                    mark,
                    ..Ipv4Send::new(dst_ip, IpProtocol::Udp)
                };
                self.ip.send_ipv4(
                    now,
                    hdr,
                    len,
                    &mut |buf, src, mode| write(buf, IpAddr::V4(src), mode),
                    sink,
                )
            }
            IpAddr::V6(dst_ip) => {
                if data.len() > MAX_UDP6_PAYLOAD {
                    return Err(SocketError::MessageTooLong);
                }
                let src = match (src_ip, local.ip()) {
                    (Some(IpAddr::V6(ip)), _) if self.ip.is_local_ipv6(ip) => Some(ip),
                    (Some(_), _) => return Err(SocketError::AddrNotAvailable),
                    (None, IpAddr::V6(ip)) if !ip.is_unspecified() => Some(ip),
                    _ => None,
                };
                let hdr = Ipv6Send {
                    src,
                    l4_checksum: true,
                    hop_limit: ttl,
                    traffic_class: tos,
                    mark,
                    ..Ipv6Send::new(dst_ip, IpProtocol::Udp)
                };
                self.ip.send_ipv6(
                    now,
                    hdr,
                    len,
                    &mut |buf, src, mode| write(buf, IpAddr::V6(src), mode),
                    sink,
                )
            }
        };
        match result {
            Ok(()) => {
                self.ip.counters.udp_datagrams_sent += 1;
                Ok(data.len())
            }
            Err(SendError::NoRoute) => Err(SocketError::NetworkUnreachable),
            Err(SendError::TooBig) => Err(SocketError::MessageTooLong),
            Err(SendError::NoBuffer) => Err(SocketError::NoBufferSpace),
        }
    }
}
