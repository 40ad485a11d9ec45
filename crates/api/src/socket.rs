//! A socket as the socket layer keeps it: its state as POSIX sees it
//! (fresh, bound, listening, connecting, connected), its options, and
//! what the readiness machinery last saw of it.

use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

use stack::{SocketHandle, Stack, TcpPollView, TcpState};

use crate::consts::*;
use crate::family::{Binding, Domain};

/// Where a connection is, as Linux's `socket->state` tracks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// connect() started; it has not reported completion yet.
    Connecting,
    Connected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// No address, no stack socket.
    Fresh,
    /// A TCP socket bound by bind(), neither listening nor connected.
    /// Addresses in states are the stack's (IPv4 for an IPv4-mapped one).
    Bound(SocketAddr),
    Listening {
        h: SocketHandle,
        local: SocketAddr,
    },
    /// A TCP connection (active or accepted).  `bound`: the local port
    /// came from bind() and is in the engine's bind table.
    Tcp {
        h: SocketHandle,
        phase: Phase,
        bound: bool,
    },
    /// A UDP socket with its stack socket (bound, perhaps connected).
    Udp {
        h: SocketHandle,
        peer: Option<SocketAddr>,
    },
}

/// Socket options (values as getsockopt reports them).
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    pub reuseaddr: bool,
    pub reuseport: bool,
    pub keepalive: bool,
    /// SO_OOBINLINE: urgent data stays in the stream.
    pub oob_inline: bool,
    pub nodelay: bool,
    /// TCP_CORK.
    pub cork: bool,
    pub broadcast: bool,
    /// SO_LINGER: `Some(seconds)` when on.
    pub linger: Option<i32>,
    /// SO_RCVBUF / SO_SNDBUF as set (Linux reports twice the value asked).
    pub rcvbuf: Option<usize>,
    pub sndbuf: Option<usize>,
    pub rcvtimeo: Option<Duration>,
    pub sndtimeo: Option<Duration>,
    /// IP_TTL (`None`: the stack's default).
    pub ttl: Option<u8>,
    pub tos: i32,
    /// IP_PKTINFO and IP_RECVDSTADDR on receive.
    pub pktinfo: bool,
    pub recvdstaddr: bool,
    /// IPV6_V6ONLY (AF_INET6): `[::]` takes IPv6 only.
    pub v6only: bool,
    /// IPV6_RECVPKTINFO.
    pub recvpktinfo6: bool,
    /// IPV6_UNICAST_HOPS (`None`: the stack's default) and IPV6_TCLASS:
    /// an AF_INET6 socket's IPv6 packets carry these, its IPv4 ones (to
    /// mapped peers) IP_TTL and IP_TOS.
    pub hops: Option<u8>,
    pub tclass: i32,
    pub keepidle: Option<u32>,
    pub keepintvl: Option<u32>,
    pub keepcnt: Option<u32>,
    /// TCP_USER_TIMEOUT in milliseconds (0: off).
    pub user_timeout: u32,
    /// TCP_SYNCNT (`None`: the stack's `syn_retries`).
    pub syncnt: Option<u32>,
    /// TCP_MAXSEG as set (`None`: 0, the path's MSS): read at the
    /// handshake, by connect() and by a listener's connections.
    pub max_segment: Option<u16>,
    /// SO_MARK (0: none): policy rules by mark (`ustack rule add mark N
    /// fib M`) route the socket's packets by it.
    pub mark: u32,
}

/// Bytes (or datagrams, or connections) the application has taken or
/// given, so that "arrived since" and "freed since" can be told from
/// a changing queue length.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Totals {
    pub consumed: u64,
    pub written: u64,
    pub accepted: u64,
}

/// What the readiness machinery last saw (see `events.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    pub mask: u32,
    pub in_total: u64,
    pub out_total: u64,
    pub state: u8,
}

pub(crate) struct Socket {
    pub domain: Domain,
    pub stream: bool,
    /// The engine (index in the worker) once the socket has one.
    pub engine: Option<usize>,
    pub state: State,
    /// The local address once bound (by bind, listen, connect or
    /// accept), as the stack has it.
    pub bound: Option<SocketAddr>,
    pub nonblock: bool,
    /// The file status flags F_SETFL keeps besides O_NONBLOCK, as Linux's
    /// (O_APPEND, O_NOATIME): shown by F_GETFL, no effect on a socket.
    pub status_flags: i32,
    pub opts: Options,
    pub shut_rd: bool,
    pub shut_wr: bool,
    pub totals: Totals,
    pub seen: Seen,
    /// The worker's `refresh_round` in which `seen` was last brought up
    /// to date (a socket named twice in one round is looked at once, and
    /// an epoll wait reads its mask from `seen` while the round's statuses
    /// are current: `Worker::seen_current`).
    pub refreshed_in: u64,
    /// A call changed the socket where the stack does not see it
    /// (shutdown, also of an unconnected socket): the next look wakes
    /// every waiter, as Linux's sk_state_change.
    pub state_changed: bool,
    /// The epoll and kqueue instances watching this socket.
    pub watchers: Vec<RawFd>,
    /// F_SETOWN: the process (or, negative, process group) told of urgent
    /// data with SIGURG; 0: none.
    pub owner: i32,
    /// The stack's count of urgent pointers received when last looked at.
    pub urgent_seen: u32,
    /// The local address of the last connection connect() started and
    /// saw fail: Linux frees a failed connection's port (the socket can
    /// bind again) but getsockname still shows that address and port.
    pub failed_name: Option<SocketAddr>,
    /// shutdown() came while connect() had not reported (Linux's
    /// SS_DISCONNECTING): connect and listen say EINVAL until a connect
    /// with AF_UNSPEC.
    pub disconnecting: bool,
    /// Its port came from listen() (no bind() first): Linux frees it when
    /// the listener is shut down for reading, as it would a connection's.
    pub port_from_listen: bool,
}

