//! How frames leave the stack, and what the link tells about a received one.

use crate::iface::IfaceId;

/// Where the stack writes the frames it sends.  The engine implements it over
/// its link's transmit queue; tests over a vector.
pub trait FrameSink {
    /// Sends one frame of `len` bytes out of `iface`: takes a buffer, lets
    /// `fill` write the whole frame into `buf[..len]`, and queues it.
    /// Returns `false` (and does not call `fill`) when no buffer is free.
    fn transmit(&mut self, iface: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool;
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
}
