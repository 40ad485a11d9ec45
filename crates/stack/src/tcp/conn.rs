//! One TCP connection: the transmission control block of RFC 9293 3.3.1.
//! Input, output and timers are in their own files; this one holds the
//! state and what derives from it.

use core::net::SocketAddr;

use wire::tcp::{SeqNumber, TcpRepr};

use crate::ipv4::Ipv4Path;
use crate::socket::SocketError;
use crate::tcp::byte_ring::ByteRing;
use crate::tcp::cc::{Cc, CongestionControl};
pub(crate) use crate::tcp::deadlines::Timers;
use crate::tcp::ecn::Ecn;
use crate::tcp::fast_output::SegmentTemplate;
use crate::tcp::output::IpOptions;
use crate::tcp::recv_buffer::RecvBuffer;
use crate::tcp::rtt::RttEstimator;
use crate::tcp::sack::Scoreboard;
use crate::tcp::shared::TcpShared;
use crate::tcp::types::{Readiness, TcpInfo, TcpState};
use crate::tcp::urgent::UrgentMark;
use crate::time::{Duration, Instant};

/// How often at most a connection's acknowledged data confirms its IPv6
/// first hop reachable: well inside ReachableTime (30 s), and rare enough
/// that the route lookup it costs is nothing per ACK.
pub(crate) const REACHABILITY_HINT_INTERVAL: Duration = Duration::from_secs(1);

/// Counters of one connection (TCP_INFO).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConnStats {
    pub retransmits: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
}

#[derive(Debug)]
pub(crate) struct TcpConnection {
    pub state: TcpState,
    pub local: SocketAddr,
    pub remote: SocketAddr,

    // Send sequence space (RFC 9293 3.3.1).
    pub iss: SeqNumber,
    pub snd_una: SeqNumber,
    pub snd_nxt: SeqNumber,
    /// The highest sequence number sent + 1 (snd_nxt goes back on a
    /// retransmission timeout; this does not).
    pub snd_max: SeqNumber,
    pub snd_wnd: usize,
    pub max_snd_wnd: usize,
    pub snd_wl1: SeqNumber,
    pub snd_wl2: SeqNumber,
    /// Shift applied to the windows the peer sends (its window scale).
    pub snd_wscale: u8,
    pub snd_mss: usize,

    // Receive sequence space.
    pub irs: SeqNumber,
    pub rcv_nxt: SeqNumber,
    /// The right edge of the window we advertised last; never moved left
    /// (RFC 9293 3.8.6.2.2).
    pub rcv_adv: SeqNumber,
    /// Our window scale shift.
    pub rcv_wscale: u8,
    /// The MSS we advertised (for counting full-sized segments).
    pub rcv_mss: usize,

    pub send: ByteRing,
    /// The sequence number of the first byte in `send` (after our SYN).
    pub send_base: SeqNumber,
    pub send_limit: usize,
    pub recv: RecvBuffer,
    /// The application shut the write side: a FIN follows the data.
    pub fin_queued: bool,
    /// The sequence number of a FIN that arrived ahead of data.
    pub peer_fin: Option<SeqNumber>,
    /// The application shut the read side.
    pub read_shut: bool,
    /// A reset came after the peer's FIN (in CLOSE-WAIT): reads still see
    /// the end of the stream, writes the error (EPIPE), as on Linux.
    pub reset_after_fin: bool,

    // Urgent data (`urgent.rs`).
    /// SND.UP while in urgent mode: the sequence number after the last
    /// urgent octet sent (RFC 6093).
    pub snd_up: Option<SeqNumber>,
    /// The receive side's mark, until the application reads past it.
    pub urgent: Option<UrgentMark>,
    /// SO_OOBINLINE: the urgent octet stays in the stream.
    pub oob_inline: bool,
    /// New urgent pointers received, ever (the socket layer's SIGURG).
    pub urgent_notices: u32,

    // Options (RFC 7323, RFC 2018).
    pub wscale_ok: bool,
    pub ts_ok: bool,
    pub ts_recent: u32,
    pub ts_offset: u32,
    pub sack_ok: bool,
    /// ECN (RFC 3168, `ecn.rs`).
    pub ecn: Ecn,

