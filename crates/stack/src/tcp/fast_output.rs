//! The output half of the fast path: an established connection's ordinary
//! segment (ACK, PSH or FIN, timestamps or no options, no SACK blocks),
//! written straight into the link's frame along the connection's cached
//! path from a template of its headers, with no `TcpRepr`, no route and no
//! neighbor lookup.  The bytes are the ones the general path (`send_tcp`)
//! writes; the simulation compares the two bit for bit
//! (`net.inet.tcp.fast_path`).

use core::net::{IpAddr, Ipv4Addr};

use wire::checksum;
use wire::ip::IpProtocol;
use wire::tcp::{SeqNumber, TcpFlags};

use crate::ethernet::transmit_tagged;
use crate::iface::LinkOut;
use crate::ip::IpLayer;
use crate::ipv4::{Ipv4Path, ATOMIC_IDENT};
use crate::sink::{FrameSink, TxMeta};
use crate::tcp::byte_ring::ByteRing;
use crate::tcp::conn::TcpConnection;
use crate::time::Instant;

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
/// Where the TCP header starts in the frame.
const TCP_AT: usize = ETH_LEN + IP_LEN;
/// A TCP header without options, and with the NOP, NOP, timestamps
/// layout every segment of a connection with timestamps carries.
const PLAIN_HEADER_LEN: usize = 20;
const TIMESTAMP_HEADER_LEN: usize = 32;
const MAX_HEADERS: usize = TCP_AT + TIMESTAMP_HEADER_LEN;

/// The headers every segment of a connection along one path shares:
/// the Ethernet header, the IPv4 header but for its length, identification
/// and checksum, and the TCP header but for its numbers, flags, window,
/// timestamps and checksum (which hold the last segment's values: each
/// segment writes them all); with the sums of the fixed IPv4 words and of
/// the pseudo header's addresses and protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentTemplate {
    /// The stamp of the path it was built on: while current, the path is
    /// the one below.  (The addresses and ports of a connection do not
    /// change; what else it was built from, [`TemplateOptions`], drops
    /// it when it changes.)
    stamp: (u64, Instant),
    bytes: [u8; MAX_HEADERS],
    ip_sum: u16,
    pseudo_sum: u16,
    /// The IP length the length and sum fields hold now, with the pseudo
    /// header's sum for it (0 before the first segment): the next segment
    /// of the same length, the usual case in a request/reply exchange or
    /// a stream of full segments, leaves them as they are.
    patched: (u16, u16),
    /// How the path's frames leave (interface, port, VLAN tag), its MTU
    /// and checksum offload.
    out: LinkOut,
    mtu: usize,
    offload: bool,
}

/// What a template is built from besides the path: the connection's IP
/// options and whether it uses timestamps.  Not kept nor compared on each
/// segment: whatever changes them drops the template
/// ([`TcpConnection::drop_template`]).
#[derive(Debug, Clone, Copy)]
struct TemplateOptions {
    ttl: u8,
    tos: u8,
    ts_ok: bool,
}

