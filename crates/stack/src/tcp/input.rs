//! TCP input for an existing connection: RFC 9293 3.10.7.3 (SYN-SENT) and
//! 3.10.7.4 (the other states), with RFC 5961's protections against blind
//! resets and injection, and RFC 7323's PAWS.

use core::net::IpAddr;

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use crate::ip::IpLayer;
use crate::sink::FrameSink;
use crate::socket::SocketError;
use crate::tcp::cc::CongestionControl;
use crate::tcp::conn::{TcpConnection, Timers, REACHABILITY_HINT_INTERVAL};
use crate::tcp::output::send_reset_for;
use crate::tcp::shared::TcpShared;
use crate::tcp::types::TcpState;
use crate::time::{Duration, Instant};

/// How long a connection the application closed may sit in FIN-WAIT-2
/// (Linux's `tcp_fin_timeout`).
pub const FIN_WAIT_2_TIMEOUT: Duration = Duration::from_secs(60);

/// The least time between ACKs that answer bare ACKs we cannot use (out
/// of the window, old by PAWS, acknowledging data never sent): Linux's
/// `tcp_invalid_ratelimit`.  Two ends that disagree about the sequence
/// space, such as a TIME-WAIT and a connection a late SYN-cookie ACK made
/// again, would otherwise answer each other's ACKs for ever (RFC 5961 7).
pub const INVALID_ACK_INTERVAL: Duration = Duration::from_millis(500);

/// What an input did that the socket layer must act on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct InputEvents {
    /// The handshake completed (SYN-SENT or SYN-RECEIVED -> ESTABLISHED).
    pub established: bool,
    /// The connection reached CLOSED.
    pub closed: bool,
    /// A passive connection was reset before it was accepted.
    pub aborted_embryonic: bool,
}

fn seq_in(seq: SeqNumber, start: SeqNumber, len: usize) -> bool {
    seq >= start && seq < start + len
}

/// The shortest interval receive auto-tuning measures over (see
/// `tune_receive_buffer`).
pub(crate) const RCV_TUNE_MIN_INTERVAL_US: u64 = 1_000;

/// In-order segments one ACK covers at most when ACKs wait for the end of
/// a receive burst (a burst cut from a 64 KB super-frame is 45).
const MAX_BURST_ACK_SEGMENTS: u32 = 16;

impl TcpConnection {
    /// Enters TIME-WAIT: only the 2*MSL timer runs (RFC 9293 3.10.7.4).
    fn enter_time_wait(&mut self, now: Instant, shared: &TcpShared) {
        self.state = TcpState::TimeWait;
        self.timers = Timers::closing_at(now + shared.cfg.msl * 2);
    }

    /// ACKs a segment we cannot use: at once if it has data, a SYN or a
    /// FIN (the peer needs to hear where we are), at most once per
    /// [`INVALID_ACK_INTERVAL`] if it is a bare ACK (as Linux's
    /// `tcp_oow_rate_limited`): zero-window and keep-alive probes still
    /// get answers, ACK wars die out.
    fn ack_unusable(&mut self, now: Instant, seg: &TcpRepr<'_>, ip: &mut IpLayer) {
        if seg.segment_len() == 0 {
            if self
                .last_invalid_ack
                .is_some_and(|t| now.saturating_since(t) < INVALID_ACK_INTERVAL)
            {
                ip.counters.tcp_invalid_acks_rate_limited += 1;
                return;
            }
            self.last_invalid_ack = Some(now);
        }
        self.ack_now = true;
    }

    /// Sends a challenge ACK (RFC 5961 3.2, 4.2, 5.2), rate limited.
    fn challenge_ack(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) {
        if shared.challenge_acks.take(now) {
            ip.counters.tcp_challenge_acks_sent += 1;
            self.send_ack(now, ip, sink);
        }
    }

    /// RFC 6298 5.7: "If the timer expires awaiting the ACK of a SYN
    /// segment and the TCP implementation is using an RTO less than 3
    /// seconds, the RTO MUST be re-initialized to 3 seconds when data
    /// transmission begins (i.e., after the three-way handshake completes)."
    /// Only without a measurement: one (from a timestamp) is better.
    fn rto_after_syn_timeout(&mut self, shared: &TcpShared) {
        if self.retries > 0 && self.rtt.srtt().is_none() {
            let rto = shared.cfg.rto_initial.max(Duration::from_secs(3));
            self.rtt.set_initial(rto);
        }
    }

