//! Header prediction (Van Jacobson's, as in FreeBSD's `tcp_input`): the
//! segment an established connection expects next (ACK or ACK+PSH, the
//! next sequence number, timestamps as agreed, acknowledging nothing or
//! new data, no loss recovery under way) is read straight from its bytes
//! and taken in with the general path's own steps, skipping the checks
//! that cannot apply to it.  Anything else takes the general path
//! (`input.rs`); the simulation checks that both make the same run bit
//! for bit (`net.inet.tcp.fast_path`).

use core::net::{IpAddr, Ipv4Addr};

use wire::checksum;
use wire::ip::IpProtocol;
use wire::tcp::{SeqNumber, TcpPacket};

use crate::iface::IfaceId;
use crate::ip::IpLayer;
use crate::ipv4::Ipv4Datagram;
use crate::sink::{FrameSink, RxMeta};
use crate::stack::Stack;
use crate::tcp::conn::TcpConnection;
use crate::tcp::shared::TcpShared;
use crate::tcp::types::TcpState;
use crate::time::Instant;

/// The header of a segment header prediction may take: no options, or
/// exactly NOP, NOP, timestamps (RFC 7323 appendix A).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PredictedSegment<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: SeqNumber,
    pub ack: SeqNumber,
    pub window: u16,
    pub timestamp: Option<(u32, u32)>,
    pub payload: &'a [u8],
}

const NO_SACK: [Option<(u32, u32)>; 3] = [None, None, None];

