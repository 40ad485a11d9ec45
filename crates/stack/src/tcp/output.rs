//! TCP output: what a connection sends now.  The payload is copied once,
//! from the send buffer straight into the link's frame.

use core::net::{IpAddr, SocketAddr};

use wire::ip::IpProtocol;
use wire::tcp::{SeqNumber, TcpFlags, TcpPacket, TcpRepr};
use wire::ChecksumMode;

use crate::ip::IpLayer;
use crate::ipv4::{Ipv4Path, Ipv4Send, SendError};
use crate::ipv6::Ipv6Send;
use crate::sink::FrameSink;
use crate::tcp::cc::CongestionControl;
use crate::tcp::conn::TcpConnection;
use crate::tcp::input::RCV_TUNE_MIN_INTERVAL_US;
use crate::tcp::shared::TcpShared;
use crate::tcp::types::TcpState;
use crate::time::{Duration, Instant};

/// IP_TTL and IP_TOS of a connection's segments (`None`: the stack's TTL),
/// and its SO_MARK (0: none), which policy rules may route by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpOptions {
    pub ttl: Option<u8>,
    pub tos: u8,
    pub mark: u32,
}

/// Sends one TCP segment whose payload (`payload_len` bytes) `fill` writes
/// after the header, along the connection's cached `path` if there is one
/// (refreshed here).  Counted; returns what the IP layer said.
// One call per segment on the fast path: plain arguments, no struct to build.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_tcp(
    ip: &mut IpLayer,
    now: Instant,
    (local, remote): (SocketAddr, SocketAddr),
    ip_opts: IpOptions,
    repr: &TcpRepr<'_>,
    payload_len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
    path: Option<&mut Option<Ipv4Path>>,
    sink: &mut dyn FrameSink,
) -> Result<(), SendError> {
    let (IpAddr::V4(src), IpAddr::V4(dst)) = (local.ip(), remote.ip()) else {
        return send_tcp_v6(
            ip,
            now,
            (local, remote),
            ip_opts,
            repr,
            payload_len,
            fill,
            sink,
        );
    };
    let header_len = repr.header_len();
    let total = header_len + payload_len;
    let mut write = |buf: &mut [u8], mode: ChecksumMode| {
        fill(&mut buf[header_len..total]);
        repr.emit(
            &mut TcpPacket::new_unchecked(&mut buf[..total]),
            &IpAddr::V4(src),
            &IpAddr::V4(dst),
            mode,
        );
    };
    let cached = path.and_then(|slot| {
        ip.refresh_path(slot, (src, ip_opts.mark), dst, now);
        *slot
    });
    let on_path = cached.and_then(|p| {
        ip.send_ipv4_on(
            &p,
            src,
            IpProtocol::Tcp,
            ip_opts.ttl,
            ip_opts.tos,
            total,
            &mut write,
            sink,
        )
    });
    let result = match on_path {
        Some(r) => r,
        None => {
            let hdr = Ipv4Send {
                src: Some(src),
                dont_frag: true,
                l4_checksum: true,
                ttl: ip_opts.ttl,
                dscp_ecn: ip_opts.tos,
                mark: ip_opts.mark,
                ..Ipv4Send::new(dst, IpProtocol::Tcp)
            };
            ip.send_ipv4(now, hdr, total, &mut |buf, _, mode| write(buf, mode), sink)
        }
    };
    if result.is_ok() {
        ip.counters.tcp_segments_sent += 1;
        if repr.flags.rst() {
            ip.counters.tcp_resets_sent += 1;
        }
    }
    result
}

