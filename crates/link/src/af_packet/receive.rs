//! What the AF_PACKET link does with one received frame, whichever ring
//! (or the socket's queue, for a frame too large for a ring slot) its
//! bytes come from: joined to an aggregate of the burst (`gro.rs`),
//! copied into a pool buffer, handed over whole in a large buffer (a TCP
//! super-frame), cut into segments (`gso.rs`), or dropped and counted.
//!
//! With `PACKET_VNET_HDR` each frame comes with a `virtio_net_hdr`
//! (`vnet_hdr.rs`), read before anything else: a refused one drops its
//! frame (counted by reason); `NEEDS_CSUM` marks the checksum partial as
//! `TP_STATUS_CSUMNOTREADY` does; a TCP super-frame's segment size is the
//! one its header gives (the sender's MSS), not the MTU; a UDP
//! super-frame (`UDP_SEGMENT`) is cut into its datagrams (`udp_gso.rs`).

use std::collections::VecDeque;

use crate::gro::{Aggregator, Offer, TcpSegment};
use crate::gso::{NotSplit, TcpSuperFrame};
use crate::pool::{PacketPool, PoolBuf};
use crate::udp_gso::UdpSuperFrame;
use crate::vnet_hdr::{self, GsoKind, VnetRxStats, VNET_HDR_LEN};
use crate::PacketBuffer;

/// A VLAN tag the kernel moved out of a received frame into metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct VlanTag {
    pub tpid: u16,
    pub tci: u16,
}

impl VlanTag {
    /// Writes the tag's 4 bytes (TPID, TCI) into `out`.
    pub fn write(&self, out: &mut [u8]) {
        out[..2].copy_from_slice(&self.tpid.to_be_bytes());
        out[2..4].copy_from_slice(&self.tci.to_be_bytes());
    }
}

/// What the kernel says of a received frame beside its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrameMeta {
    /// Its checksum is partial (`TP_STATUS_CSUMNOTREADY`): the kernel
    /// vouches for the data, the TCP/UDP field holds the pseudo-header's
    /// sum.
    pub partial: bool,
    /// The tag the kernel took out, to be put back after the MACs (only
    /// on a frame of at least 12 bytes).
    pub tag: Option<VlanTag>,
    /// The `virtio_net_hdr` before the frame (`PACKET_VNET_HDR`), unread.
    pub vnet: Option<[u8; VNET_HDR_LEN]>,
}

/// The receive side's buffers, aggregation state and counters.
pub(super) struct Receiver {
    pub pool: PacketPool,
    /// Large buffers: super-frames handed over whole and aggregates.
    /// (Boxed, as the aggregation state: the link is a variant of the
    /// runtime's port enums, kept small.)
    pub large: Box<PacketPool>,
    /// Receive aggregation, when on.
    pub gro: Option<Box<Aggregator>>,
    /// Segments cut from TCP super-frames and not yet handed to the
    /// engine (a super-frame makes more than a burst).
    pub segments: VecDeque<PoolBuf>,
    /// The link's MTU, the size super-frames are cut to.
    pub mtu: usize,
    pub frames: u64,
    pub bytes: u64,
    /// Frames too large to take (truncated by the ring with no whole
    /// copy, or longer than any buffer and no TCP super-frame).
    pub oversize: u64,
    /// Ring entries that made no sense (never expected from the kernel;
    /// counted rather than trusted).
    pub malformed: u64,
    pub super_frames: u64,
    /// Super-frames cut into segments (no large buffer, tagged, or too
    /// long for one IP packet).
    pub super_cut: u64,
    /// Super-frames whose whole TCP checksum failed.
    pub super_bad_checksum: u64,
    /// Frames read whole from the socket's queue (longer than a slot).
    pub queued_whole: u64,
    /// What the frames' `virtio_net_hdr`s said.
    pub vnet: VnetRxStats,
}

impl Receiver {
    pub fn new(pool: PacketPool, large: PacketPool, gro: bool, mtu: usize) -> Receiver {
        Receiver {
            pool,
            large: Box::new(large),
            gro: gro.then(|| Box::new(Aggregator::new())),
            segments: VecDeque::new(),
            mtu,
            frames: 0,
            bytes: 0,
            oversize: 0,
            malformed: 0,
            super_frames: 0,
            super_cut: 0,
            super_bad_checksum: 0,
            queued_whole: 0,
            vnet: VnetRxStats::default(),
        }
    }