impl SegmentTemplate {
    fn new(
        options: TemplateOptions,
        path: &Ipv4Path,
        (src, dst): (Ipv4Addr, Ipv4Addr),
        ports: (u16, u16),
    ) -> SegmentTemplate {
        let tcp_len = if options.ts_ok {
            TIMESTAMP_HEADER_LEN
        } else {
            PLAIN_HEADER_LEN
        };
        let mut b = [0u8; MAX_HEADERS];
        b[..ETH_LEN].copy_from_slice(path.eth());
        let ip = &mut b[ETH_LEN..TCP_AT];
        ip[0] = 0x45;
        ip[1] = options.tos;
        ip[6] = 0x40; // DF, offset 0
        ip[8] = options.ttl;
        ip[9] = IpProtocol::Tcp.into();
        ip[12..16].copy_from_slice(&src.octets());
        ip[16..20].copy_from_slice(&dst.octets());
        // Every segment is an atomic datagram: its identification is
        // fixed.  The length and checksum are still zero.
        ip[4..6].copy_from_slice(&ATOMIC_IDENT.to_be_bytes());
        let ip_sum = checksum::data(ip);
        let tcp = &mut b[TCP_AT..];
        tcp[0..2].copy_from_slice(&ports.0.to_be_bytes());
        tcp[2..4].copy_from_slice(&ports.1.to_be_bytes());
        tcp[12] = ((tcp_len / 4) as u8) << 4;
        if options.ts_ok {
            tcp[20..24].copy_from_slice(&[1, 1, 8, 10]);
        }
        SegmentTemplate {
            stamp: path.stamp(),
            bytes: b,
            ip_sum,
            pseudo_sum: checksum::pseudo_header_v4(&src, &dst, IpProtocol::Tcp, 0),
            patched: (0, 0),
            out: path.out(),
            mtu: path.mtu(),
            offload: path.offload(),
        }
    }
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// What goes into a segment's frame: the patched headers, and the payload
/// from the send buffer.
struct Segment<'a> {
    headers: &'a [u8; MAX_HEADERS],
    ts_ok: bool,
    send: &'a ByteRing,
    /// Where the payload starts in the send buffer.
    offset: usize,
    /// The link finishes the TCP checksum.
    offload: bool,
    /// The pseudo header's sum with the TCP length.
    pseudo: u16,
}

impl Segment<'_> {
    /// Writes the whole frame (`frame` is exactly its length).
    #[inline(always)]
    fn write(&self, frame: &mut [u8]) {
        let payload = if self.ts_ok {
            let (head, payload) = frame.split_at_mut(MAX_HEADERS);
            head.copy_from_slice(self.headers);
            payload
        } else {
            let (head, payload) = frame.split_at_mut(TCP_AT + PLAIN_HEADER_LEN);
            head.copy_from_slice(&self.headers[..TCP_AT + PLAIN_HEADER_LEN]);
            payload
        };
        self.send.copy_out(self.offset, payload);
        if !self.offload {
            // The checksum field is zero in the template.
            let sum = !checksum::combine(&[self.pseudo, checksum::data(&frame[TCP_AT..])]);
            put16(frame, TCP_AT + 16, sum);
        }
    }
}

