//! The output half of the fast path: an established connection's ordinary
//! segment (ACK, PSH or FIN, timestamps or no options, no SACK blocks),
//! written straight into the link's frame along the connection's cached
//! path from a template of its headers, with no `TcpRepr`, no route and no
//! neighbor lookup.  The bytes are the ones the general path (`send_tcp`)
//! writes; the simulation compares the two bit for bit
//! (`net.inet.tcp.fast_path`).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::checksum;
use wire::ip::IpProtocol;
use wire::ipv6::{Ipv6Packet, Ipv6Repr};
use wire::tcp::{SeqNumber, TcpFlags};

use crate::ethernet::transmit_tagged;
use crate::iface::LinkOut;
use crate::ip::IpLayer;
use crate::ipv4::{Ipv4Path, ATOMIC_IDENT};
use crate::ipv6::flow_label;
use crate::sink::{FrameSink, TxMeta};
use crate::tcp::byte_ring::ByteRing;
use crate::tcp::conn::TcpConnection;
use crate::time::Instant;

const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
/// Where the TCP header starts in the frame, by family.
const TCP_AT_V4: usize = ETH_LEN + IPV4_LEN;
const TCP_AT_V6: usize = ETH_LEN + IPV6_LEN;
/// A TCP header without options, and with the NOP, NOP, timestamps
/// layout every segment of a connection with timestamps carries.
const PLAIN_HEADER_LEN: usize = 20;
const TIMESTAMP_HEADER_LEN: usize = 32;
const HEADERS_V4: usize = TCP_AT_V4 + TIMESTAMP_HEADER_LEN;
const HEADERS_V6: usize = TCP_AT_V6 + TIMESTAMP_HEADER_LEN;

/// The headers every segment of a connection along one path shares, by
/// family.  The IPv6 one is boxed: IPv4's is the common case and sets the
/// size every connection pays for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SegmentTemplate {
    V4(Ipv4Template),
    V6(Box<Ipv6Template>),
}

/// An IPv4 connection's template: the Ethernet header, the IPv4 header
/// but for its length, identification and checksum, and the TCP header
/// but for its numbers, flags, window, timestamps and checksum (which hold
/// the last segment's values: each segment writes them all); with the
/// sums of the fixed IPv4 words and of the pseudo header's addresses and
/// protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ipv4Template {
    /// The stamp of the path it was built on: while current, the path is
    /// the one below.  (The addresses and ports of a connection do not
    /// change; what else it was built from, [`TemplateOptions`], drops
    /// it when it changes.)
    stamp: (u64, Instant),
    bytes: [u8; HEADERS_V4],
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
    /// The largest TCP super-frame the link cuts itself (0: none).
    tso_max: usize,
}

/// An IPv6 connection's template: the Ethernet header, the IPv6 header
/// but for its payload length (the flow label is the flow's, RFC 6437),
/// and the TCP header as in [`Ipv4Template`].  IPv6 has no header
/// checksum; the stamp is the path epoch and the neighbor's reachable
/// time, as for IPv4, or the path MTU's expiry when sooner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ipv6Template {
    stamp: (u64, Instant),
    bytes: [u8; HEADERS_V6],
    pseudo_sum: u16,
    /// The payload length the length field holds now, with the pseudo
    /// header's sum for it (0 before the first segment).
    patched: (u16, u16),
    out: LinkOut,
    mtu: usize,
    offload: bool,
    /// The largest TCP super-frame the link cuts itself (0: none), as for
    /// IPv4.
    tso_max: usize,
}

/// What a template is built from besides the path: the connection's IP
/// options and whether it uses timestamps.  Not kept nor compared on each
/// segment: whatever changes them drops the template
/// ([`TcpConnection::drop_template`]).
#[derive(Debug, Clone, Copy)]
struct TemplateOptions {
    /// The IPv4 TTL or the IPv6 hop limit.
    ttl: u8,
    /// The IPv4 TOS or the IPv6 traffic class.
    tos: u8,
    ts_ok: bool,
}

/// Writes the parts of a TCP header every segment shares: the ports, the
/// header length and the timestamp option's layout.
fn write_tcp_template(tcp: &mut [u8], options: TemplateOptions, ports: (u16, u16)) {
    let tcp_len = if options.ts_ok {
        TIMESTAMP_HEADER_LEN
    } else {
        PLAIN_HEADER_LEN
    };
    tcp[0..2].copy_from_slice(&ports.0.to_be_bytes());
    tcp[2..4].copy_from_slice(&ports.1.to_be_bytes());
    tcp[12] = ((tcp_len / 4) as u8) << 4;
    if options.ts_ok {
        tcp[20..24].copy_from_slice(&[1, 1, 8, 10]);
    }
}

