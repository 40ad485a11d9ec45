//! The retransmission timeout (RFC 6298): a smoothed RTT and its variation
//! from measurements, exponential backoff on expiry, and the bounds.
//!
//! Kept in whole microseconds with saturating integer arithmetic: no input
//! panics, and `rto()` is always within `[min_rto, max_rto]`.

use crate::time::Duration;

/// RFC 6298 2: "G" -- "the clock granularity", here 1 ms.
const G_US: u64 = 1_000;
/// RFC 6298 2: "K = 4".
const K: u64 = 4;

fn micros(d: Duration) -> u64 {
    crate::time::duration_micros(d)
}

/// `srtt_us` before the first measurement (a word, no `Option` tag to
/// store on every sample; no measurement comes near it).
const NO_SRTT: u64 = u64::MAX;

/// The RTO estimator of one connection.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// SRTT, once a measurement was made; [`NO_SRTT`] before.
    srtt_us: u64,
    rttvar_us: u64,
    /// RFC 6298's "RTO" before backoff: computed from each measurement,
    /// or the initial value (2.1, or 5.7's 3 s).
    base_us: u64,
    backoff: u32,
    min_us: u64,
    max_us: u64,
    /// The smallest measurement, `u64::MAX` before the first (a plain
    /// minimum per measurement).
    min_rtt_us: u64,
    /// `rto()` in microseconds, worked out whenever what it depends on
    /// changes: every segment sent and every ACK asks for it.
    rto_us: u64,
}

