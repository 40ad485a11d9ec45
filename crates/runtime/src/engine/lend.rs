//! Received buffers lent to the stack: on a port whose link can spare them
//! ([`Link::lend_budget`]: AF_XDP's UMEM frames, DPDK's mbufs), each frame
//! goes to [`Stack::receive_lent`], and a TCP socket may keep it as its
//! receive buffer (the payload is not copied out of the buffer the link
//! received it into). Frames come back through the stack's released list
//! once read; the engine returns them to their link at the start of each
//! turn and after each socket call made between turns.
//!
//! A lent buffer travels in a box ([`Lent`]) taken from a free list, so
//! lending allocates nothing once the list has grown to the number of
//! frames held at once.

use std::any::Any;

use link::{Link, PacketBuffer};
use stack::{FrameSink, IfaceId, Instant, LendLimits, LentFrame, RxFrame, RxMeta, Stack};

use super::{Engine, Port};

/// Payloads shorter than this are copied rather than held: a whole link
/// buffer kept for a few bytes costs the link more than the copy costs.
pub const MIN_LENT_PAYLOAD: usize = 128;

/// Frames one connection may hold at most (fewer on links with little to
/// spare), so that a few connections whose application reads slowly cannot
/// take every buffer the link can lend.
pub const MAX_LENT_PER_CONN: usize = 64;

/// A link buffer lent to the stack, and the port it goes back to.
struct Lent<B> {
    port: usize,
    buf: Option<B>,
}

impl<B: PacketBuffer> RxFrame for Lent<B> {
    fn bytes(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| b.data())
    }
}

/// The engine's side of lending.
pub(super) struct Lender<B> {
    /// Some port lends its buffers (one test on the paths of engines
    /// whose links do not).
    any: bool,
    /// Ports whose link lends its buffers.
    on: Vec<bool>,
    /// Empty boxes for the next frames lent.
    spare: Vec<Box<Lent<B>>>,
    /// Frames the stack released, on their way back to their links.
    back: Vec<LentFrame>,
}

impl<B: PacketBuffer> Default for Lender<B> {
    fn default() -> Self {
        Lender {
            any: false,
            on: Vec::new(),
            spare: Vec::new(),
            back: Vec::new(),
        }
    }
}

impl<B: PacketBuffer> Lender<B> {
    /// Whether port `i` lends its buffers.
    #[inline]
    pub(super) fn on(&self, i: usize) -> bool {
        self.any && self.on.get(i).copied().unwrap_or(false)
    }

    /// Whether any port lends its buffers.
    #[inline]
    pub(super) fn any(&self) -> bool {
        self.any
    }

    /// Hands `buf`, received on port `i`, to the stack as a lent frame;
    /// returns it when the stack did not keep it.
    pub(super) fn receive(
        &mut self,
        stack: &mut Stack,
        now: Instant,
        i: usize,
        buf: B,
        meta: RxMeta,
        sink: &mut dyn FrameSink,
    ) -> Option<B> {
        let spare = &mut self.spare;
        stack.receive_lent(
            now,
            IfaceId(i as u16),
            buf,
            meta,
            sink,
            |b| b.data(),
            |b| {
                let mut lent = spare
                    .pop()
                    .unwrap_or_else(|| Box::new(Lent { port: i, buf: None }));
                lent.port = i;
                lent.buf = Some(b);
                lent
            },
        )
    }
}

impl<L: Link> Engine<L> {
    /// Lets the stack keep received buffers of every port whose link can
    /// spare some.
    pub(super) fn start_lending(&mut self) {
        self.lent.on = vec![false; self.ports.len()];
        for (i, p) in self.ports.iter().enumerate() {
            let frames = p.link.lend_budget();
            if frames == 0 {
                continue;
            }
            let limits = LendLimits {
                frames,
                frames_per_conn: (frames / 8).clamp(1, MAX_LENT_PER_CONN),
                min_payload: MIN_LENT_PAYLOAD,
            };
            self.lent.on[i] = self.stack.set_rx_lending(IfaceId(i as u16), limits);
        }
        self.lent.any = self.lent.on.iter().any(|&on| on);
    }

    /// Returns the frames the stack released to their links.
    pub(super) fn return_lent(&mut self) {
        return_lent(&mut self.stack, &mut self.lent, &mut self.ports);
    }

    /// Frames the stack holds now, lent by the links.
    pub fn frames_lent(&self) -> usize {
        self.stack.rx_frames_held()
    }

    /// Calls `f` with each buffer the stack holds, and its port: to see
    /// where the sockets' received data lives.
    pub fn visit_lent(&self, mut f: impl FnMut(usize, &L::Buf)) {
        self.stack.visit_held_frames(|frame| {
            let any: &dyn Any = frame;
            if let Some(Lent { port, buf: Some(b) }) = any.downcast_ref::<Lent<L::Buf>>() {
                f(*port, b);
            }
        });
    }
}

fn return_lent<L: Link>(stack: &mut Stack, lent: &mut Lender<L::Buf>, ports: &mut [Port<L>]) {
    stack.take_released_frames(&mut lent.back);
    for frame in lent.back.drain(..) {
        let any: Box<dyn Any> = frame;
        // Only the engine lends, and only `Lent` of its buffer kind.
        let Ok(mut l) = any.downcast::<Lent<L::Buf>>() else {
            continue;
        };
        if let (Some(buf), Some(p)) = (l.buf.take(), ports.get_mut(l.port)) {
            p.link.recycle(buf);
        }
        lent.spare.push(l);
    }
}

impl<L: Link> Drop for Engine<L> {
    /// The links' buffers go back before the links do (an AF_XDP link
    /// whose frames are still out must leak its UMEM rather than unmap it).
    fn drop(&mut self) {
        self.stack.release_all_frames();
        self.return_lent();
    }
}