impl Socket {
    pub(crate) fn new(domain: Domain, stream: bool, nonblock: bool) -> Self {
        Socket {
            domain,
            stream,
            engine: None,
            state: State::Fresh,
            bound: None,
            nonblock,
            status_flags: 0,
            opts: Options::default(),
            shut_rd: false,
            shut_wr: false,
            totals: Totals::default(),
            seen: Seen::default(),
            refreshed_in: 0,
            state_changed: false,
            watchers: Vec::new(),
            owner: 0,
            urgent_seen: 0,
            failed_name: None,
            disconnecting: false,
            port_from_listen: false,
        }
    }

    /// Its binding as the bind-conflict rules see it.
    pub(crate) fn binding(&self) -> Option<Binding> {
        let addr = self.bound?;
        let dual = self.domain == Domain::V6
            && !self.opts.v6only
            && matches!(addr, SocketAddr::V6(a) if a.ip().is_unspecified());
        Some(Binding { addr, dual })
    }

    /// IP_TTL and IP_TOS, or for IPv6 packets IPV6_UNICAST_HOPS and
    /// IPV6_TCLASS: what the stack socket's packets to `peer_v6` carry.
    pub(crate) fn ip_options(&self, peer_v6: bool) -> (Option<u8>, u8) {
        if peer_v6 {
            (self.opts.hops, self.opts.tclass as u8)
        } else {
            (self.opts.ttl, self.opts.tos as u8)
        }
    }

    /// The stack socket, if there is one.
    pub(crate) fn handle(&self) -> Option<SocketHandle> {
        match self.state {
            State::Listening { h, .. } | State::Tcp { h, .. } | State::Udp { h, .. } => Some(h),
            State::Fresh | State::Bound(_) => None,
        }
    }
}

/// Everything epoll and kqueue report about a socket at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Status {
    /// The epoll mask Linux's poll would return.
    pub mask: u32,
    /// Everything that ever arrived (bytes, datagrams, connections).
    pub in_total: u64,
    /// Send space ever made available.
    pub out_total: u64,
    /// A code for the state; a change is a wakeup for every waiter.
    pub state: u8,
    /// Bytes readable (connections pending on a listener).
    pub readable: i64,
    /// Send space.
    pub writable: i64,
    pub listening: bool,
    /// Connected (a connection-mode socket that may send).
    pub connected: bool,
    /// No more data will come (BSD SBS_CANTRCVMORE).
    pub cant_recv_more: bool,
    /// No more data may be sent (BSD SBS_CANTSENDMORE).
    pub cant_send_more: bool,
    /// The pending error (errno), not taken.
    pub error: i32,
}

const IN: u32 = (EPOLLIN | EPOLLRDNORM) as u32;
const OUT: u32 = (EPOLLOUT | EPOLLWRNORM) as u32;

fn tcp_state_code(s: TcpState) -> u8 {
    match s {
        TcpState::Closed => 10,
        TcpState::Listen => 11,
        TcpState::SynSent => 12,
        TcpState::SynReceived => 13,
        TcpState::Established => 14,
        TcpState::FinWait1 => 15,
        TcpState::FinWait2 => 16,
        TcpState::CloseWait => 17,
        TcpState::Closing => 18,
        TcpState::LastAck => 19,
        TcpState::TimeWait => 20,
    }
}

/// Computes the socket's status as Linux's `tcp_poll` / `datagram_poll`
/// and FreeBSD's socket filters see it.
pub(crate) fn status(sock: &Socket, stack: Option<&Stack>) -> Status {
    let mut st = Status::default();
    let stack = match (sock.handle(), stack) {
        (Some(_), Some(s)) => s,
        (Some(_), None) => return st,
        (None, _) => {
            return unbound_status(sock);
        }
    };
    match sock.state {
        State::Fresh | State::Bound(_) => return unbound_status(sock),
        State::Listening { h, .. } => {
            st.state = 3;
            st.listening = true;
            let queued = stack.tcp_accept_queue_len(h).unwrap_or(0);
            if queued > 0 {
                st.mask = IN;
            }
            st.readable = queued as i64;
            st.in_total = queued as u64 + sock.totals.accepted;
        }
        State::Tcp { h, .. } => tcp_status(sock, stack, h, &mut st),
        State::Udp { h, .. } => {
            st.state = 4;
            let (datagrams, bytes, _) = stack.udp_recv_queued(h).unwrap_or((0, 0, None));
            st.mask = udp_mask(sock, datagrams > 0, stack.udp_error_pending(h));
            st.readable = bytes as i64;
            st.writable = udp_send_space(sock) as i64;
            st.in_total = datagrams as u64 + sock.totals.consumed;
            st.connected = true;
            st.cant_recv_more = sock.shut_rd;
            st.cant_send_more = sock.shut_wr;
        }
    }
    st
}

