//! The public vocabulary of TCP sockets.

use core::fmt;

use crate::socket::SocketError;
use crate::steer::FlowSteering;
use crate::tcp::cc::CcAlgorithm;
use crate::time::Duration;

/// The connection states of RFC 9293 section 3.3.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TcpState {
    #[default]
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

impl fmt::Display for TcpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TcpState::Closed => "CLOSED",
            TcpState::Listen => "LISTEN",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynReceived => "SYN_RCVD",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait1 => "FIN_WAIT_1",
            TcpState::FinWait2 => "FIN_WAIT_2",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::Closing => "CLOSING",
            TcpState::LastAck => "LAST_ACK",
            TcpState::TimeWait => "TIME_WAIT",
        })
    }
}

/// Which directions `shutdown` closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    Read,
    Write,
    Both,
}

/// What a socket is ready for, as epoll reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readiness {
    /// Data (or a connection to accept, or EOF) can be read.
    pub readable: bool,
    /// Data can be written (send buffer space, connection established).
    pub writable: bool,
    /// The peer closed its direction (EPOLLRDHUP).
    pub read_closed: bool,
    /// Both directions are closed (EPOLLHUP).
    pub hangup: bool,
    /// An error is pending (EPOLLERR; read it with `tcp_take_error`).
    pub error: bool,
    /// An urgent octet waits for `recv(MSG_OOB)` (EPOLLPRI).
    pub urgent: bool,
}

/// What poll, epoll and kqueue need of a connection at one moment, read
/// in one look-up (`Stack::tcp_poll_view`): a socket layer asks for it
/// several times per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPollView {
    pub state: TcpState,
    /// Bytes waiting to be read (FIONREAD).
    pub recv_queued: usize,
    /// Bytes a read would return: `recv_queued` less an out-of-line
    /// urgent octet at the read position.
    pub recv_readable: usize,
    /// An urgent octet waits for `recv(MSG_OOB)` (EPOLLPRI).
    pub urgent: bool,
    /// Room in the send buffer.
    pub send_space: usize,
    /// Bytes queued to send (sent and unacknowledged, or not sent yet).
    pub send_queued: usize,
    /// The pending error, left in place.
    pub error: Option<SocketError>,
}

/// `net.inet.tcp.ecn.enable`: whether connections use ECN (RFC 3168),
/// FreeBSD's values (Linux's `net.ipv4.tcp_ecn` has the same three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcnMode {
    /// 0: never.
    Off,
    /// 1: asked for on connects, agreed to when a peer asks.
    On,
    /// 2: agreed to when a peer asks, never asked for (the default of
    /// Linux and FreeBSD: some middleboxes drop SYNs that ask).
    #[default]
    AcceptOnly,
}

/// Tunables of TCP, from `[freebsd.sysctl]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpConfig {
    /// `net.inet.tcp.msl`: TIME_WAIT lasts twice this.
    pub msl: Duration,
    /// `net.inet.tcp.delayed_ack`.
    pub delayed_ack: bool,
    /// How long an ACK may be delayed (RFC 9293 3.8.6.3: under 0.5 s).
    pub delayed_ack_timeout: Duration,
    /// `net.inet.tcp.sendspace` / `recvspace`: initial buffer sizes.
    pub send_space: usize,
    pub recv_space: usize,
    /// `net.inet.tcp.sendbuf_max` / `recvbuf_max`: auto-tuning limits.
    pub sendbuf_max: usize,
    pub recvbuf_max: usize,
    /// `net.inet.tcp.cc.algorithm`.
    pub cc: CcAlgorithm,
    /// `net.inet.tcp.mssdflt`: the MSS assumed when the peer sends none.
    pub mss_default: u16,
    /// `net.inet.tcp.v6mssdflt`: the same over IPv6 (RFC 9293 MUST-15:
    /// 1220, what the minimum IPv6 MTU holds).
    pub mss_default_v6: u16,
    /// `net.inet.tcp.syncookies`.
    pub syncookies: bool,
    /// `kern.ipc.somaxconn`: the largest backlog.
    pub somaxconn: usize,
    /// `net.inet.tcp.keepidle`, `keepintvl`, `keepcnt`.
    pub keepidle: Duration,
    pub keepintvl: Duration,
    pub keepcnt: u32,
    /// `net.inet.tcp.sack.enable`.
    pub sack: bool,
    /// `net.inet.tcp.rfc1323`: window scaling and timestamps.
    pub rfc1323: bool,
    /// `net.inet.tcp.ecn.enable`.
    pub ecn: EcnMode,
    /// RTO bounds (RFC 6298 2.4 and 2.5; the minimum is Linux's 200 ms).
    pub rto_min: Duration,
    pub rto_max: Duration,
    pub rto_initial: Duration,
    /// Retransmissions of one segment before the connection is dropped.
    pub max_retries: u32,
    /// SYN retransmissions before a connect fails.
    pub syn_retries: u32,
    /// `net.inet.ip.portrange.first` / `last`: ephemeral ports.
    pub port_first: u16,
    pub port_last: u16,
    /// With one engine per core: which engine this stack is, so that
    /// ephemeral ports are chosen for replies to hash back to it.
    pub steering: Option<FlowSteering>,
    /// `net.inet.tcp.fast_path`: header prediction on input and segments
    /// written straight into the frame on output, for the established
    /// connection's ordinary segments.  What goes on the wire is the same
    /// either way (the simulation checks it bit for bit); off, every
    /// segment takes the general path.
    pub fast_path: bool,
    /// Bytes TCP's connections may hold in all, 0 for no budget
    /// (`net.inet.tcp.memory_budget_mb`): a handshake that would make a
    /// connection past it is refused (see `Stack::tcp_memory_accounted`).
    pub memory_budget: usize,
}

impl TcpConfig {
    /// The send MSS toward `remote` when its SYN names none (RFC 9293
    /// 3.7.1, MUST-15: 536 over IPv4, 1220 over IPv6).
    pub(crate) fn default_mss(&self, remote: core::net::IpAddr) -> usize {
        usize::from(match remote {
            core::net::IpAddr::V4(_) => self.mss_default,
            core::net::IpAddr::V6(_) => self.mss_default_v6,
        })
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            msl: Duration::from_secs(30),
            delayed_ack: true,
            delayed_ack_timeout: Duration::from_millis(40),
            send_space: 32 << 10,
            recv_space: 64 << 10,
            sendbuf_max: 2 << 20,
            recvbuf_max: 2 << 20,
            cc: CcAlgorithm::Cubic,
            mss_default: 536,
            mss_default_v6: 1220,
            syncookies: true,
            somaxconn: 4096,
            keepidle: Duration::from_secs(7200),
            keepintvl: Duration::from_secs(75),
            keepcnt: 8,
            sack: true,
            rfc1323: true,
            ecn: EcnMode::AcceptOnly,
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            rto_initial: Duration::from_secs(1),
            max_retries: 12,
            syn_retries: 6,
            port_first: 10_000,
            port_last: 65_535,
            steering: None,
            fast_path: true,
            memory_budget: 0,
        }
    }
}

/// What `TCP_INFO` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpInfo {
    pub state: Option<TcpState>,
    pub rto: Duration,
    pub srtt: Duration,
    pub rttvar: Duration,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub timestamps: bool,
    pub sack: bool,
    pub retransmits: u64,
    pub total_retrans: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
}
