//! Every socket of a stack as plain values, for `netstat`: read only.

use core::net::SocketAddr;

use crate::socket::table::Socket;
use crate::socket::SocketHandle;
use crate::stack::Stack;
use crate::tcp::{TcpInfo, TcpState};
use crate::time::Instant;

/// What kind of socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketKind {
    Tcp,
    TcpListener,
    Udp,
}

/// Which of a connection's timers runs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// Retransmission (of data, a SYN or a FIN).
    Retransmit,
    DelayedAck,
    /// Zero-window probe.
    Persist,
    Keepalive,
    /// TIME-WAIT's 2*MSL, or the FIN-WAIT-2 limit of a closed socket.
    Close,
}

/// One socket as `netstat` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SocketSummary {
    pub handle: SocketHandle,
    pub kind: SocketKind,
    pub local: SocketAddr,
    pub remote: Option<SocketAddr>,
    /// TCP's state (`Listen` for a listener); `None` for UDP.
    pub state: Option<TcpState>,
    /// Bytes received and not read; a listener's connections waiting to be
    /// accepted; a UDP socket's datagrams waiting.
    pub recv_queued: usize,
    /// Bytes queued to send; a listener's backlog.
    pub send_queued: usize,
    /// The earliest timer, and when it fires.
    pub timer: Option<(TimerKind, Instant)>,
    pub info: Option<TcpInfo>,
    /// Closed by the application, finishing on its own.
    pub orphan: bool,
}

impl Stack {
    /// Every open socket, in slot order.
    pub fn socket_summaries(&self) -> Vec<SocketSummary> {
        self.sockets
            .iter()
            .map(|(handle, s)| match s {
                Socket::Udp(u) => SocketSummary {
                    handle,
                    kind: SocketKind::Udp,
                    local: u.local_addr(),
                    remote: None,
                    state: None,
                    recv_queued: u.rx_queued(),
                    send_queued: 0,
                    timer: None,
                    info: None,
                    orphan: false,
                },
                Socket::Listener(l) => SocketSummary {
                    handle,
                    kind: SocketKind::TcpListener,
                    local: l.local,
                    remote: None,
                    state: Some(TcpState::Listen),
                    recv_queued: l.accept_queue.len(),
                    send_queued: l.backlog,
                    timer: None,
                    info: None,
                    orphan: false,
                },
                Socket::Tcp(c) => {
                    let t = &c.timers;
                    let timer = [
                        (TimerKind::Retransmit, t.rtx()),
                        (TimerKind::DelayedAck, t.delack()),
                        (TimerKind::Persist, t.persist()),
                        (TimerKind::Keepalive, t.keepalive()),
                        (TimerKind::Close, t.close()),
                    ]
                    .into_iter()
                    .filter_map(|(k, at)| at.map(|at| (k, at)))
                    .min_by_key(|&(_, at)| at);
                    SocketSummary {
                        handle,
                        kind: SocketKind::Tcp,
                        local: c.local,
                        remote: Some(c.remote),
                        state: Some(c.state),
                        recv_queued: c.recv.readable(),
                        send_queued: c.send.len(),
                        timer,
                        info: Some(c.info()),
                        orphan: c.detached,
                    }
                }
            })
            .collect()
    }
}
