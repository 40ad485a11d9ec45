//! Received frames lent to the stack, so that a TCP socket's receive buffer
//! is the packet buffer itself rather than a copy of it (DESIGN.md, "The
//! packet's way").
//!
//! A link whose buffers may stay out of its pool for a while (an AF_XDP
//! UMEM frame, a DPDK mbuf) hands each received frame to
//! [`Stack::receive_lent`] instead of [`Stack::receive`]. When the frame
//! carries in-order TCP payload, the connection's receive buffer keeps the
//! frame and the payload's place in it; the application's read copies from
//! there (the one copy a POSIX read must make) or borrows the bytes
//! ([`Stack::tcp_recv_zero_copy`]). A frame whose payload has been read goes
//! to the released list, from which the engine takes it back to its link
//! ([`Stack::take_released_frames`]).
//!
//! Holding is bounded so that a link never starves: per interface (its pool
//! must spare the frames) and per connection ([`LendLimits`]). Past a bound,
//! or for out-of-order data, a reassembled datagram or a short payload, the
//! payload is copied into the connection's ring as it is without lending;
//! the counters tell the two paths apart (`tcp_rx_zero_copy_segments`,
//! `tcp_rx_copied_segments`, `tcp_rx_hold_limited`, and the gauge
//! `tcp_rx_frames_held`).
//!
//! The stack stays free of `unsafe` and of the link crate: a frame is a
//! trait object ([`RxFrame`]) the engine makes from its own buffer, and a
//! held payload is an offset and a length into [`RxFrame::bytes`].

use core::any::Any;
use core::fmt;

use crate::iface::IfaceId;
use crate::sink::{FrameSink, RxMeta};
use crate::socket::table::Socket;
use crate::stack::Stack;
use crate::time::Instant;

/// A received frame lent to the stack. The engine wraps its link's buffer
/// in one; [`Any`] lets it unwrap the buffer again when the frame comes
/// back.
pub trait RxFrame: Any + Send {
    /// The whole frame: the same bytes, at the same place in the buffer,
    /// that [`Stack::receive_lent`] was given.
    fn bytes(&self) -> &[u8];
}

/// A frame the stack holds, or has released.
pub type LentFrame = Box<dyn RxFrame>;

/// How many received frames the stack may keep from one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LendLimits {
    /// Frames held at once by all sockets; 0 copies every payload. The
    /// link must be able to spare this many buffers and still receive.
    pub frames: usize,
    /// Frames one connection may hold at once.
    pub frames_per_conn: usize,
    /// Payloads shorter than this are copied: a whole link buffer held for
    /// a few bytes costs the link more than copying them does.
    pub min_payload: usize,
}

/// What a receive buffer may do with in-order payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Keep the frame: the payload starts `offset` bytes into it.
    Hold { iface: IfaceId, offset: usize },
    /// Copy it: the payload is not in a lendable frame, is short, or a
    /// bound was reached (counted).
    Copy,
}

/// The frame under [`Stack::receive_lent`].
#[derive(Debug, Clone, Copy)]
struct Current {
    iface: IfaceId,
    /// The frame's address range, to find the payload's offset in it (and
    /// that the payload is in it: a reassembled datagram is not).
    start: usize,
    end: usize,
    /// The connection the segment is being given to.
    target: Option<u32>,
    /// The connection whose receive buffer claimed the frame.
    claimed_by: Option<u32>,
}

/// The stack's side of lending: limits, what is held, what goes back.
#[derive(Default)]
pub(crate) struct FrameLending {
    limits: Vec<LendLimits>,
    held: Vec<usize>,
    total_held: usize,
    released: Vec<LentFrame>,
    current: Option<Current>,
    /// Segments held in their frames, and copies a bound made: counted
    /// here, off the copy path, and told to the counters after a receive.
    zero_copy_segments: u64,
    hold_limited: u64,
}

impl fmt::Debug for FrameLending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameLending")
            .field("limits", &self.limits)
            .field("held", &self.held)
            .field("released", &self.released.len())
            .finish()
    }
}

impl FrameLending {
    /// Sets the limits of `iface`.
    pub(crate) fn set_limits(&mut self, iface: IfaceId, limits: LendLimits) {
        let i = usize::from(iface.0);
        if self.limits.len() <= i {
            self.limits.resize(i + 1, LendLimits::default());
            self.held.resize(i + 1, 0);
        }
        self.limits[i] = limits;
    }

    /// The segment about to be input goes to connection `index`.
    #[inline]
    pub(crate) fn target(&mut self, index: u32) {
        if let Some(c) = &mut self.current {
            c.target = Some(index);
        }
    }

    /// Whether a lendable frame is being received.
    #[inline]
    pub(crate) fn lending(&self) -> bool {
        self.current.is_some()
    }

    /// Whether in-order `payload`, for a connection already holding
    /// `conn_frames` frames, may stay in the frame being received.
    pub(crate) fn claim(&mut self, payload: &[u8], conn_frames: usize) -> Claim {
        let Some(c) = &mut self.current else {
            return Claim::Copy;
        };
        let at = payload.as_ptr() as usize;
        let Some(target) = c.target else {
            return Claim::Copy;
        };
        if c.claimed_by.is_some() || at < c.start || at + payload.len() > c.end {
            return Claim::Copy;
        }
        let i = usize::from(c.iface.0);
        let limits = self.limits.get(i).copied().unwrap_or_default();
        if payload.len() < limits.min_payload || limits.frames == 0 {
            return Claim::Copy;
        }
        if self.held[i] >= limits.frames || conn_frames >= limits.frames_per_conn {
            self.hold_limited += 1;
            return Claim::Copy;
        }
        c.claimed_by = Some(target);
        self.held[i] += 1;
        self.total_held += 1;
        self.zero_copy_segments += 1;
        Claim::Hold {
            iface: c.iface,
            offset: at - c.start,
        }
    }

