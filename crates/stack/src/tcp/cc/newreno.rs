//! NewReno's window arithmetic: RFC 5681 slow start and congestion
//! avoidance, with RFC 3465 byte counting and RFC 6928's initial window.
//! The loss recovery half of NewReno (RFC 6582: partial ACKs, the recovery
//! point, the inflated window through `pipe`) lives in the connection.
//!
//! All sizes are bytes.  Every operation saturates: no input panics.

use super::CongestionControl;
use crate::time::Instant;

/// `ssthresh` before the first congestion event.  RFC 5681 3.1: "The
/// initial value of ssthresh SHOULD be set arbitrarily high (e.g., to the
/// size of the largest possible advertised window)".  Half of `usize::MAX`,
/// so that sums with it cannot overflow.
pub(super) const INITIAL_SSTHRESH: usize = usize::MAX / 2;

/// RFC 6928's initial window, counted in segments as Linux does (10 MSS,
/// never below RFC 5681's 2 MSS).
pub(super) fn initial_window(mss: usize) -> usize {
    mss.saturating_mul(10).max(mss.saturating_mul(2))
}

/// Whether the sender is using its window enough for the window to grow.
///
/// RFC 7661 4.3: the cwnd is "validated" when "pipeACK >= (1/2)*cwnd";
/// RFC 9438 5.8: "CUBIC does not increase cwnd when a flow is application
/// limited."  An application-limited sender that kept growing its window
/// would later burst a window it never tested.  The same rule as Linux's
/// slow start (`cwnd < 2 * packets_out`).
pub(super) fn cwnd_limited(in_flight: usize, cwnd: usize) -> bool {
    in_flight.saturating_mul(2) >= cwnd
}

/// RFC 5681 / RFC 6582 NewReno congestion window.  Laid out in
/// declaration order, so that `mss`, `cwnd` and `ssthresh` sit where CUBIC
/// has them (see [`Cc`](super::Cc)).
#[derive(Debug, Clone)]
#[repr(C)]
pub struct NewReno {
    mss: usize,
    cwnd: usize,
    ssthresh: usize,
    /// RFC 3465 2.1 "bytes_acked": bytes acknowledged in congestion
    /// avoidance since `cwnd` last grew.
    bytes_acked: usize,
    /// A loss episode (a congestion event or a timeout) whose `ssthresh`
    /// reduction has been made and which no new acknowledgment has ended
    /// yet: a timeout inside it does not reduce `ssthresh` again.
    in_loss: bool,
}

impl NewReno {
    /// A new window for a sender whose MSS is `mss` (bytes; 0 is taken as 1).
    pub fn new(mss: usize) -> NewReno {
        let mss = mss.max(1);
        NewReno {
            mss,
            cwnd: initial_window(mss),
            ssthresh: INITIAL_SSTHRESH,
            bytes_acked: 0,
            in_loss: false,
        }
    }

    /// The sender MSS this window counts in.
    pub fn mss(&self) -> usize {
        self.mss
    }

    /// RFC 5681 eq. 4: `ssthresh = max (FlightSize / 2, 2*SMSS)`.
    fn halve(&self, in_flight: usize) -> usize {
        (in_flight / 2).max(self.mss.saturating_mul(2))
    }

    /// Congestion avoidance with RFC 3465 2.1 byte counting: "When
    /// bytes_acked becomes greater than or equal to the value of the
    /// congestion window, bytes_acked is reduced by the value of cwnd.
    /// Next, cwnd is incremented by a full-sized segment (SMSS)."  That is
    /// RFC 5681 3.1's "cwnd += SMSS*SMSS/cwnd" made exact: one SMSS per RTT.
    fn congestion_avoidance(&mut self, acked: usize) {
        self.bytes_acked = self.bytes_acked.saturating_add(acked);
        if self.bytes_acked >= self.cwnd {
            self.bytes_acked -= self.cwnd;
            self.cwnd = self.cwnd.saturating_add(self.mss);
            // At most one SMSS per window however large one ACK was
            // (RFC 3465: the increase is per RTT, not per byte).
            self.bytes_acked = self.bytes_acked.min(self.cwnd.saturating_sub(1));
        }
    }
}

impl CongestionControl for NewReno {
    fn cwnd(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    #[inline]
    fn on_ack(&mut self, _now: Instant, acked: usize, _rtt_us: Option<u64>, in_flight: usize) {
        if acked == 0 {
            return;
        }
        // New data was acknowledged: the loss episode, if any, is over.
        self.in_loss = false;
        if !cwnd_limited(in_flight, self.cwnd) {
            return;
        }
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            // RFC 5681 3.1: "During slow start, a TCP increments cwnd by at
            // most SMSS bytes for each ACK received that cumulatively
            // acknowledges new data"; RFC 3465 2.2 lets byte counting use
            // "a limit of L=2*SMSS bytes" per ACK, which covers delayed ACKs.
            let grown = self
                .cwnd
                .saturating_add(acked.min(self.mss.saturating_mul(2)));
            if grown <= self.ssthresh {
                self.cwnd = grown;
                return;
            }
            // Crossed ssthresh: the rest of this ACK counts toward
            // congestion avoidance ("When cwnd and ssthresh are equal, the
            // sender may use either slow start or congestion avoidance").
            acked = grown - self.ssthresh;
            self.cwnd = self.ssthresh;
        }
        self.congestion_avoidance(acked);
    }

