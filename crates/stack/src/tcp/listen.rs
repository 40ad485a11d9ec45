//! Listening sockets: the SYN queue (connections in SYN-RECEIVED), the
//! accept queue, and SYN cookies when the SYN queue is full (RFC 4987 3.6).

use core::net::SocketAddr;
use std::collections::VecDeque;

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use crate::ip::IpLayer;
use crate::sink::FrameSink;
use crate::tcp::cc::CongestionControl;
use crate::tcp::conn::TcpConnection;
use crate::tcp::output::{send_tcp, IpOptions};
use crate::tcp::shared::TcpShared;
use crate::tcp::types::TcpState;
use crate::time::Instant;

#[derive(Debug)]
pub(crate) struct TcpListener {
    pub local: SocketAddr,
    /// listen()'s backlog, capped by `somaxconn` (Linux's
    /// sk_max_ack_backlog): the accept queue holds one more than this
    /// ([`accept_queue_full`](Self::accept_queue_full)), the SYN queue
    /// this many (at least one).
    pub backlog: usize,
    /// Established connections not yet accepted (slot indexes).
    pub accept_queue: VecDeque<u32>,
    /// Connections of this listener in SYN-RECEIVED.
    pub syn_received: usize,
    /// Bound to `[::]`: IPv6 only (IPV6_V6ONLY), or IPv4 too.
    pub v6only: bool,
    /// SO_MARK, which its connections inherit (0: none).
    pub mark: u32,
    /// TCP_MAXSEG: the most its connections advertise and send in a
    /// segment (`None`: what the path takes).
    pub max_segment: Option<usize>,
}

impl TcpListener {
    pub(crate) fn new(local: SocketAddr, backlog: usize) -> Self {
        TcpListener {
            local,
            backlog,
            accept_queue: VecDeque::new(),
            syn_received: 0,
            v6only: false,
            mark: 0,
            max_segment: None,
        }
    }
}

impl TcpListener {
    /// No room for another established connection: the queue already
    /// holds `backlog + 1`, as Linux's sk_acceptq_is_full (`>`, not `>=`),
    /// so that listen(fd, 0) still takes one connection.
    pub(crate) fn accept_queue_full(&self) -> bool {
        self.accept_queue.len() > self.backlog
    }

    /// No room for another connection in SYN-RECEIVED (then a SYN cookie
    /// or a drop).  Linux's bound is `backlog` too, but with backlog 0 it
    /// answers every SYN with a cookie; ustack keeps one slot.
    pub(crate) fn syn_queue_full(&self) -> bool {
        self.syn_received >= self.backlog.max(1)
    }
}

/// The MSS we offer on an interface of `mtu` (IPv4 and TCP headers out).
pub(crate) fn mss_for_mtu(mtu: usize) -> usize {
    mtu.saturating_sub(40).max(64)
}

/// The MSS over IPv6 on a path of `mtu` (the 40-byte IPv6 header and TCP's
/// out; RFC 8200 5 guarantees 1280).
pub(crate) fn mss_for_mtu_v6(mtu: usize) -> usize {
    mtu.max(wire::ipv6::MIN_MTU) - 60
}