impl RttEstimator {
    /// RFC 6298 2.1: "Until a round-trip time (RTT) measurement has been
    /// made for a segment sent between the sender and receiver, the sender
    /// SHOULD set RTO <- 1 second" (`initial_rto`).  `min_rto` and `max_rto`
    /// are the bounds of 2.4 and 2.5 (a `max_rto` below `min_rto` is raised
    /// to it).
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        let min_us = micros(min_rto);
        let mut e = RttEstimator {
            srtt_us: NO_SRTT,
            rttvar_us: 0,
            base_us: micros(initial_rto),
            backoff: 0,
            min_us,
            max_us: micros(max_rto).max(min_us),
            min_rtt_us: u64::MAX,
            rto_us: 0,
        };
        e.update_rto();
        e
    }

    /// A new RTT measurement.  It also ends any backoff: a measurement is
    /// only valid for a segment that was not retransmitted (Karn's
    /// algorithm, RFC 6298 3), so the path is answering again.
    ///
    /// 2.2, the first: "SRTT <- R, RTTVAR <- R/2, RTO <- SRTT + max (G,
    /// K*RTTVAR)".  2.3, later ones: "RTTVAR <- (1 - beta) * RTTVAR + beta *
    /// |SRTT - R'|" then "SRTT <- (1 - alpha) * SRTT + alpha * R'" (the
    /// RTTVAR update uses the old SRTT), alpha = 1/8, beta = 1/4.
    pub fn sample(&mut self, rtt: Duration) {
        self.sample_us(micros(rtt));
    }

    /// [`sample`](Self::sample) of `r` microseconds.
    #[inline(always)]
    pub fn sample_us(&mut self, r: u64) {
        let srtt = if self.srtt_us == NO_SRTT {
            self.rttvar_us = r / 2;
            r
        } else {
            let srtt = self.srtt_us;
            let delta = srtt.abs_diff(r);
            self.rttvar_us = self.rttvar_us - self.rttvar_us / 4 + delta / 4;
            srtt - srtt / 8 + r / 8
        };
        self.srtt_us = srtt;
        self.base_us = srtt.saturating_add(G_US.max(self.rttvar_us.saturating_mul(K)));
        self.min_rtt_us = self.min_rtt_us.min(r);
        self.backoff = 0;
        // `update_rto` with no backoff.
        self.rto_us = self.base_us.max(self.min_us).min(self.max_us);
    }

    /// The current RTO: the computed value doubled once per backoff (5.5),
    /// then bounded.  2.4: "Whenever RTO is computed, if it is less than 1
    /// second, then the RTO SHOULD be rounded up to 1 second" -- here to
    /// `min_rto` (Linux uses 200 ms); 2.5: "A maximum value MAY be placed on
    /// RTO provided it is at least 60 seconds" (`max_rto`).
    ///
    /// The bound comes first: 5.5 doubles the RTO in use, so a computed
    /// value below the minimum backs off from the minimum (200, 400, 800
    /// ms), not from itself (which would stay under the floor for several
    /// expiries and retransmit every 200 ms).
    #[inline]
    pub fn rto(&self) -> Duration {
        Duration::from_micros(self.rto_us)
    }

    /// [`rto`](Self::rto) in microseconds.
    #[inline]
    pub fn rto_us(&self) -> u64 {
        self.rto_us
    }

    fn update_rto(&mut self) {
        let factor = 1u64.checked_shl(self.backoff).unwrap_or(u64::MAX);
        let rto = self.base_us.max(self.min_us).saturating_mul(factor);
        self.rto_us = rto.min(self.max_us);
    }

    /// 5.5: "The host MUST set RTO <- RTO * 2 ("back off the timer")".
    /// The count keeps going (the connection may count retries with it);
    /// `rto()` stays at most `max_rto` however large it gets.
    pub fn backoff(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
        self.update_rto();
    }

    /// Clears the backoff.  RFC 6298 5.7 keeps the backed-off RTO until an
    /// acknowledgment of new data (and [`Self::sample`] clears it on a new
    /// measurement); a connection that acknowledges new data without a
    /// measurement (no timestamps, only retransmitted data acknowledged)
    /// may call this when it restarts the timer.
    #[inline]
    pub fn reset_backoff(&mut self) {
        if self.backoff != 0 {
            self.backoff = 0;
            self.update_rto();
        }
    }

    /// How many times the timer was backed off since the last measurement
    /// or reset.
    pub fn backoff_count(&self) -> u32 {
        self.backoff
    }

    /// The smoothed RTT, once a measurement was made.
    pub fn srtt(&self) -> Option<Duration> {
        (self.srtt_us != NO_SRTT).then(|| Duration::from_micros(self.srtt_us))
    }

    /// The RTT variation (zero before the first measurement).
    pub fn rttvar(&self) -> Duration {
        Duration::from_micros(self.rttvar_us)
    }

    /// The smallest measurement seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        (self.min_rtt_us != u64::MAX).then(|| Duration::from_micros(self.min_rtt_us))
    }

    /// Re-initializes the RTO to `rto` (and clears the backoff) until the
    /// next measurement.  RFC 6298 5.7: "If the timer expires awaiting the
    /// ACK of a SYN segment and the TCP implementation is using an RTO less
    /// than 3 seconds, the RTO MUST be re-initialized to 3 seconds when data
    /// transmission begins (i.e., after the three-way handshake completes)."
    /// SRTT and RTTVAR are kept: the next measurement updates them (2.3).
    pub fn set_initial(&mut self, rto: Duration) {
        self.base_us = micros(rto);
        self.backoff = 0;
        self.update_rto();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn est() -> RttEstimator {
        RttEstimator::new(Duration::from_secs(1), ms(200), Duration::from_secs(60))
    }

    #[test]
    fn rfc6298_2_1_initial_rto() {
        let e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rttvar(), Duration::ZERO);
        assert_eq!(e.min_rtt(), None);
    }

    #[test]
    fn rfc6298_2_2_first_measurement() {
        let mut e = est();
        e.sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        // RTO = 100 + max(1, 4 * 50) = 300 ms.
        assert_eq!(e.rto(), ms(300));
        assert_eq!(e.min_rtt(), Some(ms(100)));
    }

    #[test]
    fn rfc6298_2_3_later_measurements() {
        let mut e = est();
        e.sample(ms(100));
        e.sample(ms(200));
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5 ms (old SRTT);
        // SRTT = 7/8 * 100 + 1/8 * 200 = 112.5 ms.
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
        e.sample(ms(50));
        assert_eq!(e.min_rtt(), Some(ms(50)));
        // Steady samples converge: RTTVAR decays, SRTT approaches R.
        for _ in 0..200 {
            e.sample(ms(80));
        }
        let srtt = e.srtt().unwrap();
        assert!(srtt > ms(79) && srtt <= ms(81), "{srtt:?}");
        assert!(e.rttvar() < ms(1));
    }

    #[test]
    fn rfc6298_2_2_clock_granularity_term() {
        // RTTVAR of zero: RTO = SRTT + G.
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::ZERO, Duration::MAX);
        e.sample(Duration::ZERO);
        assert_eq!(e.rto(), ms(1));
        for _ in 0..100 {
            e.sample(ms(10));
        }
        assert!(e.rto() >= ms(11));
    }

    #[test]
    fn rfc6298_2_4_minimum_rto() {
        let mut e = est();
        e.sample(ms(1));
        assert_eq!(e.rto(), ms(200));
        let mut e = RttEstimator::new(ms(100), Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.sample(ms(10));
        assert_eq!(e.rto(), Duration::from_secs(1));
    }

    #[test]
    fn rfc6298_2_5_maximum_rto() {
        let mut e = est();
        e.sample(Duration::from_secs(100));
        assert_eq!(e.rto(), Duration::from_secs(60));
        // A maximum below the minimum is raised to it.
        let e = RttEstimator::new(Duration::from_secs(1), ms(500), ms(100));
        assert_eq!(e.rto(), ms(500));
    }

    #[test]
    fn rfc6298_5_5_backoff_doubles_up_to_max() {
        let mut e = est();
        e.sample(ms(100)); // 300 ms
        let mut expect = ms(300);
        for n in 1..=7 {
            e.backoff();
            expect *= 2;
            assert_eq!(e.backoff_count(), n);
            assert_eq!(e.rto(), expect.min(Duration::from_secs(60)));
        }
        // 300 ms * 2^8 = 76.8 s > 60 s.
        e.backoff();
        assert_eq!(e.rto(), Duration::from_secs(60));
        for _ in 0..100 {
            e.backoff();
        }
        assert_eq!(e.backoff_count(), 108);
        assert_eq!(e.rto(), Duration::from_secs(60));
        e.reset_backoff();
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn rfc6298_5_5_backoff_starts_from_the_minimum() {
        let mut e = est();
        e.sample(ms(0));
        assert_eq!(e.rto(), ms(200));
        e.backoff();
        assert_eq!(e.rto(), ms(400));
        e.backoff();
        assert_eq!(e.rto(), ms(800));
    }

    #[test]
    fn rfc6298_3_measurement_ends_backoff() {
        let mut e = est();
        e.backoff();
        e.backoff();
        assert_eq!(e.rto(), Duration::from_secs(4));
        e.sample(ms(100));
        assert_eq!(e.backoff_count(), 0);
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn rfc6298_5_7_syn_timeout_reinitializes_to_3s() {
        let mut e = est();
        e.backoff();
        e.set_initial(Duration::from_secs(3));
        assert_eq!(e.backoff_count(), 0);
        assert_eq!(e.rto(), Duration::from_secs(3));
        // The first measurement then replaces it (2.2).
        e.sample(ms(100));
        assert_eq!(e.rto(), ms(300));
        assert_eq!(e.rttvar(), ms(50));
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let mut e = RttEstimator::new(Duration::MAX, Duration::MAX, Duration::ZERO);
        e.sample(Duration::MAX);
        e.sample(Duration::ZERO);
        e.sample(Duration::MAX);
        for _ in 0..70 {
            e.backoff();
        }
        assert_eq!(e.rto(), Duration::from_micros(u64::MAX));
        e.set_initial(Duration::MAX);
        let _ = (e.srtt(), e.rttvar(), e.min_rtt(), e.rto());
    }
}
