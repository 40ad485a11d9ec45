//! CUBIC (RFC 9438): after a congestion event the window follows
//! `W_cubic(t) = C*(t-K)^3 + W_max` (concave up to the old maximum, then
//! convex beyond it), but never less than a Reno-friendly estimate `W_est`.
//! Slow start, the initial window, the restart window and the loss window
//! are RFC 5681's, as in [`super::NewReno`].
//!
//! Windows are kept in bytes (`cwnd`, `ssthresh`); the cubic function works
//! in segments (RFC 9438 section 4: "all window sizes are in units of
//! segments ... and all time units are in seconds") with `f64`, which is
//! cheap, allocation free, and guarded so that no input (zero MSS, huge
//! ACKs, zero RTT) yields NaN, infinity or a panic.

use super::newreno::{cwnd_limited, initial_window, INITIAL_SSTHRESH};
use super::CongestionControl;
use crate::time::{Duration, Instant};

/// RFC 9438 5.1: "C SHOULD be set to 0.4".
const C: f64 = 0.4;
/// RFC 9438 4.6: "Parameter beta_cubic SHOULD be set to 0.7".
const BETA: f64 = 0.7;
/// RFC 9438 4.3: "alpha_cubic = 3 * (1 - beta_cubic) / (1 + beta_cubic)".
const ALPHA: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);
/// The RTT used before any sample.
const DEFAULT_RTT: Duration = Duration::from_millis(100);

/// The state of one congestion avoidance stage (an "epoch").
#[derive(Debug, Clone, Copy)]
struct Epoch {
    /// When the stage began (shifted forward by application-limited time,
    /// RFC 9438 5.8).
    start: Instant,
    /// Seconds for `W_cubic` to climb back to `W_max` (RFC 9438 eq. 2).
    k: f64,
    /// RFC 9438 4.3's `W_est`, in segments.
    w_est: f64,
}

/// RFC 9438 CUBIC congestion window.  Laid out in declaration order, so
/// that `mss`, `cwnd` and `ssthresh` sit where NewReno has them (see
/// [`Cc`](super::Cc)).
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Cubic {
    mss: usize,
    cwnd: usize,
    ssthresh: usize,
    /// Fractional bytes of window growth not yet added to `cwnd`.
    carry: f64,
    /// RFC 9438 4.2 `W_max`, in segments; `None` before the first congestion
    /// event and after a timeout (4.8: then K = 0 and W_max is the window at
    /// the start of congestion avoidance).
    w_max: Option<f64>,
    /// RFC 9438 4.6 `cwnd_prior`, in segments: the window before the last
    /// reduction (where `W_est`'s slope switches to Reno's).
    cwnd_prior: f64,
    /// The current congestion avoidance stage, once it has begun.
    epoch: Option<Epoch>,
    /// The smallest RTT sample seen, in microseconds; `u64::MAX` before
    /// the first.
    min_rtt_us: u64,
    /// When the last ACK was processed (for 5.8's application-limited time).
    last_ack: Instant,
    /// As in NewReno: a reduction was made and no new data has been
    /// acknowledged since, so a timeout does not reduce again.
    in_loss: bool,
}

/// Seconds, as `f64`.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A window in segments, as `f64`.
fn segs(bytes: usize, mss: usize) -> f64 {
    bytes as f64 / mss.max(1) as f64
}

impl Cubic {
    /// A new window for a sender whose MSS is `mss` (0 is taken as 1).
    pub fn new(mss: usize, now: Instant) -> Cubic {
        let mss = mss.max(1);
        Cubic {
            mss,
            cwnd: initial_window(mss),
            ssthresh: INITIAL_SSTHRESH,
            carry: 0.0,
            w_max: None,
            cwnd_prior: 0.0,
            epoch: None,
            min_rtt_us: u64::MAX,
            last_ack: now,
            in_loss: false,
        }
    }

    /// The sender MSS this window counts in.
    pub fn mss(&self) -> usize {
        self.mss
    }

    /// The smallest RTT sample seen, if any.
    pub fn min_rtt(&self) -> Option<Duration> {
        (self.min_rtt_us != u64::MAX).then(|| Duration::from_micros(self.min_rtt_us))
    }