    /// Reads the frame's `virtio_net_hdr`, if it has one: `None` when it
    /// was refused (counted; the frame is dropped) or was a UDP
    /// super-frame, cut into datagrams here. Else the frame's marks, its
    /// checksum partial when the header says so, with a TCP super-frame's
    /// segment size.
    fn read_vnet(&mut self, frame: &[u8], mut meta: FrameMeta) -> Option<(FrameMeta, Option<u16>)> {
        let Some(h) = meta.vnet else {
            return Some((meta, None));
        };
        let len = frame.len() + if meta.tag.is_some() { 4 } else { 0 };
        let v = match vnet_hdr::parse_rx(&h, frame, len) {
            Ok(v) => v,
            Err(why) => {
                self.vnet.refused(why);
                return None;
            }
        };
        meta.partial |= v.needs_csum;
        self.vnet.data_valid += u64::from(v.data_valid);
        self.vnet.gso_not_needed += u64::from(v.gso_not_needed);
        match v.gso {
            None => Some((meta, None)),
            Some(g) if g.kind == GsoKind::Udp => {
                self.cut_udp_super_frame(frame, meta, g.size);
                None
            }
            Some(g) => {
                self.vnet.tcp_gso += 1;
                self.vnet.tcp_gso_size = u64::from(g.size);
                Some((meta, Some(g.size)))
            }
        }
    }

    /// Cuts a UDP super-frame into its datagrams of `size` payload bytes,
    /// queued in `segments`; one that is no UDP is counted a GSO mismatch.
    fn cut_udp_super_frame(&mut self, frame: &[u8], meta: FrameMeta, size: u16) {
        let Ok(sf) = UdpSuperFrame::parse(frame, usize::from(size)) else {
            self.vnet.refused(vnet_hdr::VnetRefusal::GsoMismatch);
            return;
        };
        self.vnet.udp_gso += 1;
        self.vnet.udp_gso_size = u64::from(size);
        let queued = self.queue_pieces(
            sf.datagrams(),
            meta.tag,
            |i| sf.datagram_len(i),
            |i, out| sf.write_datagram(frame, i, out),
        );
        self.vnet.udp_datagrams += queued as u64;
    }

    /// Queues in `segments` the `count` pieces cut from one super-frame,
    /// piece `i` of `len(i)` bytes written by `write(i, out)`, each with
    /// its checksum partial. A super-frame's VLAN tag goes on every piece:
    /// written 4 bytes in, the piece's addresses moved ahead of the tag.
    /// Stops where no buffer is free (the pool counts it; the rest of the
    /// frame is lost, as a full ring would lose it) or one is too small
    /// (counted oversize). Returns how many pieces were queued.
    fn queue_pieces(
        &mut self,
        count: usize,
        tag: Option<VlanTag>,
        len: impl Fn(usize) -> usize,
        mut write: impl FnMut(usize, &mut [u8]),
    ) -> usize {
        for i in 0..count {
            let Some(mut b) = self.pool.alloc_reserved() else {
                return i;
            };
            let total = len(i) + if tag.is_some() { 4 } else { 0 };
            if total > b.capacity() {
                self.pool.free(b);
                self.oversize += 1;
                return i;
            }
            b.set_len(total);
            let out = b.data_mut();
            match tag {
                None => write(i, out),
                Some(tag) => {
                    write(i, &mut out[4..]);
                    out.copy_within(4..16, 0);
                    tag.write(&mut out[12..16]);
                }
            }
            b.set_csum_partial(true);
            self.segments.push_back(b);
        }
        count
    }

    /// Takes the whole frame `src`: joined to an aggregate of the burst
    /// (whose frames since its start are `out[start..]`), copied into a
    /// buffer pushed on `out`, or handed on as a super-frame. Returns
    /// false when no buffer was free (the frame is lost, counted by the
    /// pool).
    pub fn take(
        &mut self,
        src: &[u8],
        meta: FrameMeta,
        out: &mut Vec<PoolBuf>,
        start: usize,
    ) -> bool {
        let Some((meta, gso)) = self.read_vnet(src, meta) else {
            return true;
        };
        let Some(start_aggregate) = self.offer(src, meta, out, start) else {
            return true;
        };
        self.keep(src, meta, gso, start_aggregate, out, start)
    }

