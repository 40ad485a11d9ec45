//! (being written by the TCP building-blocks work; this file is replaced)
use crate::time::{Duration, Instant};
#[derive(Debug, Clone)]
pub struct Cubic {
    cwnd: usize,
    ssthresh: usize,
    mss: usize,
}
impl Cubic {
    pub fn new(mss: usize, _now: Instant) -> Self {
        Cubic {
            cwnd: 10 * mss,
            ssthresh: usize::MAX / 2,
            mss,
        }
    }
}
impl super::CongestionControl for Cubic {
    fn cwnd(&self) -> usize {
        self.cwnd
    }
    fn ssthresh(&self) -> usize {
        self.ssthresh
    }
    fn on_ack(&mut self, _: Instant, acked: usize, _: Option<Duration>, _: usize) {
        self.cwnd += acked.min(self.mss);
    }
    fn on_congestion_event(&mut self, _: Instant, f: usize) {
        self.ssthresh = (f / 2).max(2 * self.mss);
        self.cwnd = self.ssthresh;
    }
    fn on_recovery_exit(&mut self, _: Instant) {
        self.cwnd = self.ssthresh;
    }
    fn on_rto(&mut self, _: Instant, f: usize) {
        self.ssthresh = (f / 2).max(2 * self.mss);
        self.cwnd = self.mss;
    }
    fn on_idle_restart(&mut self, _: Instant) {}
    fn set_mss(&mut self, mss: usize) {
        self.mss = mss;
    }
}