/// A socket without a stack socket: TCP in Linux's TCP_CLOSE, or an
/// unbound UDP socket.
fn unbound_status(sock: &Socket) -> Status {
    let mut st = Status {
        // One code bound or not: bind() wakes no waiter on Linux (the
        // socket stays in TCP_CLOSE), so an edge-triggered watcher hears
        // nothing new from it.
        state: 1,
        cant_recv_more: sock.shut_rd,
        cant_send_more: sock.shut_wr,
        ..Status::default()
    };
    if sock.stream {
        // Nothing shut: writable and hung up.
        st.mask = OUT | EPOLLHUP as u32;
        if sock.shut_rd {
            st.mask |= IN | EPOLLRDHUP as u32;
        }
    } else {
        st.mask = udp_mask(sock, false, false);
        st.writable = udp_send_space(sock) as i64;
    }
    st
}

/// UDP has no send queue: a datagram leaves at once.  Report the send
/// buffer size as space (FreeBSD reports sbspace of an empty buffer).
fn udp_send_space(sock: &Socket) -> usize {
    sock.opts.sndbuf.unwrap_or(9216)
}

fn udp_mask(sock: &Socket, queued: bool, error: bool) -> u32 {
    let mut mask = 0;
    if error {
        mask |= EPOLLERR as u32;
    }
    if sock.shut_rd {
        mask |= IN | EPOLLRDHUP as u32;
    }
    if sock.shut_rd && sock.shut_wr {
        mask |= EPOLLHUP as u32;
    }
    if queued {
        mask |= IN;
    }
    mask | OUT | EPOLLWRBAND as u32
}

/// sk_stream_is_writeable: free space at least half of what is queued.
pub(crate) fn stream_writable(space: usize, queued: usize) -> bool {
    space > 0 && space >= queued / 2
}

/// Whether a send on connection `h` that ended `ok` left it writable (see
/// `Worker::touch_after_send`): one look at the connection.
#[inline(always)]
pub(crate) fn writable_after_send(stack: &Stack, h: SocketHandle, ok: bool) -> bool {
    ok && stack
        .tcp_send_room(h)
        .is_ok_and(|(space, queued)| stream_writable(space, queued))
}

fn tcp_status(sock: &Socket, stack: &Stack, h: SocketHandle, st: &mut Status) {
    // One look-up: this runs several times per request.
    let Ok(view) = stack.tcp_poll_view(h) else {
        return;
    };
    // tcp_poll: an out-of-line urgent octet at the read position is not
    // data to read (`recv_readable`); one waiting for recv(MSG_OOB) is
    // EPOLLPRI.
    let TcpPollView {
        state,
        recv_queued: readable,
        recv_readable: readable_now,
        urgent,
        send_space: space,
        send_queued: queued,
        error,
    } = view;
    let closed = state == TcpState::Closed;
    let peer_fin = matches!(
        state,
        TcpState::CloseWait | TcpState::LastAck | TcpState::Closing | TcpState::TimeWait
    );
    let rcv_shut = sock.shut_rd || peer_fin || closed;
    let snd_shut = sock.shut_wr || closed;
    let mut mask = 0;
    if (rcv_shut && snd_shut) || closed {
        mask |= EPOLLHUP as u32;
    }
    if rcv_shut {
        mask |= IN | EPOLLRDHUP as u32;
    }
    let synchronizing = matches!(state, TcpState::SynSent | TcpState::SynReceived);
    if !synchronizing {
        if readable_now > 0 {
            mask |= IN;
        }
        if urgent {
            mask |= EPOLLPRI as u32;
        }
        if !snd_shut {
            if stream_writable(space, queued) {
                mask |= OUT;
            }
        } else {
            mask |= OUT;
        }
    }
    if error.is_some() {
        mask |= EPOLLERR as u32;
    }
    st.mask = mask;
    st.state = tcp_state_code(state);
    st.readable = readable as i64;
    st.writable = space as i64;
    st.in_total = readable as u64 + sock.totals.consumed;
    st.out_total = space as u64 + sock.totals.written;
    st.connected = !synchronizing && !closed;
    st.cant_recv_more = rcv_shut;
    st.cant_send_more = snd_shut;
    st.error = error.map_or(0, |e| e.errno());
}