    /// RFC 9438 eq. 1, in segments: `W_cubic(t) = C*(t-K)^3 + W_max`.
    fn w_cubic(&self, t: f64, epoch: &Epoch) -> f64 {
        let d = t - epoch.k;
        C * d * d * d + self.w_max.unwrap_or(0.0)
    }

    /// Begins a congestion avoidance stage.  RFC 9438 4.2: "K =
    /// cubic_root((W_max - cwnd_epoch)/C)", where "cwnd_epoch is the cwnd at
    /// the beginning of the current congestion avoidance stage"; 4.3: "W_est
    /// is set equal to cwnd_epoch at the start of the congestion avoidance
    /// stage".  Without a W_max (no congestion event yet, 4.10; or after a
    /// timeout, 4.8) "K is set to 0, and W_max is set to the congestion window
    /// size at the beginning of the current congestion avoidance stage"; the
    /// same when the window is already past W_max (K would be negative).
    fn start_epoch(&mut self, now: Instant) -> Epoch {
        let cwnd_epoch = segs(self.cwnd, self.mss);
        let k = match self.w_max {
            Some(w_max) if w_max > cwnd_epoch => ((w_max - cwnd_epoch) / C).cbrt(),
            _ => {
                self.w_max = Some(cwnd_epoch);
                0.0
            }
        };
        let k = if k.is_finite() { k } else { 0.0 };
        let epoch = Epoch {
            start: now,
            k,
            w_est: cwnd_epoch,
        };
        self.epoch = Some(epoch);
        epoch
    }

    /// One ACK of `acked` bytes in congestion avoidance.
    fn congestion_avoidance(&mut self, now: Instant, acked: usize) {
        let mut epoch = match self.epoch {
            Some(e) => e,
            None => self.start_epoch(now),
        };
        let cwnd = segs(self.cwnd, self.mss);
        let acked_segs = segs(acked, self.mss);
        let t = secs(now.saturating_since(epoch.start));
        let rtt = secs(self.min_rtt().unwrap_or(DEFAULT_RTT));

        // RFC 9438 4.3: "W_est = W_est + alpha_cubic * segments_acked /
        // cwnd"; "Once W_est has grown to reach the cwnd at the time of most
        // recently setting ssthresh -- that is, W_est >= cwnd_prior -- the
        // sender SHOULD set alpha_cubic to 1".
        let alpha = if epoch.w_est >= self.cwnd_prior {
            1.0
        } else {
            ALPHA
        };
        epoch.w_est += alpha * acked_segs / cwnd;

        let new_cwnd = if self.w_cubic(t, &epoch) < epoch.w_est {
            // 4.3: "If so, CUBIC is in the Reno-friendly region and cwnd
            // SHOULD be set to W_est at each reception of a new ACK."  (Never
            // lowered: cwnd may already be ahead, tracking W_cubic(t+RTT).)
            epoch.w_est.max(cwnd)
        } else {
            // 4.2: the target is W_cubic(t+RTT), bounded to [cwnd, 1.5*cwnd]
            // so that "CUBIC's congestion window increase rate is
            // non-decreasing and is less than the increase rate of slow
            // start".  RTT here is the minimum RTT (as Linux; the RFC uses
            // the smoothed RTT).  4.4 (concave) and 4.5 (convex): "cwnd MUST
            // be incremented by (target - cwnd)/cwnd for each received new
            // ACK" -- per segment acknowledged, for ACKs covering several.
            let target = self.w_cubic(t + rtt, &epoch).max(cwnd).min(1.5 * cwnd);
            cwnd + (target - cwnd) / cwnd * acked_segs
        };
        self.epoch = Some(epoch);
        self.grow_to(new_cwnd);
    }

    /// Sets the window to `new_cwnd` segments if that is larger, carrying the
    /// fraction of a byte over to the next ACK.
    fn grow_to(&mut self, new_cwnd: f64) {
        let inc = (new_cwnd - segs(self.cwnd, self.mss)) * self.mss as f64 + self.carry;
        if !inc.is_finite() || inc <= 0.0 {
            return;
        }
        let whole = inc.floor();
        self.carry = inc - whole;
        // `as` saturates for floats out of range.
        self.cwnd = self.cwnd.saturating_add(whole as usize);
    }