impl TcpConnection {
    /// Sends `len` bytes of the send buffer from `seq` with `flags` (ACK
    /// is always set), our ACK, window and timestamps, written in place.
    /// `false`, with nothing sent, when the general path must build the
    /// segment: the fast path is off, SACK blocks are due, the connection
    /// is not IPv4 or has no cached path, or the packet is larger than the
    /// path's MTU.
    #[inline(always)]
    pub(crate) fn send_direct(
        &mut self,
        now: Instant,
        flags: TcpFlags,
        seq: SeqNumber,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> bool {
        if !ip.cfg.tcp.fast_path || (self.sack_ok && self.recv.has_out_of_order()) {
            return false;
        }
        // A template whose path stamp is current stands for the path: the
        // epoch covers interfaces, routes and neighbors, and the remote
        // address never changes. Only a stale or missing one looks the
        // path up.
        let fresh = match &self.template {
            Some(t) => t.stamp.0 == ip.path_epoch() && now < t.stamp.1,
            None => false,
        };
        if !fresh && !self.rebuild_template(now, ip) {
            return false;
        }
        let ts_ok = self.ts_ok;
        let Some(t) = &self.template else {
            return false;
        };
        let header_len = if ts_ok {
            TIMESTAMP_HEADER_LEN
        } else {
            PLAIN_HEADER_LEN
        };
        let tcp_len = header_len + len;
        let ip_len = IP_LEN + tcp_len;
        if ip_len > t.mtu {
            return false;
        }
        let (out, offload) = (t.out, t.offload);
        let window = self.advertise_window();
        let (tsval, tsecr) = (self.ts_now(now), self.ts_recent);
        let ack = self.rcv_nxt.0 as u32;
        let offset = seq - self.data_start();
        let Some(t) = &mut self.template else {
            return false;
        };
        // The segment's fields are patched into the template itself (each
        // is written for every segment, but the length's fields only when
        // it changes; the fixed sums are kept apart), which is then
        // written with one fixed-size copy.
        let h = &mut t.bytes;
        let pseudo = if t.patched.0 == ip_len as u16 {
            t.patched.1
        } else {
            put16(h, ETH_LEN + 2, ip_len as u16);
            let ip_sum = !checksum::combine(&[t.ip_sum, ip_len as u16]);
            put16(h, ETH_LEN + 10, ip_sum);
            let pseudo = checksum::combine(&[t.pseudo_sum, tcp_len as u16]);
            if offload {
                // Without offload the field stays zero, as the sum needs.
                put16(h, TCP_AT + 16, pseudo);
            }
            t.patched = (ip_len as u16, pseudo);
            pseudo
        };
        put32(h, TCP_AT + 4, seq.0 as u32);
        put32(h, TCP_AT + 8, ack);
        h[TCP_AT + 13] = (flags | TcpFlags::ACK).bits() as u8;
        put16(h, TCP_AT + 14, window);
        put32(h, TCP_AT + 24, tsval);
        put32(h, TCP_AT + 28, tsecr);
        let frame_len = ETH_LEN + ip_len;
        let meta = TxMeta {
            csum_partial: offload,
        };
        // Made in each branch: the closure's borrow would keep the lent
        // branch's copy in memory too.
        let segment = || Segment {
            headers: &t.bytes,
            ts_ok: self.ts_ok,
            send: &self.send,
            offset,
            offload,
            pseudo,
        };
        let sent = if out.vid.is_some() {
            // A VLAN interface's frame is written whole, then tagged.
            let segment = segment();
            match ip.links.get_mut(usize::from(out.iface.0)) {
                Some(link) => transmit_tagged(link, sink, frame_len, meta, &mut |buf| {
                    if let Some(frame) = buf.get_mut(..frame_len) {
                        segment.write(frame);
                    }
                }),
                None => false,
            }
        } else if let Some(buf) = sink.frame(out.port, frame_len, meta) {
            segment().write(buf);
            true
        } else if sink.lends_frames() {
            false
        } else {
            let segment = segment();
            // A sink hands `fill` at least `frame_len` bytes; a shorter
            // buffer is left unwritten rather than indexed past.
            sink.transmit_with(out.port, frame_len, meta, &mut |buf: &mut [u8]| {
                if let Some(frame) = buf.get_mut(..frame_len) {
                    segment.write(frame);
                }
            })
        };
        if sent {
            ip.counters.tx_frames += 1;
            ip.counters.tx_bytes += frame_len as u64;
            ip.counters.tcp_segments_sent += 1;
            ip.counters.tcp_direct_segments += 1;
        } else {
            ip.counters.tx_drop_no_buffer += 1;
        }
        true
    }

    /// Looks the path up again and builds the connection's template on
    /// it; `false` when there is none (not IPv4, or no path yet): the
    /// general path sends, and resolves the neighbor.
    #[cold]
    #[inline(never)]
    fn rebuild_template(&mut self, now: Instant, ip: &IpLayer) -> bool {
        let (ttl, tos, ts_ok) = (
            self.ip_opts.ttl.unwrap_or(ip.cfg.ip_ttl),
            self.ip_opts.tos,
            self.ts_ok,
        );
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (self.local.ip(), self.remote.ip()) else {
            return false;
        };
        ip.refresh_path(&mut self.path, src, dst, now);
        let Some(path) = self.path else {
            self.template = None;
            return false;
        };
        let options = TemplateOptions { ttl, tos, ts_ok };
        let ports = (self.local.port(), self.remote.port());
        self.template = Some(SegmentTemplate::new(options, &path, (src, dst), ports));
        true
    }
}

impl TcpConnection {
    /// Forgets the template: its IP options or its timestamp layout are
    /// no longer the connection's (the next segment builds a new one).
    pub(crate) fn drop_template(&mut self) {
        self.template = None;
    }
}