    /// Takes a frame the kernel copied whole into `b`, a large buffer
    /// (the ring held it truncated): a TCP super-frame is handed over in
    /// `b` itself, anything else as [`Receiver::take`] would.
    pub fn take_large(
        &mut self,
        b: PoolBuf,
        meta: FrameMeta,
        out: &mut Vec<PoolBuf>,
        start: usize,
    ) -> bool {
        let Some((meta, gso)) = self.read_vnet(b.data(), meta) else {
            self.large.free(b);
            return true;
        };
        let Some(start_aggregate) = self.offer(b.data(), meta, out, start) else {
            self.large.free(b);
            return true;
        };
        let len = b.data().len();
        let whole =
            meta.tag.is_none() && TcpSegment::parse(b.data()).is_some_and(|s| s.frame_len() == len);
        if whole {
            // A whole checksum is verified by the stack over all of it;
            // a partial one the kernel vouched for.
            let mut b = b;
            b.set_csum_partial(meta.partial);
            self.super_frames += 1;
            self.frames += 1;
            self.bytes += len as u64;
            out.push(b);
            return true;
        }
        let taken = self.keep(b.data(), meta, gso, start_aggregate, out, start);
        self.large.free(b);
        taken
    }

    /// Offers `src` to the aggregation: `None` when it joined an
    /// aggregate (counted), else whether it may start one.
    fn offer(
        &mut self,
        src: &[u8],
        meta: FrameMeta,
        out: &mut [PoolBuf],
        start: usize,
    ) -> Option<bool> {
        let (Some(gro), None) = (self.gro.as_mut(), meta.tag) else {
            return Some(false);
        };
        match gro.offer(
            src,
            meta.partial,
            &mut out[start..],
            &mut self.pool,
            &mut self.large,
        ) {
            Offer::Joined => {
                self.frames += 1;
                self.bytes += src.len() as u64;
                None
            }
            Offer::Keep { start } => Some(start),
        }
    }

    /// Keeps `src` as a frame of its own (see [`Receiver::take`]); `gso`:
    /// the segment size its header gave.
    fn keep(
        &mut self,
        src: &[u8],
        meta: FrameMeta,
        gso: Option<u16>,
        start_aggregate: bool,
        out: &mut Vec<PoolBuf>,
        start: usize,
    ) -> bool {
        let snap = src.len();
        let len = snap + if meta.tag.is_some() { 4 } else { 0 };
        // A frame of several segments by its header is a super-frame even
        // when a pool buffer would hold it (two segments, one short).
        if len > self.pool.buf_size() || gso.is_some() {
            if self.take_super_frame(src, meta, gso, out) {
                self.frames += 1;
                self.bytes += snap as u64;
            }
            return true;
        }
        // Receive may use the reserve (DESIGN.md, "Memory").
        let Some(mut buf) = self.pool.alloc_reserved() else {
            return false;
        };
        buf.set_len(len);
        let dst = buf.data_mut();
        match meta.tag {
            Some(tag) => {
                dst[..12].copy_from_slice(&src[..12]);
                tag.write(&mut dst[12..16]);
                dst[16..].copy_from_slice(&src[12..]);
            }
            None => dst.copy_from_slice(src),
        }
        buf.set_csum_partial(meta.partial);
        self.frames += 1;
        self.bytes += len as u64;
        out.push(buf);
        if start_aggregate {
            if let (Some(gro), Some(b)) = (self.gro.as_mut(), out.last()) {
                gro.started(out.len() - 1 - start, b.data(), meta.partial);
            }
        }
        true
    }

    /// A TCP super-frame: into a large buffer whole when one is free and
    /// its IP length fits its field, else cut into segments (of `gso`
    /// payload bytes when its header gave it, else of the MTU) queued in
    /// `segments`. Returns whether it was taken; a frame that
    /// is no TCP super-frame, or whose whole checksum fails, is counted
    /// and dropped.
    fn take_super_frame(
        &mut self,
        frame: &[u8],
        meta: FrameMeta,
        gso: Option<u16>,
        out: &mut Vec<PoolBuf>,
    ) -> bool {
        let snap = frame.len();
        let whole = meta.tag.is_none()
            && snap <= self.large.buf_size()
            && TcpSegment::parse(frame).is_some_and(|s| s.frame_len() == snap);
        if whole {
            if let Some(mut b) = self.large.alloc() {
                self.super_frames += 1;
                b.set_len(snap);
                b.data_mut().copy_from_slice(frame);
                b.set_csum_partial(meta.partial);
                out.push(b);
                return true;
            }
        }
        if self.cut_super_frame(frame, meta, gso) {
            return false;
        }
        self.oversize += 1;
        false
    }

