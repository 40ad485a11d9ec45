//! The TCP socket calls of a stack, and the dispatch of received segments
//! to connections and listeners.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use wire::tcp::{SeqNumber, TcpPacket, TcpRepr};
use wire::{ChecksumMode, Error as WireError};

use crate::ip::L4Datagram;
use crate::ipv4::Ipv4Datagram;
use crate::sink::FrameSink;
use crate::socket::table::{ConnKey, LocalKey, ReadyMark, Socket, SocketTable};
use crate::socket::{SocketError, SocketHandle};
use crate::stack::Stack;
use crate::tcp::cc::CongestionControl;
use crate::tcp::conn::TcpConnection;
use crate::tcp::fast_input::{checksum_ok, verified_meta, PredictedSegment};
use crate::tcp::input::InputEvents;
use crate::tcp::listen::{
    connection_from_cookie, mss_for_mtu, mss_for_mtu_v6, send_cookie_syn_ack, TcpListener,
};
use crate::tcp::output::send_reset_for;
use crate::tcp::shared::{TcpShared, CACHE_DECAY_INTERVAL, TRIM_INTERVAL};
use crate::tcp::timer_wheel::TimerWheel;
use crate::tcp::types::{Readiness, Shutdown, TcpInfo, TcpPollView, TcpState};
use crate::tcp::urgent::OobRead;
use crate::time::{Duration, Instant};

/// Whether the application may queue data (RFC 9293 3.10.2 SEND): the
/// pending error first, then the state.
fn check_send(conn: &mut TcpConnection) -> Result<(), SocketError> {
    // Read, and cleared only when there is one: a send without an error
    // stores nothing.
    if let Some(e) = conn.error {
        conn.error = None;
        return Err(e);
    }
    if !conn.can_send() {
        return Err(match conn.state {
            TcpState::Closed if !conn.fin_queued => SocketError::NotConnected,
            _ => SocketError::BrokenPipe,
        });
    }
    Ok(())
}

/// What [`Stack::tcp_after_event`] does for an ordinary event (not the end
/// of a handshake) of a connection that lives on: tells the wheel of an
/// earlier deadline, and readiness.  `false`, with nothing done, for a
/// closed connection.
#[inline(always)]
fn tcp_event_settled(
    now: Instant,
    index: u32,
    conn: &mut TcpConnection,
    mark: ReadyMark<'_>,
    wheel: &mut TimerWheel,
) -> bool {
    if conn.state == TcpState::Closed {
        return false;
    }
    settle_wheel(now, index, conn, wheel);
    mark.notify();
    true
}

/// A ring parked since the last claim (`BufferCache::parked`) is the
/// connection's that was just worked on: it joins the trim list, once.
#[inline(always)]
fn claim_parked(tcp: &mut TcpShared, index: u32, conn: &mut TcpConnection) {
    if tcp.buffers.parked() {
        tcp.buffers.set_parked(false);
        if !conn.trim_listed {
            conn.trim_listed = true;
            tcp.trim_list.push(index);
        }
    }
}

/// Tells the wheel of the connection's earliest deadline when its entry is
/// missing, later than a deadline set since, or past (see `deadlines.rs`).
#[inline(always)]
fn settle_wheel(now: Instant, index: u32, conn: &mut TcpConnection, wheel: &mut TimerWheel) {
    let armed = conn.timers.take_armed();
    let (at, now_us) = (conn.wheel_at, now.total_micros());
    if armed >= at && at >= now_us {
        // Nothing set since is earlier than the entry, which is still to
        // come (or, with no entry, nothing was set and no deadline is
        // left): every deadline is at or after it.
        debug_assert!(conn.next_deadline().is_none_or(|d| d.total_micros() >= at));
        return;
    }
    if let Some(deadline) = conn.next_deadline() {
        let d = deadline.total_micros();
        if d < at || at < now_us {
            conn.wheel_at = d;
            wheel.schedule(index, deadline);
        }
    }
}

fn conn_mut(sockets: &mut SocketTable, h: SocketHandle) -> Result<&mut TcpConnection, SocketError> {
    match sockets.get_mut(h) {
        Some(Socket::Tcp(c)) if !c.detached => Ok(c),
        Some(_) => Err(SocketError::NotSupported),
        None => Err(SocketError::BadHandle),
    }
}

