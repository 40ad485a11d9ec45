//! Software GSO (`[portN] gso`): large send on a link without
//! segmentation offload.
//!
//! The stack is told the port takes TCP super-frames (`Stack::set_tso`),
//! so a connection pays its per-segment costs (headers, timers, the
//! retransmission queue's entries, ACK bookkeeping) once per burst of up
//! to 64 KB instead of once per MSS. The super-frame is written into a
//! buffer of the port's own, not the link's, and cut into frames of the
//! link (`link::gso`, the cut the receive side uses for a peer's
//! super-frames) just before the port's next frame is placed or its queue
//! is flushed, so the segments keep their place among the port's frames.
//!
//! What TCP knows is unchanged: it sent one segment. A segment lost on
//! the wire is a hole in what the peer acknowledges; the peer's SACK
//! blocks say which, and TCP retransmits that range (an RTO resends from
//! the first unacknowledged byte, cut again when it is larger than the
//! MTU). The frames are cut above the fault injector and the capture, so
//! `[fault] drop=` loses MTU-sized segments, as a wire would.

use link::gso::TcpSuperFrame;
use stack::Instant;

/// The largest IP packet a super-frame may be: IPv4's and IPv6's length
/// fields' limit.
pub const SOFT_GSO_MAX: usize = 65_535;

/// The buffer a super-frame is written into: an Ethernet header, a VLAN
/// tag and the largest IP packet.
const FRAME_BYTES: usize = 18 + SOFT_GSO_MAX;

/// A port's software GSO.
pub struct SoftGso {
    frame: Box<[u8]>,
    /// The super-frame lent to the stack and not cut yet: its length, its
    /// segments' payload size, and when it was lent.
    pending: Option<(usize, u16, Instant)>,
    /// The link finishes checksums: the segments stay in the partial
    /// form. Otherwise each is made whole.
    link_offloads: bool,
}

impl SoftGso {
    pub fn new(link_offloads: bool) -> SoftGso {
        SoftGso {
            frame: vec![0u8; FRAME_BYTES].into_boxed_slice(),
            pending: None,
            link_offloads,
        }
    }

    /// Whether a super-frame waits to be cut.
    pub fn pending(&self) -> bool {
        self.pending.is_some()
    }

    /// When the waiting super-frame was lent.
    pub fn pending_since(&self) -> Option<Instant> {
        self.pending.map(|p| p.2)
    }

    /// Lends `len` bytes for a super-frame of segments of `seg` payload
    /// bytes; `None` when longer than the buffer. Only when none is
    /// pending (the caller cuts it first).
    pub fn lend(&mut self, len: usize, seg: u16, now: Instant) -> Option<&mut [u8]> {
        debug_assert!(self.pending.is_none());
        let buf = self.frame.get_mut(..len)?;
        self.pending = Some((len, seg, now));
        Some(buf)
    }

    /// Takes the waiting super-frame for cutting: the frame and how to
    /// cut it, or why it cannot be.
    pub fn take(&mut self) -> Option<Result<Cut<'_>, link::gso::NotSplit>> {
        let (len, seg, _) = self.pending.take()?;
        let frame = &self.frame[..len];
        Some(TcpSuperFrame::parse_outgoing(frame, seg).map(|sf| Cut {
            frame,
            sf,
            whole: !self.link_offloads,
        }))
    }
}

/// A super-frame being cut.
pub struct Cut<'a> {
    frame: &'a [u8],
    sf: TcpSuperFrame,
    whole: bool,
}

impl Cut<'_> {
    /// How many segments it makes.
    pub fn segments(&self) -> usize {
        self.sf.segments()
    }

    /// The length of segment `i`'s frame.
    pub fn segment_len(&self, i: usize) -> usize {
        self.sf.segment_len(i)
    }

    /// Whether each segment's checksum is left in the partial form.
    pub fn csum_partial(&self) -> bool {
        !self.whole
    }

    /// Writes segment `i` into `dst` (exactly its length).
    pub fn write(&self, i: usize, dst: &mut [u8]) {
        if self.whole {
            self.sf.write_segment_whole(self.frame, i, dst);
        } else {
            self.sf.write_segment(self.frame, i, dst);
        }
    }
}