    /// RFC 9438 4.6: "ssthresh = flight_size * beta_cubic", floored at
    /// 2*SMSS ("ssthresh = max(ssthresh, 2)").  Computed from cwnd, as Linux
    /// does; the note in 4.6 asks such implementations to "use other measures
    /// to prevent cwnd from growing when the volume of bytes in flight is
    /// smaller than cwnd", which [`cwnd_limited`] does.
    fn reduced(&self) -> usize {
        let ss = (self.cwnd as f64 * BETA) as usize;
        ss.max(self.mss.saturating_mul(2))
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    #[inline(always)]
    fn on_ack(&mut self, now: Instant, acked: usize, rtt_us: Option<u64>, in_flight: usize) {
        if let Some(r) = rtt_us {
            self.min_rtt_us = self.min_rtt_us.min(r);
        }
        let last_ack = self.last_ack;
        self.last_ack = last_ack.max(now);
        if acked == 0 {
            return;
        }
        self.in_loss = false;
        if !cwnd_limited(in_flight, self.cwnd) {
            // RFC 9438 5.8: "CUBIC does not increase cwnd when a flow is
            // application limited", and t "does not include periods during
            // which cwnd has not been updated due to application limiting".
            if let Some(e) = &mut self.epoch {
                e.start = (e.start + now.saturating_since(last_ack)).min(now);
            }
            return;
        }
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            // RFC 9438 4.10: "When cwnd is no more than ssthresh, CUBIC MUST
            // employ a slow-start algorithm": RFC 5681 3.1 with RFC 3465's
            // L = 2*SMSS, as NewReno.
            let grown = self
                .cwnd
                .saturating_add(acked.min(self.mss.saturating_mul(2)));
            if grown <= self.ssthresh {
                self.cwnd = grown;
                return;
            }
            acked = grown - self.ssthresh;
            self.cwnd = self.ssthresh;
        }
        self.congestion_avoidance(now, acked);
    }

    /// RFC 9438 4.6 (multiplicative decrease) with 4.7 (fast convergence):
    /// "if cwnd < W_max and fast convergence enabled, further reduce W_max:
    /// W_max = cwnd * (1 + beta_cubic) / 2; otherwise, remember cwnd before
    /// reduction: W_max = cwnd"; "cwnd_prior = cwnd"; "cwnd = max(ssthresh,
    /// 2)".  The next congestion avoidance stage starts a new epoch.
    fn on_congestion_event(&mut self, _now: Instant, _in_flight: usize) {
        let cwnd = segs(self.cwnd, self.mss);
        self.w_max = Some(match self.w_max {
            Some(w_max) if cwnd < w_max => cwnd * (1.0 + BETA) / 2.0,
            _ => cwnd,
        });
        self.cwnd_prior = cwnd;
        self.ssthresh = self.reduced();
        self.cwnd = self.ssthresh;
        self.epoch = None;
        self.carry = 0.0;
        self.in_loss = true;
    }

    /// RFC 6582 3.2 step 3, option (2): cwnd = ssthresh.
    fn on_recovery_exit(&mut self, _now: Instant) {
        self.cwnd = self.ssthresh;
        self.in_loss = false;
    }

    /// RFC 9438 4.8: "In the case of a timeout, CUBIC follows Reno to reduce
    /// cwnd \[RFC5681\] but sets ssthresh using beta_cubic (same as in Section
    /// 4.6)"; "During the first congestion avoidance stage after a timeout,
    /// CUBIC increases its congestion window size using Figure 1, where t is
    /// the elapsed time since the beginning of the current congestion
    /// avoidance stage, K is set to 0, and W_max is set to the congestion
    /// window size at the beginning of the current congestion avoidance
    /// stage."  As RFC 5681 3.1, a repeated timeout with no new data
    /// acknowledged since the last reduction keeps `ssthresh`.
    fn on_rto(&mut self, _now: Instant, _in_flight: usize) {
        if !self.in_loss {
            self.cwnd_prior = segs(self.cwnd, self.mss);
            self.ssthresh = self.reduced();
        }
        self.w_max = None;
        self.cwnd = self.mss;
        self.epoch = None;
        self.carry = 0.0;
        self.in_loss = true;
    }