    /// RFC 5681 3.2 step 2: "ssthresh = max (FlightSize / 2, 2*SMSS)"; the
    /// window during recovery is `ssthresh` (step 3's "+ 3*SMSS" inflation and
    /// RFC 6582's partial-ACK handling are the connection's, through pipe).
    fn on_congestion_event(&mut self, _now: Instant, in_flight: usize) {
        self.ssthresh = self.halve(in_flight);
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
        self.in_loss = true;
    }

    /// RFC 6582 3.2 step 3 (full acknowledgment): "Set cwnd to either (1)
    /// min (ssthresh, max(FlightSize, SMSS) + SMSS) or (2) ssthresh"; this is
    /// option (2).
    fn on_recovery_exit(&mut self, _now: Instant) {
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
        self.in_loss = false;
    }

    /// RFC 5681 3.1: "When a TCP sender detects segment loss using the
    /// retransmission timer and the given segment has not yet been resent by
    /// way of the retransmission timer, the value of ssthresh MUST be set to
    /// no more than the value given in equation (4)" and "cwnd MUST be set to
    /// no more than the loss window, LW, which equals 1 full-sized segment".
    /// A timeout with no new acknowledgment since the last reduction (the same
    /// segment timing out again, or a timeout during fast recovery) keeps
    /// `ssthresh`, as Linux does.
    fn on_rto(&mut self, _now: Instant, in_flight: usize) {
        if !self.in_loss {
            self.ssthresh = self.halve(in_flight);
        }
        self.cwnd = self.mss;
        self.bytes_acked = 0;
        self.in_loss = true;
    }

    /// RFC 5681 4.1: "a TCP SHOULD set cwnd to no more than RW before
    /// beginning transmission if the TCP has not sent data in an interval
    /// exceeding the retransmission timeout", where "RW = min(IW,cwnd)".
    fn on_idle_restart(&mut self, _now: Instant) {
        self.cwnd = self.cwnd.min(initial_window(self.mss));
        self.bytes_acked = 0;
    }