/// [`send_tcp`] over IPv6: through the IP layer each time (no cached
/// path), never fragmented (segments are sized to the path MTU).
#[allow(clippy::too_many_arguments)]
#[cold]
fn send_tcp_v6(
    ip: &mut IpLayer,
    now: Instant,
    (local, remote): (SocketAddr, SocketAddr),
    ip_opts: IpOptions,
    repr: &TcpRepr<'_>,
    payload_len: usize,
    fill: &mut dyn FnMut(&mut [u8]),
    sink: &mut dyn FrameSink,
) -> Result<(), SendError> {
    let (IpAddr::V6(src), IpAddr::V6(dst)) = (local.ip(), remote.ip()) else {
        // A connection's two ends are of one family.
        return Err(SendError::NoRoute);
    };
    let header_len = repr.header_len();
    let total = header_len + payload_len;
    let hdr = Ipv6Send {
        src: Some(src),
        hop_limit: ip_opts.ttl,
        traffic_class: ip_opts.tos,
        mark: ip_opts.mark,
        l4_checksum: true,
        // Segments are sized to the path MTU; one sent before a packet too
        // big lowered it goes out in fragments rather than not at all.
        may_fragment: true,
        ..Ipv6Send::new(dst, IpProtocol::Tcp)
    };
    let result = ip.send_ipv6(
        now,
        hdr,
        total,
        &mut |buf, _, mode| {
            fill(&mut buf[header_len..total]);
            repr.emit(
                &mut TcpPacket::new_unchecked(&mut buf[..total]),
                &IpAddr::V6(src),
                &IpAddr::V6(dst),
                mode,
            );
        },
        sink,
    );
    if result.is_ok() {
        ip.counters.tcp_segments_sent += 1;
        if repr.flags.rst() {
            ip.counters.tcp_resets_sent += 1;
        }
    }
    result
}

/// RFC 9293 3.10.7.1: the reset answering a segment that reached no
/// connection.  Never answers a reset.
pub(crate) fn send_reset_for(
    ip: &mut IpLayer,
    now: Instant,
    local: SocketAddr,
    remote: SocketAddr,
    seg: &TcpRepr<'_>,
    sink: &mut dyn FrameSink,
) {
    if seg.flags.rst() {
        return;
    }
    let mut rst = TcpRepr::new(local.port(), remote.port(), TcpFlags::RST, SeqNumber(0));
    match seg.ack_number {
        Some(ack) => rst.seq_number = ack,
        None => rst.ack_number = Some(seg.seq_number + seg.segment_len()),
    }
    let _ = send_tcp(
        ip,
        now,
        (local, remote),
        IpOptions::default(),
        &rst,
        0,
        &mut |_| {},
        None,
        sink,
    );
}

impl TcpConnection {
    /// The window to put in a segment, scaled; moves the advertised edge
    /// right when the buffer has room (never left, RFC 9293 3.8.6.2.2), and
    /// only by worthwhile amounts (receiver SWS avoidance, 3.8.6.2.2).
    #[inline(always)]
    pub(crate) fn advertise_window(&mut self) -> u16 {
        let window = self.recv.window();
        let edge = self.rcv_nxt + window;
        // An empty buffer (the usual case between requests) moves the edge
        // as far as it goes, with no step to work out.
        if edge > self.rcv_adv
            && (window == self.recv.capacity() || {
                let current = self.rcv_adv - self.rcv_nxt;
                let step = (self.recv.capacity() / 2).min(self.rcv_mss).max(1);
                window - current >= step || current == 0 && window >= step
            })
        {
            self.rcv_adv = edge;
        }
        if self.rcv_adv < self.rcv_nxt {
            self.rcv_adv = self.rcv_nxt;
        }
        let adv = self.rcv_adv - self.rcv_nxt;
        (adv >> self.rcv_wscale).min(65535) as u16
    }

    /// The application read enough that the peer should hear of the room
    /// (RFC 9293 3.8.6.2.2: by two segments or half the buffer).
    #[inline(always)]
    pub(crate) fn window_update_due(&self) -> bool {
        // The sums first: they say no to almost every call, and the state
        // is then not looked at.
        let edge = self.rcv_nxt + self.recv.window();
        let opened = edge - self.rcv_adv;
        (opened >= 2 * self.rcv_mss || opened >= self.recv.capacity() / 2) && self.can_receive()
    }