    /// Cuts the TCP super-frame `frame` into segments of `gso` payload
    /// bytes (the sender's, from its header), or of the MTU, queued in
    /// `segments`. Returns whether the frame was dealt with (cut, or
    /// dropped for a bad checksum); false leaves it to be counted as
    /// oversize.
    fn cut_super_frame(&mut self, frame: &[u8], meta: FrameMeta, gso: Option<u16>) -> bool {
        let sf = match TcpSuperFrame::parse(frame, self.mtu, meta.partial) {
            Ok(sf) => match gso {
                Some(size) => sf.cut_at(usize::from(size)),
                None => sf,
            },
            Err(NotSplit::NotTcp) => return false,
            Err(NotSplit::BadChecksum) => {
                self.super_bad_checksum += 1;
                return true;
            }
        };
        self.super_frames += 1;
        self.super_cut += 1;
        self.queue_pieces(
            sf.segments(),
            meta.tag,
            |i| sf.segment_len(i),
            |i, out| sf.write_segment(frame, i, out),
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gro::LARGE_BUF_SIZE;

    fn receiver() -> Receiver {
        Receiver::new(
            PacketPool::with_reserve(2048, 64, 8),
            PacketPool::new(LARGE_BUF_SIZE, 2),
            false,
            1500,
        )
    }

    fn vnet(flags: u8, gso_type: u8, gso_size: u16, start: u16, offset: u16) -> FrameMeta {
        let mut h = [0u8; VNET_HDR_LEN];
        h[0] = flags;
        h[1] = gso_type;
        h[4..6].copy_from_slice(&gso_size.to_le_bytes());
        h[6..8].copy_from_slice(&start.to_le_bytes());
        h[8..10].copy_from_slice(&offset.to_le_bytes());
        FrameMeta {
            partial: false,
            tag: None,
            vnet: Some(h),
        }
    }

    #[test]
    fn a_refused_header_drops_its_frame_counted_by_reason() {
        let payload = vec![5u8; 6000];
        let tcp = crate::gro::tests::segment(false, 4000, 1000, 0x10, 5, &payload);
        let mut rx = receiver();
        let mut out = Vec::new();
        let bad = [
            vnet(1, 2, 1000, 34, 16),   // no such GSO type
            vnet(1, 1, 0, 34, 16),      // segment size 0
            vnet(1, 1, 1000, 6100, 16), // checksum past the frame
            vnet(1, 0x80, 0, 34, 16),   // ECN without GSO
            vnet(0, 5, 1000, 0, 0),     // UDP GSO, no partial checksum
            vnet(1, 4, 1000, 34, 16),   // says IPv6, is IPv4
        ];
        for m in bad {
            assert!(rx.take(&tcp, m, &mut out, 0));
        }
        assert!(out.is_empty() && rx.segments.is_empty());
        let v = rx.vnet;
        assert_eq!(
            [
                v.bad_gso_type,
                v.bad_gso_size,
                v.bad_csum,
                v.bad_ecn,
                v.udp_without_csum,
                v.gso_mismatch
            ],
            [1; 6]
        );
        assert_eq!(rx.pool.stats().available, 64, "no buffer kept");
    }

    #[test]
    fn a_tcp_super_frame_is_cut_at_its_headers_segment_size() {
        let payload: Vec<u8> = (0..6000u32).map(|i| i as u8).collect();
        let tcp = crate::gro::tests::segment(false, 4000, 1000, 0x10, 5, &payload);
        let mut rx = receiver();
        // No large buffer free: cut.
        *rx.large = PacketPool::new(LARGE_BUF_SIZE, 0);
        let mut out = Vec::new();
        assert!(rx.take(&tcp, vnet(1, 1, 1000, 34, 16), &mut out, 0));
        assert_eq!(rx.segments.len(), 6, "6000 bytes in segments of 1000");
        assert!(rx.segments.iter().all(|b| b.csum_partial()));
        assert_eq!(
            (rx.vnet.tcp_gso, rx.vnet.tcp_gso_size, rx.super_cut),
            (1, 1000, 1)
        );
        // NEEDS_CSUM alone on a plain frame marks it partial.
        let small = crate::gro::tests::segment(false, 4000, 1000, 0x10, 5, &payload[..100]);
        assert!(rx.take(&small, vnet(1, 0, 0, 34, 16), &mut out, 0));
        assert_eq!(out.len(), 1);
        assert!(out[0].csum_partial());
        // A header saying GSO on a frame of one segment: taken plain.
        assert!(rx.take(&small, vnet(1, 1, 1448, 34, 16), &mut out, 0));
        assert_eq!((out.len(), rx.vnet.gso_not_needed), (2, 1));
        // Two segments that a pool buffer would hold: cut all the same.
        let two = crate::gro::tests::segment(false, 4000, 1000, 0x10, 5, &payload[..1800]);
        assert!(two.len() <= 2048);
        assert!(rx.take(&two, vnet(1, 1, 1448, 34, 16), &mut out, 0));
        assert_eq!(out.len(), 2);
        assert_eq!(rx.segments.len(), 6 + 2);
        assert_eq!((rx.super_frames, rx.super_cut), (2, 2));
    }

    /// The pieces `rx` queued, as bytes.
    fn queued(rx: &Receiver) -> Vec<Vec<u8>> {
        rx.segments.iter().map(|b| b.data().to_vec()).collect()
    }

    #[test]
    fn every_piece_of_a_tagged_super_frame_carries_the_tag() {
        let tag = VlanTag {
            tpid: 0x8100,
            tci: 7,
        };
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let tcp = crate::gro::tests::segment(false, 4000, 1000, 0x10, 5, &payload);
        let udp = crate::test_frames::udp_frame(false, 1, &payload);
        // TCP cut at 1000 (no large buffer free), UDP_L4 at 1000.
        for (frame, meta) in [
            (&tcp, vnet(1, 1, 1000, 34, 16)),
            (&udp, vnet(1, 5, 1000, 34, 6)),
        ] {
            let mut plain = receiver();
            *plain.large = PacketPool::new(LARGE_BUF_SIZE, 0);
            let mut tagged = receiver();
            *tagged.large = PacketPool::new(LARGE_BUF_SIZE, 0);
            let mut out = Vec::new();
            assert!(plain.take(frame, meta, &mut out, 0));
            let meta = FrameMeta {
                tag: Some(tag),
                ..meta
            };
            assert!(tagged.take(frame, meta, &mut out, 0));
            assert!(out.is_empty());
            let (plain, tagged) = (queued(&plain), queued(&tagged));
            assert_eq!(plain.len(), 3, "3000 bytes in pieces of 1000");
            assert_eq!(tagged.len(), 3);
            for (p, t) in plain.iter().zip(&tagged) {
                assert_eq!(&t[..12], &p[..12], "addresses ahead of the tag");
                assert_eq!(&t[12..16], &[0x81, 0x00, 0x00, 0x07]);
                assert_eq!(&t[16..], &p[12..]);
            }
        }
    }

    #[test]
    fn pieces_larger_than_a_buffer_are_counted_oversize() {
        let payload = vec![3u8; 3000];
        let tcp = crate::gro::tests::segment(false, 4000, 1000, 0x10, 5, &payload);
        let udp = crate::test_frames::udp_frame(false, 1, &payload);
        for (frame, meta) in [
            (&tcp, vnet(1, 1, 1000, 34, 16)),
            (&udp, vnet(1, 5, 1000, 34, 6)),
        ] {
            let mut rx = Receiver::new(
                PacketPool::with_reserve(512, 64, 8),
                PacketPool::new(LARGE_BUF_SIZE, 0),
                false,
                1500,
            );
            let mut out = Vec::new();
            assert!(rx.take(frame, meta, &mut out, 0));
            assert!(out.is_empty() && rx.segments.is_empty());
            assert_eq!(
                rx.oversize, 1,
                "the first piece does not fit; the rest is lost"
            );
            assert_eq!(rx.vnet.udp_datagrams, 0);
            assert_eq!(rx.pool.stats().available, 64, "the buffer went back");
        }
    }
}
