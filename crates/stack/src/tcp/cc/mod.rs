//! Congestion control behind one small interface (RFC 5681's variables):
//! the connection tells it what happened, it keeps `cwnd` and `ssthresh`.
//! Loss *recovery* (which segment to resend, RFC 6675 / RFC 6582) lives in
//! the connection; only the window arithmetic lives here.

mod cubic;
mod newreno;

pub use cubic::Cubic;
pub use newreno::NewReno;

use crate::time::Instant;

/// The algorithms, as `net.inet.tcp.cc.algorithm` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcAlgorithm {
    Cubic,
    NewReno,
}

impl CcAlgorithm {
    pub fn name(self) -> &'static str {
        match self {
            CcAlgorithm::Cubic => "cubic",
            CcAlgorithm::NewReno => "newreno",
        }
    }
}

/// The interface every algorithm implements.  All sizes are bytes.
pub trait CongestionControl {
    /// The congestion window.
    fn cwnd(&self) -> usize;
    /// The slow start threshold.
    fn ssthresh(&self) -> usize;
    /// New data was acknowledged outside loss recovery: grow the window
    /// (slow start, or the algorithm's congestion avoidance).  `acked` is
    /// the bytes newly acknowledged, `rtt_us` a sample in microseconds if
    /// the ACK gave one (as the RTT estimator keeps them), `in_flight` the
    /// bytes outstanding before this ACK.
    fn on_ack(&mut self, now: Instant, acked: usize, rtt_us: Option<u64>, in_flight: usize);
    /// Loss was detected by duplicate ACKs or SACK (a congestion event):
    /// set `ssthresh` (and for CUBIC, remember `W_max`) and the window to
    /// use during recovery.  `in_flight` is FlightSize (RFC 5681 eq. 4).
    fn on_congestion_event(&mut self, now: Instant, in_flight: usize);
    /// Loss recovery ended (the recovery point was acknowledged): set the
    /// window to `ssthresh` (RFC 6582 step 3 "full acknowledgment").
    fn on_recovery_exit(&mut self, now: Instant);
    /// The retransmission timer expired (RFC 5681 eq. 4 and cwnd = 1 MSS).
    fn on_rto(&mut self, now: Instant, in_flight: usize);
    /// The connection sent nothing for longer than an RTO (RFC 5681 4.1,
    /// restart window).
    fn on_idle_restart(&mut self, now: Instant);
    /// The sender's MSS changed (it is known only after the handshake).
    fn set_mss(&mut self, mss: usize);
}

/// One connection's congestion control: an enum, not a box, so a
/// connection allocates nothing for it and calls dispatch statically.
/// The algorithms' states start alike (`mss`, `cwnd`, `ssthresh`, each
/// `#[repr(C)]`) behind a tag of their own (`#[repr(u8)]`: each variant
/// is laid out as the tag then its state), so that reading the window,
/// which every segment sent and ACK taken does, is one load whichever the
/// algorithm.  (The tag costs a word: a niche for it would let the two
/// states start at different places.)
#[derive(Debug, Clone)]
#[repr(u8)]
pub enum Cc {
    NewReno(NewReno),
    Cubic(Cubic),
}

impl Cc {
    /// The algorithm with RFC 5681's initial window for `mss`
    /// (RFC 6928's 10 segments, as Linux).
    pub fn new(alg: CcAlgorithm, mss: usize, now: Instant) -> Self {
        match alg {
            CcAlgorithm::NewReno => Cc::NewReno(NewReno::new(mss)),
            CcAlgorithm::Cubic => Cc::Cubic(Cubic::new(mss, now)),
        }
    }

    pub fn algorithm(&self) -> CcAlgorithm {
        match self {
            Cc::NewReno(_) => CcAlgorithm::NewReno,
            Cc::Cubic(_) => CcAlgorithm::Cubic,
        }
    }
}

/// Calls `$call` on the algorithm: a `match`, so that each call is direct
/// (and may be inlined) rather than through a vtable.
macro_rules! each {
    ($self:expr, $c:ident => $call:expr) => {
        match $self {
            Cc::NewReno($c) => $call,
            Cc::Cubic($c) => $call,
        }
    };
}

impl CongestionControl for Cc {
    #[inline]
    fn cwnd(&self) -> usize {
        each!(self, c => c.cwnd())
    }
    fn ssthresh(&self) -> usize {
        each!(self, c => c.ssthresh())
    }
    #[inline]
    fn on_ack(&mut self, now: Instant, acked: usize, rtt_us: Option<u64>, in_flight: usize) {
        each!(self, c => c.on_ack(now, acked, rtt_us, in_flight))
    }
    fn on_congestion_event(&mut self, now: Instant, in_flight: usize) {
        each!(self, c => c.on_congestion_event(now, in_flight))
    }
    fn on_recovery_exit(&mut self, now: Instant) {
        each!(self, c => c.on_recovery_exit(now))
    }
    fn on_rto(&mut self, now: Instant, in_flight: usize) {
        each!(self, c => c.on_rto(now, in_flight))
    }
    fn on_idle_restart(&mut self, now: Instant) {
        each!(self, c => c.on_idle_restart(now))
    }
    fn set_mss(&mut self, mss: usize) {
        each!(self, c => c.set_mss(mss))
    }
}