    fn base_repr(&mut self, now: Instant, flags: TcpFlags, seq: SeqNumber) -> TcpRepr<'static> {
        let mut repr = TcpRepr::new(self.local.port(), self.remote.port(), flags, seq);
        repr.ack_number = Some(self.rcv_nxt);
        repr.window_len = self.advertise_window();
        if self.ts_ok {
            repr.timestamp = Some((self.ts_now(now), self.ts_recent));
        }
        if self.sack_ok && self.recv.has_out_of_order() {
            repr.sack_ranges = self.recv.sack_blocks();
        }
        self.set_urgent_fields(&mut repr);
        repr.flags |= self.ecn_flags();
        repr
    }

    fn after_ack_sent(&mut self, now: Instant) {
        self.ack_now = false;
        self.burst_ack = false;
        self.unacked_segments = 0;
        self.timers.set_delack(None);
        self.last_send = now;
    }

    /// Sends `repr` through the general path (`send_tcp`) along the
    /// connection's cached path, with the `len` bytes of the send buffer
    /// from its sequence number as payload.
    fn send_general(
        &mut self,
        now: Instant,
        repr: &TcpRepr<'_>,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SendError> {
        let offset = repr.seq_number - self.data_start();
        let mut ip_opts = self.ip_opts;
        ip_opts.tos = (ip_opts.tos & !3) | self.ecn_codepoint(repr.seq_number, len, repr.flags);
        let send = &self.send;
        send_tcp(
            ip,
            now,
            (self.local, self.remote),
            ip_opts,
            repr,
            len,
            &mut |buf| {
                send.copy_out(offset, buf);
            },
            Some(&mut self.path),
            sink,
        )
    }

    /// Sends our SYN, or SYN-ACK in SYN-RECEIVED (RFC 9293 3.5).
    pub(crate) fn send_syn(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &TcpShared,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SendError> {
        let passive = self.state == TcpState::SynReceived;
        let cfg = &shared.cfg;
        let mut repr = TcpRepr::new(
            self.local.port(),
            self.remote.port(),
            TcpFlags::SYN | self.ecn_syn_flags(),
            self.iss,
        );
        repr.window_len = self.recv.window().min(65535) as u16;
        repr.max_seg_size = Some(self.rcv_mss.min(65535) as u16);
        if passive {
            repr.ack_number = Some(self.rcv_nxt);
            // The window of a SYN is never scaled (RFC 7323 2.2), so it
            // tells at most 65535 bytes; the right edge kept is the whole
            // window's, which the next segment advertises, so that the
            // handshake's last ACK does not find it "opened" (an ACK for an
            // ACK, which Linux does not send either).
            let edge = self.rcv_nxt + self.recv.window();
            if edge > self.rcv_adv {
                self.rcv_adv = edge;
            }
            repr.window_scale = self.wscale_ok.then_some(self.rcv_wscale);
            repr.sack_permitted = self.sack_ok;
            repr.timestamp = self.ts_ok.then(|| (self.ts_now(now), self.ts_recent));
        } else {
            repr.window_scale = cfg.rfc1323.then_some(self.rcv_wscale);
            repr.sack_permitted = cfg.sack;
            repr.timestamp = cfg.rfc1323.then(|| (self.ts_now(now), 0));
        }
        self.snd_nxt = self.iss + 1;
        if self.snd_max < self.snd_nxt {
            self.snd_max = self.snd_nxt;
        } else {
            // Sent before: after a timeout, or for the peer's SYN again.
            self.stats.retransmits += 1;
            ip.counters.tcp_retransmitted_segments += 1;
        }
        if self.timers.rtx().is_none() {
            self.arm_rtx(now);
        }
        self.after_ack_sent(now);
        self.send_general(now, &repr, 0, ip, sink)
    }

    /// Sends `len` bytes of the send buffer from `seq`, with FIN if asked.
    #[inline(always)]
    pub(crate) fn send_data_at(
        &mut self,
        now: Instant,
        seq: SeqNumber,
        len: usize,
        fin: bool,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) {
        let mut flags = TcpFlags::ACK;
        if fin {
            flags |= TcpFlags::FIN;
        }
        let data_end = self.data_end();
        if len > 0 && seq + len == data_end {
            flags |= TcpFlags::PSH;
        }
        if self.ecn.on {
            flags |= self.ecn_cwr(seq, len);
        }
        if !self.send_direct(now, flags, seq, len, ip, sink) {
            self.send_data_general(now, flags, seq, len, ip, sink);
        }
        if seq < self.snd_max {
            self.stats.retransmits += 1;
            ip.counters.tcp_retransmitted_segments += 1;
        }
        self.after_ack_sent(now);
    }

    /// [`send_data_at`](Self::send_data_at) through the general path (SACK
    /// blocks, IPv6, no cached path): out of line, so that the direct
    /// path's callers keep their registers.
    #[cold]
    #[inline(never)]
    fn send_data_general(
        &mut self,
        now: Instant,
        flags: TcpFlags,
        seq: SeqNumber,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) {
        let mut repr = self.base_repr(now, flags, seq);
        // Options and data share the peer's MSS (RFC 6691): SACK blocks
        // that would push a full segment past it are left out (the next
        // pure ACK carries them).
        let limit = 20 + self.snd_mss + if self.ts_ok { 12 } else { 0 };
        while repr.header_len() + len > limit {
            match repr.sack_ranges.iter().rposition(Option::is_some) {
                Some(i) => repr.sack_ranges[i] = None,
                None => break,
            }
        }
        let _ = self.send_general(now, &repr, len, ip, sink);
    }

    /// Sends `len` bytes from SND.NXT, with FIN if asked, and moves SND.NXT
    /// and SND.MAX past them; starts an RTT measurement on new data
    /// (without timestamps) and the retransmission timer if it is not
    /// running.
    #[inline(always)]
    fn send_next(
        &mut self,
        now: Instant,
        len: usize,
        fin: bool,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) {
        let seq = self.snd_nxt;
        let fresh = seq >= self.snd_max;
        self.send_data_at(now, seq, len, fin, ip, sink);
        self.snd_nxt = seq + len + usize::from(fin);
        if self.snd_nxt > self.snd_max {
            self.snd_max = self.snd_nxt;
        }
        if fresh && !self.ts_ok && self.rtt_probe.is_none() {
            self.rtt_probe = Some((self.snd_nxt, now));
        }
        if self.timers.rtx().is_none() {
            self.arm_rtx(now);
        }
    }

    /// Sends an ACK with no data.
    #[inline]
    pub(crate) fn send_ack(&mut self, now: Instant, ip: &mut IpLayer, sink: &mut dyn FrameSink) {
        // SND.MAX, not SND.NXT (as the BSDs): after a timeout SND.NXT goes
        // back, and an ACK left of the peer's window would be dropped
        // unread; two ends doing so never hear each other's ACKs again.
        if !self.send_direct(now, TcpFlags::ACK, self.snd_max, 0, ip, sink) {
            let repr = self.base_repr(now, TcpFlags::ACK, self.snd_max);
            let _ = self.send_general(now, &repr, 0, ip, sink);
        }
        self.after_ack_sent(now);
    }

    /// Sends a segment the peer must answer with an ACK: one below
    /// SND.UNA, for zero-window and keep-alive probes (RFC 9293 3.8.4).
    pub(crate) fn send_probe(&mut self, now: Instant, ip: &mut IpLayer, sink: &mut dyn FrameSink) {
        let repr = self.base_repr(now, TcpFlags::ACK, self.snd_una - 1);
        let _ = self.send_general(now, &repr, 0, ip, sink);
        self.last_send = now;
    }

    /// Sends a reset for an abort (RFC 9293 3.10.5: SEQ = SND.NXT).
    pub(crate) fn send_rst(&mut self, now: Instant, ip: &mut IpLayer, sink: &mut dyn FrameSink) {
        let mut repr = TcpRepr::new(
            self.local.port(),
            self.remote.port(),
            TcpFlags::RST,
            self.snd_nxt,
        );
        if self.state == TcpState::SynReceived || self.synchronized() {
            repr.ack_number = Some(self.rcv_nxt);
        }
        let _ = self.send_general(now, &repr, 0, ip, sink);
    }

    /// Bytes believed in the network (RFC 6675 pipe with SACK; without it,
    /// each duplicate ACK is a segment that left, RFC 6582's inflation).
    pub(crate) fn pipe(&self) -> usize {
        if self.sack_ok {
            self.scoreboard
                .pipe(self.snd_una, self.snd_max, self.high_rxt, self.snd_mss)
        } else {
            self.flight()
                .saturating_sub(self.dupacks as usize * self.snd_mss)
        }
    }

    /// Sends what the state, the windows and the queues allow.
    #[inline]
    pub(crate) fn output(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) {
        // Received data waits for receive auto-tuning's look once a round
        // trip has passed (`tune_receive_buffer`).
        let tune = self.rcv_tune_start;
        if tune != 0 && now.total_micros().wrapping_sub(tune) > RCV_TUNE_MIN_INTERVAL_US {
            self.tune_receive_buffer(now, ip, shared);
        }
        // Most calls after a segment came in find nothing to do (the ACK
        // is delayed, the reply not written yet): told without a call.
        if ip.cfg.tcp.fast_path && self.nothing_to_output() {
            return;
        }
        self.output_any_outlined(now, ip, shared, sink);
    }

    /// [`output_any`](Self::output_any) out of line, for the calls of
    /// `output` that find something to do (and a read's window update):
    /// `output` is inlined in many places, `output_any` only where the
    /// application sends.
    #[inline(never)]
    pub(crate) fn output_any_outlined(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) {
        self.output_any(now, ip, shared, sink);
    }

    /// What `output_predicted` finds when it does nothing: an established
    /// connection, not in recovery, with no FIN and no data to send, its
    /// retransmission timer armed if data is in flight, and no ACK or
    /// window update due.  A window update is not looked for: only what
    /// opens the window makes one due (a segment taken in moves both the
    /// window's edge and RCV.NXT, and a SYN-ACK keeps the whole window's
    /// edge), and each of those sends it at once (a read) or marks an ACK
    /// due (a larger receive buffer).
    #[inline(always)]
    fn nothing_to_output(&self) -> bool {
        let nothing = self.state == TcpState::Established
            && self.recovery_point.is_none()
            && !self.fin_queued
            && self.snd_nxt == self.data_end()
            && !self.ack_now
            && (self.flight() == 0
                || self.timers.rtx().is_some()
                || self.timers.persist().is_some());
        debug_assert!(
            !nothing || !self.window_update_due(),
            "a window update left due"
        );
        nothing
    }

    /// Whether [`output_any`](Self::output_any) would now send nothing, arm
    /// no timer and so need no clock: `output_predicted`'s answer when it
    /// returns without a segment and without arming (an established
    /// connection with nothing queued, or TCP_CORK holding less than a
    /// segment both windows would let go; in flight data already timed; no
    /// ACK or window update due).  An application's send that leaves it so
    /// can skip reading the clock (nginx's writes and sendfile between its
    /// cork and uncork).
    #[inline(always)]
    pub(crate) fn output_holds(&self, fast_path: bool) -> bool {
        if !fast_path
            || self.state != TcpState::Established
            || self.recovery_point.is_some()
            || self.fin_queued
            || self.urgent_mode()
            || self.ack_now
        {
            return false;
        }
        let seq = self.snd_nxt;
        let avail = self.data_end() - seq;
        let in_flight = seq - self.snd_una;
        let held = avail == 0
            || (self.cork
                && avail < self.snd_mss
                && avail <= (self.snd_una + self.snd_wnd) - seq
                && avail <= self.cc.cwnd().saturating_sub(in_flight));
        held && (self.flight() == 0
            || self.timers.rtx().is_some()
            || self.timers.persist().is_some())
            && !self.window_update_due()
    }

    /// [`output`](Self::output) without its first test: for a caller
    /// that knows there is something to decide (the application just
    /// queued data).
    #[inline(always)]
    pub(crate) fn output_any(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) {
        if ip.cfg.tcp.fast_path && self.output_predicted(now, ip, sink) {
            return;
        }
        self.output_general(now, ip, shared, sink);
    }

    /// The output of an established connection with nothing to send but
    /// perhaps an ACK, or with one segment's worth of new data that both
    /// windows and Nagle let go at once: what `output_general` would do,
    /// without its loops.  `false`, with nothing done, for anything else.
    #[inline]
    fn output_predicted(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> bool {
        if self.state != TcpState::Established
            || self.recovery_point.is_some()
            || self.fin_queued
            || self.urgent_mode()
        {
            return false;
        }
        let seq = self.snd_nxt;
        let avail = self.data_end() - seq;
        if avail == 0 {
            if self.flight() > 0 && self.timers.rtx().is_none() && self.timers.persist().is_none() {
                self.arm_rtx(now);
            }
            if self.ack_now || self.window_update_due() {
                self.send_ack(now, ip, sink);
            }
            return true;
        }
        let in_flight = seq - self.snd_una;
        // TCP_CORK holding less than a segment that both windows would let
        // go (nginx's response headers and body, between its cork and
        // uncork): `output_general` sends nothing then, and does what it
        // does with nothing queued.  (Its idle restart of the congestion
        // window waits for the segment that leaves after the idle time:
        // the uncork's output.)
        if self.cork
            && avail < self.snd_mss
            && avail <= (self.snd_una + self.snd_wnd) - seq
            && avail <= self.cc.cwnd().saturating_sub(in_flight)
        {
            if self.flight() > 0 && self.timers.rtx().is_none() && self.timers.persist().is_none() {
                self.arm_rtx(now);
            }
            if self.ack_now || self.window_update_due() {
                self.send_ack(now, ip, sink);
            }
            return true;
        }
        let fits = avail <= self.snd_mss
            && self.dupacks == 0
            && avail <= (self.snd_una + self.snd_wnd) - seq
            && avail <= self.cc.cwnd().saturating_sub(in_flight)
            // Nagle (RFC 9293 3.7.4), or TCP_CORK, would hold a small
            // segment back.
            && (avail == self.snd_mss || (!self.cork && (self.nodelay || in_flight == 0)))
            // After an idle period the general path restarts the window.
            && (self.flight() > 0 || now.micros_since(self.last_send) <= self.rtt.rto_us());
        if !fits {
            return false;
        }
        self.send_next(now, avail, false, ip, sink);
        true
    }

    /// [`output`](Self::output) in every state and case.
    #[inline(never)]
    fn output_general(
        &mut self,
        now: Instant,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) {
        match self.state {
            TcpState::Closed | TcpState::Listen => return,
            TcpState::SynSent | TcpState::SynReceived => {
                if self.snd_nxt == self.iss {
                    if let Err(SendError::NoRoute) = self.send_syn(now, ip, shared, sink) {
                        if self.state == TcpState::SynSent {
                            self.fail(crate::socket::SocketError::NetworkUnreachable);
                        }
                    }
                } else if self.ack_now && self.state == TcpState::SynReceived {
                    self.send_ack(now, ip, sink);
                }
                return;
            }
            TcpState::TimeWait => {
                if self.ack_now {
                    self.send_ack(now, ip, sink);
                }
                return;
            }
            _ => {}
        }
        // Nothing queued and no recovery: at most an ACK (every input to a
        // connection whose application has not answered yet).
        if self.recovery_point.is_none() && !self.fin_queued && self.data_end() == self.snd_nxt {
            if self.flight() > 0 && self.timers.rtx().is_none() && self.timers.persist().is_none() {
                self.arm_rtx(now);
            }
            if self.ack_now || self.window_update_due() {
                self.send_ack(now, ip, sink);
            }
            return;
        }
        // RFC 5681 4.1: after an idle period longer than an RTO, restart
        // from the restart window.
        if self.flight() == 0
            && now.saturating_since(self.last_send) > self.rtt.rto()
            && self.data_end() > self.snd_nxt
        {
            self.cc.on_idle_restart(now);
        }
        let mut sent_any = false;
        let in_recovery = self.recovery_point.is_some();
        // RFC 6675 NextSeg rule 1: lost segments first.
        if in_recovery && self.sack_ok {
            for _ in 0..64 {
                if self.pipe() + self.snd_mss > self.cc.cwnd() {
                    break;
                }
                let from = self.high_rxt.max(self.snd_una);
                let Some((seq, len)) = self.scoreboard.next_lost(from, self.snd_max, self.snd_mss)
                else {
                    break;
                };
                self.send_data_at(now, seq, len, false, ip, sink);
                self.high_rxt = seq + len;
                sent_any = true;
            }
        }
        // New data (or data again after a timeout went back to SND.UNA).
        for _ in 0..1024 {
            let data_end = self.data_end();
            let avail = data_end - self.snd_nxt;
            let fin_pending = self.fin_queued && self.snd_nxt <= data_end;
            let rwnd_left = (self.snd_una + self.snd_wnd) - self.snd_nxt;
            let cwnd = self.cc.cwnd();
            let cwnd_left = if in_recovery {
                cwnd.saturating_sub(self.pipe())
            } else {
                // RFC 3042 limited transmit: a segment per early dupack.
                let allowance = cwnd + self.dupacks.min(2) as usize * self.snd_mss;
                allowance.saturating_sub(self.snd_nxt - self.snd_una)
            };
            // Outside loss recovery, one segment of several MSS where the
            // link cuts it (TSO): sent as the MSS-sized segments it holds
            // would be, a short tail among them only when Nagle and SWS
            // avoidance would let it go (below), else left for the next
            // round.
            let seg_max = if in_recovery {
                self.snd_mss
            } else {
                self.segment_max(ip)
            };
            let mut len = avail.min(seg_max).min(rwnd_left).min(cwnd_left);
            if len > self.snd_mss
                && len % self.snd_mss != 0
                && (len < avail || self.cork || !self.nodelay)
            {
                len -= len % self.snd_mss;
            }
            let fin = fin_pending
                && self.snd_nxt + len == data_end
                && (cwnd_left > 0 || len > 0 || avail == 0);
            if len == 0 && !fin {
                break;
            }
            if len > 0 && len < self.snd_mss && !fin {
                if len == avail {
                    // Nagle (RFC 9293 3.7.4): a small segment waits while
                    // data is unacknowledged; corked, it waits anyway.
                    // Urgent data goes at once (as Linux's
                    // `tcp_nagle_test`).
                    if !self.urgent_mode()
                        && (self.cork || (!self.nodelay && self.snd_nxt > self.snd_una))
                    {
                        break;
                    }
                } else if len < self.max_snd_wnd / 2 && self.snd_nxt > self.snd_una {
                    // Sender SWS avoidance (3.8.6.2.1).
                    break;
                }
            }
            self.send_next(now, len, fin, ip, sink);
            sent_any = true;
            if fin {
                break;
            }
        }
        // The peer's window is closed and we have data: probe it.  (Data
        // already sent is the retransmission timer's: see
        // `zero_window_timeout`.)
        let waiting = self.data_end() > self.snd_nxt || (self.fin_queued && !self.fin_sent());
        if waiting
            && self.snd_wnd == 0
            && self.timers.rtx().is_none()
            && self.timers.persist().is_none()
        {
            let base = self.rtt.rto().max(Duration::from_millis(200));
            let backoff = base.saturating_mul(1u32 << self.persist_backoff.min(6));
            self.timers
                .set_persist(Some(now + backoff.min(shared.cfg.rto_max)));
        }
        // Whatever is outstanding, a timer watches (the persist timer stops
        // when the window opens, and loss recovery may have no room in the
        // congestion window to send).
        if self.flight() > 0 && self.timers.rtx().is_none() && self.timers.persist().is_none() {
            self.arm_rtx(now);
        }
        if !sent_any && (self.ack_now || self.window_update_due()) {
            self.send_ack(now, ip, sink);
        }
    }
}