fn be16<const N: usize>(b: &[u8; N], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl<'a> PredictedSegment<'a> {
    /// Reads `bytes` if they are such a segment with ACK and at most PSH
    /// besides (no SYN, FIN, RST, URG, ECE, CWR or NS); `None` otherwise,
    /// malformed ones included (the general path counts those).
    #[inline]
    pub(crate) fn parse(bytes: &'a [u8]) -> Option<Self> {
        let fixed: &[u8; 20] = bytes.first_chunk()?;
        // Flags: ACK, maybe PSH; the reserved bits are ignored as
        // `TcpRepr::parse` ignores them.  The data offset: 5 or 8 words.
        // Both bytes in one compare.
        let (header_len, timestamp) = match be16(fixed, 12) & 0xf1f7 {
            0x5010 => (20, None),
            0x8010 => {
                let options: &[u8; 12] = bytes.get(20..32)?.first_chunk()?;
                if options[..4] != [1, 1, 8, 10] {
                    return None;
                }
                (32, Some((be32(options, 4), be32(options, 8))))
            }
            _ => return None,
        };
        // A zero port is not tested for: no connection has one at either
        // end (a listener's port 0 is an ephemeral one, a connect to port
        // 0 is refused, the general path drops a SYN from port 0), so the
        // lookup misses and the general path counts the segment.
        Some(PredictedSegment {
            src_port: be16(fixed, 0),
            dst_port: be16(fixed, 2),
            seq: SeqNumber(be32(fixed, 4) as i32),
            ack: SeqNumber(be32(fixed, 8) as i32),
            window: be16(fixed, 14),
            timestamp,
            payload: bytes.get(header_len..)?,
        })
    }
}

/// Whether a segment's TCP checksum holds (or the link vouches for it):
/// checked before header prediction, which then takes one argument fewer
/// (all in registers).  A segment that fails goes to the general path,
/// which counts it.
#[inline(always)]
pub(crate) fn checksum_ok((src, dst): (Ipv4Addr, Ipv4Addr), segment: &[u8], meta: RxMeta) -> bool {
    meta.csum_partial
        || TcpPacket::new_unchecked(segment).verify_checksum(&IpAddr::V4(src), &IpAddr::V4(dst))
}

/// What the general path is told of a segment header prediction declined:
/// a checksum found good is not summed again (the mark is the link's for
/// a sum it vouches for); a bad one is, and counted there.
#[inline(always)]
pub(crate) fn verified_meta(meta: RxMeta, verified: bool) -> RxMeta {
    RxMeta {
        csum_partial: meta.csum_partial || verified,
    }
}

impl Stack {
    /// The frame of an IPv4 TCP segment to this interface's address (to
    /// our MAC, no IP options, not a fragment), checked in one pass with
    /// the general path's checks (`ethernet.rs`, `ipv4/input.rs`) and given
    /// to header prediction; a segment prediction does not take goes to
    /// the general TCP input, its frame's checks done.  `false`, with
    /// nothing done, for any other frame.
    pub(crate) fn tcp_receive_early(
        &mut self,
        now: Instant,
        iface: IfaceId,
        frame: &[u8],
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let Some(f) = frame.first_chunk::<34>() else {
            return false;
        };
        let (Some(ifc), Some(ip)) = (self.ip.interface(iface), f[14..].first_chunk::<20>()) else {
            return false;
        };
        let total = usize::from(be16(ip, 2));
        if f[..6] != ifc.mac
            || f[6] & 1 != 0
            || f[12..14] != [0x08, 0x00]
            || ip[0] != 0x45
            || ip[9] != u8::from(IpProtocol::Tcp)
            || (ip[6] & 0x3f) | ip[7] != 0
            || ip[1] & 3 == 3
        {
            return false;
        }
        // Whole (the IP length past the header, within the frame; what
        // follows is link padding).
        let Some(payload) = frame.get(34..14 + total) else {
            return false;
        };
        let src = Ipv4Addr::from(be32(ip, 12));
        let dst = Ipv4Addr::from(be32(ip, 16));
        // RFC 1122 3.2.1.3: a unicast source; our unicast address.
        if ifc.addr() != Some(dst)
            || ifc.is_broadcast(dst)
            || src.is_broadcast()
            || src.is_multicast()
            || src.is_unspecified()
            || ifc.is_broadcast(src)
            || src.is_loopback()
            || (!ifc.rx_ip_checksum_offload && checksum::data(ip) != 0xffff)
        {
            return false;
        }
        let verified = checksum_ok((src, dst), payload, meta);
        if !verified || !self.tcp_input_predicted(now, (src, dst), payload, sink) {
            let d = Ipv4Datagram {
                iface,
                src,
                dst,
                protocol: IpProtocol::Tcp,
                broadcast: false,
                header: ip,
                payload,
                meta: verified_meta(meta, verified),
            };
            self.tcp_input_general(now, &d.l4(), sink);
        }
        true
    }
}

impl TcpConnection {
    /// Takes `seg` in as `input` would, if it is the segment predicted;
    /// `false`, with nothing changed, if the general path must take it.
    /// Inlined into each family's caller: called from two places, the
    /// compiler would otherwise keep it apart, at some 30 instructions a
    /// segment.
    #[inline(always)]
    pub(crate) fn input_predicted(
        &mut self,
        now: Instant,
        seg: &PredictedSegment<'_>,
        ip: &mut IpLayer,
        shared: &mut TcpShared,
        sink: &mut dyn FrameSink,
    ) -> bool {
        let (seq, ack) = (seg.seq, seg.ack);
        let window = usize::from(seg.window) << self.snd_wscale;
        let acks_new = ack > self.snd_una;
        // What the general path would find: PAWS passes, the segment is
        // the next in the window, its ACK is neither old, new beyond
        // SND.MAX, nor a duplicate, no FIN waits for this data, and no
        // loss recovery or SACK scoreboard is under way.
        let predicted = self.state == TcpState::Established
            && seq == self.rcv_nxt
            && self.ts_ok == seg.timestamp.is_some()
            && seg
                .timestamp
                .is_none_or(|(tsval, _)| (tsval.wrapping_sub(self.ts_recent) as i32) >= 0)
            && (seg.payload.is_empty() || self.rcv_adv > self.rcv_nxt || self.recv.window() > 0)
            && ack >= self.snd_una
            && ack <= self.snd_max
            && (acks_new
                || !seg.payload.is_empty()
                || window != self.snd_wnd
                || self.flight() == 0)
            && self.peer_fin.is_none()
            && self.urgent.is_none()
            && self.recovery_point.is_none()
            && (!self.sack_ok || self.scoreboard.is_empty());
        if !predicted {
            return false;
        }
        ip.counters.tcp_predicted_segments += 1;
        self.last_recv = now;
        self.keep_probes = 0;
        if self.keepalive {
            self.timers
                .set_keepalive(Some(now + self.keep_idle(shared)));
        }
        if let Some((tsval, _)) = seg.timestamp {
            self.ts_recent = tsval;
        }
        // The window, the text and the ACK touch disjoint state, so they
        // go in the order that lets the segment's fields die soonest: the
        // general path's order (ACK, window, text) gives the same result.
        self.update_send_window(seq, ack, window, acks_new);
        if !seg.payload.is_empty() {
            self.take_text(now, seq, seg.payload, ip, shared);
        }
        if acks_new {
            self.new_ack(now, ack, seg.timestamp, &NO_SACK, ip, shared, sink);
        }
        true
    }
}
