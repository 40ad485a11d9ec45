//! What the AF_PACKET link does with one received frame, whichever ring
//! (or the socket's queue, for a frame too large for a ring slot) its
//! bytes come from: joined to an aggregate of the burst (`gro.rs`),
//! copied into a pool buffer, handed over whole in a large buffer (a TCP
//! super-frame), cut into segments of the MTU (`gso.rs`), or dropped and
//! counted.

use std::collections::VecDeque;

use crate::gro::{Aggregator, Offer, TcpSegment};
use crate::gso::{NotSplit, TcpSuperFrame};
use crate::pool::{PacketPool, PoolBuf};
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
        }
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
        let Some(start_aggregate) = self.offer(src, meta, out, start) else {
            return true;
        };
        self.keep(src, meta, start_aggregate, out, start)
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
        let taken = self.keep(b.data(), meta, start_aggregate, out, start);
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

    /// Keeps `src` as a frame of its own (see [`Receiver::take`]).
    fn keep(
        &mut self,
        src: &[u8],
        meta: FrameMeta,
        start_aggregate: bool,
        out: &mut Vec<PoolBuf>,
        start: usize,
    ) -> bool {
        let snap = src.len();
        let len = snap + if meta.tag.is_some() { 4 } else { 0 };
        if len > self.pool.buf_size() {
            if self.take_super_frame(src, meta, out) {
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
    /// its IP length fits its field, else cut into segments of the MTU
    /// queued in `segments`. Returns whether it was taken; a frame that
    /// is no TCP super-frame, or whose whole checksum fails, is counted
    /// and dropped.
    fn take_super_frame(&mut self, frame: &[u8], meta: FrameMeta, out: &mut Vec<PoolBuf>) -> bool {
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
        if self.cut_super_frame(frame, meta) {
            return false;
        }
        self.oversize += 1;
        false
    }

    /// Cuts the TCP super-frame `frame` into segments of the MTU, queued
    /// in `segments`. Returns whether the frame was dealt with (cut, or
    /// dropped for a bad checksum); false leaves it to be counted as
    /// oversize.
    fn cut_super_frame(&mut self, frame: &[u8], meta: FrameMeta) -> bool {
        let sf = match TcpSuperFrame::parse(frame, self.mtu, meta.partial) {
            Ok(sf) => sf,
            Err(NotSplit::NotTcp) => return false,
            Err(NotSplit::BadChecksum) => {
                self.super_bad_checksum += 1;
                return true;
            }
        };
        self.super_frames += 1;
        self.super_cut += 1;
        for i in 0..sf.segments() {
            let Some(mut b) = self.pool.alloc_reserved() else {
                // The pool counts it; the rest of the frame is lost, as a
                // full ring would lose it.
                break;
            };
            let seg_len = sf.segment_len(i);
            let len = seg_len + if meta.tag.is_some() { 4 } else { 0 };
            if len > b.capacity() {
                self.pool.free(b);
                self.oversize += 1;
                break;
            }
            b.set_len(len);
            let out = b.data_mut();
            match meta.tag {
                None => sf.write_segment(frame, i, out),
                Some(tag) => {
                    // Each segment carries the super-frame's tag: written
                    // 4 bytes in, its addresses moved ahead of the tag.
                    sf.write_segment(frame, i, &mut out[4..]);
                    out.copy_within(4..16, 0);
                    tag.write(&mut out[12..16]);
                }
            }
            b.set_csum_partial(true);
            self.segments.push_back(b);
        }
        true
    }
}
