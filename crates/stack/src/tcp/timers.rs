//! TCP timers (RFC 9293 3.8, RFC 6298): retransmission, delayed ACK,
//! persist, keep-alive, TIME-WAIT and the FIN-WAIT-2 limit.

use crate::ip::IpLayer;
use crate::sink::FrameSink;
use crate::tcp::cc::CongestionControl;
use crate::tcp::conn::{TcpConnection, Timers};
use crate::tcp::shared::TcpShared;
use crate::tcp::types::TcpState;
use crate::time::{Duration, Instant};

/// R1 of RFC 9293 3.8.3: retransmissions after which TCP gives IP
/// negative advice (RFC 1122 4.2.3.5: at least 3).
const R1: u32 = 3;

fn due(t: Option<Instant>, now: Instant) -> bool {
    t.is_some_and(|t| t <= now)
}

impl TcpConnection {
    /// Runs the timers that are due.  Returns whether the connection
    /// reached CLOSED.
    pub(crate) fn on_timers(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> bool {
        if due(self.timers.close(), now) {
            self.timers = Timers::default();
            if self.state == TcpState::FinWait2 {
                ip.counters.tcp_fin_wait_2_timeouts += 1;
            }
            self.state = TcpState::Closed;
            return true;
        }
        if due(self.timers.rtx(), now) {
            self.timers.set_rtx(None);
            if self.retransmission_timeout(now, ip, shared, sink) {
                return true;
            }
        }
        if due(self.timers.delack(), now) {
            self.timers.set_delack(None);
            self.ack_now = true;
        }
        if due(self.timers.persist(), now) {
            self.timers.set_persist(None);
            if self.peer_silent(now, shared) || self.probing_past_user_timeout(now) {
                // No probe answered: the peer is gone (as Linux's
                // `tcp_probe_timer`, which counts the probes instead); or
                // the window stayed closed through the user timeout,
                // answered or not (Linux's too, since 5.11).
                self.send_rst(now, ip, sink);
                self.fail(self.timeout_error());
                return true;
            }
            ip.counters.tcp_window_probes += 1;
            self.send_probe(now, ip, sink);
            self.persist_backoff = self.persist_backoff.saturating_add(1);
            let base = self.rtt.rto().max(Duration::from_millis(200));
            let backoff = base.saturating_mul(1u32 << self.persist_backoff.min(6));
            let next = now + backoff.min(shared.cfg.rto_max);
            self.timers
                .set_persist(Some(self.clamp_probe_to_user_timeout(now, next)));
        }
        if due(self.timers.keepalive(), now) {
            self.timers.set_keepalive(None);
            if self.keepalive && (self.flight() > 0 || !self.send.is_empty()) {
                // Data is on its way: the retransmission or persist timer
                // watches the peer, keep-alive waits for an idle connection
                // (as Linux); its probes would not be answered in time
                // under loss, and the reset would end a transfer.
                self.keep_probes = 0;
                self.timers
                    .set_keepalive(Some(now + self.keep_idle(shared)));
            } else if self.keepalive_given_up(now, shared) {
                ip.counters.tcp_keepalive_timeouts += 1;
                self.send_rst(now, ip, sink);
                self.fail(self.timeout_error());
                return true;
            } else if self.keepalive && self.synchronized() {
                self.keep_probes += 1;
                self.send_probe(now, ip, sink);
                self.timers
                    .set_keepalive(Some(now + self.keep_intvl(shared)));
            }
        }
        self.output(now, ip, shared, sink);
        self.clamp_to_user_timeout();
        self.state == TcpState::Closed
    }

    /// With a user timeout, the retransmission timer (backed off) fires no
    /// later than the timeout itself, where the connection gives up (as
    /// Linux's `tcp_clamp_rto_to_user_timeout`); counted from the first
    /// retransmission, or, into a closed window, from the first probe.
    fn clamp_to_user_timeout(&mut self) {
        let (Some(limit), Some(rtx)) = (self.user_timeout, self.timers.rtx()) else {
            return;
        };
        let since = if self.retries > 0 {
            self.stall_since
        } else {
            match self.probe_since {
                Some(t) => t,
                None => return,
            }
        };
        let end = since.add_micros(u64::try_from(limit.as_micros()).unwrap_or(u64::MAX));
        if rtx > end {
            self.timers.set_rtx(Some(end));
        }
    }

    /// RFC 5482 for zero-window probes (Linux's `tcp_probe_timer`): the
    /// first probe starts the clock; with a user timeout, the window
    /// still closed that long after it ends the connection, however the
    /// peer answers (RFC 1122 4.2.2.17's "indefinitely" is without one).
    fn probing_past_user_timeout(&mut self, now: Instant) -> bool {
        match self.probe_since {
            None => {
                self.probe_since = Some(now);
                false
            }
            Some(t) => self
                .user_timeout
                .is_some_and(|limit| now.saturating_since(t) >= limit),
        }
    }

    /// The next probe no later than the user timeout's end (Linux's
    /// `tcp_clamp_probe0_to_user_timeout`, at least 2 ms ahead).
    fn clamp_probe_to_user_timeout(&self, now: Instant, next: Instant) -> Instant {
        match (self.user_timeout, self.probe_since) {
            (Some(limit), Some(t)) => next.min((t + limit).max(now + Duration::from_millis(2))),
            _ => next,
        }
    }

    /// Keep-alive gives up: after `keepcnt` unanswered probes, or, with a
    /// user timeout, once the peer has been silent that long and a probe
    /// went unanswered (Linux's `tcp_keepalive_timer`: the count is then
    /// not looked at).
    fn keepalive_given_up(&self, now: Instant, shared: &TcpShared) -> bool {
        match self.user_timeout {
            Some(limit) => self.keep_probes > 0 && now.saturating_since(self.last_recv) >= limit,
            None => self.keep_probes >= self.keep_cnt(shared),
        }
    }

    /// Nothing came from the peer for twice the largest RTO: probes of a
    /// closed window (persist, or retransmissions into it) stop there.
    fn peer_silent(&self, now: Instant, shared: &TcpShared) -> bool {
        now.saturating_since(self.last_recv) > shared.cfg.rto_max * 2
    }

    /// A timeout while the peer's window is closed under data sent into it
    /// (it filled while the data was on its way, or the peer shrank it):
    /// the first segment goes again as a window probe, and the connection
    /// ends only if the peer stays silent for twice the largest RTO, not
    /// after so many timeouts (as Linux's `tcp_retransmit_timer`): a slow
    /// reader is no reason to give up, and a peer that is gone answers the
    /// probe with a reset.  Returns whether the connection gave up.
    fn zero_window_timeout(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> bool {
        if self.peer_silent(now, shared) || self.probing_past_user_timeout(now) {
            self.send_rst(now, ip, sink);
            self.fail(self.timeout_error());
            return true;
        }
        self.rtt.backoff();
        self.rtt_probe = None;
        self.retransmit_head(now, ip, sink);
        false
    }

    /// RFC 6298 5.4-5.7 and RFC 5681 3.1 eq. 4.  Returns whether the
    /// connection gave up.
    fn retransmission_timeout(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> bool {
        ip.counters.tcp_rto_timeouts += 1;
        let handshake = matches!(self.state, TcpState::SynSent | TcpState::SynReceived);
        if !handshake && self.snd_wnd == 0 && self.flight() > 0 {
            return self.zero_window_timeout(now, ip, shared, sink);
        }
        if self.retries == 0 {
            // The segment went out one RTO ago.
            let sent = now.total_micros().saturating_sub(self.rtt.rto_us());
            self.stall_since = crate::time::Instant::from_micros(sent);
        }
        self.retries += 1;
        let limit = if handshake {
            self.syn_retries.unwrap_or(shared.cfg.syn_retries)
        } else {
            shared.cfg.max_retries
        };
        // RFC 5482 (Linux's TCP_USER_TIMEOUT): a user timeout replaces the
        // count, for SYNs as for data.
        let given_up = match self.user_timeout {
            Some(limit) => now.saturating_since(self.stall_since) >= limit,
            None => self.retries > limit,
        };
        if given_up {
            if !handshake {
                self.send_rst(now, ip, sink);
            }
            self.fail(self.timeout_error());
            return true;
        }
        if self.retries == R1 {
            ip.negative_advice(self.remote.ip());
            self.path = None;
            self.drop_template();
        }
        self.rtt.backoff();
        self.rtt_probe = None;
        if handshake {
            // Resend the SYN or SYN-ACK.
            self.snd_nxt = self.iss;
            return false;
        }
        if self.flight() == 0 {
            return false;
        }
        self.cc.on_rto(now, self.flight());
        self.recovery_point = None;
        self.dupacks = 0;
        // RFC 2018 8 / RFC 6675 5.1: after a timeout the SACK information is
        // not trusted; everything outstanding is sent again from SND.UNA.
        self.scoreboard.clear();
        self.high_rxt = self.snd_una;
        self.snd_nxt = self.snd_una;
        self.arm_rtx(now);
        false
    }
}