    pub rtt: RttEstimator,
    /// A segment being timed when timestamps are off (Karn's rule clears it).
    pub rtt_probe: Option<(SeqNumber, Instant)>,
    pub cc: Cc,
    pub dupacks: u32,
    /// Loss recovery is under way until this is acknowledged (RFC 6582
    /// "recover", RFC 6675 RecoveryPoint).
    pub recovery_point: Option<SeqNumber>,
    pub high_rxt: SeqNumber,
    pub scoreboard: Scoreboard,

    pub timers: Timers,
    /// When the wheel will next look at this connection, in microseconds;
    /// `u64::MAX` when it holds no entry for it.
    pub wheel_at: u64,
    /// On the trim list (`TcpShared::trim_list`): a ring of it emptied and
    /// kept its storage.
    pub trim_listed: bool,
    /// The trim scan that last looked at it (one look per scan, however
    /// many entries the list holds for its slot).
    pub trim_pass: u32,
    /// Consecutive retransmission timeouts.
    pub retries: u32,
    pub persist_backoff: u32,
    pub keep_probes: u32,

    /// An ACK must go out now.
    pub ack_now: bool,
    /// Full-sized segments received since the last ACK (RFC 5681 4.2:
    /// ACK at least every second one).
    pub unacked_segments: u32,

    pub nodelay: bool,
    /// TCP_CORK: a segment shorter than the MSS waits (until uncorked or
    /// the FIN), whatever Nagle or TCP_NODELAY would do.
    pub cork: bool,
    pub keepalive: bool,
    /// Per-socket keep-alive timing (TCP_KEEPIDLE/INTVL/CNT); `None`: the
    /// stack's configuration.
    pub keep_idle: Option<Duration>,
    pub keep_intvl: Option<Duration>,
    pub keep_cnt: Option<u32>,
    /// TCP_USER_TIMEOUT: how long data may stay unacknowledged (or a SYN
    /// unanswered, the peer's window closed, a keep-alive peer silent)
    /// before the connection gives up; `None`: the retry counts decide.
    pub user_timeout: Option<Duration>,
    /// TCP_SYNCNT: SYN retransmissions before a connect gives up; `None`:
    /// the stack's `syn_retries`.
    pub syn_retries: Option<u32>,
    /// When the segment the retransmission timer is resending was first
    /// sent (set at the first timeout, read while `retries` > 0).
    pub stall_since: Instant,
    /// When the first probe of the peer's closed window went out (a
    /// persist probe, or data sent again into it); `None` once the window
    /// opens or data is acknowledged. TCP_USER_TIMEOUT counts from here
    /// (Linux's `icsk_probes_tstamp`).
    pub probe_since: Option<Instant>,
    pub linger_zero: bool,
    /// SO_RCVBUF was set: the receive buffer does not auto-tune.
    pub recv_locked: bool,
    /// Receive buffer auto-tuning: when the current measuring interval
    /// (about a round trip) began, in microseconds (0: none began), and
    /// the bytes received in order since.
    pub rcv_tune_start: u64,
    pub rcv_tune_bytes: usize,
    /// An ACK of in-order data waits for the end of the receive burst
    /// (`Stack::set_ack_per_burst`), and the connection is on the list.
    pub burst_ack: bool,
    pub burst_ack_listed: bool,
    /// IP_TTL and IP_TOS of the socket's segments.
    pub ip_opts: IpOptions,
    /// Where the segments go, cached (see [`Ipv4Path`]).
    pub path: Option<Ipv4Path>,
    /// The headers the fast path writes its segments from.
    pub template: Option<SegmentTemplate>,
    pub error: Option<SocketError>,
    /// The soft error of the last ICMP error and when it came: what a
    /// timeout reports instead of ETIMEDOUT unless the peer was heard
    /// since (see [`TcpConnection::timeout_error`]; a time, not a flag
    /// cleared on input, so that header prediction does not pay for it).
    pub soft_error: Option<(SocketError, Instant)>,
    /// The application closed its handle; the connection finishes alone.
    pub detached: bool,
    /// The listener slot (index, generation) of a connection not yet accepted.
    pub parent: Option<(u32, u32)>,
    pub last_send: Instant,
    pub last_recv: Instant,
    /// When new data acknowledged next tells the neighbor cache that the
    /// first hop is reachable (IPv6, RFC 4861 7.3.1; at most once per
    /// [`REACHABILITY_HINT_INTERVAL`](crate::tcp::conn::REACHABILITY_HINT_INTERVAL)).
    pub reachability_hint_due: Instant,
    /// When we last answered a bare ACK we could not use.
    pub last_invalid_ack: Option<Instant>,
    pub stats: ConnStats,
}

