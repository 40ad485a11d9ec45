//! What a POSIX socket layer (crates/api) asks of sockets beyond the core
//! calls: queue lengths for epoll, kqueue and FIONREAD, the pending error
//! without taking it, MSG_PEEK on datagrams, and per-socket options:
//! buffer sizes (SO_RCVBUF, SO_SNDBUF), keep-alive timing, the user
//! timeout and SYN count (TCP_USER_TIMEOUT, TCP_SYNCNT), IP_TTL, IP_TOS.

use core::net::IpAddr;

use crate::socket::table::Socket;
use crate::socket::udp::UdpRecv;
use crate::socket::{SocketError, SocketHandle};
use crate::stack::Stack;
use crate::tcp::conn::TcpConnection;
use crate::time::Duration;

impl Stack {
    fn posix_tcp(&self, h: SocketHandle) -> Result<&TcpConnection, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Tcp(c)) if !c.detached => Ok(c),
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    fn posix_tcp_mut(&mut self, h: SocketHandle) -> Result<&mut TcpConnection, SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Tcp(c)) if !c.detached => Ok(c),
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    /// Connections waiting in a listener's accept queue.
    pub fn tcp_accept_queue_len(&self, h: SocketHandle) -> Result<usize, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Listener(l)) => Ok(l.accept_queue.len()),
            Some(_) => Err(SocketError::InvalidArgument),
            None => Err(SocketError::BadHandle),
        }
    }

    /// Bytes queued to send (sent and unacknowledged, or not sent yet).
    pub fn tcp_send_queued(&self, h: SocketHandle) -> Result<usize, SocketError> {
        self.posix_tcp(h).map(|c| c.send.len())
    }

    /// The pending error, left in place (SO_ERROR takes it with
    /// [`Stack::tcp_take_error`]).
    pub fn tcp_peek_error(&self, h: SocketHandle) -> Result<Option<SocketError>, SocketError> {
        self.posix_tcp(h).map(|c| c.error)
    }

    /// SO_SNDBUF: the most data the connection queues to send.
    pub fn tcp_set_send_buffer(
        &mut self,
        h: SocketHandle,
        bytes: usize,
    ) -> Result<(), SocketError> {
        self.posix_tcp_mut(h).map(|c| c.send_limit = bytes.max(1))
    }

    /// SO_RCVBUF: the receive buffer, hence the window (never below what
    /// is already held); it no longer grows by auto-tuning.
    pub fn tcp_set_recv_buffer(
        &mut self,
        h: SocketHandle,
        bytes: usize,
    ) -> Result<(), SocketError> {
        self.posix_tcp_mut(h).map(|c| {
            c.recv.set_capacity(bytes.max(1));
            c.recv_locked = true;
            // A larger buffer may open the window by enough that the peer
            // should hear of it: the next output sends the ACK, as after a
            // read that opened it (`nothing_to_output` relies on this).
            if c.window_update_due() {
                c.ack_now = true;
            }
        })
    }

    /// TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT (`None`: the stack's).
    /// They apply from the next keep-alive timer on.
    pub fn tcp_set_keepalive_timing(
        &mut self,
        h: SocketHandle,
        idle: Option<Duration>,
        intvl: Option<Duration>,
        cnt: Option<u32>,
    ) -> Result<(), SocketError> {
        self.posix_tcp_mut(h).map(|c| {
            c.keep_idle = idle;
            c.keep_intvl = intvl;
            c.keep_cnt = cnt;
        })
    }

    /// TCP_USER_TIMEOUT (RFC 5482; RFC 9293 3.8.3's R2 set by the
    /// application, MUST-21): how long sent data may stay unacknowledged,
    /// or a SYN unanswered, before the connection gives up with ETIMEDOUT
    /// (in place of the retry counts); as on Linux it also bounds how
    /// long the peer's window may stay closed from the first zero-window
    /// probe (answered or not), and how long a keep-alive peer may stay
    /// silent (in place of `keepcnt`). `None` turns it off.
    pub fn tcp_set_user_timeout(
        &mut self,
        h: SocketHandle,
        timeout: Option<Duration>,
    ) -> Result<(), SocketError> {
        self.posix_tcp_mut(h).map(|c| c.user_timeout = timeout)
    }

    /// TCP_SYNCNT: SYN retransmissions before a connect gives up; `None`:
    /// the stack's `syn_retries`.
    pub fn tcp_set_syn_retries(
        &mut self,
        h: SocketHandle,
        retries: Option<u32>,
    ) -> Result<(), SocketError> {
        self.posix_tcp_mut(h).map(|c| c.syn_retries = retries)
    }

    /// IP_TTL (`None`: the stack's) and IP_TOS of a connection's segments.
    pub fn tcp_set_ip_options(
        &mut self,
        h: SocketHandle,
        ttl: Option<u8>,
        tos: u8,
    ) -> Result<(), SocketError> {
        self.posix_tcp_mut(h).map(|c| {
            c.ip_opts.ttl = ttl;
            c.ip_opts.tos = tos;
            c.drop_template();
        })
    }

    /// SO_MARK of a TCP socket (0: none): policy rules by mark route its
    /// segments from the next one on.  A listener's connections inherit
    /// it; one already made keeps its own.
    pub fn tcp_set_mark(&mut self, h: SocketHandle, mark: u32) -> Result<(), SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Listener(l)) => {
                l.mark = mark;
                Ok(())
            }
            Some(Socket::Tcp(c)) => {
                c.ip_opts.mark = mark;
                // The cached path and template were looked up by the old
                // mark's FIB.
                c.path = None;
                c.drop_template();
                Ok(())
            }
            Some(_) => Err(SocketError::InvalidArgument),
            None => Err(SocketError::BadHandle),
        }
    }

    /// listen() again on a listening socket: its new backlog (Linux's
    /// sk_max_ack_backlog, capped by somaxconn as the first listen()),
    /// for the connections to come.
    pub fn tcp_set_backlog(&mut self, h: SocketHandle, backlog: usize) -> Result<(), SocketError> {
        let somaxconn = self.tcp.cfg.somaxconn;
        match self.sockets.get_mut(h) {
            Some(Socket::Listener(l)) => {
                l.backlog = backlog.min(somaxconn);
                Ok(())
            }
            Some(_) => Err(SocketError::InvalidArgument),
            None => Err(SocketError::BadHandle),
        }
    }

    /// TCP_MAXSEG (`None`: the path's MSS).  A listener's connections
    /// advertise and send at most `mss` bytes a segment from their
    /// handshake on; a connection that has begun its handshake keeps the
    /// MSS it has, as Linux's does (the value is read at the handshake:
    /// [`tcp_connect_with`](Self::tcp_connect_with) takes it for an
    /// active open).
    pub fn tcp_set_max_segment(
        &mut self,
        h: SocketHandle,
        mss: Option<u16>,
    ) -> Result<(), SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Listener(l)) => {
                l.max_segment = mss.map(usize::from);
                Ok(())
            }
            Some(Socket::Tcp(_)) => Ok(()),
            Some(_) => Err(SocketError::InvalidArgument),
            None => Err(SocketError::BadHandle),
        }
    }

    /// SO_MARK of a UDP socket's datagrams (0: none).
    pub fn udp_set_mark(&mut self, h: SocketHandle, mark: u32) -> Result<(), SocketError> {
        self.sockets.udp_mut(h)?.mark = mark;
        Ok(())
    }

    /// IP_TTL and IP_TOS of a UDP socket's datagrams.
    pub fn udp_set_ip_options(
        &mut self,
        h: SocketHandle,
        ttl: Option<u8>,
        tos: u8,
    ) -> Result<(), SocketError> {
        let s = self.sockets.udp_mut(h)?;
        s.ttl = ttl;
        s.tos = tos;
        Ok(())
    }

    /// Whether a TCP listener holds `ip:port` (for choosing a port at bind).
    pub fn tcp_port_in_use(&self, ip: IpAddr, port: u16) -> bool {
        self.sockets.tcp_port_taken(ip, port)
    }

    /// Whether a UDP socket holds `ip:port`.
    pub fn udp_port_in_use(&self, ip: IpAddr, port: u16) -> bool {
        self.sockets.udp_port_taken(ip, port)
    }

    /// Datagrams queued, their bytes, and the length of the first.
    pub fn udp_recv_queued(
        &self,
        h: SocketHandle,
    ) -> Result<(usize, usize, Option<usize>), SocketError> {
        let s = self.sockets.udp(h)?;
        Ok((
            s.rx.len(),
            s.rx.queued_bytes(),
            s.rx.peek().map(|(len, _)| len),
        ))
    }

    /// Copies the oldest datagram into `buf` and leaves it queued (MSG_PEEK).
    pub fn udp_peek_from(&self, h: SocketHandle, buf: &mut [u8]) -> Result<UdpRecv, SocketError> {
        let s = self.sockets.udp(h)?;
        let (len, datagram_len, meta) = s.rx.peek_into(buf).ok_or(SocketError::WouldBlock)?;
        Ok(UdpRecv {
            len,
            datagram_len,
            meta,
        })
    }

    /// SO_RCVBUF of a UDP socket: the bytes its receive queue holds.
    /// Datagrams already queued stay if they fit, oldest first.
    pub fn udp_set_recv_buffer(
        &mut self,
        h: SocketHandle,
        bytes: usize,
    ) -> Result<(), SocketError> {
        let s = self.sockets.udp_mut(h)?;
        s.rx.resize(bytes, (bytes / 64).max(16));
        Ok(())
    }
}