impl Ipv4Template {
    fn new(
        options: TemplateOptions,
        path: &Ipv4Path,
        (src, dst): (Ipv4Addr, Ipv4Addr),
        ports: (u16, u16),
    ) -> Ipv4Template {
        let mut b = [0u8; HEADERS_V4];
        b[..ETH_LEN].copy_from_slice(path.eth());
        let ip = &mut b[ETH_LEN..TCP_AT_V4];
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
        write_tcp_template(&mut b[TCP_AT_V4..], options, ports);
        Ipv4Template {
            stamp: path.stamp(),
            bytes: b,
            ip_sum,
            pseudo_sum: checksum::pseudo_header_v4(&src, &dst, IpProtocol::Tcp, 0),
            patched: (0, 0),
            out: path.out(),
            mtu: path.mtu(),
            offload: path.offload(),
            tso_max: path.tso_max(),
        }
    }
}

impl Ipv6Template {
    /// Builds the template toward `dst` on the path the IP layer gives
    /// now; `None` when there is none to cache (no route, or a neighbor
    /// that is not reachable: the general path resolves it, RFC 4861 7.3).
    /// The route is the one policy gives the source and `mark`.
    fn new(
        now: Instant,
        ip: &IpLayer,
        options: TemplateOptions,
        (src, dst): (Ipv6Addr, Ipv6Addr),
        mark: u32,
        ports: (u16, u16),
    ) -> Option<Ipv6Template> {
        if dst.is_multicast() {
            return None;
        }
        let (iface, neighbor) = ip.ipv6_route_from(Some(src), mark, dst, None)?;
        let ifc = ip.interface(iface)?;
        let out = ip.links.get(usize::from(iface.0))?.out;
        let (mac, reachable_until) = ip.neighbors.resolved(iface, IpAddr::V6(neighbor), now)?;
        let expires = ip
            .pmtu6
            .expiry(dst, now)
            .map_or(reachable_until, |e| e.min(reachable_until));
        let mut b = [0u8; HEADERS_V6];
        b[..6].copy_from_slice(&mac);
        b[6..12].copy_from_slice(&ifc.mac);
        b[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let repr = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Tcp,
            payload_len: 0,
            hop_limit: options.ttl,
            traffic_class: options.tos,
            flow_label: 0,
        };
        let mut packet = Ipv6Packet::new_unchecked(&mut b[ETH_LEN..TCP_AT_V6]);
        repr.emit(&mut packet);
        // The label the general path gives the flow: its hash covers the
        // ports, the first four bytes of the TCP header.
        let mut port_bytes = [0u8; 4];
        port_bytes[..2].copy_from_slice(&ports.0.to_be_bytes());
        port_bytes[2..].copy_from_slice(&ports.1.to_be_bytes());
        let label = flow_label(ip.flow_label_key, src, dst, IpProtocol::Tcp, &port_bytes);
        packet.set_flow_label(label);
        write_tcp_template(&mut b[TCP_AT_V6..], options, ports);
        Some(Ipv6Template {
            stamp: (ip.path_epoch(), expires),
            bytes: b,
            pseudo_sum: checksum::pseudo_header_v6(&src, &dst, IpProtocol::Tcp, 0),
            patched: (0, 0),
            out,
            mtu: ip.ipv6_path_mtu(iface, dst, now),
            offload: ifc.tx_checksum_offload,
            // A super-frame's checksum is the partial form, for what cuts
            // it to finish per segment.
            tso_max: ifc.tso_max,
        })
    }
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// The fields of one segment's TCP header.
struct SegmentFields {
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    window: u16,
    tsval: u32,
    tsecr: u32,
}

impl SegmentFields {
    /// Writes them into headers whose TCP header starts at `TCP_AT`.
    #[inline(always)]
    fn patch<const TCP_AT: usize, const N: usize>(&self, h: &mut [u8; N]) {
        put32(h, TCP_AT + 4, self.seq);
        put32(h, TCP_AT + 8, self.ack);
        h[TCP_AT + 13] = (self.flags | TcpFlags::ACK).bits() as u8;
        put16(h, TCP_AT + 14, self.window);
        put32(h, TCP_AT + 24, self.tsval);
        put32(h, TCP_AT + 28, self.tsecr);
    }
}

/// What goes into a segment's frame: the patched headers (`N` bytes, the
/// TCP header at `TCP_AT`), and the payload from the send buffer.
struct Segment<'a, const TCP_AT: usize, const N: usize> {
    headers: &'a [u8; N],
    ts_ok: bool,
    send: &'a ByteRing,
    /// Where the payload starts in the send buffer.
    offset: usize,
    /// The link finishes the TCP checksum.
    offload: bool,
    /// The pseudo header's sum with the TCP length.
    pseudo: u16,
}