    /// RFC 5681 4.1's restart window, `min(IW, cwnd)`, and a new epoch: the
    /// idle time is not growth time (RFC 9438 5.8: t "does not include
    /// periods during which cwnd has not been updated due to application
    /// limiting, such as idle periods").
    fn on_idle_restart(&mut self, now: Instant) {
        self.cwnd = self.cwnd.min(initial_window(self.mss));
        self.epoch = None;
        self.carry = 0.0;
        self.last_ack = self.last_ack.max(now);
    }

    /// As [`super::NewReno::set_mss`]: an untouched initial window is
    /// recomputed for the new MSS; the window stays at least one segment.
    /// The epoch restarts, its segment counts having changed meaning.
    fn set_mss(&mut self, mss: usize) {
        let mss = mss.max(1);
        if mss == self.mss {
            return;
        }
        let untouched = self.cwnd == initial_window(self.mss) && self.ssthresh == INITIAL_SSTHRESH;
        // W_max and cwnd_prior are kept in bytes across the change.
        let scale = self.mss as f64 / mss as f64;
        self.w_max = self.w_max.map(|w| w * scale);
        self.cwnd_prior *= scale;
        self.mss = mss;
        if untouched {
            self.cwnd = initial_window(mss);
        }
        self.cwnd = self.cwnd.max(mss);
        self.ssthresh = self.ssthresh.max(mss.saturating_mul(2));
        self.epoch = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    fn micros(d: Duration) -> u64 {
        d.as_micros() as u64
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A sender that is always cwnd-limited (it refills the window after
    /// each ACK) over a path with a fixed RTT: each round trip, one window is
    /// acknowledged in `acks` evenly spaced ACKs.  Returns the time after the
    /// round trip.
    fn round_trip(cc: &mut Cubic, now: Instant, rtt: Duration, acks: usize) -> Instant {
        let window = cc.cwnd();
        let per_ack = (window / acks).max(1);
        let step = rtt / acks as u32;
        let mut t = now;
        let mut acked = 0;
        while acked < window {
            t += step;
            let n = per_ack.min(window - acked);
            cc.on_ack(t, n, Some(micros(rtt)), cc.cwnd());
            acked += n;
        }
        now + rtt
    }

    /// A Cubic that has just had a loss at a window of `w_max` segments and
    /// finished recovery.
    fn after_loss_at(w_max: usize, now: Instant) -> Cubic {
        let mut cc = Cubic::new(MSS, now);
        cc.cwnd = w_max * MSS;
        cc.on_congestion_event(now, w_max * MSS);
        cc.on_recovery_exit(now);
        cc
    }

    #[test]
    fn rfc9438_4_10_slow_start_as_reno() {
        let mut cc = Cubic::new(MSS, Instant::ZERO);
        assert_eq!(cc.cwnd(), 10 * MSS);
        let mut now = Instant::ZERO;
        for _ in 0..4 {
            let acks = cc.cwnd() / MSS;
            now = round_trip(&mut cc, now, ms(10), acks);
        }
        assert_eq!(cc.cwnd(), 160 * MSS);
        assert_eq!(cc.ssthresh(), INITIAL_SSTHRESH);
    }

    #[test]
    fn rfc9438_4_6_loss_reduces_to_beta_times_window() {
        let mut cc = after_loss_at(100, Instant::ZERO);
        assert_eq!(cc.cwnd(), 70 * MSS);
        assert_eq!(cc.ssthresh(), 70 * MSS);
        assert_eq!(cc.w_max, Some(100.0));
        // Floor of 2 segments.
        cc.cwnd = MSS;
        cc.on_congestion_event(Instant::ZERO, MSS);
        assert_eq!(cc.ssthresh(), 2 * MSS);
    }

    #[test]
    fn rfc9438_4_7_fast_convergence() {
        let mut cc = after_loss_at(100, Instant::ZERO);
        // A second loss below the previous W_max releases bandwidth:
        // W_max = cwnd * (1 + beta) / 2.
        cc.cwnd = 80 * MSS;
        cc.on_congestion_event(Instant::ZERO, 80 * MSS);
        let w_max = cc.w_max.unwrap();
        assert!((w_max - 80.0 * 1.7 / 2.0).abs() < 1e-9, "{w_max}");
        assert_eq!(cc.cwnd(), 56 * MSS);
    }

    #[test]
    fn rfc9438_4_2_concave_then_convex_reaching_w_max_at_k() {
        // W_max = 10000 segments, RTT 10 ms: large enough that the cubic
        // function, not the Reno-friendly estimate, drives the window.
        let w_max = 10_000.0;
        let rtt = ms(10);
        let mut now = Instant::from_secs(1);
        let mut cc = after_loss_at(10_000, now);
        let k = ((w_max * (1.0 - BETA)) / C).cbrt();
        assert!((k - 19.574).abs() < 0.01, "K = {k}");
        let start = now;
        // cwnd (segments) at the end of each simulated second.
        let mut per_second = vec![segs(cc.cwnd(), MSS)];
        let mut at_k = None;
        for _second in 0..40 {
            for _ in 0..100 {
                now = round_trip(&mut cc, now, rtt, 100);
                let t = secs(now.saturating_since(start));
                if at_k.is_none() && t >= k {
                    at_k = Some(segs(cc.cwnd(), MSS));
                }
            }
            per_second.push(segs(cc.cwnd(), MSS));
        }
        // At t = K the window is back at W_max (within 1%).
        let at_k = at_k.unwrap();
        assert!((at_k - w_max).abs() < 0.01 * w_max, "W(K) = {at_k}");
        // Concave before K: growth per second shrinks...
        let growth = |s: usize| per_second[s + 1] - per_second[s];
        assert!(growth(0) > growth(10), "{} {}", growth(0), growth(10));
        assert!(growth(10) > growth(18), "{} {}", growth(10), growth(18));
        // ...convex after K: it grows again.
        assert!(growth(21) < growth(30), "{} {}", growth(21), growth(30));
        assert!(growth(30) < growth(38), "{} {}", growth(30), growth(38));
        // And it follows the curve: at t = 30 s, W = C*(30-K)^3 + W_max
        // (cwnd tracks W_cubic(t + RTT); allow 2%).
        let expect = C * (30.0 - k + 0.01f64).powi(3) + w_max;
        let got = per_second[30];
        assert!(
            (got - expect).abs() < 0.02 * expect,
            "W(30) = {got}, expected {expect}"
        );
    }

    #[test]
    fn rfc9438_4_3_reno_friendly_region_at_small_window_and_short_rtt() {
        // W_max = 20 segments, RTT 1 ms: Reno would grow 1 segment per
        // millisecond, far faster than the cubic curve (K = 2.47 s).
        let rtt = ms(1);
        let mut now = Instant::ZERO;
        let mut cc = after_loss_at(20, now);
        let start = now;
        for _ in 0..100 {
            now = round_trip(&mut cc, now, rtt, 4);
        }
        let epoch = cc.epoch.unwrap();
        let t = secs(now.saturating_since(start));
        let w_cubic = cc.w_cubic(t, &epoch);
        let w = segs(cc.cwnd(), MSS);
        assert!(w_cubic < 16.0, "{w_cubic}");
        // W_est: +0.53 per RTT up to cwnd_prior (20), then +1 per RTT.
        assert!(w > 90.0 && w < 120.0, "cwnd = {w} segments");
        assert!((w - epoch.w_est).abs() < 1.0);
    }

    #[test]
    fn rfc9438_4_8_timeout() {
        let now = Instant::from_secs(5);
        let mut cc = after_loss_at(100, now);
        cc.on_rto(now, 70 * MSS);
        assert_eq!(cc.cwnd(), MSS);
        assert_eq!(cc.ssthresh(), 49 * MSS);
        // The segment times out again: no further reduction.
        cc.on_rto(now, 70 * MSS);
        assert_eq!(cc.ssthresh(), 49 * MSS);
        // Slow start to ssthresh, then the first epoch has K = 0 and
        // W_max = the window at its start.
        let mut t = now;
        while cc.cwnd() < cc.ssthresh() {
            let acks = cc.cwnd() / MSS;
            t = round_trip(&mut cc, t, ms(10), acks);
        }
        round_trip(&mut cc, t, ms(10), 10);
        let epoch = cc.epoch.unwrap();
        assert_eq!(epoch.k, 0.0);
        assert_eq!(cc.w_max, Some(49.0));
    }

    #[test]
    fn rfc9438_5_8_application_limited_time_is_not_growth_time() {
        let mut now = Instant::ZERO;
        let mut cc = after_loss_at(10_000, now);
        now = round_trip(&mut cc, now, ms(10), 10);
        let w = cc.cwnd();
        let start = cc.epoch.unwrap().start;
        // Ten seconds of ACKs with little in flight: no growth, and the
        // epoch start moves with them.
        for _ in 0..1000 {
            now += ms(10);
            cc.on_ack(now, MSS, Some(micros(ms(10))), MSS);
        }
        assert_eq!(cc.cwnd(), w);
        let moved = cc.epoch.unwrap().start.saturating_since(start);
        assert!(moved >= Duration::from_secs(9), "{moved:?}");
    }

    #[test]
    fn rfc5681_4_1_idle_restart_resets_window_and_epoch() {
        let mut now = Instant::ZERO;
        let mut cc = after_loss_at(100, now);
        now = round_trip(&mut cc, now, ms(10), 10);
        assert!(cc.epoch.is_some());
        cc.on_idle_restart(now + Duration::from_secs(3600));
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert!(cc.epoch.is_none());
        // Back in slow start (cwnd < ssthresh = 70 segments).
        let before = cc.cwnd();
        round_trip(&mut cc, now + Duration::from_secs(3600), ms(10), 10);
        assert_eq!(cc.cwnd(), 2 * before);
    }

    #[test]
    fn min_rtt_is_tracked() {
        let mut cc = Cubic::new(MSS, Instant::ZERO);
        assert_eq!(cc.min_rtt(), None);
        cc.on_ack(Instant::ZERO, 0, Some(micros(ms(30))), 0);
        cc.on_ack(Instant::ZERO, 0, Some(micros(ms(10))), 0);
        cc.on_ack(Instant::ZERO, 0, Some(micros(ms(20))), 0);
        assert_eq!(cc.min_rtt(), Some(ms(10)));
    }

    #[test]
    fn set_mss_recomputes_untouched_initial_window() {
        let mut cc = Cubic::new(536, Instant::ZERO);
        cc.set_mss(1460);
        assert_eq!(cc.cwnd(), 14_600);
        let mut cc = after_loss_at(100, Instant::ZERO);
        cc.set_mss(500);
        assert_eq!(cc.cwnd(), 70 * MSS);
        assert_eq!(cc.w_max, Some(200.0));
    }

    #[test]
    fn extreme_inputs_do_not_panic() {
        let times = [
            Instant::ZERO,
            Instant::from_secs(1),
            Instant::from_micros(u64::MAX),
        ];
        for mss in [0, 1, 1460, usize::MAX / 3, usize::MAX] {
            let mut cc = Cubic::new(mss, Instant::ZERO);
            for &now in &times {
                for acked in [0, 1, usize::MAX] {
                    for fl in [0, 1, usize::MAX] {
                        for rtt in [None, Some(0), Some(u64::MAX)] {
                            cc.on_ack(now, acked, rtt, fl);
                            cc.on_congestion_event(now, fl);
                            cc.on_ack(now, acked, rtt, fl);
                            cc.on_recovery_exit(now);
                            cc.on_ack(now, acked, rtt, fl);
                            cc.on_ack(Instant::ZERO, acked, rtt, fl);
                            cc.on_rto(now, fl);
                            cc.on_ack(now, acked, rtt, fl);
                            cc.on_idle_restart(now);
                            assert!(cc.cwnd() >= 1);
                            assert!(cc.carry.is_finite());
                        }
                    }
                }
                cc.set_mss(mss / 2);
            }
        }
        // Many ACKs with mss 1, zero RTT and nothing in flight.
        let mut cc = Cubic::new(1, Instant::ZERO);
        cc.on_congestion_event(Instant::ZERO, 0);
        for i in 0..10_000u64 {
            cc.on_ack(Instant::from_micros(i), 1, Some(0), usize::MAX);
        }
        assert!(cc.cwnd() >= 2);
    }
}