/// Answers a SYN with a SYN-ACK whose ISN is a cookie, keeping no state;
/// it goes by the route of the listener's `mark`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn send_cookie_syn_ack(
    ip: &mut IpLayer,
    shared: &TcpShared,
    now: Instant,
    (local, remote): (SocketAddr, SocketAddr),
    mark: u32,
    syn: &TcpRepr<'_>,
    mss: usize,
    sink: &mut dyn FrameSink,
) {
    let peer_mss = syn
        .max_seg_size
        .map_or(shared.cfg.default_mss(remote.ip()), usize::from);
    let our_mss = mss.min(peer_mss).min(65535) as u16;
    let isn = shared
        .cookies
        .make(now, local, remote, syn.seq_number.0 as u32, our_mss);
    let mut repr = TcpRepr::new(
        local.port(),
        remote.port(),
        TcpFlags::SYN,
        SeqNumber(isn as i32),
    );
    repr.ack_number = Some(syn.seq_number + 1);
    repr.window_len = shared.cfg.recv_space.min(65535) as u16;
    repr.max_seg_size = Some(our_mss);
    // Without timestamps there is nowhere to keep window scale and SACK,
    // so a cookie connection goes without them (as Linux's).
    if let (Some((tsval, _)), true) = (syn.timestamp, shared.cfg.rfc1323) {
        // The cookie keeps the peer's shift; ours follows from the config.
        let ts = shared.cookies.encode_ts(
            now.total_millis() as u32,
            syn.window_scale,
            syn.sack_permitted && shared.cfg.sack,
        );
        repr.timestamp = Some((ts, tsval));
        repr.window_scale = syn
            .window_scale
            .map(|_| TcpConnection::wscale_for(shared.cfg.recvbuf_max));
        repr.sack_permitted = syn.sack_permitted && shared.cfg.sack;
    }
    let sent = send_tcp(
        ip,
        now,
        (local, remote),
        IpOptions {
            mark,
            ..IpOptions::default()
        },
        &repr,
        0,
        &mut |_| {},
        None,
        sink,
    );
    if sent.is_ok() {
        ip.counters.tcp_syncookies_sent += 1;
    }
}

/// Builds the connection a valid cookie ACK stands for.
pub(crate) fn connection_from_cookie(
    shared: &mut TcpShared,
    now: Instant,
    local: SocketAddr,
    remote: SocketAddr,
    ack: &TcpRepr<'_>,
    mss_cap: usize,
) -> Option<TcpConnection> {
    let ack_number = ack.ack_number?;
    let mss = shared.cookies.check(
        now,
        local,
        remote,
        ack.seq_number.0 as u32,
        ack_number.0 as u32,
    )?;
    let iss = ack_number - 1;
    let mut conn = TcpConnection::new(
        shared,
        now,
        TcpState::Established,
        local,
        remote,
        iss,
        mss_cap,
    );
    conn.snd_una = ack_number;
    conn.snd_nxt = ack_number;
    conn.snd_max = ack_number;
    conn.irs = ack.seq_number - 1;
    conn.rcv_nxt = ack.seq_number;
    conn.snd_mss = usize::from(mss).min(mss_cap);
    if let (Some((tsval, tsecr)), true) = (ack.timestamp, shared.cfg.rfc1323) {
        let (wscale, sack) = crate::tcp::isn::SynCookies::decode_ts(tsecr);
        conn.ts_ok = true;
        conn.drop_template();
        conn.ts_recent = tsval;
        // Our cookie TSval came from the plain clock; later ones must not
        // go backwards (the peer's PAWS would drop them).
        conn.ts_offset = 0;
        conn.snd_mss = conn.snd_mss.saturating_sub(12).max(64);
        conn.sack_ok = sack;
        if let Some(peer_shift) = wscale {
            conn.wscale_ok = true;
            conn.snd_wscale = peer_shift.min(wire::tcp::MAX_WINDOW_SCALE);
            conn.rcv_wscale = TcpConnection::wscale_for(shared.cfg.recvbuf_max);
        } else {
            conn.recv.set_capacity(conn.recv.capacity().min(65535));
        }
    } else {
        conn.recv.set_capacity(conn.recv.capacity().min(65535));
    }
    // The cookie SYN-ACK advertised the window unscaled (at most 65535):
    // the edge kept is the whole window's, as for any SYN-ACK (see
    // `output.rs`), which must not look newly opened (an ACK for the ACK).
    conn.rcv_adv = conn.rcv_nxt + conn.recv.window();
    conn.snd_wnd = usize::from(ack.window_len) << conn.snd_wscale;
    conn.max_snd_wnd = conn.snd_wnd;
    conn.snd_wl1 = ack.seq_number;
    conn.snd_wl2 = ack_number;
    conn.cc.set_mss(conn.snd_mss);
    Some(conn)
}