impl<const TCP_AT: usize, const N: usize> Segment<'_, TCP_AT, N> {
    /// Writes the whole frame (`frame` is exactly its length).
    #[inline(always)]
    fn write(&self, frame: &mut [u8]) {
        let payload = if self.ts_ok {
            let (head, payload) = frame.split_at_mut(N);
            head.copy_from_slice(self.headers);
            payload
        } else {
            let (head, payload) = frame.split_at_mut(TCP_AT + PLAIN_HEADER_LEN);
            head.copy_from_slice(&self.headers[..TCP_AT + PLAIN_HEADER_LEN]);
            payload
        };
        self.send.copy_out(self.offset, payload);
        if self.offload {
            // The partial form: the pseudo header's sum, for the link (or
            // what cuts a super-frame) to finish.
            put16(frame, TCP_AT + 16, self.pseudo);
        } else {
            // The checksum field is zero in the template.
            let sum = !checksum::combine(&[self.pseudo, checksum::data(&frame[TCP_AT..])]);
            put16(frame, TCP_AT + 16, sum);
        }
    }
}

/// Hands the segment `segment` makes to the sink, as a frame of
/// `frame_len` bytes out by `out`, and counts it (or its loss, when
/// the sink had no buffer).  Always `true`: the segment is dealt with.
// `segment` makes the segment in each branch: a value made before the
// branches would keep the lent branch's copy in memory too.
#[inline(always)]
fn transmit_segment<'a, const TCP_AT: usize, const N: usize>(
    ip: &mut IpLayer,
    sink: &mut dyn FrameSink,
    out: LinkOut,
    frame_len: usize,
    (offload, gso_size): (bool, u16),
    segment: impl Fn() -> Segment<'a, TCP_AT, N>,
) -> bool {
    let meta = TxMeta {
        csum_partial: offload,
        gso_size,
        ..TxMeta::default()
    };
    // A sink lends at least `frame_len` bytes; a shorter buffer is left
    // unwritten (and counted) rather than indexed past.
    let mut wrote = false;
    let sent = if out.vid.is_some() {
        // A VLAN interface's frame is written whole, then tagged.
        let segment = segment();
        match ip.links.get_mut(usize::from(out.iface.0)) {
            Some(link) => transmit_tagged(link, sink, frame_len, meta, &mut |buf| {
                if let Some(frame) = buf.get_mut(..frame_len) {
                    segment.write(frame);
                    wrote = true;
                }
            }),
            None => false,
        }
    } else if let Some(buf) = sink.frame(out.port, frame_len, meta) {
        if let Some(frame) = buf.get_mut(..frame_len) {
            segment().write(frame);
            wrote = true;
        }
        true
    } else if sink.lends_frames() {
        false
    } else {
        let segment = segment();
        sink.transmit_with(out.port, frame_len, meta, &mut |buf: &mut [u8]| {
            if let Some(frame) = buf.get_mut(..frame_len) {
                segment.write(frame);
                wrote = true;
            }
        })
    };
    if sent && !wrote {
        ip.counters.tx_sink_short_buffer += 1;
    }
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

impl TcpConnection {
    /// Sends `len` bytes of the send buffer from `seq` with `flags` (ACK
    /// is always set), our ACK, window and timestamps, written in place.
    /// `false`, with nothing sent, when the general path must build the
    /// segment: the fast path is off, SACK blocks are due, the connection
    /// has no cached path, or the packet is larger than the path's MTU.
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
        if !ip.cfg.tcp.fast_path
            || (self.sack_ok && self.recv.has_out_of_order())
            || self.urgent_mode()
            || self.ecn.on
        {
            return false;
        }
        // A template whose path stamp is current stands for the path: the
        // epoch covers interfaces, routes and neighbors, and the remote
        // address never changes. Only a stale or missing one looks the
        // path up; IPv6 takes that way too, out of IPv4's line.
        let fresh = match &self.template {
            Some(SegmentTemplate::V4(t)) => t.stamp.0 == ip.path_epoch() && now < t.stamp.1,
            _ => false,
        };
        if !fresh {
            return self.send_direct_unprepared(now, flags, seq, len, ip, sink);
        }
        self.send_on_ipv4_template(now, flags, seq, len, ip, sink)
    }

    /// [`Self::send_direct`] for a connection without a current IPv4
    /// template: builds one and sends on it, or sends over IPv6.
    #[cold]
    #[inline(never)]
    fn send_direct_unprepared(
        &mut self,
        now: Instant,
        flags: TcpFlags,
        seq: SeqNumber,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> bool {
        if self.remote.is_ipv6() {
            return self.send_direct_v6(now, flags, seq, len, ip, sink);
        }
        self.rebuild_template(now, ip) && self.send_on_ipv4_template(now, flags, seq, len, ip, sink)
    }

    /// The most new data one segment may carry: the MSS; or, on an IPv4
    /// or IPv6 path whose link cuts TCP super-frames itself
    /// (`Stack::set_tso`) and that the direct path sends on (what
    /// `send_on_ipv4_template` and `send_direct_v6` take), as many whole
    /// MSS as fit in its largest frame.  The template decides; one gone
    /// stale is built again on the same interface, which keeps its
    /// offloads.
    #[inline]
    pub(crate) fn segment_max(&self, ip: &IpLayer) -> usize {
        let (tso_max, ip_header) = match &self.template {
            Some(SegmentTemplate::V4(t)) => (t.tso_max, IPV4_LEN),
            Some(SegmentTemplate::V6(t)) => (t.tso_max, IPV6_LEN),
            None => return self.snd_mss,
        };
        if tso_max == 0 || !ip.cfg.tcp.fast_path || (self.sack_ok && self.recv.has_out_of_order()) {
            return self.snd_mss;
        }
        let header = ip_header
            + if self.ts_ok {
                TIMESTAMP_HEADER_LEN
            } else {
                PLAIN_HEADER_LEN
            };
        let mss = self.snd_mss.max(1);
        (tso_max.saturating_sub(header) / mss).max(1) * mss
    }

    /// The options a template is built with.
    fn template_options(&self, ip: &IpLayer) -> TemplateOptions {
        let hop_limit = if self.remote.is_ipv6() {
            ip.cfg.ip6_hop_limit
        } else {
            ip.cfg.ip_ttl
        };
        TemplateOptions {
            ttl: self.ip_opts.ttl.unwrap_or(hop_limit),
            tos: self.ip_opts.tos,
            ts_ok: self.ts_ok,
        }
    }

    /// The segment's fields but its length.
    #[inline(always)]
    fn segment_fields(&mut self, now: Instant, flags: TcpFlags, seq: SeqNumber) -> SegmentFields {
        SegmentFields {
            seq: seq.0 as u32,
            ack: self.rcv_nxt.0 as u32,
            flags,
            window: self.advertise_window(),
            tsval: self.ts_now(now),
            tsecr: self.ts_recent,
        }
    }

    /// Sends on the connection's current IPv4 template.
    #[inline(always)]
    fn send_on_ipv4_template(
        &mut self,
        now: Instant,
        flags: TcpFlags,
        seq: SeqNumber,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let ts_ok = self.ts_ok;
        let Some(SegmentTemplate::V4(t)) = &self.template else {
            return false;
        };
        let header_len = if ts_ok {
            TIMESTAMP_HEADER_LEN
        } else {
            PLAIN_HEADER_LEN
        };
        let tcp_len = header_len + len;
        let ip_len = IPV4_LEN + tcp_len;
        // Larger than the MTU: a super-frame for the link to cut, where it
        // does (sized by `tso_segment_max`), in segments of the MSS.
        let gso_size = if ip_len <= t.mtu {
            0
        } else if ip_len <= t.tso_max && self.snd_mss < len {
            self.snd_mss as u16
        } else {
            return false;
        };
        // A super-frame leaves in the partial form (`Stack::set_tso`).
        let (out, offload) = (t.out, t.offload || gso_size != 0);
        let fields = self.segment_fields(now, flags, seq);
        let offset = seq - self.data_start();
        let Some(SegmentTemplate::V4(t)) = &mut self.template else {
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
            t.patched = (ip_len as u16, pseudo);
            pseudo
        };
        fields.patch::<TCP_AT_V4, HEADERS_V4>(h);
        let frame_len = ETH_LEN + ip_len;
        let headers = &t.bytes;
        let send = &self.send;
        transmit_segment(ip, sink, out, frame_len, (offload, gso_size), || Segment::<
            TCP_AT_V4,
            HEADERS_V4,
        > {
            headers,
            ts_ok,
            send,
            offset,
            offload,
            pseudo,
        })
    }

    /// [`Self::send_direct`] over IPv6: on the connection's IPv6 template,
    /// built again when its stamp is stale.
    fn send_direct_v6(
        &mut self,
        now: Instant,
        flags: TcpFlags,
        seq: SeqNumber,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let fresh = match &self.template {
            Some(SegmentTemplate::V6(t)) => t.stamp.0 == ip.path_epoch() && now < t.stamp.1,
            _ => false,
        };
        if !fresh && !self.rebuild_template_v6(now, ip) {
            return false;
        }
        let ts_ok = self.ts_ok;
        let Some(SegmentTemplate::V6(t)) = &self.template else {
            return false;
        };
        let header_len = if ts_ok {
            TIMESTAMP_HEADER_LEN
        } else {
            PLAIN_HEADER_LEN
        };
        let tcp_len = header_len + len;
        // Larger than the MTU: a super-frame for the link to cut, as over
        // IPv4 (its payload length field holds the whole TCP length).
        let ip_len = IPV6_LEN + tcp_len;
        let gso_size = if ip_len <= t.mtu {
            0
        } else if ip_len <= t.tso_max && self.snd_mss < len {
            self.snd_mss as u16
        } else {
            return false;
        };
        let (out, offload) = (t.out, t.offload || gso_size != 0);
        let fields = self.segment_fields(now, flags, seq);
        let offset = seq - self.data_start();
        let Some(SegmentTemplate::V6(t)) = &mut self.template else {
            return false;
        };
        let h = &mut t.bytes;
        let pseudo = if t.patched.0 == tcp_len as u16 {
            t.patched.1
        } else {
            put16(h, ETH_LEN + 4, tcp_len as u16);
            let pseudo = checksum::combine(&[t.pseudo_sum, tcp_len as u16]);
            t.patched = (tcp_len as u16, pseudo);
            pseudo
        };
        fields.patch::<TCP_AT_V6, HEADERS_V6>(h);
        let frame_len = TCP_AT_V6 + tcp_len;
        let headers = &t.bytes;
        let send = &self.send;
        transmit_segment(ip, sink, out, frame_len, (offload, gso_size), || Segment::<
            TCP_AT_V6,
            HEADERS_V6,
        > {
            headers,
            ts_ok,
            send,
            offset,
            offload,
            pseudo,
        })
    }

    /// Looks the path up again and builds the connection's template on
    /// it; `false` when there is none (no path yet): the general path
    /// sends, and resolves the neighbor.
    #[cold]
    #[inline(never)]
    fn rebuild_template(&mut self, now: Instant, ip: &IpLayer) -> bool {
        let options = self.template_options(ip);
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (self.local.ip(), self.remote.ip()) else {
            return false;
        };
        ip.refresh_path(&mut self.path, (src, self.ip_opts.mark), dst, now);
        let Some(path) = self.path else {
            self.template = None;
            return false;
        };
        let ports = (self.local.port(), self.remote.port());
        self.template = Some(SegmentTemplate::V4(Ipv4Template::new(
            options,
            &path,
            (src, dst),
            ports,
        )));
        true
    }

    /// [`Self::rebuild_template`] over IPv6 (in the box the connection
    /// already has, when it has one).
    #[cold]
    #[inline(never)]
    fn rebuild_template_v6(&mut self, now: Instant, ip: &IpLayer) -> bool {
        let options = self.template_options(ip);
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (self.local.ip(), self.remote.ip()) else {
            return false;
        };
        let ports = (self.local.port(), self.remote.port());
        let Some(built) = Ipv6Template::new(now, ip, options, (src, dst), self.ip_opts.mark, ports)
        else {
            self.template = None;
            return false;
        };
        match &mut self.template {
            Some(SegmentTemplate::V6(t)) => **t = built,
            slot => *slot = Some(SegmentTemplate::V6(Box::new(built))),
        }
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