impl Stack {
    fn tcp_conn_mut(&mut self, h: SocketHandle) -> Result<&mut TcpConnection, SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Tcp(c)) if !c.detached => Ok(c),
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    fn tcp_conn(&self, h: SocketHandle) -> Result<&TcpConnection, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Tcp(c)) if !c.detached => Ok(c),
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    /// The MSS we can receive on the interface that reaches `remote` from
    /// `local` with `mark`.
    fn tcp_mss_toward(&self, local: IpAddr, remote: IpAddr, mark: u32, now: Instant) -> usize {
        match (local, remote) {
            // The path's MTU where a fragmentation needed lowered it.
            (IpAddr::V4(src), IpAddr::V4(dst)) => self
                .ip
                .ipv4_route_from(Some(src), mark, dst, None)
                .map_or(536, |(iface, _, _)| {
                    mss_for_mtu(self.ip.ipv4_path_mtu(iface, dst, now))
                }),
            // The path's MTU where a packet too big lowered it: the
            // connection then starts with segments that fit.
            (IpAddr::V6(src), IpAddr::V6(dst)) => self
                .ip
                .ipv6_route_from(Some(src), mark, dst, None)
                .map_or(1220, |(iface, _)| {
                    mss_for_mtu_v6(self.ip.ipv6_path_mtu(iface, dst, now))
                }),
            (_, IpAddr::V4(_)) => 536,
            (_, IpAddr::V6(_)) => 1220,
        }
    }

    /// The path MTU toward `dst` is `mtu` (a packet too big or a
    /// fragmentation needed said so): the connections there send segments
    /// that fit, and resend at once the first unacknowledged one, which did
    /// not (RFC 8201 5.4, RFC 1191's "retransmit immediately").
    pub(crate) fn tcp_path_mtu_changed(
        &mut self,
        now: Instant,
        dst: IpAddr,
        mtu: usize,
        sink: &mut dyn FrameSink,
    ) {
        let base = match dst {
            IpAddr::V4(_) => mss_for_mtu(mtu),
            IpAddr::V6(_) => mss_for_mtu_v6(mtu),
        };
        let mut lowered = Vec::new();
        for (h, s) in self.sockets.iter() {
            if let Socket::Tcp(c) = s {
                if c.remote.ip() == dst {
                    let mss = base.saturating_sub(if c.ts_ok { 12 } else { 0 });
                    if mss < c.snd_mss {
                        lowered.push((h.index, mss));
                    }
                }
            }
        }
        for (index, mss) in lowered {
            if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) {
                conn.snd_mss = mss;
                conn.cc.set_mss(mss);
                conn.drop_template();
                self.ip.counters.tcp_path_mtu_lowered += 1;
                if conn.snd_una != conn.snd_max {
                    if conn.recovery_point.is_none() {
                        // Every segment in flight was too big: all of it
                        // goes again at once in the new size, within the
                        // window (Linux's tcp_simple_retransmit), without
                        // the congestion response of a loss.
                        conn.rtt_probe = None;
                        conn.snd_nxt = conn.snd_una;
                    } else {
                        conn.retransmit_head(now, &mut self.ip, sink);
                    }
                }
                conn.output(now, &mut self.ip, &mut self.tcp, sink);
            }
        }
    }

    /// Receives a TCP segment (RFC 9293 3.10.7).
    pub(crate) fn tcp_input(
        &mut self,
        now: Instant,
        d: &Ipv4Datagram<'_>,
        sink: &mut dyn FrameSink,
    ) {
        // A Congestion Experienced mark is the general path's to see.
        let ce = d.header.get(1).is_some_and(|tos| tos & 3 == 3);
        if self.ip.cfg.tcp.fast_path && !d.broadcast && !ce {
            let verified = checksum_ok((d.src, d.dst), d.payload, d.meta);
            if verified && self.tcp_input_predicted(now, (d.src, d.dst), d.payload, sink) {
                return;
            }
            let d = Ipv4Datagram {
                meta: verified_meta(d.meta, verified),
                ..*d
            };
            return self.tcp_input_general(now, &d.l4(), sink);
        }
        self.tcp_input_general(now, &d.l4(), sink);
    }

    /// [`tcp_input`](Self::tcp_input) without header prediction: every
    /// segment, RFC 9293's steps in full.
    pub(crate) fn tcp_input_general(
        &mut self,
        now: Instant,
        d: &L4Datagram<'_>,
        sink: &mut dyn FrameSink,
    ) {
        let (src, dst) = (d.src, d.dst);
        let mode = if d.meta.csum_partial {
            ChecksumMode::Offload
        } else {
            ChecksumMode::Full
        };
        let seg = match TcpPacket::new_checked(d.payload)
            .and_then(|p| TcpRepr::parse(&p, &src, &dst, mode))
        {
            Ok(s) => s,
            Err(WireError::BadChecksum) => {
                self.ip.counters.rx_drop_tcp_bad_checksum += 1;
                return;
            }
            Err(_) => {
                self.ip.counters.rx_drop_tcp_malformed += 1;
                return;
            }
        };
        if d.broadcast {
            self.ip.counters.rx_drop_tcp_to_broadcast += 1;
            return;
        }
        self.ip.counters.tcp_segments_received += 1;
        self.tcp.segment_ce = d.ecn == crate::tcp::ecn::CE;
        let local = SocketAddr::new(dst, seg.dst_port);
        let remote = SocketAddr::new(src, seg.src_port);
        let mut found = self.sockets.tcp_conns.get(&ConnKey::new(local, remote));
        if let Some(index) = found {
            if self.time_wait_yields(index, &seg, local) {
                self.free_socket(index);
                found = None;
            }
        }
        if let Some(index) = found {
            let f = seg.flags;
            if f.ack() && !f.syn() && !f.rst() && self.tcp_child_blocked(index) {
                // The accept queue holds at most `backlog + 1` connections: the
                // ACK that would complete this handshake is dropped (as
                // Linux without tcp_abort_on_overflow); the connection
                // stays in SYN-RECEIVED and the peer's retransmission of
                // the ACK, or its data, completes it once there is room.
                self.ip.counters.rx_drop_tcp_listen_overflow += 1;
                return;
            }
            if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) {
                self.ip.counters.rx_accept_tcp += 1;
                self.tcp.lend.target(index);
                let ev = conn.input(now, &seg, &mut self.ip, &mut self.tcp, sink);
                conn.output(now, &mut self.ip, &mut self.tcp, sink);
                list_burst_ack(conn, index, &mut self.tcp);
                self.tcp_after_event(now, index, ev);
                return;
            }
        }
        if let Some(lindex) = self.sockets.tcp_listener_index(local) {
            self.tcp_listen_input(now, lindex, local, remote, &seg, sink);
            return;
        }
        if self.tcp_hand_off() {
            return;
        }
        let h = &self.tcp.handoff;
        if h.unclaimed_offer
            && seg.flags.syn()
            && !seg.flags.ack()
            && h.closed_listener_ports.contains(&local.port())
        {
            self.ip.counters.rx_drop_tcp_syn_listener_moved += 1;
            return;
        }
        self.ip.counters.rx_drop_tcp_no_socket += 1;
        send_reset_for(&mut self.ip, now, local, remote, &seg, sink);
    }

    /// A segment of no connection of ours, when other processes share the
    /// ports: offered to them (or, handed over by one of them, dropped).
    /// Returns whether it was dealt with so (no reset is due then).
    fn tcp_hand_off(&mut self) -> bool {
        let h = &mut self.tcp.handoff;
        if !h.on {
            return false;
        }
        if h.forwarded {
            h.unclaimed = true;
            self.ip.counters.rx_drop_tcp_handoff_unclaimed += 1;
        } else {
            h.offer = true;
            self.ip.counters.tcp_handoff_offered += 1;
        }
        true
    }

    /// Header prediction (`fast_input.rs`): takes the segment if it is
    /// the one its connection expects, as the rest of `tcp_input` would.
    pub(crate) fn tcp_input_predicted(
        &mut self,
        now: Instant,
        (src, dst): (Ipv4Addr, Ipv4Addr),
        payload: &[u8],
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(seg) = PredictedSegment::parse(payload) else {
            return false;
        };
        let key = ConnKey::v4((dst, seg.dst_port), (src, seg.src_port));
        self.tcp_take_predicted(now, key, &seg, sink)
    }

    /// [`tcp_input_predicted`](Self::tcp_input_predicted) over IPv6.
    pub(crate) fn tcp_input_predicted_v6(
        &mut self,
        now: Instant,
        (src, dst): (Ipv6Addr, Ipv6Addr),
        payload: &[u8],
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(seg) = PredictedSegment::parse(payload) else {
            return false;
        };
        let key = ConnKey::new(
            SocketAddr::new(IpAddr::V6(dst), seg.dst_port),
            SocketAddr::new(IpAddr::V6(src), seg.src_port),
        );
        self.tcp_take_predicted(now, key, &seg, sink)
    }

    /// The family-neutral part of header prediction: the connection of
    /// `key` takes `seg` if it is the one it expects.
    #[inline(always)]
    fn tcp_take_predicted(
        &mut self,
        now: Instant,
        key: ConnKey,
        seg: &PredictedSegment<'_>,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(index) = self.sockets.tcp_conns.get(&key) else {
            return false;
        };
        let Some((Socket::Tcp(conn), mark)) = self.sockets.at_mut_with_ready(index) else {
            return false;
        };
        // The lender's target is only read when a payload is placed, which
        // happens only once the segment is taken.
        self.tcp.lend.target(index);
        if !conn.input_predicted(now, seg, &mut self.ip, &mut self.tcp, sink) {
            return false;
        }
        self.ip.counters.tcp_segments_received += 1;
        self.ip.counters.rx_accept_tcp += 1;
        conn.output(now, &mut self.ip, &mut self.tcp, sink);
        list_burst_ack(conn, index, &mut self.tcp);
        claim_parked(&mut self.tcp, index, conn);
        if !tcp_event_settled(now, index, conn, mark, &mut self.tcp.wheel) {
            self.tcp_after_state_event(now, index, InputEvents::default());
        }
        true
    }

    /// Connection `index` is in SYN-RECEIVED under a listener whose accept
    /// queue is full.
    fn tcp_child_blocked(&self, index: u32) -> bool {
        let Some(Socket::Tcp(conn)) = self.sockets.at(index) else {
            return false;
        };
        let Some((lindex, lgen)) = conn.parent else {
            return false;
        };
        if conn.state != TcpState::SynReceived || self.sockets.handle(lindex).generation != lgen {
            return false;
        }
        matches!(self.sockets.at(lindex), Some(Socket::Listener(l)) if l.accept_queue_full())
    }

    /// RFC 6191, RFC 1122 4.2.2.13: a SYN newer than a closed TIME-WAIT (by
    /// timestamp, else by sequence number) opens a new incarnation: the
    /// TIME-WAIT ends, the listener takes the SYN.
    fn time_wait_yields(&self, index: u32, seg: &TcpRepr<'_>, local: SocketAddr) -> bool {
        let f = seg.flags;
        if !f.syn() || f.ack() || f.rst() {
            return false;
        }
        let Some(Socket::Tcp(conn)) = self.sockets.at(index) else {
            return false;
        };
        let newer = match (conn.ts_ok, seg.timestamp) {
            (true, Some((tsval, _))) => (tsval.wrapping_sub(conn.ts_recent) as i32) > 0,
            _ => seg.seq_number > conn.rcv_nxt,
        };
        conn.state == TcpState::TimeWait
            && conn.detached
            && newer
            && self.sockets.tcp_listener_index(local).is_some()
    }

    /// A segment for a listener (RFC 9293 3.10.7.2).
    fn tcp_listen_input(
        &mut self,
        now: Instant,
        lindex: u32,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &TcpRepr<'_>,
        sink: &mut dyn FrameSink,
    ) {
        let flags = seg.flags;
        if flags.rst() {
            self.ip.counters.rx_drop_tcp_listen_unexpected += 1;
            return;
        }
        // A listener's connections inherit its mark (Linux's sk_clone):
        // their segments, the SYN-ACK first, take the route it gives.
        // And its TCP_MAXSEG: the MSS their SYN-ACK advertises and the
        // most they send.
        let (mark, max_segment) = match self.sockets.at(lindex) {
            Some(Socket::Listener(l)) => (l.mark, l.max_segment),
            _ => return,
        };
        let mss = self.tcp_mss_toward(local.ip(), remote.ip(), mark, now);
        let mss = max_segment.map_or(mss, |m| mss.min(m));
        if flags.ack() && !flags.syn() {
            // The last ACK of a handshake whose state we did not keep.
            if self.tcp.cfg.syncookies {
                let full = match self.sockets.at(lindex) {
                    Some(Socket::Listener(l)) => l.accept_queue_full(),
                    _ => return,
                };
                if let Some(mut conn) =
                    connection_from_cookie(&mut self.tcp, now, local, remote, seg, mss)
                {
                    conn.ip_opts.mark = mark;
                    if full {
                        // A full accept queue drops the handshake's last
                        // ACK (Linux without tcp_abort_on_overflow): the
                        // peer, which thinks itself connected, sends it
                        // again with its data until there is room.
                        self.ip.counters.rx_drop_tcp_listen_overflow += 1;
                        return;
                    }
                    if !self.tcp_admits_connection(now, sink) {
                        // The peer sends its ACK (or data) again.
                        return;
                    }
                    self.tcp_adopt(now, lindex, conn, seg, sink);
                    return;
                }
            }
            // Another process's connection, or its cookie.
            if self.tcp_hand_off() {
                return;
            }
            self.ip.counters.rx_drop_tcp_listen_unexpected += 1;
            send_reset_for(&mut self.ip, now, local, remote, seg, sink);
            return;
        }
        if (!flags.syn() || flags.ack()) && self.tcp_hand_off() {
            return;
        }
        if !flags.syn() || flags.ack() || flags.fin() {
            self.ip.counters.rx_drop_tcp_listen_unexpected += 1;
            // RFC 9293 3.10.7.2: "Any acknowledgment is bad if it arrives
            // on a connection still in the LISTEN state": a SYN-ACK too
            // gets <SEQ=SEG.ACK><CTL=RST>.  (SYN+FIN is dropped, as Linux.)
            if !flags.syn() || flags.ack() {
                send_reset_for(&mut self.ip, now, local, remote, seg, sink);
            }
            return;
        }
        if !self.tcp_admits_connection(now, sink) {
            // No SYN-ACK, not even a cookie's: a connection the peer thought
            // made would hang on an ACK we must drop (Linux drops the
            // handshake when it cannot make the socket; the peer's SYN
            // comes again and is taken once there is room).
            return;
        }
        let Some(Socket::Listener(listener)) = self.sockets.at_mut(lindex) else {
            return;
        };
        if listener.accept_queue_full() {
            self.ip.counters.rx_drop_tcp_listen_overflow += 1;
            return;
        }
        if listener.syn_queue_full() {
            if self.tcp.cfg.syncookies {
                self.ip.counters.rx_accept_tcp += 1;
                send_cookie_syn_ack(
                    &mut self.ip,
                    &self.tcp,
                    now,
                    (local, remote),
                    mark,
                    seg,
                    mss,
                    sink,
                );
            } else {
                self.ip.counters.rx_drop_tcp_listen_overflow += 1;
            }
            return;
        }
        listener.syn_received += 1;
        let lgen = self.sockets.handle(lindex).generation;
        let iss = SeqNumber(self.tcp.isn.isn(now, local, remote) as i32);
        let mut conn = TcpConnection::new(
            &mut self.tcp,
            now,
            TcpState::SynReceived,
            local,
            remote,
            iss,
            mss,
        );
        conn.irs = seg.seq_number;
        conn.rcv_nxt = seg.seq_number + 1;
        conn.rcv_adv = conn.rcv_nxt;
        conn.accept_syn_options(&self.tcp, seg, true);
        conn.snd_wnd = usize::from(seg.window_len);
        conn.max_snd_wnd = conn.snd_wnd;
        conn.snd_wl1 = seg.seq_number;
        conn.parent = Some((lindex, lgen));
        conn.ip_opts.mark = mark;
        self.tcp_recycle_time_wait(now, sink);
        match self.sockets.insert(Socket::Tcp(Box::new(conn))) {
            Ok(h) => {
                self.ip.counters.rx_accept_tcp += 1;
                self.sockets
                    .tcp_conns
                    .insert(ConnKey::new(local, remote), h.index);
                if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(h.index) {
                    conn.output(now, &mut self.ip, &mut self.tcp, sink);
                }
                self.tcp_after_event(now, h.index, InputEvents::default());
            }
            Err(_) => {
                if let Some(Socket::Listener(l)) = self.sockets.at_mut(lindex) {
                    l.syn_received -= 1;
                }
                self.ip.counters.rx_drop_tcp_table_full += 1;
            }
        }
    }

    /// Puts a connection made from a SYN cookie in the table and the
    /// listener's accept queue, then lets it take the segment's data.
    fn tcp_adopt(
        &mut self,
        now: Instant,
        lindex: u32,
        conn: TcpConnection,
        seg: &TcpRepr<'_>,
        sink: &mut dyn FrameSink,
    ) {
        let key = ConnKey::new(conn.local, conn.remote);
        let lgen = self.sockets.handle(lindex).generation;
        self.tcp_recycle_time_wait(now, sink);
        let Ok(h) = self.sockets.insert(Socket::Tcp(Box::new(conn))) else {
            // The peer retransmits its data (or its ACK): the handshake
            // completes once there is room.
            self.ip.counters.rx_drop_tcp_table_full += 1;
            return;
        };
        self.ip.counters.rx_accept_tcp += 1;
        self.ip.counters.tcp_syncookies_accepted += 1;
        self.sockets.tcp_conns.insert(key, h.index);
        if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(h.index) {
            conn.parent = Some((lindex, lgen));
            let mut ev = InputEvents {
                established: true,
                ..InputEvents::default()
            };
            if !seg.payload.is_empty() || seg.flags.fin() {
                self.tcp.lend.target(h.index);
                let more = conn.input(now, seg, &mut self.ip, &mut self.tcp, sink);
                ev.closed = more.closed;
            }
            conn.output(now, &mut self.ip, &mut self.tcp, sink);
            // The cookie path never counted a SYN-RECEIVED child.
            if let Some(Socket::Listener(l)) = self.sockets.at_mut(lindex) {
                l.syn_received += 1;
            }
            self.tcp_after_event(now, h.index, ev);
        }
    }

    /// What follows an input, a call or a timer on connection `index`:
    /// the listener's queues, freeing, readiness, the timer wheel.
    #[inline(always)]
    pub(crate) fn tcp_after_event(&mut self, now: Instant, index: u32, ev: InputEvents) {
        let Some((Socket::Tcp(conn), mark)) = self.sockets.at_mut_with_ready(index) else {
            return;
        };
        claim_parked(&mut self.tcp, index, conn);
        // Nearly every event: the handshake is not ending and the
        // connection lives on; only the wheel and readiness need a look.
        if !ev.established && tcp_event_settled(now, index, conn, mark, &mut self.tcp.wheel) {
            return;
        }
        self.tcp_after_state_event(now, index, ev);
    }

    /// [`tcp_after_event`](Self::tcp_after_event) when the handshake ends
    /// or the connection is closed.
    #[inline(never)]
    fn tcp_after_state_event(&mut self, now: Instant, index: u32, ev: InputEvents) {
        let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
            return;
        };
        let parent = conn.parent;
        let state = conn.state;
        let detached = conn.detached;
        let key = ConnKey::new(conn.local, conn.remote);
        if ev.established || (state == TcpState::Closed && parent.is_some()) {
            // Leaves the SYN queue: into the accept queue, or gone.
            if let Some((lindex, lgen)) = parent {
                let listener_alive = self.sockets.handle(lindex).generation == lgen;
                if let (true, Some(Socket::Listener(l))) =
                    (listener_alive, self.sockets.at_mut(lindex))
                {
                    l.syn_received = l.syn_received.saturating_sub(1);
                    if ev.established && state != TcpState::Closed {
                        l.accept_queue.push_back(index);
                        self.ip.counters.tcp_passive_opens += 1;
                        self.sockets.notify(lindex);
                    }
                }
            }
        }
        if ev.established && parent.is_none() {
            self.ip.counters.tcp_active_opens += 1;
        }
        if state == TcpState::Closed {
            if self.sockets.tcp_conns.get(&key) == Some(index) {
                self.sockets.tcp_conns.remove(&key);
            }
            // Nobody will read this socket again: free it.
            if detached || parent.is_some() {
                self.free_socket(index);
                return;
            }
        }
        self.sockets.notify(index);
        self.tcp_schedule(now, index);
    }

    /// Tells the wheel about the connection's earliest deadline.
    fn tcp_schedule(&mut self, now: Instant, index: u32) {
        let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
            return;
        };
        settle_wheel(now, index, conn, &mut self.tcp.wheel);
    }

    /// Gives back the storage of rings that stayed empty for a
    /// [`TRIM_INTERVAL`] (see `ByteRing::trim`): those of the connections
    /// on the trim list, which stay on it while a ring waits.
    fn tcp_trim(&mut self, now: Instant) {
        if !self.tcp_trim_waits() || now < self.tcp.next_trim {
            return;
        }
        self.tcp.next_trim = now + TRIM_INTERVAL;
        if self.tcp.buffers.parked() {
            // No connection claimed that ring (a path that parks without
            // claiming): every connection is looked at, as a fallback.
            self.tcp_trim_all();
            return;
        }
        let tcp = &mut self.tcp;
        tcp.trim_passes = tcp.trim_passes.wrapping_add(1);
        let pass = tcp.trim_passes;
        let mut list = core::mem::take(&mut tcp.trim_list);
        list.retain(|&index| {
            let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
                return false;
            };
            if !conn.trim_listed || conn.trim_pass == pass {
                return false;
            }
            conn.trim_pass = pass;
            let again = conn.send.trim(&mut tcp.buffers) | conn.recv.trim(&mut tcp.buffers);
            conn.trim_listed = again;
            again
        });
        tcp.trim_list = list;
    }

    /// The trim scan of every connection; the list is made anew.
    #[cold]
    fn tcp_trim_all(&mut self) {
        let tcp = &mut self.tcp;
        tcp.trim_full_scans += 1;
        tcp.trim_list.clear();
        tcp.buffers.set_parked(false);
        for (index, socket) in self.sockets.indexed_sockets_mut() {
            if let Socket::Tcp(conn) = socket {
                let again = conn.send.trim(&mut tcp.buffers) | conn.recv.trim(&mut tcp.buffers);
                conn.trim_listed = again;
                if again {
                    tcp.trim_list.push(index);
                }
            }
        }
    }

    /// Whether a ring waits for a trim scan.
    fn tcp_trim_waits(&self) -> bool {
        self.tcp.buffers.parked() || !self.tcp.trim_list.is_empty()
    }

    /// Trim scans that had to look at every connection (a ring parked that
    /// no connection claimed); 0 when every path that parks claims.
    pub fn tcp_trim_full_scans(&self) -> u64 {
        self.tcp.trim_full_scans
    }

    /// Connections waiting on the trim list.
    pub fn tcp_trim_listed(&self) -> usize {
        self.tcp.trim_list.len()
    }

    /// Ends the buffer cache's decay period when it is due: storage the
    /// cache held unused through the period is freed.
    fn tcp_decay_cache(&mut self, now: Instant) {
        if self.tcp.buffers.held_bytes() == 0 || now < self.tcp.next_decay {
            return;
        }
        self.tcp.next_decay = now + CACHE_DECAY_INTERVAL;
        self.tcp.buffers.decay();
    }

    /// When the trim scan is due, if a ring waits for one, or the cache's
    /// decay, if it holds storage.
    pub(crate) fn tcp_trim_deadline(&self) -> Option<Instant> {
        let trim = self.tcp_trim_waits().then_some(self.tcp.next_trim);
        let decay = (self.tcp.buffers.held_bytes() > 0).then_some(self.tcp.next_decay);
        trim.into_iter().chain(decay).min()
    }

    /// Bytes of ring storage the stack has freed since the start (a
    /// runtime that can hand freed heap back to the system watches it).
    pub fn tcp_buffer_released_bytes(&self) -> u64 {
        self.tcp.buffers.released_bytes()
    }

    /// Runs the TCP timers that are due.
    pub(crate) fn tcp_poll(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        self.tcp_trim(now);
        let mut fired = core::mem::take(&mut self.tcp.fired);
        self.tcp
            .wheel
            .advance(now, |index, deadline| fired.push((index, deadline)));
        for &(index, deadline) in &fired {
            let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
                continue;
            };
            // Only the entry the connection last asked for is its own: an
            // entry it superseded by an earlier one, or one of an earlier
            // connection in the same slot of the table, goes.  Taken as
            // its own, each would arm the connection again and live on
            // as a new entry, and with the table's slots reused under
            // churn the wheel would grow by every connection ever made.
            if conn.wheel_at != deadline.total_micros() {
                continue;
            }
            // The entry is gone: the next settling must find the earliest
            // deadline afresh, set since or not.
            conn.wheel_at = u64::MAX;
            conn.timers.rearm();
            let mut ev = InputEvents::default();
            if conn.next_deadline().is_some_and(|d| d <= now) {
                ev.closed = conn.on_timers(now, &mut self.ip, &mut self.tcp, sink);
            }
            self.tcp_after_event(now, index, ev);
        }
        fired.clear();
        self.tcp.fired = fired;
        // Last: the timers may have given the cache storage, and a decay
        // deadline left in the past would have the caller poll again at once.
        self.tcp_decay_cache(now);
    }

    /// Opens a listening socket (RFC 9293 3.10.1 passive OPEN).
    pub fn tcp_listen(
        &mut self,
        local: SocketAddr,
        backlog: usize,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_listen_v6only(local, backlog, false)
    }

    /// [`tcp_listen`](Self::tcp_listen) with IPV6_V6ONLY: a listener on
    /// `[::]` without it takes IPv4 connections too (Linux's default),
    /// whose addresses are IPv4.
    pub fn tcp_listen_v6only(
        &mut self,
        local: SocketAddr,
        backlog: usize,
        v6only: bool,
    ) -> Result<SocketHandle, SocketError> {
        if !local.ip().is_unspecified() && !self.is_local_ip(local.ip()) {
            return Err(SocketError::AddrNotAvailable);
        }
        if local.port() == 0 {
            return Err(SocketError::InvalidArgument);
        }
        let v6only = v6only && local.is_ipv6();
        if self
            .sockets
            .tcp_bind_clash(local.ip(), local.port(), v6only)
        {
            return Err(SocketError::AddrInUse);
        }
        // Linux's listen(): a backlog above somaxconn (a negative one
        // included, which the caller passes as usize::MAX) is somaxconn.
        let backlog = backlog.min(self.tcp.cfg.somaxconn);
        let mut listener = TcpListener::new(local, backlog);
        listener.v6only = v6only;
        let h = self.sockets.insert(Socket::Listener(listener))?;
        self.sockets
            .tcp_listeners
            .insert(LocalKey::new(local.ip(), local.port()), h.index);
        Ok(h)
    }

    /// Takes an established connection from a listener's accept queue.
    pub fn tcp_accept(
        &mut self,
        listener: SocketHandle,
    ) -> Result<(SocketHandle, SocketAddr), SocketError> {
        loop {
            let index = match self.sockets.get_mut(listener) {
                Some(Socket::Listener(l)) => {
                    l.accept_queue.pop_front().ok_or(SocketError::WouldBlock)?
                }
                Some(_) => return Err(SocketError::InvalidArgument),
                None => return Err(SocketError::BadHandle),
            };
            let handle = self.sockets.handle(index);
            if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) {
                if conn
                    .parent
                    .is_some_and(|(l, g)| l == listener.index && g == listener.generation)
                {
                    conn.parent = None;
                    self.ip.counters.tcp_accepted += 1;
                    return Ok((handle, conn.remote));
                }
            }
        }
    }

    /// Opens a connection (RFC 9293 3.10.1 active OPEN); it completes in
    /// the background, like a non-blocking connect.
    pub fn tcp_connect(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        sink: &mut dyn FrameSink,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_connect_marked(now, remote, local, 0, sink)
    }

    /// [`tcp_connect`](Self::tcp_connect) from a socket with SO_MARK
    /// `mark`: policy rules by mark choose its route, and so its source
    /// address when `local` leaves it open, from its SYN on.
    pub fn tcp_connect_marked(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        mark: u32,
        sink: &mut dyn FrameSink,
    ) -> Result<SocketHandle, SocketError> {
        self.tcp_connect_with(now, remote, local, mark, None, sink)
    }

    /// [`tcp_connect_marked`](Self::tcp_connect_marked) with TCP_MAXSEG
    /// `max_segment`: the SYN advertises at most that MSS and the
    /// connection sends segments no larger (Linux's user_mss).
    pub fn tcp_connect_with(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        mark: u32,
        max_segment: Option<u16>,
        sink: &mut dyn FrameSink,
    ) -> Result<SocketHandle, SocketError> {
        let dst = remote.ip();
        // RFC 9293 MUST-46: no connection to a broadcast (a subnet's
        // directed one too) or multicast address.
        let bad_dst = match dst {
            IpAddr::V4(d) => {
                d.is_broadcast()
                    || d.is_multicast()
                    || self.ip.ifaces.iter().any(|i| i.is_broadcast(d))
            }
            IpAddr::V6(d) => d.is_multicast() || d.to_ipv4_mapped().is_some(),
        };
        if remote.port() == 0 || dst.is_unspecified() || bad_dst {
            return Err(SocketError::InvalidArgument);
        }
        let src_ip: IpAddr = match local.map(|l| l.ip()) {
            Some(ip) if ip.is_ipv4() != dst.is_ipv4() => {
                return Err(SocketError::AddrFamilyNotSupported)
            }
            Some(ip) if !ip.is_unspecified() => {
                if !self.is_local_ip(ip) {
                    return Err(SocketError::AddrNotAvailable);
                }
                ip
            }
            _ => match dst {
                IpAddr::V4(d) => self.ip.ipv4_source_for(d, mark).map(IpAddr::V4),
                IpAddr::V6(d) => self.ip.ipv6_source_for(d, mark).map(IpAddr::V6),
            }
            .ok_or(SocketError::NetworkUnreachable)?,
        };
        let port = match local.map(|l| l.port()) {
            Some(p) if p != 0 => {
                if self
                    .sockets
                    .tcp_conns
                    .contains_key(&ConnKey::new(SocketAddr::new(src_ip, p), remote))
                {
                    return Err(SocketError::AddrInUse);
                }
                p
            }
            _ => {
                let conns = &self.sockets.tcp_conns;
                let listeners = &self.sockets.tcp_listeners;
                self.tcp
                    .ports
                    .pick(src_ip, remote, |p| {
                        conns.contains_key(&ConnKey::new(SocketAddr::new(src_ip, p), remote))
                            || listeners.contains_key(&LocalKey::new(src_ip, p))
                    })
                    .ok_or(SocketError::NoFreePort)?
            }
        };
        let local = SocketAddr::new(src_ip, port);
        let mss = self.tcp_mss_toward(src_ip, remote.ip(), mark, now);
        let mss = max_segment.map_or(mss, |m| mss.min(usize::from(m)));
        let iss = SeqNumber(self.tcp.isn.isn(now, local, remote) as i32);
        let mut conn = TcpConnection::new(
            &mut self.tcp,
            now,
            TcpState::SynSent,
            local,
            remote,
            iss,
            mss,
        );
        if self.tcp.cfg.rfc1323 {
            conn.rcv_wscale = TcpConnection::wscale_for(self.tcp.cfg.recvbuf_max);
        }
        conn.ip_opts.mark = mark;
        self.tcp_recycle_time_wait(now, sink);
        if self.tcp_over_budget() {
            self.ip.counters.tcp_connects_refused_memory_budget += 1;
            return Err(SocketError::NoBufferSpace);
        }
        let h = self.sockets.insert(Socket::Tcp(Box::new(conn)))?;
        self.sockets
            .tcp_conns
            .insert(ConnKey::new(local, remote), h.index);
        if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(h.index) {
            conn.output(now, &mut self.ip, &mut self.tcp, sink);
        }
        self.tcp_after_event(now, h.index, InputEvents::default());
        Ok(h)
    }

    /// Queues data to send; returns how much fit (RFC 9293 3.10.2 SEND).
    #[inline]
    pub fn tcp_send(
        &mut self,
        now: Instant,
        h: SocketHandle,
        data: &[u8],
        sink: &mut dyn FrameSink,
    ) -> Result<usize, SocketError> {
        // One look-up and no `output_holds`: the push follows at once.
        let conn = conn_mut(&mut self.sockets, h)?;
        let n = queue_send(conn, data, &mut self.tcp.buffers)?;
        conn.output_any(now, &mut self.ip, &mut self.tcp, sink);
        // `tcp_after_push` without its second look-up.
        if conn.state == TcpState::Closed {
            self.tcp_after_state_event(now, h.index, InputEvents::default());
        } else {
            settle_wheel(now, h.index, conn, &mut self.tcp.wheel);
        }
        Ok(n)
    }

    /// [`tcp_send`](Self::tcp_send) without the clock: queues the data and
    /// says whether output must follow now ([`tcp_send_push`](Self::tcp_send_push)).
    /// `false` when the output would send nothing and arm no timer (TCP_CORK
    /// holding less than a segment, see `output_holds`): then nothing more
    /// is due, and a caller that reads its clock only for the push reads
    /// none (nginx's writev and sendfile between its cork and uncork).
    pub fn tcp_send_queue(
        &mut self,
        h: SocketHandle,
        data: &[u8],
    ) -> Result<(usize, bool), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        let n = queue_send(conn, data, &mut self.tcp.buffers)?;
        Ok((n, !conn.output_holds(self.ip.cfg.tcp.fast_path)))
    }

    /// The output of [`tcp_send`](Self::tcp_send) after
    /// [`tcp_send_queue`](Self::tcp_send_queue) queued its data.
    pub fn tcp_send_push(
        &mut self,
        now: Instant,
        h: SocketHandle,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        conn.output_any(now, &mut self.ip, &mut self.tcp, sink);
        self.tcp_after_push(now, h.index);
        Ok(())
    }

    /// What follows a send's output: the ready list is not told (see
    /// `tcp_after_send`) unless the output closed the connection.
    #[inline(always)]
    fn tcp_after_push(&mut self, now: Instant, index: u32) {
        let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
            return;
        };
        if conn.state == TcpState::Closed {
            self.tcp_after_state_event(now, index, InputEvents::default());
        } else {
            settle_wheel(now, index, conn, &mut self.tcp.wheel);
        }
    }

    /// What follows a call that queued or released data to send
    /// ([`tcp_send`](Self::tcp_send)'s rule, for the zero-copy commit and
    /// the uncork): the ready list is not told, as the caller knows what it
    /// did and sending makes nothing readable or writable that was not (it
    /// would bring the socket back for a readiness look that finds nothing
    /// new: one per nginx response).  A connection the output closed is
    /// told.
    #[inline(always)]
    fn tcp_after_send(&mut self, now: Instant, index: u32) {
        let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
            return;
        };
        claim_parked(&mut self.tcp, index, conn);
        if conn.state == TcpState::Closed {
            self.tcp_after_state_event(now, index, InputEvents::default());
        } else {
            settle_wheel(now, index, conn, &mut self.tcp.wheel);
        }
    }

    /// Zero-copy send, first half: lends a contiguous writable region of
    /// the connection's send buffer, right after the data already queued,
    /// of at most `want` bytes (within the send buffer limit; shorter than
    /// asked when the free room wraps).  The caller writes its data there
    /// and passes the count to [`Stack::tcp_send_commit`].  The state
    /// checks and errors are `tcp_send`'s; WouldBlock when the buffer is
    /// full.  The region stays in place until the commit, the next
    /// reservation, a `tcp_send`, or the connection's end, even while
    /// segments come and go.
    pub fn tcp_send_reserve(
        &mut self,
        h: SocketHandle,
        want: usize,
    ) -> Result<&mut [u8], SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        check_send(conn)?;
        let region = conn
            .send
            .reserve_tail(want, conn.send_limit, &mut self.tcp.buffers);
        if region.is_empty() && want > 0 {
            return Err(SocketError::WouldBlock);
        }
        Ok(region)
    }

    /// Zero-copy send, second half: the first `n` bytes of the region
    /// [`Stack::tcp_send_reserve`] lent join the stream and are sent as
    /// `tcp_send` would send them.  InvalidArgument when `n` is more than
    /// was lent (nothing is sent, the region stays lent); the errors of
    /// `tcp_send` otherwise (and then the region is given up).
    pub fn tcp_send_commit(
        &mut self,
        now: Instant,
        h: SocketHandle,
        n: usize,
        sink: &mut dyn FrameSink,
    ) -> Result<usize, SocketError> {
        let (n, _) = self.tcp_send_commit_queue(h, n)?;
        self.tcp_send_commit_push(now, h, sink)?;
        Ok(n)
    }

    /// [`tcp_send_commit`](Self::tcp_send_commit) without the clock, as
    /// [`tcp_send_queue`](Self::tcp_send_queue) is `tcp_send`'s: commits
    /// and says whether [`tcp_send_commit_push`](Self::tcp_send_commit_push)
    /// must follow now.  When not, receive auto-tuning's look waits for the
    /// connection's next output (as after `tcp_send`: the uncork's).
    pub fn tcp_send_commit_queue(
        &mut self,
        h: SocketHandle,
        n: usize,
    ) -> Result<(usize, bool), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        if let Err(e) = check_send(conn) {
            conn.send.cancel_reservation();
            return Err(e);
        }
        if !conn.send.commit_reserved(n) {
            return Err(SocketError::InvalidArgument);
        }
        let push = !conn.output_holds(self.ip.cfg.tcp.fast_path);
        if !push {
            claim_parked(&mut self.tcp, h.index, conn);
        }
        Ok((n, push))
    }

    /// The output of [`tcp_send_commit`](Self::tcp_send_commit) after
    /// [`tcp_send_commit_queue`](Self::tcp_send_commit_queue).
    pub fn tcp_send_commit_push(
        &mut self,
        now: Instant,
        h: SocketHandle,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        conn.output(now, &mut self.ip, &mut self.tcp, sink);
        self.tcp_after_send(now, h.index);
        Ok(())
    }

    /// Reads received data; `Ok(0)` is the end of the stream.
    #[inline]
    pub fn tcp_recv(
        &mut self,
        now: Instant,
        h: SocketHandle,
        buf: &mut [u8],
        sink: &mut dyn FrameSink,
    ) -> Result<usize, SocketError> {
        let (n, update) = self.tcp_read(h, buf)?;
        if update {
            self.tcp_send_window_update(now, h.index, sink);
        }
        Ok(n)
    }

    /// [`tcp_recv`](Self::tcp_recv) without the clock: the count read,
    /// and whether the read opened the window enough that the peer must
    /// hear of it now (then [`tcp_window_update`](Self::tcp_window_update)
    /// sends it).  Most reads leave the window as the peer knows it, so a
    /// caller that reads its clock only for the update seldom reads it
    /// (the socket layer's read: a clock read is ~55 ns in a VM).
    #[inline]
    pub fn tcp_read(
        &mut self,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Result<(usize, bool), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        if buf.is_empty() {
            return Ok((0, false));
        }
        let n = if conn.urgent.is_some() {
            conn.read_around_mark(buf, &mut self.tcp.buffers, &mut self.tcp.lend)
        } else {
            conn.recv
                .read(buf, &mut self.tcp.buffers, &mut self.tcp.lend)
        };
        claim_parked(&mut self.tcp, h.index, conn);
        if n == 0 {
            // Linux: the peer's FIN was read, so EOF, also after a reset
            // (the error waits for a write or SO_ERROR).
            if conn.reset_after_fin {
                return Ok((0, false));
            }
            if let Some(e) = conn.error.take() {
                return Err(e);
            }
            if conn.peer_closed() || conn.read_shut {
                return Ok((0, false));
            }
            if matches!(conn.state, TcpState::SynSent | TcpState::SynReceived)
                || conn.state == TcpState::Closed
            {
                return Err(if conn.state == TcpState::Closed {
                    SocketError::NotConnected
                } else {
                    SocketError::WouldBlock
                });
            }
            return Err(SocketError::WouldBlock);
        }
        // Receive buffer auto-tuning: an application that drains a full
        // buffer gets a bigger one, up to `recvbuf_max`.
        if n >= conn.recv.capacity() / 2 && conn.wscale_ok && !conn.recv_locked {
            let grown = (conn.recv.capacity() * 2).min(self.tcp.cfg.recvbuf_max);
            conn.recv.set_capacity(grown);
        }
        Ok((n, conn.window_update_due()))
    }

    /// Sends the window update a [`tcp_read`](Self::tcp_read) said is due.
    pub fn tcp_window_update(
        &mut self,
        now: Instant,
        h: SocketHandle,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        conn_mut(&mut self.sockets, h)?;
        self.tcp_send_window_update(now, h.index, sink);
        Ok(())
    }

    /// The application read enough to open the window by a worthwhile
    /// amount: the peer hears of it now. Out of line: most reads leave
    /// the window as the peer knows it.
    #[cold]
    #[inline(never)]
    fn tcp_send_window_update(&mut self, now: Instant, index: u32, sink: &mut dyn FrameSink) {
        if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) {
            // Past `output`'s first test, which does not look for a window
            // update (see `nothing_to_output`).
            conn.output_any_outlined(now, &mut self.ip, &mut self.tcp, sink);
            self.tcp_after_event(now, index, InputEvents::default());
        }
    }

    /// Reads received data in place: `f` sees the first contiguous run of
    /// readable bytes (the payload where a held frame has it, else the
    /// ring's) and returns how many it used; those are removed. Returns
    /// that count; with nothing to read, what [`tcp_recv`](Self::tcp_recv)
    /// would (`Ok(0)` at the end of the stream, or the error).
    pub fn tcp_recv_zero_copy(
        &mut self,
        now: Instant,
        h: SocketHandle,
        f: impl FnOnce(&[u8]) -> usize,
        sink: &mut dyn FrameSink,
    ) -> Result<usize, SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        // Not past the urgent mark (`urgent.rs`).
        let limit = if conn.urgent.is_some() {
            conn.prepare_read_at_mark(&mut self.tcp.buffers, &mut self.tcp.lend)
        } else {
            usize::MAX
        };
        let read = conn.recv.read_in_place(
            |run| f(&run[..run.len().min(limit)]),
            &mut self.tcp.buffers,
            &mut self.tcp.lend,
        );
        if let Some(used) = read {
            conn.read_toward_mark(used);
        }
        claim_parked(&mut self.tcp, h.index, conn);
        let Some(used) = read else {
            // Nothing readable: the end of the stream, an error, or wait.
            return self.tcp_recv(now, h, &mut [0u8; 1], sink);
        };
        if conn.window_update_due() {
            conn.output_any_outlined(now, &mut self.ip, &mut self.tcp, sink);
            self.tcp_after_event(now, h.index, InputEvents::default());
        }
        Ok(used)
    }

    /// Closes one or both directions (RFC 9293 3.10.4 CLOSE for writing).
    pub fn tcp_shutdown(
        &mut self,
        now: Instant,
        h: SocketHandle,
        how: Shutdown,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            conn.read_shut = true;
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            match conn.state {
                TcpState::SynSent => conn.state = TcpState::Closed,
                TcpState::SynReceived | TcpState::Established => {
                    conn.fin_queued = true;
                    conn.state = TcpState::FinWait1;
                }
                TcpState::CloseWait => {
                    conn.fin_queued = true;
                    conn.state = TcpState::LastAck;
                }
                TcpState::Closed => return Err(SocketError::NotConnected),
                _ => {}
            }
            conn.output(now, &mut self.ip, &mut self.tcp, sink);
        }
        self.tcp_after_event(now, h.index, InputEvents::default());
        Ok(())
    }

    /// Closes a socket: a listener resets its unaccepted connections; a
    /// connection finishes sending, then closes on its own.  Unread data,
    /// or SO_LINGER with a zero timeout, resets it instead (RFC 9293
    /// 3.10.4, RFC 2525 2.17).
    pub fn tcp_close(
        &mut self,
        now: Instant,
        h: SocketHandle,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Listener(l)) => {
                let queued: Vec<u32> = l.accept_queue.drain(..).collect();
                let port = l.local.port();
                let handoff = &mut self.tcp.handoff;
                if handoff.on && !handoff.closed_listener_ports.contains(&port) {
                    if handoff.closed_listener_ports.len()
                        >= crate::tcp::shared::CLOSED_LISTENERS_MAX
                    {
                        handoff.closed_listener_ports.remove(0);
                    }
                    handoff.closed_listener_ports.push(port);
                }
                self.sockets.remove(h.index);
                for index in queued {
                    self.tcp_abort_index(now, index, sink);
                }
                // SYN-RECEIVED children find their listener gone and are
                // freed when they finish; reset them now instead.
                let orphans: Vec<u32> = self
                    .sockets
                    .iter()
                    .filter_map(|(ch, s)| match s {
                        Socket::Tcp(c) if c.parent.is_some_and(|(l, _)| l == h.index) => {
                            Some(ch.index)
                        }
                        _ => None,
                    })
                    .collect();
                for index in orphans {
                    self.tcp_abort_index(now, index, sink);
                }
                Ok(())
            }
            Some(Socket::Tcp(conn)) if !conn.detached => {
                if conn.linger_zero || conn.recv.readable() > 0 {
                    self.tcp_abort_index(now, h.index, sink);
                    return Ok(());
                }
                conn.detached = true;
                match conn.state {
                    TcpState::SynSent | TcpState::Closed => conn.state = TcpState::Closed,
                    TcpState::SynReceived | TcpState::Established => {
                        conn.fin_queued = true;
                        conn.state = TcpState::FinWait1;
                    }
                    TcpState::CloseWait => {
                        conn.fin_queued = true;
                        conn.state = TcpState::LastAck;
                    }
                    TcpState::FinWait2 => {
                        conn.timers
                            .set_close(Some(now + crate::tcp::input::FIN_WAIT_2_TIMEOUT));
                    }
                    _ => {}
                }
                conn.output(now, &mut self.ip, &mut self.tcp, sink);
                self.tcp_after_event(now, h.index, InputEvents::default());
                Ok(())
            }
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    /// ACKs of in-order data wait for the end of each receive burst
    /// ([`Stack::end_of_burst`]), one per connection for the burst's
    /// segments (at most 16), as a receiver with GRO acknowledges:
    /// far fewer ACKs for the sender and the link to carry.  For an
    /// engine, which calls `end_of_burst` after every burst it receives.
    pub fn set_ack_per_burst(&mut self, on: bool) {
        self.tcp.ack_per_burst = on;
    }

    /// Whether ACKs wait for [`Stack::end_of_burst`].
    #[inline(always)]
    pub fn has_burst_acks(&self) -> bool {
        !self.tcp.burst_acks.is_empty()
    }

    /// Sends the ACKs that waited for the end of the receive burst
    /// ([`Stack::set_ack_per_burst`]).
    #[inline(never)]
    pub fn end_of_burst(&mut self, now: Instant, sink: &mut dyn FrameSink) {
        let listed = std::mem::take(&mut self.tcp.burst_acks);
        for &index in &listed {
            let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) else {
                continue;
            };
            conn.burst_ack_listed = false;
            if !std::mem::take(&mut conn.burst_ack) {
                continue;
            }
            conn.ack_now = true;
            conn.output(now, &mut self.ip, &mut self.tcp, sink);
            self.tcp_after_event(now, index, InputEvents::default());
        }
        // The list's storage, for the next burst.
        let mut listed = listed;
        listed.clear();
        if self.tcp.burst_acks.is_empty() {
            self.tcp.burst_acks = listed;
        }
    }

    /// Closed connections that still hold data or a FIN the peer has not
    /// acknowledged: what an exiting process waits for before its engine
    /// goes (the kernel would carry them on as orphans).
    pub fn tcp_unfinished_closes(&self) -> usize {
        self.sockets
            .iter()
            .filter(|(_, s)| matches!(s, Socket::Tcp(c) if c.detached && is_unfinished(c.state)))
            .count()
    }

    /// Resets every closed connection [`Stack::tcp_unfinished_closes`]
    /// counts: the engine is going and cannot finish them.  Returns how
    /// many.
    pub fn tcp_abort_unfinished_closes(&mut self, now: Instant, sink: &mut dyn FrameSink) -> usize {
        let unfinished: Vec<u32> = self
            .sockets
            .iter()
            .filter_map(|(h, s)| match s {
                Socket::Tcp(c) if c.detached && is_unfinished(c.state) => Some(h.index),
                _ => None,
            })
            .collect();
        for &index in &unfinished {
            self.tcp_abort_index(now, index, sink);
        }
        unfinished.len()
    }

    /// Resets a connection and frees it (RFC 9293 3.10.5 ABORT).
    pub fn tcp_abort(
        &mut self,
        now: Instant,
        h: SocketHandle,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        self.tcp_conn(h)?;
        self.tcp_abort_index(now, h.index, sink);
        Ok(())
    }

    /// A full socket table (or TCP's memory at its budget) makes room for
    /// a new connection by ending a TIME-WAIT early: the one due to end
    /// first among those no application holds (as Linux does past
    /// `tcp_max_tw_buckets`; RFC 1122 4.2.2.13 and RFC 6191 end one early
    /// for a new incarnation too).
    /// Without this, a host that closes first under churn would refuse
    /// connections for 2 MSL with its table full of finished ones.  The
    /// candidates come from one walk of the table, 64 at a time, so a
    /// refusal storm does not walk it per connection.  Returns whether one
    /// was freed.
    pub(crate) fn tcp_recycle_time_wait(&mut self, now: Instant, sink: &mut dyn FrameSink) -> bool {
        const BATCH: usize = 64;
        // A walk that found no TIME-WAIT is not made again for this long:
        // a table (or budget) held full by live connections would be
        // walked whole for every refused handshake.
        const WALK_AGAIN_AFTER: Duration = Duration::from_millis(100);
        if !self.sockets.is_full() && !self.tcp_over_budget() {
            return false;
        }
        let mut walked = false;
        loop {
            let Some((_, index, generation)) = self.tcp.time_wait_victims.pop() else {
                if walked {
                    self.tcp.time_wait_walk_found_none = Some(now);
                    return false;
                }
                if self
                    .tcp
                    .time_wait_walk_found_none
                    .is_some_and(|at| now < at + WALK_AGAIN_AFTER)
                {
                    return false;
                }
                walked = true;
                let mut heap = std::collections::BinaryHeap::with_capacity(BATCH + 1);
                for (h, s) in self.sockets.iter() {
                    if let Socket::Tcp(c) = s {
                        if c.state == TcpState::TimeWait && c.detached {
                            let end = c.timers.close().unwrap_or(now);
                            heap.push((end, h.index, h.generation));
                            if heap.len() > BATCH {
                                heap.pop();
                            }
                        }
                    }
                }
                // Latest first: `pop` takes the earliest.
                let mut victims = heap.into_sorted_vec();
                victims.reverse();
                self.tcp.time_wait_victims = victims;
                continue;
            };
            if self.sockets.handle(index).generation != generation {
                continue;
            }
            match self.sockets.at(index) {
                Some(Socket::Tcp(c)) if c.state == TcpState::TimeWait && c.detached => {}
                _ => continue,
            }
            self.tcp_abort_index(now, index, sink);
            self.ip.counters.tcp_time_wait_recycled += 1;
            return true;
        }
    }

    fn tcp_abort_index(&mut self, now: Instant, index: u32, sink: &mut dyn FrameSink) {
        if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) {
            if conn.state != TcpState::Closed
                && conn.state != TcpState::SynSent
                && conn.state != TcpState::TimeWait
            {
                conn.send_rst(now, &mut self.ip, sink);
            }
            conn.state = TcpState::Closed;
            conn.detached = true;
            conn.timers = Default::default();
        }
        self.tcp_after_event(now, index, InputEvents::default());
    }

    /// Whether connection `h` still holds its local port: the stack has
    /// it in a state but closed, also after the application let it go
    /// (closing, TIME-WAIT).  Linux's bind conflicts count such
    /// connections until they are freed.
    pub fn tcp_holds_port(&self, h: SocketHandle) -> bool {
        matches!(self.sockets.get(h), Some(Socket::Tcp(c)) if c.state != TcpState::Closed)
    }

    pub fn tcp_state(&self, h: SocketHandle) -> Result<TcpState, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Listener(_)) => Ok(TcpState::Listen),
            _ => self.tcp_conn(h).map(|c| c.state),
        }
    }

    pub fn tcp_info(&self, h: SocketHandle) -> Result<TcpInfo, SocketError> {
        self.tcp_conn(h).map(|c| c.info())
    }

    pub fn tcp_local_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Listener(l)) => Ok(l.local),
            _ => self.tcp_conn(h).map(|c| c.local),
        }
    }

    pub fn tcp_peer_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        self.tcp_conn(h).map(|c| c.remote)
    }

    /// What the socket is ready for (epoll's view).
    pub fn tcp_readiness(&self, h: SocketHandle) -> Result<Readiness, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Listener(l)) => Ok(Readiness {
                readable: !l.accept_queue.is_empty(),
                ..Readiness::default()
            }),
            _ => self.tcp_conn(h).map(|c| c.readiness()),
        }
    }

    /// A connection's state, queues and pending error for poll, in one
    /// look-up: what [`tcp_state`](Self::tcp_state),
    /// [`tcp_recv_queued`](Self::tcp_recv_queued),
    /// [`tcp_recv_readable`](Self::tcp_recv_readable),
    /// [`tcp_readiness`](Self::tcp_readiness)'s `urgent`,
    /// [`tcp_send_space`](Self::tcp_send_space),
    /// [`tcp_send_queued`](Self::tcp_send_queued) and
    /// [`tcp_peek_error`](Self::tcp_peek_error) each say.  NotSupported
    /// for a listener.
    pub fn tcp_poll_view(&self, h: SocketHandle) -> Result<TcpPollView, SocketError> {
        let c = self.tcp_conn(h)?;
        Ok(TcpPollView {
            state: c.state,
            recv_queued: c.recv.readable(),
            recv_readable: c.readable_for_poll(),
            urgent: c.urgent_pending(),
            send_space: c.send_space(),
            send_queued: c.send.len(),
            error: c.error,
        })
    }

    /// Takes the pending error (SO_ERROR).
    pub fn tcp_take_error(&mut self, h: SocketHandle) -> Result<Option<SocketError>, SocketError> {
        self.tcp_conn_mut(h).map(|c| c.error.take())
    }

    /// TCP_NODELAY: send small segments without waiting (no Nagle).
    pub fn tcp_set_nodelay(
        &mut self,
        now: Instant,
        h: SocketHandle,
        on: bool,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        conn.nodelay = on;
        if on {
            conn.output(now, &mut self.ip, &mut self.tcp, sink);
            self.tcp_after_event(now, h.index, InputEvents::default());
        }
        Ok(())
    }

    /// TCP_CORK: while on, segments shorter than the MSS are held (the FIN
    /// still takes what is queued); turning it off sends what waits.
    /// Unlike Linux, a cork held for 200 ms does not let the data go by
    /// itself: it waits for the uncork, a full segment or the close.
    pub fn tcp_set_cork(
        &mut self,
        now: Instant,
        h: SocketHandle,
        on: bool,
        sink: &mut dyn FrameSink,
    ) -> Result<(), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        conn.cork = on;
        if !on {
            conn.output(now, &mut self.ip, &mut self.tcp, sink);
            self.tcp_after_send(now, h.index);
        }
        Ok(())
    }

    /// TCP_CORK on: as `tcp_set_cork(.., true, ..)`, which sends nothing
    /// and needs no clock.
    pub fn tcp_cork(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        self.tcp_conn_mut(h).map(|c| c.cork = true)
    }

    /// SO_KEEPALIVE.
    pub fn tcp_set_keepalive(
        &mut self,
        now: Instant,
        h: SocketHandle,
        on: bool,
    ) -> Result<(), SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        let idle = conn.keep_idle(&self.tcp);
        conn.keepalive = on;
        conn.timers
            .set_keepalive((on && conn.synchronized()).then_some(now + idle));
        self.tcp_schedule(now, h.index);
        Ok(())
    }

    /// SO_LINGER with a zero timeout: close resets the connection.
    pub fn tcp_set_linger_zero(&mut self, h: SocketHandle, on: bool) -> Result<(), SocketError> {
        self.tcp_conn_mut(h).map(|c| c.linger_zero = on)
    }

    /// Room in the send buffer.
    pub fn tcp_send_space(&self, h: SocketHandle) -> Result<usize, SocketError> {
        self.tcp_conn(h).map(|c| c.send_space())
    }

    /// The send buffer's free space and the bytes queued in it (sent and
    /// not acknowledged, and not yet sent), in one look: whether a send
    /// left the socket writable.
    pub fn tcp_send_room(&self, h: SocketHandle) -> Result<(usize, usize), SocketError> {
        self.tcp_conn(h).map(|c| (c.send_space(), c.send.len()))
    }

    /// Copies received data without consuming it (MSG_PEEK); not past
    /// the urgent mark, as a read.
    pub fn tcp_peek(&self, h: SocketHandle, buf: &mut [u8]) -> Result<usize, SocketError> {
        let conn = self.tcp_conn(h)?;
        let n = conn.recv.peek(buf);
        Ok(if conn.urgent.is_some() {
            conn.peek_around_mark(buf, n)
        } else {
            n
        })
    }

    /// Queues data to send as urgent data (`send(MSG_OOB)`): its last
    /// octet is urgent, and the segments before it carry URG and the
    /// pointer after it (RFC 6093, `urgent.rs`). Returns how much fit, as
    /// [`tcp_send`](Self::tcp_send); the mark goes after what fit.
    pub fn tcp_send_urgent(
        &mut self,
        now: Instant,
        h: SocketHandle,
        data: &[u8],
        sink: &mut dyn FrameSink,
    ) -> Result<usize, SocketError> {
        let conn = conn_mut(&mut self.sockets, h)?;
        check_send(conn)?;
        let n = conn
            .send
            .append(data, conn.send_limit, &mut self.tcp.buffers);
        if n == 0 && !data.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        if n > 0 {
            conn.mark_urgent_sent();
        }
        conn.output_any(now, &mut self.ip, &mut self.tcp, sink);
        self.tcp_after_event(now, h.index, InputEvents::default());
        Ok(n)
    }

    /// Reads the urgent octet (`recv(MSG_OOB)`, Linux's semantics):
    /// InvalidArgument with SO_OOBINLINE, without a mark, or once it was
    /// taken; WouldBlock while the pointer has come and the octet not;
    /// NotConnected on a listener. `peek` leaves it to be read again.
    pub fn tcp_recv_urgent(&mut self, h: SocketHandle, peek: bool) -> Result<OobRead, SocketError> {
        if let Some(Socket::Listener(_)) = self.sockets.get(h) {
            return Err(SocketError::NotConnected);
        }
        self.tcp_conn_mut(h)?.read_urgent(peek)
    }

    /// SIOCATMARK: the next octet to read is the urgent one (the mark).
    pub fn tcp_at_mark(&self, h: SocketHandle) -> Result<bool, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Listener(_)) => Ok(false),
            _ => self.tcp_conn(h).map(|c| c.at_mark()),
        }
    }

    /// SO_OOBINLINE: urgent octets stay in the stream.
    pub fn tcp_set_oob_inline(&mut self, h: SocketHandle, on: bool) -> Result<(), SocketError> {
        self.tcp_conn_mut(h).map(|c| c.oob_inline = on)
    }

    /// New urgent pointers received on the connection, ever: a change is
    /// news of urgent data for the socket layer's SIGURG (RFC 9293
    /// MUST-32).
    pub fn tcp_urgent_notices(&self, h: SocketHandle) -> Result<u32, SocketError> {
        self.tcp_conn(h).map(|c| c.urgent_notices)
    }

    /// Bytes a read would return, for poll: the readable bytes less an
    /// out-of-line urgent octet at the read position.
    pub fn tcp_recv_readable(&self, h: SocketHandle) -> Result<usize, SocketError> {
        self.tcp_conn(h).map(|c| c.readable_for_poll())
    }

    /// Bytes waiting to be read.
    pub fn tcp_recv_queued(&self, h: SocketHandle) -> Result<usize, SocketError> {
        self.tcp_conn(h).map(|c| c.recv.readable())
    }

    /// What FIONREAD reports: the bytes waiting to be read, but only those
    /// before the urgent mark while an out-of-line urgent octet is in the
    /// stream (Linux's `tcp_inq`).
    pub fn tcp_recv_queued_to_mark(&self, h: SocketHandle) -> Result<usize, SocketError> {
        self.tcp_conn(h).map(|c| c.readable_to_mark())
    }

    /// The receive buffer's size: what SO_RCVBUF set, or where
    /// auto-tuning has taken it.
    pub fn tcp_recv_buffer(&self, h: SocketHandle) -> Result<usize, SocketError> {
        self.tcp_conn(h).map(|c| c.recv.capacity())
    }

    /// Bytes of memory held by TCP connections, and how many there are.
    pub fn tcp_memory(&self) -> (usize, usize) {
        self.sockets
            .iter()
            .filter_map(|(_, s)| match s {
                Socket::Tcp(c) => Some(c.memory()),
                _ => None,
            })
            .fold((0, 0), |(bytes, n), m| (bytes + m, n + 1))
    }

    /// Bytes TCP's connections hold as the memory budget
    /// (`TcpConfig::memory_budget`) counts them: each connection's state,
    /// the ring storage the connections hold, and the tables that find the
    /// sockets (their whole capacity). Kept as they change, so a handshake
    /// asks it at no cost; [`Stack::tcp_memory`] walks the connections for
    /// their state and rings alone.
    pub fn tcp_memory_accounted(&self) -> usize {
        self.tcp_memory_held().0 + self.sockets.table_bytes()
    }

    /// What [`Stack::tcp_memory`] finds walking the connections (their
    /// state and ring storage, and how many there are), kept as they
    /// change: for statistics taken often (a walk of a million
    /// connections every 100 ms slowed the engine that served them).
    pub fn tcp_memory_held(&self) -> (usize, usize) {
        let n = self.sockets.tcp_len();
        (
            n * core::mem::size_of::<TcpConnection>() + self.tcp.buffers.lent_bytes(),
            n,
        )
    }

    /// Whether one more connection would take TCP's memory past its
    /// budget: its state and what the tables grow by to hold it.
    fn tcp_over_budget(&self) -> bool {
        let budget = self.tcp.cfg.memory_budget;
        budget != 0
            && self.tcp_memory_accounted()
                + core::mem::size_of::<TcpConnection>()
                + self.sockets.table_growth_for_one_more()
                > budget
    }

    /// Whether a handshake may make a connection now: the socket table has
    /// room (`kern.ipc.maxsockets`) and TCP's memory its budget, after
    /// TIME-WAITs have been ended for room if need be (more than one when
    /// the tables grew past the room one leaves). A refusal is counted by
    /// its reason (the segment is dropped).
    fn tcp_admits_connection(&mut self, now: Instant, sink: &mut dyn FrameSink) -> bool {
        while self.tcp_recycle_time_wait(now, sink) && self.tcp_over_budget() {}
        if self.sockets.is_full() {
            self.ip.counters.rx_drop_tcp_table_full += 1;
            return false;
        }
        if self.tcp_over_budget() {
            self.ip.counters.rx_drop_tcp_memory_budget += 1;
            return false;
        }
        true
    }

    /// Entries in the TCP timer wheel (stale ones included) and the bytes
    /// its slots hold room for.
    pub fn tcp_timer_wheel(&self) -> (usize, usize) {
        (self.tcp.wheel.len(), self.tcp.wheel.capacity_bytes())
    }

    /// Idle ring storage the stack keeps for reuse.
    pub fn tcp_buffer_cache_bytes(&self) -> usize {
        self.tcp.buffers.held_bytes()
    }

    /// Hands the sockets whose readiness may have changed to the caller.
    /// A send does not list its socket (it only uses up room, and the
    /// caller knows it sent): a caller that tracks readiness looks again
    /// after its own sends.
    #[inline]
    pub fn drain_ready(&mut self, out: &mut Vec<SocketHandle>) {
        self.sockets.drain_ready(out)
    }

    /// Whether [`drain_ready`](Self::drain_ready) would hand out any
    /// socket: a caller that looks every turn skips the drain on the
    /// many turns that changed nothing.
    #[inline]
    pub fn has_ready(&self) -> bool {
        self.sockets.has_ready()
    }
}

/// Whether a closed connection in `state` still has something of ours to
/// deliver: data, or a FIN not yet acknowledged.
fn is_unfinished(state: TcpState) -> bool {
    matches!(
        state,
        TcpState::FinWait1 | TcpState::Closing | TcpState::LastAck
    )
}

/// Puts connection `index` on the list of ACKs waiting for the end of the
/// receive burst, if one waits and it is not there yet.
#[inline(always)]
fn list_burst_ack(conn: &mut TcpConnection, index: u32, shared: &mut TcpShared) {
    if conn.burst_ack && !conn.burst_ack_listed {
        conn.burst_ack_listed = true;
        shared.burst_acks.push(index);
    }
}

/// Appends `data` to `conn`'s send buffer (as much as fits): the queueing
/// half of [`Stack::tcp_send`] and [`Stack::tcp_send_queue`].
#[inline(always)]
fn queue_send(
    conn: &mut TcpConnection,
    data: &[u8],
    buffers: &mut crate::tcp::buffer_cache::BufferCache,
) -> Result<usize, SocketError> {
    check_send(conn)?;
    let n = conn.send.append(data, conn.send_limit, buffers);
    if n == 0 && !data.is_empty() {
        return Err(SocketError::WouldBlock);
    }
    Ok(n)
}
