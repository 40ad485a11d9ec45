//! What all TCP connections of a stack share: the tunables, the secret-keyed
//! generators, the timer wheel.

use crate::lend::FrameLending;
use crate::rand::{KeyedState, Rng};
use crate::ratelimit::TokenBucket;
use crate::tcp::buffer_cache::BufferCache;
use crate::tcp::isn::{IsnGenerator, PortAllocator, SynCookies};
use crate::tcp::timer_wheel::TimerWheel;
use crate::tcp::types::TcpConfig;
use crate::time::{duration_micros, Duration, Instant};

/// Idle ring storage a stack keeps for reuse at most.
pub const BUFFER_CACHE_BYTES: usize = 64 << 20;

/// How often rings that emptied are looked at: one empty and unused for
/// a whole interval gives its storage back (so within two intervals).
pub const TRIM_INTERVAL: Duration = Duration::from_millis(100);
/// The period of the ring storage cache's decay (`BufferCache::decay`):
/// storage unused for a whole period is freed.
pub const CACHE_DECAY_INTERVAL: Duration = Duration::from_millis(500);

/// Challenge ACKs per second at most (RFC 5961 section 7).
pub const CHALLENGE_ACK_LIMIT: u32 = 1000;

#[derive(Debug)]
pub(crate) struct TcpShared {
    pub cfg: TcpConfig,
    pub isn: IsnGenerator,
    pub ports: PortAllocator,
    pub cookies: SynCookies,
    pub wheel: TimerWheel,
    pub challenge_acks: TokenBucket,
    /// Ring storage of idle connections, for reuse.
    pub buffers: BufferCache,
    /// Keys the timestamp offset of each four-tuple (RFC 7323 7.1).
    pub ts_secret: KeyedState,
    /// Connections whose wheel entries fired, with the entries'
    /// deadlines; reused between polls.
    pub fired: Vec<(u32, Instant)>,
    /// Received frames lent to the connections' receive buffers.
    pub lend: FrameLending,
    /// When the next trim scan may run.
    pub next_trim: Instant,
    /// Connections with a ring that emptied and kept its storage, for the
    /// trim scan: it looks at these, not at every connection (a scan of a
    /// million idle connections every interval kept the engine busy with
    /// nothing else).  An entry whose slot was freed since is dropped by
    /// the scan.
    pub trim_list: Vec<u32>,
    /// Trim scans so far (see `TcpConnection::trim_pass`).
    pub trim_passes: u32,
    /// Scans of every connection: a ring parked where no connection
    /// claimed it (see `Stack::tcp_claim_parked`); expected to stay 0.
    pub trim_full_scans: u64,
    /// When the buffer cache's decay period ends.
    pub next_decay: Instant,
    /// `cfg.delayed_ack_timeout` in microseconds: armed on most segments
    /// with data.
    pub delack_us: u64,
    /// Sharing flows with other processes (`Stack::set_flow_handoff`).
    pub handoff: Handoff,
    /// The ACKs of in-order data wait for the end of the caller's receive
    /// burst (`Stack::set_ack_per_burst`).
    pub ack_per_burst: bool,
    /// Connections with such an ACK waiting.
    pub burst_acks: Vec<u32>,
    /// The segment being taken in arrived marked Congestion Experienced
    /// (RFC 3168; set by the general input path, which takes every such
    /// segment).
    pub segment_ce: bool,
    /// TIME-WAIT connections a full socket table may end early, the
    /// earliest to end last: (end of TIME-WAIT, index, generation), checked
    /// again before use (see `Stack::tcp_recycle_time_wait`).
    pub time_wait_victims: Vec<(Instant, u32, u32)>,
    /// When a walk of the table for TIME-WAIT victims last found none: a
    /// table held full by live connections is not walked again for every
    /// handshake refused meanwhile.
    pub time_wait_walk_found_none: Option<Instant>,
}

/// What the stack does with a TCP segment of no connection of its own when
/// other processes share its ports.
#[derive(Debug, Clone, Default)]
pub(crate) struct Handoff {
    /// Offer such segments to the other processes instead of answering
    /// them with a reset.
    pub on: bool,
    /// The segment being received was handed over by another process:
    /// if it is not ours it is dropped, not offered again.
    pub forwarded: bool,
    /// The segment just received is to be offered to the others.
    pub offer: bool,
    /// The handed-over segment just received was not ours.
    pub unclaimed: bool,
    /// The segment being received was offered and nobody took it
    /// (`Stack::receive_unclaimed`).
    pub unclaimed_offer: bool,
    /// Ports whose listener this stack closed while sharing them, newest
    /// last (at most `CLOSED_LISTENERS_MAX`): the listeners of the group's
    /// other processes take the port over (an nginx reload's new workers),
    /// and a SYN nobody took meanwhile is dropped, to come again, not
    /// refused.
    pub closed_listener_ports: Vec<u16>,
}

/// Ports [`Handoff::closed_listener_ports`] remembers at most.
pub(crate) const CLOSED_LISTENERS_MAX: usize = 64;

impl TcpShared {
    pub(crate) fn new(cfg: TcpConfig, rng: &mut Rng) -> Self {
        let ports = PortAllocator::new(KeyedState::from_rng(rng), cfg.port_first, cfg.port_last)
            .with_steering(cfg.steering.clone());
        TcpShared {
            isn: IsnGenerator::new(KeyedState::from_rng(rng)),
            ports,
            cookies: SynCookies::new(KeyedState::from_rng(rng)),
            wheel: TimerWheel::new(Duration::from_millis(1), 4096, Instant::ZERO),
            challenge_acks: TokenBucket::new(CHALLENGE_ACK_LIMIT),
            ts_secret: KeyedState::from_rng(rng),
            buffers: BufferCache::new(BUFFER_CACHE_BYTES),
            fired: Vec::new(),
            lend: FrameLending::default(),
            next_trim: Instant::ZERO,
            trim_list: Vec::new(),
            trim_passes: 0,
            trim_full_scans: 0,
            next_decay: Instant::ZERO,
            delack_us: duration_micros(cfg.delayed_ack_timeout),
            handoff: Handoff::default(),
            ack_per_burst: false,
            burst_acks: Vec::new(),
            time_wait_victims: Vec::new(),
            time_wait_walk_found_none: None,
            cfg,
            segment_ce: false,
        }
    }
}