    /// A held frame is no longer needed: it goes back to the engine.
    pub(crate) fn release(&mut self, iface: IfaceId, frame: LentFrame) {
        self.forget(iface);
        self.released.push(frame);
    }

    /// A claim that was never attached, or a frame released: one fewer held.
    fn forget(&mut self, iface: IfaceId) {
        if let Some(h) = self.held.get_mut(usize::from(iface.0)) {
            *h = h.saturating_sub(1);
        }
        self.total_held = self.total_held.saturating_sub(1);
    }
}

impl Stack {
    /// Lets TCP keep frames received on `iface` as socket buffer memory, up
    /// to `limits` (the engine sets them from what the link's pool can
    /// spare). Returns whether `iface` exists.
    pub fn set_rx_lending(&mut self, iface: IfaceId, limits: LendLimits) -> bool {
        if self.ip.interface(iface).is_none() {
            return false;
        }
        self.tcp.lend.set_limits(iface, limits);
        true
    }

    /// Like [`receive`](Self::receive), for a frame whose buffer the stack
    /// may keep: `bytes` gives the frame's bytes, and `lend` turns the
    /// buffer into a [`LentFrame`] whose [`RxFrame::bytes`] are those same
    /// bytes. Returns the buffer when the stack did not keep it (the
    /// caller recycles it); a kept one comes back later through
    /// [`take_released_frames`](Self::take_released_frames).
    #[allow(clippy::too_many_arguments)]
    pub fn receive_lent<B>(
        &mut self,
        now: Instant,
        iface: IfaceId,
        frame: B,
        meta: RxMeta,
        sink: &mut dyn FrameSink,
        bytes: impl Fn(&B) -> &[u8],
        lend: impl FnOnce(B) -> LentFrame,
    ) -> Option<B> {
        let data = bytes(&frame);
        let start = data.as_ptr() as usize;
        self.tcp.lend.current = Some(Current {
            iface,
            start,
            end: start + data.len(),
            target: None,
            claimed_by: None,
        });
        self.receive(now, iface, data, meta, sink);
        let l = &mut self.tcp.lend;
        let claimed = l.current.take().and_then(|c| c.claimed_by);
        self.ip.counters.tcp_rx_zero_copy_segments = l.zero_copy_segments;
        self.ip.counters.tcp_rx_hold_limited = l.hold_limited;
        let Some(index) = claimed else {
            return Some(frame);
        };
        match self.sockets.at_mut(index) {
            Some(Socket::Tcp(conn)) if conn.recv.has_pending() => {
                conn.recv.attach(lend(frame));
                self.ip.counters.tcp_rx_frames_held = self.tcp.lend.total_held as u64;
                None
            }
            // The connection went away during the receive, and its claim
            // with it.
            _ => {
                self.tcp.lend.forget(iface);
                Some(frame)
            }
        }
    }

    /// Whether frames wait in the released list.
    #[inline]
    pub fn has_released_frames(&self) -> bool {
        !self.tcp.lend.released.is_empty()
    }

    /// Moves the frames the stack no longer holds (their payload was read,
    /// or their connection is gone) to `out`, for the engine to recycle.
    pub fn take_released_frames(&mut self, out: &mut Vec<LentFrame>) {
        out.append(&mut self.tcp.lend.released);
        self.ip.counters.tcp_rx_frames_held = self.tcp.lend.total_held as u64;
    }

    /// Calls `f` with each frame the sockets hold.
    pub fn visit_held_frames(&self, mut f: impl FnMut(&dyn RxFrame)) {
        for (_, s) in self.sockets.iter() {
            if let Socket::Tcp(conn) = s {
                conn.recv.visit_frames(&mut f);
            }
        }
    }

    /// Frames the stack holds now, on every interface.
    pub fn rx_frames_held(&self) -> usize {
        self.tcp.lend.total_held
    }

    /// Hands back every frame the sockets hold, dropping the unread data
    /// in them: for an engine that is shutting down and must return its
    /// link's buffers before the link goes.
    pub fn release_all_frames(&mut self) {
        let tcp: Vec<u32> = self
            .sockets
            .iter()
            .filter(|(_, s)| matches!(s, Socket::Tcp(_)))
            .map(|(h, _)| h.index)
            .collect();
        for index in tcp {
            if let Some(Socket::Tcp(conn)) = self.sockets.at_mut(index) {
                conn.recv.release_frames(&mut self.tcp.lend);
            }
        }
        self.ip.counters.tcp_rx_frames_held = self.tcp.lend.total_held as u64;
    }

    /// Frees socket `index`, handing back the frames a connection held.
    pub(crate) fn free_socket(&mut self, index: u32) {
        if let Some(Socket::Tcp(mut conn)) = self.sockets.remove(index) {
            conn.recv.release_frames(&mut self.tcp.lend);
            conn.send.discard(&mut self.tcp.buffers);
            conn.recv.discard_storage(&mut self.tcp.buffers);
        }
    }
}