    /// Handles one segment for this connection.
    pub(crate) fn input(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> InputEvents {
        let mut ev = InputEvents::default();
        self.last_recv = now;
        self.keep_probes = 0;
        if self.keepalive && self.synchronized() {
            self.timers
                .set_keepalive(Some(now + self.keep_idle(shared)));
        }
        match self.state {
            TcpState::SynSent => return self.input_syn_sent(now, seg, ip, shared, sink),
            TcpState::Closed | TcpState::Listen => return ev,
            _ => {}
        }
        // RFC 9293 3.5, Figure 8 (simultaneous open): in SYN-RECEIVED the
        // peer's SYN-ACK repeats the SYN already taken; only its ACK is new.
        let simultaneous;
        let seg = if self.state == TcpState::SynReceived
            && self.parent.is_none()
            && seg.flags.syn()
            && seg.flags.ack()
            && seg.seq_number == self.irs
        {
            simultaneous = TcpRepr {
                flags: seg.flags.without(TcpFlags::SYN),
                seq_number: seg.seq_number + 1,
                // The window of a SYN is never scaled (RFC 7323 2.2): in
                // the scaled units of every later segment, rounded down.
                window_len: seg.window_len >> self.snd_wscale,
                ..*seg
            };
            &simultaneous
        } else {
            seg
        };
        let flags = seg.flags;
        let seq = seg.seq_number;
        let seg_len = seg.segment_len();

        // A retransmitted SYN in SYN-RECEIVED: our SYN-ACK was lost.
        if self.state == TcpState::SynReceived && flags.syn() && !flags.ack() && seq == self.irs {
            self.snd_nxt = self.iss;
            return ev;
        }
        // RFC 7323 5.3 (PAWS): a segment older than the last one accepted
        // is a duplicate from a previous incarnation.
        if self.ts_ok && !flags.rst() {
            if let Some((tsval, _)) = seg.timestamp {
                if (tsval.wrapping_sub(self.ts_recent) as i32) < 0 {
                    ip.counters.tcp_paws_rejected += 1;
                    self.ack_unusable(now, seg, ip);
                    return ev;
                }
            }
        }
        // First: is the segment in the window? (RFC 9293 3.10.7.4)
        let rcv_wnd = (self.rcv_adv - self.rcv_nxt).max(self.recv.window().min(1));
        let acceptable = match (seg_len, rcv_wnd) {
            (0, 0) => seq == self.rcv_nxt,
            (0, w) => seq_in(seq, self.rcv_nxt, w),
            (_, 0) => false,
            (n, w) => seq_in(seq, self.rcv_nxt, w) || seq_in(seq + (n - 1), self.rcv_nxt, w),
        };
        // A zero-window probe or keep-alive lands just left of the window.
        if !acceptable {
            ip.counters.tcp_out_of_window += 1;
            if !flags.rst() {
                self.ack_unusable(now, seg, ip);
            }
            // RFC 9293 3.10.7.4, TIME-WAIT: "The only thing that can arrive
            // in this state is a retransmission of the remote FIN.
            // Acknowledge it, and restart the 2 MSL timeout."  (It lies
            // left of the window, so it ends here.)
            if self.state == TcpState::TimeWait && flags.fin() && !flags.rst() {
                self.timers.set_close(Some(now + shared.cfg.msl * 2));
            }
            return ev;
        }
        // RFC 7323 4.3: remember the timestamp to echo.
        if let (true, Some((tsval, _))) = (self.ts_ok, seg.timestamp) {
            if seq <= self.rcv_nxt && (tsval.wrapping_sub(self.ts_recent) as i32) >= 0 {
                self.ts_recent = tsval;
            }
        }
        // Second: RST (RFC 5961 3.2: only an exact match resets).
        if flags.rst() {
            if seq != self.rcv_nxt {
                self.challenge_ack(now, ip, shared, sink);
                return ev;
            }
            ip.counters.tcp_resets_received += 1;
            match self.state {
                TcpState::SynReceived if self.parent.is_some() => {
                    ev.aborted_embryonic = true;
                    self.fail(SocketError::ConnectionRefused);
                }
                TcpState::SynReceived => self.fail(SocketError::ConnectionRefused),
                TcpState::Established | TcpState::FinWait1 | TcpState::FinWait2 => {
                    self.fail(SocketError::ConnectionReset)
                }
                // The peer had sent its FIN: the stream it sent is whole
                // (reads end with EOF), what we send is lost (Linux's
                // tcp_reset: EPIPE in CLOSE-WAIT).
                TcpState::CloseWait => {
                    self.fail(SocketError::BrokenPipe);
                    self.reset_after_fin = true;
                }
                _ => {
                    self.state = TcpState::Closed;
                    self.timers = Timers::default();
                }
            }
            ev.closed = true;
            return ev;
        }
        // Fourth: a SYN in a synchronized state (RFC 5961 4.2).
        if flags.syn() {
            self.challenge_ack(now, ip, shared, sink);
            return ev;
        }
        // Fifth: the ACK.
        let Some(ack) = seg.ack_number else { return ev };
        if self.state == TcpState::SynReceived {
            if self.snd_una < ack && ack <= self.snd_max {
                self.state = TcpState::Established;
                ev.established = true;
                self.rto_after_syn_timeout(shared);
                self.snd_wnd = usize::from(seg.window_len) << self.snd_wscale;
                self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
                self.snd_wl1 = seq;
                self.snd_wl2 = ack;
            } else {
                send_reset_for(ip, now, self.local, self.remote, seg, sink);
                return ev;
            }
        }
        // RFC 5961 5.2: an ACK for data never sent, or far in the past.
        if ack > self.snd_max {
            self.ack_unusable(now, seg, ip);
            return ev;
        }
        if ack < self.snd_una - self.max_snd_wnd.max(65535) {
            self.challenge_ack(now, ip, shared, sink);
            return ev;
        }
        let window = usize::from(seg.window_len) << self.snd_wscale;
        let window_changed = window != self.snd_wnd;
        let acks_new = ack > self.snd_una;
        if acks_new {
            self.new_ack(now, ack, seg.timestamp, &seg.sack_ranges, ip, shared, sink);
        } else if ack == self.snd_una
            && seg.payload.is_empty()
            && !flags.fin()
            && !window_changed
            && self.flight() > 0
        {
            self.duplicate_ack(now, seg, ip, sink);
        }
        self.update_send_window(seq, ack, window, acks_new);
        if self.ecn.on {
            self.ecn_input(now, seg, shared.segment_ce, ip);
        }
        match self.state {
            TcpState::FinWait1 if self.fin_acked() => {
                self.state = TcpState::FinWait2;
                if self.detached {
                    self.timers.set_close(Some(now + FIN_WAIT_2_TIMEOUT));
                }
            }
            TcpState::Closing if self.fin_acked() => self.enter_time_wait(now, shared),
            TcpState::LastAck if self.fin_acked() => {
                self.state = TcpState::Closed;
                self.timers = Timers::default();
                ev.closed = true;
                return ev;
            }
            _ => {}
        }
        self.input_text(now, seg, seq, ev, ip, shared, sink)
    }

    /// The send window from a segment's `window` (scaled) with `seq` and
    /// `ack` (RFC 9293 3.10.7.4, the SND.WL1/SND.WL2 rule), and from every
    /// ACK of new data (`acks_new`), whatever its sequence number, but
    /// never from an ACK older than SND.UNA (as Linux's `tcp_ack`): SND.WND
    /// counts from SND.UNA, so a window counted from another ACK would
    /// reach past the edge the peer gave.
    #[inline(always)]
    pub(crate) fn update_send_window(
        &mut self,
        seq: SeqNumber,
        ack: SeqNumber,
        window: usize,
        acks_new: bool,
    ) {
        let window_news =
            acks_new || self.snd_wl1 < seq || (self.snd_wl1 == seq && self.snd_wl2 <= ack);
        if ack >= self.snd_una && window_news {
            if self.snd_wnd == 0 && window > 0 {
                self.timers.set_persist(None);
                self.persist_backoff = 0;
                self.probe_since = None;
            }
            self.snd_wnd = window;
            self.max_snd_wnd = self.max_snd_wnd.max(window);
            self.snd_wl1 = self.snd_wl1.max(seq);
            self.snd_wl2 = ack;
        }
    }

    /// The sixth step on (RFC 9293 3.10.7.4): the text and the FIN of a
    /// segment whose first data byte is `data_seq`.
    #[allow(clippy::too_many_arguments)]
    fn input_text(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        data_seq: SeqNumber,
        mut ev: InputEvents,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> InputEvents {
        let flags = seg.flags;
        // Seventh: the text.
        // RFC 1122 4.2.2.13: "if new data is received after CLOSE is
        // called, its TCP SHOULD send a RST to show that data was lost"
        // (as Linux and the BSDs: the reset answers the segment).
        // (Data: a bare ACK's sequence number is the peer's SND.MAX, past
        // RCV.NXT while its FIN is on the way or lost.)
        // Linux does the same after shutdown(SHUT_RDWR), which closes both
        // directions as close() does but keeps the socket: that socket
        // then hears of the reset (ECONNRESET).
        if (self.detached || self.read_shut)
            && matches!(self.state, TcpState::FinWait1 | TcpState::FinWait2)
            && !seg.payload.is_empty()
            && data_seq + seg.payload.len() > self.rcv_nxt
        {
            send_reset_for(ip, now, self.local, self.remote, seg, sink);
            ip.counters.tcp_aborts_on_data += 1;
            if self.detached {
                self.state = TcpState::Closed;
                self.timers = Timers::default();
            } else {
                self.fail(SocketError::ConnectionReset);
            }
            ev.closed = true;
            return ev;
        }
        if flags.urg() || self.urgent.is_some() {
            self.urgent_input(seg, data_seq, ip, &mut shared.buffers, &mut shared.lend);
        }
        if !seg.payload.is_empty() {
            self.take_text(now, data_seq, seg.payload, ip, shared);
        }
        // Eighth: FIN, in order only (one ahead of data waits).
        if flags.fin() {
            let fin_seq = data_seq + seg.payload.len();
            if fin_seq > self.rcv_nxt && self.can_receive() {
                self.peer_fin = Some(fin_seq);
                self.ack_now = true;
            } else if fin_seq == self.rcv_nxt || self.state == TcpState::TimeWait {
                self.peer_fin = Some(fin_seq);
            }
        }
        if let Some(fin_seq) = self.peer_fin {
            if fin_seq == self.rcv_nxt && self.can_receive() {
                self.rcv_nxt += 1;
                self.peer_fin = None;
                self.ack_now = true;
                match self.state {
                    TcpState::SynReceived | TcpState::Established => {
                        self.state = TcpState::CloseWait
                    }
                    TcpState::FinWait1 if self.fin_acked() => self.enter_time_wait(now, shared),
                    TcpState::FinWait1 => self.state = TcpState::Closing,
                    TcpState::FinWait2 => self.enter_time_wait(now, shared),
                    _ => {}
                }
            } else if self.state == TcpState::TimeWait {
                // A retransmitted FIN: ACK it and restart the 2*MSL wait.
                self.peer_fin = None;
                self.ack_now = true;
                self.timers.set_close(Some(now + shared.cfg.msl * 2));
            }
        }
        ev
    }

    /// The seventh step for a segment's non-empty `payload`, whose first
    /// byte is `data_seq`: into the receive buffer, and when to ACK.
    #[inline(always)]
    pub(crate) fn take_text(
        &mut self,
        now: Instant,
        data_seq: SeqNumber,
        payload: &[u8],
        ip: &mut IpLayer,
        shared: &mut TcpShared,
    ) {
        if self.can_receive() {
            // The next bytes, taken whole: ACKed with the next segment or
            // every second one (RFC 5681 4.2, below), and no other test.
            if let Some(n) = self.recv.insert_next(
                self.rcv_nxt,
                data_seq,
                payload,
                &mut shared.buffers,
                &shared.lend,
            ) {
                ip.counters.tcp_rx_copied_segments += 1;
                self.rcv_nxt += n;
                self.stats.bytes_received += n as u64;
                self.count_for_receive_tuning(now, n);
                self.ack_in_order_segment(now, n, shared);
                return;
            }
            let before = self.rcv_nxt;
            let r = self.recv.insert(
                self.rcv_nxt,
                data_seq,
                payload,
                &mut shared.buffers,
                &mut shared.lend,
            );
            ip.counters.tcp_rx_copied_segments += u64::from(r.copied);
            self.rcv_nxt += r.advanced;
            self.stats.bytes_received += r.advanced as u64;
            if r.advanced > 0 {
                self.count_for_receive_tuning(now, r.advanced);
            }
            if r.trimmed > 0 {
                ip.counters.tcp_rx_trimmed_bytes += r.trimmed as u64;
            }
            if r.out_of_order {
                ip.counters.tcp_rx_out_of_order += 1;
            }
            // RFC 5681 4.2: ACK out-of-order data and hole fills at once,
            // otherwise at least every second full segment.  A segment
            // that moved RCV.NXT past its own end filled a gap; one that
            // moved it less was partly old.
            if r.out_of_order
                || self.recv.has_out_of_order()
                || r.advanced == 0
                || self.rcv_nxt - before != payload.len()
            {
                self.ack_now = true;
            } else {
                self.ack_in_order_segment(now, payload.len(), shared);
            }
        } else {
            // Data after the peer's FIN, or to a closed read side.
            self.ack_now = true;
        }
    }

    /// Counts in-order bytes for receive buffer auto-tuning
    /// ([`Self::tune_receive_buffer`]).
    #[inline(always)]
    fn count_for_receive_tuning(&mut self, now: Instant, bytes: usize) {
        self.rcv_tune_bytes += bytes;
        if self.rcv_tune_start == 0 {
            self.rcv_tune_start = now.total_micros().max(1);
        }
    }

    /// Receive buffer auto-tuning (FreeBSD's `tcp_autorcvbuf`), at the
    /// connection's next output (after a segment is processed whole, by
    /// either input path): when more than 3/8 of the buffer
    /// arrived within a round trip, the window, not the path, is what
    /// limits the peer, so the buffer doubles (up to `recvbuf_max`; not
    /// after SO_RCVBUF, nor without window scaling).  The round trip is the
    /// connection's smoothed RTT (the handshake gives one), at least 1 ms:
    /// links that batch frames (TPACKET_V3 blocks) stretch short paths to
    /// about that.
    #[cold]
    #[inline(never)]
    pub(crate) fn tune_receive_buffer(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &TcpShared,
    ) {
        let start = self.rcv_tune_start;
        if start == 0 {
            return;
        }
        let rtt_us = self
            .rtt
            .srtt()
            .map_or(RCV_TUNE_MIN_INTERVAL_US, |d| d.as_micros() as u64)
            .max(RCV_TUNE_MIN_INTERVAL_US);
        if now.total_micros().saturating_sub(start) <= rtt_us {
            return;
        }
        let capacity = self.recv.capacity();
        if self.rcv_tune_bytes > capacity / 8 * 3
            && capacity < shared.cfg.recvbuf_max
            && !self.recv_locked
            && self.wscale_ok
        {
            let grown = (capacity * 2)
                .max(self.rcv_tune_bytes * 2)
                .min(shared.cfg.recvbuf_max);
            self.recv.set_capacity(grown);
            ip.counters.tcp_rcvbuf_grown += 1;
            // The peer hears of the room at once.
            self.ack_now = true;
        }
        self.rcv_tune_start = 0;
        self.rcv_tune_bytes = 0;
    }

    /// RFC 5681 4.2 for a segment of in-order data that moved RCV.NXT by
    /// its whole length, `bytes`: an ACK at least every second segment,
    /// else within the delayed-ACK time.  A segment larger than our MSS
    /// (a super-frame, or segments the link aggregated) counts as the
    /// full-sized segments it holds, as the sender sent them: ACKed at
    /// once, so its window and congestion window move as they would have.
    #[inline(always)]
    fn ack_in_order_segment(&mut self, now: Instant, bytes: usize, shared: &TcpShared) {
        let segments = if bytes > self.rcv_mss {
            u32::try_from(bytes.div_ceil(self.rcv_mss.max(1))).unwrap_or(u32::MAX)
        } else {
            1
        };
        self.unacked_segments = self.unacked_segments.saturating_add(segments);
        if !shared.cfg.delayed_ack || self.unacked_segments >= 2 {
            // Per burst: one ACK for the burst's segments (as a GRO
            // receiver's), at least every `MAX_BURST_ACK_SEGMENTS`.
            if shared.ack_per_burst && self.unacked_segments < MAX_BURST_ACK_SEGMENTS {
                self.burst_ack = true;
            } else {
                self.ack_now = true;
            }
        } else if self.timers.delack().is_none() {
            self.timers
                .set_delack(Some(now.add_micros(shared.delack_us)));
        }
    }

    /// RFC 9293 3.10.7.3.
    fn input_syn_sent(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> InputEvents {
        let mut ev = InputEvents::default();
        let flags = seg.flags;
        if let Some(ack) = seg.ack_number {
            if ack <= self.iss || ack > self.snd_max {
                send_reset_for(ip, now, self.local, self.remote, seg, sink);
                return ev;
            }
        }
        if flags.rst() {
            if seg.ack_number.is_some() {
                ip.counters.tcp_resets_received += 1;
                self.fail(SocketError::ConnectionRefused);
                ev.closed = true;
            }
            return ev;
        }
        if !flags.syn() {
            return ev;
        }
        self.irs = seg.seq_number;
        self.rcv_nxt = seg.seq_number + 1;
        self.accept_syn_options(shared, seg, true);
        // RFC 7323 2.2: the window of a SYN is never scaled.
        self.snd_wnd = usize::from(seg.window_len);
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq_number;
        self.rcv_adv = self.rcv_nxt;
        if let Some(ack) = seg.ack_number {
            self.snd_una = ack;
            self.snd_wl2 = ack;
            if let (true, Some((_, tsecr))) = (self.ts_ok, seg.timestamp) {
                let rtt = self.ts_now(now).wrapping_sub(tsecr);
                if self.retries == 0 && rtt < 60_000 {
                    self.rtt.sample(Duration::from_millis(u64::from(rtt)));
                }
            } else if self.retries == 0 {
                self.rtt.sample(now.saturating_since(self.last_send));
            }
            self.rto_after_syn_timeout(shared);
            self.retries = 0;
            self.timers.set_rtx(None);
            self.state = TcpState::Established;
            self.ack_now = true;
            ev.established = true;
            if self.keepalive {
                self.timers
                    .set_keepalive(Some(now + self.keep_idle(shared)));
            }
            // RFC 9293 3.10.7.3: "If there are other controls or text in the
            // segment, then continue processing at the sixth step".
            if !seg.payload.is_empty() || flags.fin() {
                ev = self.input_text(now, seg, seg.seq_number + 1, ev, ip, shared, sink);
            }
        } else {
            // Simultaneous open: answer with SYN-ACK.
            self.state = TcpState::SynReceived;
            self.snd_nxt = self.iss;
        }
        ev
    }

    /// New data acknowledged (SND.UNA < SEG.ACK <= SND.MAX), by a segment
    /// with these timestamps and SACK blocks.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn new_ack(
        &mut self,
        now: Instant,
        ack: SeqNumber,
        timestamp: Option<(u32, u32)>,
        sack_ranges: &[Option<(u32, u32)>; 3],
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) {
        let flight_before = self.flight();
        let data_start = self.data_start();
        let data_end = self.data_end();
        let data_acked = if ack > data_start {
            ack.min(data_end) - data_start
        } else {
            0
        };
        self.send.consume(data_acked);
        if self.send.is_empty() {
            self.send.park(&mut shared.buffers);
        }
        self.send_base += data_acked;
        self.snd_una = ack;
        if now >= self.reachability_hint_due {
            self.reachability_hint(now, ip);
        }
        self.urgent_acked();
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        self.stats.bytes_acked += data_acked as u64;
        // RTT: RFC 7323 4.1 (RTTM) with timestamps, else RFC 6298 with
        // Karn's rule (the probe is cleared on retransmission).
        let mut sample_us = None;
        if self.ts_ok {
            if let Some((_, tsecr)) = timestamp {
                let rtt = self.ts_now(now).wrapping_sub(tsecr);
                if tsecr != 0 && rtt < 60_000 {
                    sample_us = Some(u64::from(rtt) * 1000);
                }
            }
        } else if let Some((end, sent)) = self.rtt_probe {
            if ack >= end {
                sample_us = Some(now.micros_since(sent));
                self.rtt_probe = None;
            }
        }
        if let Some(us) = sample_us {
            self.rtt.sample_us(us);
        }
        self.rtt.reset_backoff();
        self.retries = 0;
        self.probe_since = None;
        // Without blocks and with nothing SACKed there is nothing to do
        // (the common ACK of an in-order stream).
        if self.sack_ok && (sack_ranges.iter().any(Option::is_some) || !self.scoreboard.is_empty())
        {
            self.scoreboard
                .update(self.snd_una, self.snd_max, sack_ranges);
        }
        match self.recovery_point {
            Some(point) if ack >= point => {
                // RFC 6582 3.2 step 3 / RFC 6675 5: full acknowledgment.
                self.recovery_point = None;
                self.dupacks = 0;
                self.cc.on_recovery_exit(now);
            }
            Some(_) => {
                // A partial acknowledgment (RFC 6582 3.2 step 4): the next
                // hole is lost too.  With SACK, output finds the holes.
                if !self.sack_ok {
                    self.dupacks = 0;
                    self.retransmit_head(now, ip, sink);
                }
            }
            None => {
                self.dupacks = 0;
                self.cc.on_ack(now, data_acked, sample_us, flight_before);
            }
        }
        if self.snd_una == self.snd_max {
            self.timers.set_rtx(None);
        } else {
            self.arm_rtx(now);
        }
        // Send buffer auto-tuning: room for two congestion windows.
        let want = (2 * self.cc.cwnd()).min(shared.cfg.sendbuf_max);
        if want > self.send_limit {
            self.send_limit = want;
        }
    }

    fn duplicate_ack(
        &mut self,
        now: Instant,
        seg: &TcpRepr<'_>,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) {
        self.dupacks += 1;
        ip.counters.tcp_dupacks_received += 1;
        if self.sack_ok {
            self.scoreboard
                .update(self.snd_una, self.snd_max, &seg.sack_ranges);
        }
        if self.recovery_point.is_some() {
            return;
        }
        // RFC 5681 3.2 / RFC 6675 5: enter recovery on the third duplicate,
        // or when SACK shows the first segment lost.
        let lost = self.sack_ok && self.scoreboard.is_lost(self.snd_una, self.snd_mss);
        if self.dupacks as usize >= crate::tcp::sack::DUP_THRESH || lost {
            ip.counters.tcp_fast_retransmits += 1;
            self.cc.on_congestion_event(now, self.flight());
            self.recovery_point = Some(self.snd_max);
            self.rtt_probe = None;
            self.high_rxt = self.snd_una;
            self.retransmit_head(now, ip, sink);
        }
    }

    /// Retransmits the first unacknowledged segment.
    pub(crate) fn retransmit_head(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) {
        let seq = self.snd_una;
        let data_end = self.data_end();
        // Only what was sent: data past SND.MAX is new (the window may
        // not take it), and the peer's ACK of it would pass SND.MAX.
        let len = (data_end.min(self.snd_max) - seq).min(self.snd_mss);
        let fin = self.fin_sent() && seq + len == data_end;
        if len == 0 && !fin {
            return;
        }
        self.send_data_at(now, seq, len, fin, ip, sink);
        self.high_rxt = self.high_rxt.max(seq + len);
        self.arm_rtx(now);
    }
}

impl TcpConnection {
    /// RFC 4861 7.3.1: new data acknowledged is forward progress, which
    /// confirms an IPv6 connection's first hop reachable (then at most
    /// once per [`REACHABILITY_HINT_INTERVAL`]).
    #[cold]
    fn reachability_hint(&mut self, now: Instant, ip: &mut IpLayer) {
        self.reachability_hint_due = now + REACHABILITY_HINT_INTERVAL;
        if let (IpAddr::V6(src), IpAddr::V6(dst)) = (self.local.ip(), self.remote.ip()) {
            ip.confirm_forward_progress(src, dst, self.ip_opts.mark, now);
        }
    }
}