    /// A new sender MSS.  While the window is still the untouched initial
    /// window (nothing acknowledged, no loss), it is recomputed for the new
    /// MSS (RFC 6928's IW is counted in segments).  The window never stays
    /// below one segment, nor `ssthresh` below RFC 5681's 2*SMSS.
    fn set_mss(&mut self, mss: usize) {
        let mss = mss.max(1);
        let untouched = self.cwnd == initial_window(self.mss) && self.ssthresh == INITIAL_SSTHRESH;
        self.mss = mss;
        if untouched {
            self.cwnd = initial_window(mss);
        }
        self.cwnd = self.cwnd.max(mss);
        self.ssthresh = self.ssthresh.max(mss.saturating_mul(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    fn t0() -> Instant {
        Instant::ZERO
    }

    /// Acknowledges one full window in MSS-sized ACKs, as a cwnd-limited
    /// sender (which refills the window after each ACK) sees one round trip.
    fn one_rtt(cc: &mut NewReno) {
        let window = cc.cwnd();
        let mut acked = 0;
        while acked < window {
            cc.on_ack(t0(), MSS, None, cc.cwnd());
            acked += MSS;
        }
    }

    #[test]
    fn rfc6928_initial_window_is_ten_segments() {
        let cc = NewReno::new(MSS);
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.ssthresh(), INITIAL_SSTHRESH);
        // Never below 2 MSS, and an MSS of 0 does not give a zero window.
        assert_eq!(NewReno::new(0).cwnd(), 10);
    }

    #[test]
    fn rfc5681_3_1_slow_start_doubles_per_rtt() {
        let mut cc = NewReno::new(MSS);
        for _ in 0..3 {
            one_rtt(&mut cc);
        }
        assert_eq!(cc.cwnd(), 80 * MSS);
    }

    #[test]
    fn rfc3465_2_2_slow_start_counts_at_most_two_segments_per_ack() {
        let mut cc = NewReno::new(MSS);
        cc.on_ack(t0(), 10 * MSS, None, 10 * MSS);
        assert_eq!(cc.cwnd(), 12 * MSS);
        // Less than a segment counts as what it is (byte counting).
        cc.on_ack(t0(), 100, None, 12 * MSS);
        assert_eq!(cc.cwnd(), 12 * MSS + 100);
    }

    #[test]
    fn rfc5681_3_1_congestion_avoidance_one_segment_per_rtt() {
        let mut cc = NewReno::new(MSS);
        cc.on_congestion_event(t0(), 40 * MSS);
        cc.on_recovery_exit(t0());
        assert_eq!(cc.cwnd(), 20 * MSS);
        for n in 1..=5 {
            one_rtt(&mut cc);
            assert_eq!(cc.cwnd(), (20 + n) * MSS);
        }
        // An ACK of a huge amount still grows by one segment.
        cc.on_ack(t0(), usize::MAX, None, usize::MAX);
        assert_eq!(cc.cwnd(), 26 * MSS);
    }

    #[test]
    fn rfc5681_slow_start_stops_at_ssthresh() {
        let mut cc = NewReno::new(MSS);
        cc.on_congestion_event(t0(), 30 * MSS);
        cc.on_recovery_exit(t0());
        cc.on_idle_restart(t0());
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.ssthresh(), 15 * MSS);
        for _ in 0..3 {
            one_rtt(&mut cc);
        }
        // 10 -> 20 would pass 15: slow start up to 15, then +1 per RTT.
        assert!(
            cc.cwnd() >= 15 * MSS && cc.cwnd() <= 17 * MSS,
            "{}",
            cc.cwnd()
        );
    }

    #[test]
    fn rfc5681_3_2_congestion_event_halves_flight_size() {
        let mut cc = NewReno::new(MSS);
        cc.on_congestion_event(t0(), 30 * MSS);
        assert_eq!(cc.ssthresh(), 15 * MSS);
        assert_eq!(cc.cwnd(), 15 * MSS);
        cc.on_recovery_exit(t0());
        assert_eq!(cc.cwnd(), 15 * MSS);
        // Floor of 2*SMSS.
        cc.on_congestion_event(t0(), MSS);
        assert_eq!(cc.ssthresh(), 2 * MSS);
    }

    #[test]
    fn rfc5681_3_1_rto_loss_window_and_repeated_timeout() {
        let mut cc = NewReno::new(MSS);
        one_rtt(&mut cc);
        cc.on_rto(t0(), 20 * MSS);
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.ssthresh(), 10 * MSS);
        // The same segment times out again: ssthresh is not reduced again.
        cc.on_rto(t0(), MSS);
        assert_eq!(cc.ssthresh(), 10 * MSS);
        assert_eq!(cc.cwnd(), MSS);
        // New data acknowledged ends the episode; a later timeout reduces.
        cc.on_ack(t0(), MSS, None, MSS);
        assert_eq!(cc.cwnd(), 2 * MSS);
        cc.on_rto(t0(), 8 * MSS);
        assert_eq!(cc.ssthresh(), 4 * MSS);
        // A timeout during fast recovery keeps the recovery's ssthresh.
        let mut cc = NewReno::new(MSS);
        cc.on_congestion_event(t0(), 40 * MSS);
        cc.on_rto(t0(), 40 * MSS);
        assert_eq!(cc.ssthresh(), 20 * MSS);
        assert_eq!(cc.cwnd(), MSS);
    }

    #[test]
    fn rfc5681_4_1_restart_window() {
        let mut cc = NewReno::new(MSS);
        for _ in 0..4 {
            one_rtt(&mut cc);
        }
        assert!(cc.cwnd() > 10 * MSS);
        cc.on_idle_restart(t0());
        assert_eq!(cc.cwnd(), 10 * MSS);
        // RW = min(IW, cwnd): a small window stays.
        cc.on_rto(t0(), 10 * MSS);
        cc.on_idle_restart(t0());
        assert_eq!(cc.cwnd(), MSS);
    }

    #[test]
    fn rfc7661_application_limited_sender_does_not_grow() {
        let mut cc = NewReno::new(MSS);
        cc.on_ack(t0(), MSS, None, MSS);
        cc.on_ack(t0(), MSS, None, 0);
        assert_eq!(cc.cwnd(), 10 * MSS);
        cc.on_ack(t0(), MSS, None, 5 * MSS);
        assert_eq!(cc.cwnd(), 11 * MSS);
    }

    #[test]
    fn set_mss_recomputes_untouched_initial_window_only() {
        let mut cc = NewReno::new(536);
        cc.set_mss(1460);
        assert_eq!(cc.cwnd(), 14_600);
        one_rtt(&mut cc);
        let grown = cc.cwnd();
        cc.set_mss(1000);
        assert_eq!(cc.cwnd(), grown);
        // After a timeout the window is at least one (new) segment.
        cc.on_rto(t0(), grown);
        cc.set_mss(9000);
        assert_eq!(cc.cwnd(), 9000);
        assert!(cc.ssthresh() >= 18_000);
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        for mss in [0, 1, usize::MAX / 3, usize::MAX] {
            let mut cc = NewReno::new(mss);
            for acked in [0, 1, usize::MAX] {
                for fl in [0, 1, usize::MAX] {
                    cc.on_ack(t0(), acked, Some(0), fl);
                    cc.on_congestion_event(t0(), fl);
                    cc.on_ack(t0(), acked, None, fl);
                    cc.on_recovery_exit(t0());
                    cc.on_rto(t0(), fl);
                    cc.on_idle_restart(t0());
                    cc.set_mss(acked);
                    assert!(cc.cwnd() >= 1);
                }
            }
        }
    }
}