/// The timestamp clock's offset for a four-tuple: a keyed hash, so that it
/// does not reveal the host's uptime, yet stays the same for every
/// incarnation of the pair and so keeps increasing across them (RFC 7323
/// 5.4 and 7.1; a random offset per connection would make a quick
/// reconnect from the same port fail the peer's PAWS check).
fn ts_offset(shared: &TcpShared, local: SocketAddr, remote: SocketAddr) -> u32 {
    let mut key = [0u8; 36];
    let mut put = |at: usize, a: SocketAddr| {
        match a.ip() {
            core::net::IpAddr::V4(ip) => key[at..at + 4].copy_from_slice(&ip.octets()),
            core::net::IpAddr::V6(ip) => key[at..at + 16].copy_from_slice(&ip.octets()),
        }
        key[at + 16..at + 18].copy_from_slice(&a.port().to_be_bytes());
    };
    put(0, local);
    put(18, remote);
    shared.ts_secret.hash_bytes(&key) as u32
}

impl TcpConnection {
    /// A connection in `state` with fresh buffers and estimators.
    pub(crate) fn new(
        shared: &mut TcpShared,
        now: Instant,
        state: TcpState,
        local: SocketAddr,
        remote: SocketAddr,
        iss: SeqNumber,
        mss: usize,
    ) -> Self {
        let cfg = &shared.cfg;
        TcpConnection {
            state,
            local,
            remote,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            snd_wscale: 0,
            snd_mss: cfg.default_mss(remote.ip()).min(mss),
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_adv: SeqNumber(0),
            rcv_wscale: 0,
            rcv_mss: mss,
            send: ByteRing::new(),
            send_base: iss + 1,
            send_limit: cfg.send_space,
            recv: RecvBuffer::new(cfg.recv_space),
            fin_queued: false,
            peer_fin: None,
            read_shut: false,
            reset_after_fin: false,
            snd_up: None,
            urgent: None,
            oob_inline: false,
            urgent_notices: 0,
            wscale_ok: false,
            ts_ok: false,
            ts_recent: 0,
            ts_offset: ts_offset(shared, local, remote),
            sack_ok: false,
            ecn: Ecn::new(cfg.ecn, state, iss),
            rtt: RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max),
            rtt_probe: None,
            cc: Cc::new(cfg.cc, cfg.default_mss(remote.ip()).min(mss), now),
            dupacks: 0,
            recovery_point: None,
            high_rxt: iss,
            scoreboard: Scoreboard::default(),
            timers: Timers::default(),
            wheel_at: u64::MAX,
            trim_listed: false,
            trim_pass: 0,
            retries: 0,
            persist_backoff: 0,
            keep_probes: 0,
            ack_now: false,
            unacked_segments: 0,
            nodelay: false,
            cork: false,
            keepalive: false,
            keep_idle: None,
            keep_intvl: None,
            keep_cnt: None,
            user_timeout: None,
            syn_retries: None,
            stall_since: now,
            probe_since: None,
            linger_zero: false,
            recv_locked: false,
            rcv_tune_start: 0,
            rcv_tune_bytes: 0,
            burst_ack: false,
            burst_ack_listed: false,
            ip_opts: IpOptions::default(),
            path: None,
            template: None,
            error: None,
            soft_error: None,
            detached: false,
            parent: None,
            last_send: now,
            reachability_hint_due: now,
            last_recv: now,
            last_invalid_ack: None,
            stats: ConnStats::default(),
        }
    }

    /// The window scale we offer: the smallest shift that lets the window
    /// reach the largest receive buffer (RFC 7323 2.3).
    pub(crate) fn wscale_for(recvbuf_max: usize) -> u8 {
        let mut shift = 0u8;
        while shift < wire::tcp::MAX_WINDOW_SCALE && (65535usize << shift) < recvbuf_max {
            shift += 1;
        }
        shift
    }

    /// Takes in the options of the peer's SYN (RFC 9293 3.7.1, RFC 7323
    /// 2.2 and 3.2, RFC 2018 2): each option is used only if both sides
    /// sent it.
    pub(crate) fn accept_syn_options(
        &mut self,
        shared: &TcpShared,
        syn: &TcpRepr<'_>,
        we_offered: bool,
    ) {
        let cfg = &shared.cfg;
        let peer_mss = syn
            .max_seg_size
            .map_or(cfg.default_mss(self.remote.ip()), usize::from);
        self.snd_mss = peer_mss.min(self.rcv_mss).max(64);
        match (syn.window_scale, cfg.rfc1323 && we_offered) {
            (Some(shift), true) => {
                self.wscale_ok = true;
                self.snd_wscale = shift.min(wire::tcp::MAX_WINDOW_SCALE);
                self.rcv_wscale = TcpConnection::wscale_for(cfg.recvbuf_max);
            }
            _ => {
                self.wscale_ok = false;
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
                // Without scaling the window cannot pass 64 KB.
                self.recv.set_capacity(self.recv.capacity().min(65535));
            }
        }
        self.sack_ok = syn.sack_permitted && cfg.sack;
        self.ecn_negotiate(shared, syn);
        if let (Some((tsval, _)), true) = (syn.timestamp, cfg.rfc1323) {
            self.ts_ok = true;
            self.drop_template();
            self.ts_recent = tsval;
            // The timestamp option takes 12 bytes of every segment.
            self.snd_mss = self.snd_mss.saturating_sub(12).max(64);
        }
        self.cc.set_mss(self.snd_mss);
    }

    /// The first sequence number of data (after the SYN).
    pub(crate) fn data_start(&self) -> SeqNumber {
        self.send_base
    }

    /// The sequence number after the last byte queued to send.
    pub(crate) fn data_end(&self) -> SeqNumber {
        self.data_start() + self.send.len()
    }

    /// Our FIN has been sent.
    pub(crate) fn fin_sent(&self) -> bool {
        self.fin_queued && self.snd_max > self.data_end()
    }

    /// Our FIN has been acknowledged.
    pub(crate) fn fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una > self.data_end()
    }

    /// Bytes sent and not acknowledged.
    pub(crate) fn flight(&self) -> usize {
        self.snd_max - self.snd_una
    }

    /// The state is one of the synchronized ones (RFC 9293 3.5.2).
    pub(crate) fn synchronized(&self) -> bool {
        !matches!(
            self.state,
            TcpState::Closed | TcpState::Listen | TcpState::SynSent | TcpState::SynReceived
        )
    }

    /// The peer may still send data.
    pub(crate) fn can_receive(&self) -> bool {
        matches!(
            self.state,
            TcpState::SynReceived | TcpState::Established | TcpState::FinWait1 | TcpState::FinWait2
        )
    }

    /// The application may still queue data.
    pub(crate) fn can_send(&self) -> bool {
        !self.fin_queued
            && matches!(
                self.state,
                TcpState::SynSent
                    | TcpState::SynReceived
                    | TcpState::Established
                    | TcpState::CloseWait
            )
    }

    /// The peer's FIN arrived: no more data will come.
    pub(crate) fn peer_closed(&self) -> bool {
        matches!(
            self.state,
            TcpState::CloseWait | TcpState::LastAck | TcpState::Closing | TcpState::TimeWait
        ) || (self.state == TcpState::Closed && self.error.is_none())
    }

    /// Free room in the send buffer.
    pub(crate) fn send_space(&self) -> usize {
        self.send_limit.saturating_sub(self.send.len())
    }

    pub(crate) fn readiness(&self) -> Readiness {
        let established = self.synchronized() || self.state == TcpState::Closed;
        Readiness {
            readable: self.readable_for_poll() > 0
                || self.peer_closed()
                || self.error.is_some()
                || self.read_shut,
            writable: (self.can_send() && established && self.send_space() > 0)
                || self.error.is_some(),
            read_closed: self.peer_closed(),
            hangup: self.state == TcpState::Closed || (self.peer_closed() && self.fin_queued),
            error: self.error.is_some(),
            urgent: self.urgent_pending(),
        }
    }

    pub(crate) fn info(&self) -> TcpInfo {
        TcpInfo {
            state: Some(self.state),
            rto: self.rtt.rto(),
            srtt: self.rtt.srtt().unwrap_or(Duration::ZERO),
            rttvar: self.rtt.rttvar(),
            snd_mss: self.snd_mss as u32,
            rcv_mss: self.rcv_mss as u32,
            cwnd: self.cc.cwnd().min(u32::MAX as usize) as u32,
            ssthresh: self.cc.ssthresh().min(u32::MAX as usize) as u32,
            snd_wnd: self.snd_wnd.min(u32::MAX as usize) as u32,
            rcv_wnd: self.recv.window().min(u32::MAX as usize) as u32,
            snd_wscale: self.snd_wscale,
            rcv_wscale: self.rcv_wscale,
            timestamps: self.ts_ok,
            sack: self.sack_ok,
            retransmits: u64::from(self.retries),
            total_retrans: self.stats.retransmits,
            bytes_acked: self.stats.bytes_acked,
            bytes_received: self.stats.bytes_received,
            unacked: self.flight() as u32,
            sacked: self.scoreboard.sacked_bytes() as u32,
            lost: 0,
        }
    }

    /// Our timestamp clock: milliseconds, offset per connection (RFC 7323
    /// 5.4 and 7.1).
    pub(crate) fn ts_now(&self, now: Instant) -> u32 {
        (now.total_millis() as u32).wrapping_add(self.ts_offset)
    }

    /// The earliest deadline of the connection.
    #[inline(always)]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.earliest()
    }

    /// Restarts the retransmission timer (RFC 6298 5.1 and 5.3).
    pub(crate) fn arm_rtx(&mut self, now: Instant) {
        self.timers.set_rtx(Some(now.add_micros(self.rtt.rto_us())));
        self.timers.set_persist(None);
    }

    /// Memory the connection holds (for the idle-connection figure).
    pub(crate) fn memory(&self) -> usize {
        core::mem::size_of::<TcpConnection>() + self.send.allocated() + self.recv.allocated()
    }

    /// Keep-alive idle time, probe interval and probe count.
    pub(crate) fn keep_idle(&self, shared: &TcpShared) -> Duration {
        self.keep_idle.unwrap_or(shared.cfg.keepidle)
    }

    pub(crate) fn keep_intvl(&self, shared: &TcpShared) -> Duration {
        self.keep_intvl.unwrap_or(shared.cfg.keepintvl)
    }

    pub(crate) fn keep_cnt(&self, shared: &TcpShared) -> u32 {
        self.keep_cnt.unwrap_or(shared.cfg.keepcnt)
    }

    /// The error a connection that gave up reports: the soft error of an
    /// ICMP error that came after the peer was last heard (RFC 1122
    /// 4.2.3.9, as Linux's `sk_err_soft`), else ETIMEDOUT.
    pub(crate) fn timeout_error(&self) -> SocketError {
        match self.soft_error {
            Some((e, at)) if at >= self.last_recv => e,
            _ => SocketError::TimedOut,
        }
    }

    /// Moves to CLOSED with an error for the application.
    pub(crate) fn fail(&mut self, error: SocketError) {
        self.state = TcpState::Closed;
        self.error = Some(error);
        self.timers = Timers::default();
    }
}
