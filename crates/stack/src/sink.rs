//! How frames leave the stack, and what the link tells about a received one.

use crate::iface::IfaceId;

/// Where the stack writes the frames it sends.  The engine implements it over
/// its link's transmit queue; tests over a vector.
pub trait FrameSink {
    /// Sends one frame of `len` bytes out of `iface`: takes a buffer, lets
    /// `fill` write the whole frame into `buf[..len]`, and queues it.
    /// Returns `false` (and does not call `fill`) when no buffer is free.
    fn transmit(&mut self, iface: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool;

    /// Like [`transmit`](Self::transmit), with what the link must know
    /// about the frame.  The stack asks for a partial checksum only on
    /// interfaces whose link takes them (see
    /// [`Stack::set_tx_checksum_offload`](crate::Stack::set_tx_checksum_offload)),
    /// so sinks of links that cannot finish a checksum keep this default.
    fn transmit_with(
        &mut self,
        iface: IfaceId,
        len: usize,
        meta: TxMeta,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        let _ = meta;
        self.transmit(iface, len, fill)
    }

    /// Queues a frame of `len` bytes out of `iface` and lends its bytes,
    /// for the caller to write whole before its next call on the sink: the
    /// frame leaves as written.  `None` when it lends none: no buffer is
    /// free, or this sink builds frames only through
    /// [`transmit_with`](Self::transmit_with) (it keeps this default, and
    /// [`lends_frames`](Self::lends_frames) says so), which the caller then
    /// uses.  (An option of a slice comes back in two registers, where an
    /// enum saying why would come back through memory: every sent segment
    /// asks for one.)
    fn frame(&mut self, iface: IfaceId, len: usize, meta: TxMeta) -> Option<&mut [u8]> {
        let _ = (iface, len, meta);
        None
    }

    /// Whether [`frame`](Self::frame) lends frames: when it does, its
    /// `None` means no buffer is free.
    fn lends_frames(&self) -> bool {
        false
    }
}

/// What the stack tells the link about a frame it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxMeta {
    /// The L4 checksum field holds only the pseudo-header sum: the link
    /// (a NIC's offload, or a link between trusted memories such as the
    /// shared-memory pair, like Linux loopback) finishes or skips it.
    pub csum_partial: bool,
    /// A TCP super-frame (larger than the MTU) for the link to cut into
    /// segments of this many payload bytes (its segmentation offload; see
    /// [`Stack::set_tso`](crate::Stack::set_tso)); 0 for every other frame.
    /// Always with `csum_partial`.
    pub gso_size: u16,
    /// A control frame (ARP, ICMP, ICMPv6 and so NDP): it may take the
    /// buffers a link keeps in reserve, so that a pool drained by data
    /// never leaves the host unable to answer (DESIGN.md, "Memory").
    pub reserve: bool,
}

/// What the link knows about a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxMeta {
    /// The L4 checksum was left for the NIC to fill (a kernel peer with
    /// checksum offload on a veth or TAP): it must not be verified.
    pub csum_partial: bool,
}

/// A sink that keeps every frame, for tests and simulation.
#[derive(Debug, Default)]
pub struct VecSink {
    pub frames: Vec<(IfaceId, Vec<u8>)>,
    /// When set, refuse frames once this many are queued.
    pub limit: Option<usize>,
}

impl FrameSink for VecSink {
    fn transmit(&mut self, iface: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        if self.limit.is_some_and(|l| self.frames.len() >= l) {
            return false;
        }
        let mut buf = vec![0u8; len];
        fill(&mut buf);
        self.frames.push((iface, buf));
        true
    }

    fn frame(&mut self, iface: IfaceId, len: usize, _meta: TxMeta) -> Option<&mut [u8]> {
        if self.limit.is_some_and(|l| self.frames.len() >= l) {
            return None;
        }
        self.frames.push((iface, vec![0u8; len]));
        self.frames.last_mut().map(|(_, buf)| &mut buf[..])
    }

    fn lends_frames(&self) -> bool {
        true
    }
}
