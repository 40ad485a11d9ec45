//! The dispatcher hook (DESIGN.md, "The packet's way"): every received
//! buffer passes here before the stack sees it, and may be taken.
//!
//! - Software steering: with several engines, a frame whose flow hash
//!   (`crate::steer`) belongs to another engine is handed to it over a
//!   lock-free SPSC ring (`link::spsc`), the buffer itself, no copy; the
//!   owner gives the buffer back on a return ring once its stack is done
//!   with it, so every buffer goes home to the pool it came from.
//! - ARP and IPv6 neighbour discovery are for every engine: the engine
//!   that receives such a frame answers, and hands a copy to each other
//!   engine, which learns from it with its ARP and NDP transmissions muted
//!   (one answer on the wire, every neighbor table and default router up to
//!   date, and a reply reaches the engine that asked).
//! - The exception path (`[kni]`, F-Stack's KNI): frames the filter gives
//!   the kernel are written to a TAP device (engine 0 owns it; the other
//!   engines hand such frames to engine 0), and what the kernel sends on the
//!   TAP leaves through the port. ARP and neighbour discovery go to both.
//! - The application's frame hook (F-Stack's `ff_regist_packet_dispatcher`,
//!   [`FrameHook`]): it sees every received frame before all of the above
//!   and may take it, answer it in place (the frame goes back out of the
//!   port it came in on), or let it pass.

use link::spsc::{Consumer, Producer};
use link::{Link, PacketBuffer, PacketPool, PoolBuf, TapLink, TapOptions, MAX_BURST};
use stack::{FrameSink, IfaceId, Instant, RxMeta, Stack};

use super::{Engine, EngineCounters, Port, TxQueues, MAX_TXQ};
use crate::config::KniConfig;
use crate::steer::{classify, FrameClass, KniFilter, KniVerdict};

/// Why a frame goes to another engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardKind {
    /// Its flow belongs to the receiving engine.
    Stack,
    /// A copy of ARP or neighbour discovery: learn, answer nothing.
    NeighborCopy,
    /// For the kernel, through engine 0's exception path.
    Kernel,
}

/// A frame on its way to another engine.
pub struct Forward<B> {
    pub port: u16,
    pub kind: ForwardKind,
    pub buf: B,
}

/// A buffer on its way back to the engine whose pool it belongs to.
pub struct Returned<B> {
    pub port: u16,
    pub buf: B,
}

/// One engine's ends of the rings between all engines.
pub struct MeshEnd<B> {
    /// `to[e]`: frames for engine `e` (`None` for ourselves).
    to: Vec<Option<Producer<Forward<B>>>>,
    /// Frames from other engines, with the sender's number.
    from: Vec<(usize, Consumer<Forward<B>>)>,
    /// `back_to[e]`: buffers of engine `e`'s pools, going home.
    back_to: Vec<Option<Producer<Returned<B>>>>,
    /// Our buffers coming home.
    back_from: Vec<Consumer<Returned<B>>>,
    /// Buffers whose return ring was full, retried each turn.
    pending_back: Pending<B>,
}

/// The rings between `engines` engines (frames one way, buffers back), as
/// one [`MeshEnd`] per engine. `capacity` frames per ring.
pub fn mesh<B: Send>(engines: usize, capacity: usize) -> Vec<MeshEnd<B>> {
    let mut ends: Vec<MeshEnd<B>> = (0..engines)
        .map(|_| MeshEnd {
            to: (0..engines).map(|_| None).collect(),
            from: Vec::new(),
            back_to: (0..engines).map(|_| None).collect(),
            back_from: Vec::new(),
            pending_back: Vec::new(),
        })
        .collect();
    for a in 0..engines {
        for b in 0..engines {
            if a == b {
                continue;
            }
            let (p, c) = link::spsc::ring(capacity);
            ends[a].to[b] = Some(p);
            ends[b].from.push((a, c));
            // Room for every buffer that can be out at once, so a return
            // never waits in the common case.
            let (p, c) = link::spsc::ring(capacity * 2);
            ends[b].back_to[a] = Some(p);
            ends[a].back_from.push(c);
        }
    }
    ends
}

/// The exception path of one port: a TAP whose kernel side shares the
/// port's Ethernet address.
pub struct KniPort {
    pub tap: TapLink,
    /// Frames read from the TAP, reused.
    rx: Vec<PoolBuf>,
    /// Frames waiting to be written to the TAP.
    txq: Vec<PoolBuf>,
}

/// Opens the exception path of port `port` (`{ifname}{port}`), giving the
/// kernel side the port's MAC; the TAP's buffers hold `buf_size` bytes.
pub fn open_kni(
    cfg: &KniConfig,
    port: u16,
    mac: [u8; 6],
    buf_size: usize,
) -> std::io::Result<KniPort> {
    let name = format!("{}{port}", cfg.ifname);
    let pool = PacketPool::with_reserve(buf_size, 1024, 64);
    // No checksum offload: the kernel sends complete frames, which leave on
    // the wire as they are.
    let opts = TapOptions {
        csum_offload: false,
        mac: Some(mac),
        ..TapOptions::default()
    };
    let mut tap = TapLink::open_with(&name, pool, &opts)?;
    tap.set_kernel_mac(mac)?;
    Ok(KniPort {
        tap,
        rx: Vec::with_capacity(MAX_BURST),
        txq: Vec::with_capacity(MAX_BURST),
    })
}

/// What the application's frame hook made of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookVerdict {
    /// On to the engine: steering, the exception path, the stack.
    Pass,
    /// Taken: the buffer goes back to its pool.
    Consume,
    /// Answered in place: the buffer's first `len` bytes (a whole
    /// Ethernet frame the hook wrote) leave through the port the frame came
    /// in on, with the flush at the end of this loop turn.
    Answer(usize),
}

/// An application's look at every received frame before the engine's own
/// dispatching and the stack (F-Stack's `ff_regist_packet_dispatcher`).
/// It runs on the engine's thread, inside the loop turn: it must not block.
pub trait FrameHook: Send {
    /// A frame received on `port`: `buf[..len]` is the frame, the rest of
    /// `buf` is room for a longer answer.
    fn frame(&mut self, port: u16, buf: &mut [u8], len: usize) -> HookVerdict;
}

impl<F: FnMut(u16, &mut [u8], usize) -> HookVerdict + Send> FrameHook for F {
    fn frame(&mut self, port: u16, buf: &mut [u8], len: usize) -> HookVerdict {
        self(port, buf, len)
    }
}

impl<L: Link> Engine<L> {
    /// Puts the application's frame hook in front of everything the engine
    /// does with a received frame (with a dispatcher of its own when the
    /// engine had none); `None` removes it.
    pub fn set_frame_hook(&mut self, hook: Option<Box<dyn FrameHook>>) {
        match (self.dispatch.as_mut(), hook) {
            (Some(d), hook) => d.hook = hook,
            (None, None) => {}
            (None, Some(hook)) => {
                let mut d = Dispatcher::new(0, 1, None, None, Vec::new());
                d.hook = Some(hook);
                self.dispatch = Some(d);
                self.refresh_turn_kind();
            }
        }
    }
}

/// Counters of the dispatcher.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DispatchCounters {
    /// Frames handed to the engine that owns their flow.
    pub steer_forwarded: u64,
    /// Frames other engines handed to this one.
    pub steer_received: u64,
    /// Frames dropped because the ring to their engine was full.
    pub steer_drop_ring_full: u64,
    /// Frames of another process's flows, left to it (every process of
    /// the group receives every frame: DPDK's af_packet vdevs).
    pub steer_other_members: u64,
    /// ARP copies handed to the other engines.
    pub steer_arp_copies: u64,
    /// ARP copies dropped (no buffer, or the ring was full).
    pub steer_arp_copy_drops: u64,
    /// Neighbour discovery (IPv6) copies handed to the other engines.
    pub steer_ndp_copies: u64,
    /// Neighbour discovery copies dropped (no buffer, or the ring was
    /// full).
    pub steer_ndp_copy_drops: u64,
    /// Buffers whose return ring was full when first tried.
    pub steer_return_waits: u64,
    /// Frames given to the kernel (exception path).
    pub kni_to_kernel: u64,
    /// Frames the kernel sent out through the port.
    pub kni_from_kernel: u64,
    /// Frames for the kernel dropped (TAP full, no buffer).
    pub kni_drop: u64,
    /// Frames of the kernel dropped (no buffer on the port, too large).
    pub kni_tx_drop: u64,
    /// Partial checksums completed for the kernel.
    pub kni_csum_completed: u64,
    /// Frames the application's hook took.
    pub hook_consumed: u64,
    /// Frames the application's hook answered (sent back out).
    pub hook_answered: u64,
    /// Answers dropped: longer than the buffer, or the port's queue full.
    pub hook_answer_drops: u64,
    /// Frames read from the ARP taps, ARP and IPv6 neighbour discovery
    /// (learned from, not answered).
    pub arp_tap_frames: u64,
    /// Frames of no flow of ours offered to the group's other processes.
    pub handoff_offered: u64,
    /// Frames of no flow with no other process in the group to offer them
    /// to: answered at once, as if the ports were not shared.
    pub handoff_unsent: u64,
    /// Frames of no flow dropped unanswered: every other process's outbox
    /// was full, the frame too long to hand over, or more offers waited
    /// than are kept.  The peer retransmits; a reset could end a
    /// connection another process has.
    pub handoff_dropped: u64,
    /// Records lost because the process they were for left the group.
    pub handoff_lost: u64,
    /// Malformed records received (the rest of their datagram dropped).
    pub handoff_malformed: u64,
    /// Frames the group's other processes offered to this one.
    pub handoff_received: u64,
    /// Frames another process offered that were ours (claimed).
    pub handoff_claimed: u64,
    /// Offers of ours nobody claimed (every member they went to declined,
    /// or one never answered within `OFFER_WAIT_MAX`): received as if the
    /// ports were not shared (a reset for a segment of no connection).
    pub handoff_expired: u64,
    /// Offers of ours that a member declined (not its flow).
    pub handoff_declined: u64,
    /// Offers of ours answered only by the time limit: a member they went
    /// to never said (busy for `OFFER_WAIT_MAX`, or gone with the record).
    pub handoff_unanswered: u64,
    /// Errors reading the handoff channel.
    pub handoff_errors: u64,
    /// ARP and neighbour discovery frames copied to the group's other
    /// processes (AF_XDP queues: each process sees only its own).
    pub handoff_neighbors_shared: u64,
    /// Such copies received from the others and learned from.
    pub handoff_neighbors_received: u64,
    /// Errors reading an ARP tap.
    pub arp_tap_errors: u64,
    /// Frames of an AF_XDP queue no process holds, read from the pass tap
    /// (`link::PassTap`) and received.
    pub pass_tap_frames: u64,
    /// Such frames longer than the tap's buffer, dropped.
    pub pass_tap_truncated: u64,
    /// Errors reading the pass tap.
    pub pass_tap_errors: u64,
}

impl DispatchCounters {
    pub fn visit(&self, mut f: impl FnMut(&'static str, u64)) {
        f("steer_forwarded", self.steer_forwarded);
        f("steer_received", self.steer_received);
        f("steer_drop_ring_full", self.steer_drop_ring_full);
        f("steer_other_members", self.steer_other_members);
        f("steer_arp_copies", self.steer_arp_copies);
        f("steer_arp_copy_drops", self.steer_arp_copy_drops);
        f("steer_ndp_copies", self.steer_ndp_copies);
        f("steer_ndp_copy_drops", self.steer_ndp_copy_drops);
        f("steer_return_waits", self.steer_return_waits);
        f("kni_to_kernel", self.kni_to_kernel);
        f("kni_from_kernel", self.kni_from_kernel);
        f("kni_drop", self.kni_drop);
        f("kni_tx_drop", self.kni_tx_drop);
        f("kni_csum_completed", self.kni_csum_completed);
        f("hook_consumed", self.hook_consumed);
        f("hook_answered", self.hook_answered);
        f("hook_answer_drops", self.hook_answer_drops);
        f("arp_tap_frames", self.arp_tap_frames);
        f("handoff_offered", self.handoff_offered);
        f("handoff_unsent", self.handoff_unsent);
        f("handoff_dropped", self.handoff_dropped);
        f("handoff_lost", self.handoff_lost);
        f("handoff_malformed", self.handoff_malformed);
        f("handoff_received", self.handoff_received);
        f("handoff_claimed", self.handoff_claimed);
        f("handoff_expired", self.handoff_expired);
        f("handoff_declined", self.handoff_declined);
        f("handoff_unanswered", self.handoff_unanswered);
        f("handoff_errors", self.handoff_errors);
        f("handoff_neighbors_shared", self.handoff_neighbors_shared);
        f(
            "handoff_neighbors_received",
            self.handoff_neighbors_received,
        );
        f("arp_tap_errors", self.arp_tap_errors);
        f("pass_tap_frames", self.pass_tap_frames);
        f("pass_tap_truncated", self.pass_tap_truncated);
        f("pass_tap_errors", self.pass_tap_errors);
    }
}

/// An engine's dispatcher: its place among the engines and the exception
/// path.
pub struct Dispatcher<B> {
    engine: usize,
    engines: usize,
    mesh: Option<MeshEnd<B>>,
    kni_filter: Option<KniFilter>,
    /// Per port, on the engine that owns the exception path.
    kni: Vec<Option<KniPort>>,
    counters: DispatchCounters,
    /// Where a muted neighbour copy's output is looked at.
    scratch: Vec<u8>,
    /// The application's frame hook, first to see each frame.
    hook: Option<Box<dyn FrameHook>>,
    /// ARP taps by port, when this engine shares its ports' fanout groups
    /// with other processes (`link::ArpTap`).
    arp_taps: Vec<(u16, link::ArpTap)>,
    /// The group's channel for frames of flows another process has.
    handoff: Option<link::FlowHandoff>,
    /// By port, the frames of AF_XDP queues no process of the group holds
    /// (`link::PassTap`), with the buffer they are read into.
    pass_taps: Vec<(u16, link::PassTap)>,
    pass_buf: Vec<u8>,
    /// Copy the ARP and neighbour discovery frames received to the group's
    /// other processes over `handoff`: their links (AF_XDP queues) never
    /// see the frames of this process's queue, and no tap does.
    share_neighbors: bool,
    /// Every process of the group receives every frame (DPDK's af_packet
    /// vdev, one per process: see `Engine::share_by_copy`): a frame of
    /// another member's flow is dropped here, that member has its copy.
    every_member_receives: bool,
    /// Our offers waiting for a claim, oldest first.
    offers: std::collections::VecDeque<PendingOffer>,
    /// When the side channels (ARP taps, handoff) are read next.
    next_side_read: Instant,
    /// The ports' RSS when their queues (one per engine) are spread by
    /// it: a frame's owner is the queue the NIC picks, not the flow hash's.
    rss: Option<std::sync::Arc<stack::steer::RssSteering>>,
}

/// A frame offered to the group, kept until a member claims it, or every
/// member it went to declines it, or its time passes (then it is ours to
/// answer: with a reset).
struct PendingOffer {
    id: u32,
    deadline: std::time::Instant,
    /// Members it went to that have not answered yet.
    awaiting: usize,
    port: u16,
    csum_partial: bool,
    frame: Vec<u8>,
}

/// How long an offer waits at most for its answers.  Every member it went
/// to answers, with a claim (the flow is its) or a decline, on its next
/// side read or when its idle wait sees the channel readable; the offer
/// is ours to answer once all have declined.  A member busy in the
/// program between two waits may take a while, and answering before it
/// does would reset a connection it has (Linux never loses a flow of a
/// live process): the wait ends without all answers only for a member
/// that is stuck or left the group with the offer unread.
const OFFER_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(5);
/// Offers waiting at most; past it the oldest is dropped unanswered.
const MAX_OFFERS: usize = 8192;
/// How soon an outbox the receiver's queue refused is tried again.
const OUTBOX_RETRY: std::time::Duration = std::time::Duration::from_micros(200);

impl<B: PacketBuffer> Dispatcher<B> {
    /// Engine `engine` of `engines` (`mesh` is its end of the rings when
    /// there are several), with the exception path's filter when `[kni]` is
    /// on and, on engine 0, its TAP per port.
    pub fn new(
        engine: usize,
        engines: usize,
        mesh: Option<MeshEnd<B>>,
        kni_filter: Option<KniFilter>,
        kni: Vec<Option<KniPort>>,
    ) -> Self {
        Dispatcher {
            engine,
            engines: engines.max(1),
            mesh,
            kni_filter,
            kni,
            counters: DispatchCounters::default(),
            scratch: Vec::new(),
            hook: None,
            arp_taps: Vec::new(),
            handoff: None,
            pass_taps: Vec::new(),
            pass_buf: Vec::new(),
            share_neighbors: false,
            every_member_receives: false,
            offers: std::collections::VecDeque::new(),
            next_side_read: Instant::ZERO,
            rss: None,
        }
    }

    /// Owners are found by the ports' RSS from now on (see
    /// `Dispatcher::rss`).
    pub fn set_rss(&mut self, rss: Option<std::sync::Arc<stack::steer::RssSteering>>) {
        self.rss = rss;
    }

    /// Frames of no flow of ours go to the group's other processes over
    /// `h`, and theirs come here (see `Stack::set_flow_handoff`).
    pub fn set_handoff(&mut self, h: link::FlowHandoff) {
        self.handoff = Some(h);
    }

    /// Copies the neighbour frames this engine receives to the group's
    /// other processes (see `Dispatcher::share_neighbors`).
    pub fn set_share_neighbors(&mut self, on: bool) {
        self.share_neighbors = on;
    }

    /// Every process of the group receives every frame; this one keeps
    /// its share (see `Dispatcher::every_member_receives`).
    pub fn set_every_member_receives(&mut self, on: bool) {
        self.every_member_receives = on;
    }

    /// Offers a frame the stack found no flow for to the other processes.
    pub(super) fn offer(&mut self, port: usize, csum_partial: bool, frame: &[u8]) {
        let Some(h) = self.handoff.as_mut() else {
            return;
        };
        let o = h.offer(port as u16, csum_partial, frame);
        let deadline = if o.queued > 0 {
            self.counters.handoff_offered += 1;
            std::time::Instant::now() + OFFER_WAIT_MAX
        } else if o.members == 0 {
            // Nobody else could have the flow: answered at once.
            self.counters.handoff_unsent += 1;
            std::time::Instant::now()
        } else {
            self.counters.handoff_dropped += 1;
            return;
        };
        if self.offers.len() >= MAX_OFFERS {
            self.offers.pop_front();
            self.counters.handoff_dropped += 1;
        }
        self.offers.push_back(PendingOffer {
            id: o.id,
            deadline,
            awaiting: o.queued,
            port: port as u16,
            csum_partial,
            frame: frame.to_vec(),
        });
    }

    /// When the dispatcher needs a turn though nothing arrives: an offer's
    /// time is up, or records wait for room in another process's queue.
    pub fn next_event(&self) -> Option<std::time::Instant> {
        let offer = self.offers.iter().map(|o| o.deadline).min();
        let outbox = self
            .handoff
            .as_ref()
            .filter(|h| h.has_pending())
            .map(|_| std::time::Instant::now() + OUTBOX_RETRY);
        match (offer, outbox) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Reads port `port`'s ARP frames and neighbour discovery from `tap`
    /// too: every one is learned from, none answered (the process the fanout group gave the
    /// frame to answers it).
    pub fn add_arp_tap(&mut self, port: u16, tap: link::ArpTap) {
        self.arp_taps.push((port, tap));
    }

    /// Reads port `port`'s frames that no AF_XDP socket of the group took
    /// from `tap`, and receives them as the port's own.
    pub fn add_pass_tap(&mut self, port: u16, tap: link::PassTap) {
        self.pass_taps.push((port, tap));
        self.pass_buf = vec![0; link::pass_tap::PASS_TAP_FRAME];
    }

    pub fn engine(&self) -> usize {
        self.engine
    }

    pub fn counters(&self) -> &DispatchCounters {
        &self.counters
    }

    /// The exception path's filter, when `[kni]` is on.
    pub fn kni_filter(&self) -> Option<&KniFilter> {
        self.kni_filter.as_ref()
    }

    pub fn kni_filter_mut(&mut self) -> Option<&mut KniFilter> {
        self.kni_filter.as_mut()
    }

    /// The ports whose exception path (TAP) this engine holds.
    pub fn kni_ports(&self) -> impl Iterator<Item = usize> + '_ {
        self.kni
            .iter()
            .enumerate()
            .filter(|(_, k)| k.is_some())
            .map(|(i, _)| i)
    }

    /// Descriptors that wake an idle engine (the TAPs of the exception
    /// path).
    /// Whether frames may come from other engines of this process (the
    /// rings between them): those rings have no fd to wake a sleeping
    /// engine, so it must look at them every `idle_sleep`.
    pub fn has_mesh(&self) -> bool {
        self.mesh.is_some()
    }

    pub fn wait_fds(&self) -> impl Iterator<Item = std::os::fd::RawFd> + '_ {
        self.kni
            .iter()
            .flatten()
            .filter_map(|k| k.tap.rx_fd())
            .chain(self.arp_taps.iter().map(|(_, t)| t.fd()))
            .chain(self.pass_taps.iter().map(|(_, t)| t.fd()))
            .chain(self.handoff.iter().map(|h| h.fd()))
    }

    fn push(&mut self, to: usize, f: Forward<B>) -> Result<(), Forward<B>> {
        match self.mesh.as_mut().and_then(|m| m.to.get_mut(to)?.as_mut()) {
            Some(p) => p.push(f),
            None => Err(f),
        }
    }

    /// Writes a copy of `frame` to the kernel through port `port`'s TAP
    /// (this engine owns the exception path).
    /// Whether port `port` has an exception TAP on this engine.
    fn has_tap(&self, port: usize) -> bool {
        self.kni.get(port).is_some_and(Option::is_some)
    }

    fn give_kernel(&mut self, port: usize, frame: &[u8], csum_partial: bool) {
        let Some(k) = self.kni.get_mut(port).and_then(Option::as_mut) else {
            self.counters.kni_drop += 1;
            return;
        };
        let Some(mut b) = k.tap.alloc_tx() else {
            self.counters.kni_drop += 1;
            return;
        };
        if !b.fill_from(frame) {
            // Larger than the TAP's buffers: a TCP super-frame or
            // aggregate from a link with large receive, which goes to the
            // kernel in segments of the TAP's MTU.
            let mtu = k.tap.info().mtu;
            match link::gso::TcpSuperFrame::parse(frame, mtu, csum_partial) {
                Ok(sf) => {
                    k.tap.recycle(b);
                    for i in 0..sf.segments() {
                        let Some(mut seg) = k.tap.alloc_tx() else {
                            self.counters.kni_drop += 1;
                            return;
                        };
                        let len = sf.segment_len(i);
                        if len > seg.capacity() {
                            k.tap.recycle(seg);
                            self.counters.kni_drop += 1;
                            return;
                        }
                        seg.set_len(len);
                        sf.write_segment(frame, i, seg.data_mut());
                        // Each segment holds the partial form: finished.
                        if wire::partial_checksum::complete(seg.data_mut()) {
                            self.counters.kni_csum_completed += 1;
                        }
                        k.txq.push(seg);
                        self.counters.kni_to_kernel += 1;
                    }
                }
                Err(_) => {
                    k.tap.recycle(b);
                    self.counters.kni_drop += 1;
                }
            }
            if k.txq.len() >= MAX_BURST {
                flush_kni(k, &mut self.counters);
            }
            return;
        }
        // The kernel verifies what arrives on a TAP; a frame whose checksum
        // the sender left to the NIC is finished here.
        if csum_partial && wire::partial_checksum::complete(b.data_mut()) {
            self.counters.kni_csum_completed += 1;
        }
        k.txq.push(b);
        self.counters.kni_to_kernel += 1;
        if k.txq.len() >= MAX_BURST {
            flush_kni(k, &mut self.counters);
        }
    }
}

/// Sends what waits for the kernel; drops what the TAP will not take.
fn flush_kni(k: &mut KniPort, counters: &mut DispatchCounters) {
    if k.txq.is_empty() {
        return;
    }
    let _ = k.tap.tx_burst(&mut k.txq);
    counters.kni_drop += k.txq.len() as u64;
    for b in k.txq.drain(..) {
        k.tap.recycle(b);
    }
}

/// A sink that lets everything but ARP and neighbour discovery through:
/// an engine learning from a copy must not answer it too (the receiving
/// engine did), but frames that waited for the neighbor go out.
struct NeighborMuted<'a> {
    inner: &'a mut dyn FrameSink,
    scratch: &'a mut Vec<u8>,
}

impl FrameSink for NeighborMuted<'_> {
    fn transmit(&mut self, iface: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.scratch.clear();
        self.scratch.resize(len, 0);
        fill(self.scratch);
        if classify(self.scratch).is_neighbor_discovery() {
            return true;
        }
        let frame = &self.scratch[..];
        self.inner
            .transmit(iface, len, &mut |b: &mut [u8]| b.copy_from_slice(frame))
    }
}

/// Decides where a frame received on port `i` goes. Returns it when this
/// engine's stack is to receive it; otherwise it has been handed on (or
/// dropped and counted) and its buffer dealt with.
pub(super) fn route<L: Link>(
    d: &mut Dispatcher<L::Buf>,
    ports: &mut [Port<L>],
    i: usize,
    buf: L::Buf,
) -> Option<L::Buf> {
    let buf = match d.hook.as_mut() {
        Some(hook) => run_hook(hook.as_mut(), &mut d.counters, ports, i, buf)?,
        None => buf,
    };
    if d.share_neighbors {
        if let Some(h) = d.handoff.as_mut() {
            if classify(buf.data()).is_neighbor_discovery() {
                h.share_neighbor(i as u16, buf.data());
                d.counters.handoff_neighbors_shared += 1;
            }
        }
    }
    if d.engines == 1 && d.kni_filter.is_none() {
        // One engine and no exception path: nothing to decide.
        return Some(buf);
    }
    let class = classify(buf.data());
    let verdict = d
        .kni_filter
        .as_ref()
        .map_or(KniVerdict::Stack, |f| f.verdict(&class));
    if class.is_neighbor_discovery() {
        // (When every member receives every frame, each has this one.)
        if d.engines > 1 && !d.every_member_receives {
            copy_neighbor(d, ports, i, &buf, class == FrameClass::Arp);
        }
        // A port without a TAP has its exception path in its XDP program
        // (`xdp_program=libxdp`), which keeps the kernel's neighbour
        // traffic: this frame is ustack's alone.
        if verdict == KniVerdict::Both && d.engine == 0 && d.has_tap(i) {
            d.give_kernel(i, buf.data(), false);
        }
        return Some(buf);
    }
    if verdict == KniVerdict::Kernel {
        if d.engine == 0 {
            d.give_kernel(i, buf.data(), buf.csum_partial());
            ports[i].link.recycle(buf);
        } else {
            hand_on(d, ports, i, 0, ForwardKind::Kernel, buf);
        }
        return None;
    }
    if d.engines > 1 {
        let owner = usize::from(match &d.rss {
            Some(rss) => class.rss_queue(rss),
            None => class.engine(d.engines as u16),
        });
        if owner != d.engine && d.every_member_receives {
            d.counters.steer_other_members += 1;
            ports[i].link.recycle(buf);
            return None;
        }
        if owner != d.engine {
            hand_on(d, ports, i, owner, ForwardKind::Stack, buf);
            return None;
        }
    }
    Some(buf)
}

/// Shows a received frame to the application's hook and does what it says.
/// Returns the frame when it passes.
fn run_hook<L: Link>(
    hook: &mut dyn FrameHook,
    counters: &mut DispatchCounters,
    ports: &mut [Port<L>],
    i: usize,
    mut buf: L::Buf,
) -> Option<L::Buf> {
    let len = buf.data().len();
    let room = buf.capacity().max(len);
    buf.set_len(room);
    match hook.frame(i as u16, buf.data_mut(), len) {
        HookVerdict::Pass => {
            buf.set_len(len);
            Some(buf)
        }
        HookVerdict::Consume => {
            counters.hook_consumed += 1;
            ports[i].link.recycle(buf);
            None
        }
        HookVerdict::Answer(n) if n == 0 || n > room || ports[i].txq.len() >= MAX_TXQ => {
            counters.hook_answer_drops += 1;
            ports[i].link.recycle(buf);
            None
        }
        HookVerdict::Answer(n) => {
            buf.set_len(n);
            // The hook wrote whole checksums; the mark of the received
            // frame must not make a NIC rewrite them.
            buf.set_csum_partial(false);
            let port = &mut ports[i];
            if let Some(buf) = port.link.tx_push(buf) {
                port.txq.push(buf);
            }
            // Queued "long ago": due at the end of this turn whatever
            // `pkt_tx_delay` says, as an answer should be.
            port.oldest_queued.get_or_insert(Instant::ZERO);
            counters.hook_answered += 1;
            None
        }
    }
}

fn hand_on<L: Link>(
    d: &mut Dispatcher<L::Buf>,
    ports: &mut [Port<L>],
    i: usize,
    to: usize,
    kind: ForwardKind,
    buf: L::Buf,
) {
    let f = Forward {
        port: i as u16,
        kind,
        buf,
    };
    match d.push(to, f) {
        Ok(()) => d.counters.steer_forwarded += 1,
        Err(f) => {
            d.counters.steer_drop_ring_full += 1;
            ports[i].link.recycle(f.buf);
        }
    }
}

/// Hands a copy of an ARP (`arp`) or neighbour discovery frame to every
/// other engine.
fn copy_neighbor<L: Link>(
    d: &mut Dispatcher<L::Buf>,
    ports: &mut [Port<L>],
    i: usize,
    buf: &L::Buf,
    arp: bool,
) {
    let count = |c: &mut DispatchCounters, copied: bool| {
        *match (arp, copied) {
            (true, true) => &mut c.steer_arp_copies,
            (true, false) => &mut c.steer_arp_copy_drops,
            (false, true) => &mut c.steer_ndp_copies,
            (false, false) => &mut c.steer_ndp_copy_drops,
        } += 1;
    };
    let frame = buf.data();
    for e in 0..d.engines {
        if e == d.engine {
            continue;
        }
        let Some(mut copy) = ports[i].link.alloc_tx_reserved() else {
            count(&mut d.counters, false);
            continue;
        };
        if frame.len() > copy.capacity() {
            ports[i].link.recycle(copy);
            count(&mut d.counters, false);
            continue;
        }
        copy.set_len(frame.len());
        copy.data_mut().copy_from_slice(frame);
        let f = Forward {
            port: i as u16,
            kind: ForwardKind::NeighborCopy,
            buf: copy,
        };
        match d.push(e, f) {
            Ok(()) => count(&mut d.counters, true),
            Err(f) => {
                count(&mut d.counters, false);
                ports[i].link.recycle(f.buf);
            }
        }
    }
}

/// Frames handed to this engine at most per sender per turn.
const INBOUND_BUDGET: usize = 4 * MAX_BURST;

/// The dispatcher's share of a loop turn: frames other engines handed over,
/// buffers coming home, and the exception path in both directions. Returns
/// whether there was work.
pub(super) fn serve<L: Link>(
    d: &mut Dispatcher<L::Buf>,
    stack: &mut Stack,
    ports: &mut [Port<L>],
    counters: &mut EngineCounters,
    now: Instant,
) -> bool {
    let mut work = false;
    if let Some(mut mesh) = d.mesh.take() {
        // Frames from the other engines.
        for (origin, from) in &mut mesh.from {
            for _ in 0..INBOUND_BUDGET {
                let Some(f) = from.pop() else { break };
                work = true;
                d.counters.steer_received += 1;
                let port = usize::from(f.port);
                match f.kind {
                    ForwardKind::Kernel => d.give_kernel(port, f.buf.data(), f.buf.csum_partial()),
                    ForwardKind::Stack | ForwardKind::NeighborCopy if port < ports.len() => {
                        let meta = RxMeta {
                            csum_partial: f.buf.csum_partial(),
                        };
                        let mut sink = TxQueues {
                            ports,
                            now,
                            counters,
                        };
                        if f.kind == ForwardKind::NeighborCopy {
                            let mut muted = NeighborMuted {
                                inner: &mut sink,
                                scratch: &mut d.scratch,
                            };
                            stack.receive(now, IfaceId(f.port), f.buf.data(), meta, &mut muted);
                            if d.engine == 0 && d.kni_filter.is_some() {
                                d.give_kernel(port, f.buf.data(), false);
                            }
                        } else {
                            stack.receive(now, IfaceId(f.port), f.buf.data(), meta, &mut sink);
                        }
                    }
                    ForwardKind::Stack | ForwardKind::NeighborCopy => {}
                }
                let r = Returned {
                    port: f.port,
                    buf: f.buf,
                };
                send_back(
                    &mut mesh.back_to,
                    &mut mesh.pending_back,
                    *origin,
                    r,
                    &mut d.counters,
                );
            }
        }
        // Buffers of ours coming home.
        for back in &mut mesh.back_from {
            while let Some(r) = back.pop() {
                if let Some(p) = ports.get_mut(usize::from(r.port)) {
                    p.link.recycle(r.buf);
                }
            }
        }
        // Returns that waited for room.
        for (origin, r) in std::mem::take(&mut mesh.pending_back) {
            send_back(
                &mut mesh.back_to,
                &mut mesh.pending_back,
                origin,
                r,
                &mut d.counters,
            );
        }
        d.mesh = Some(mesh);
    }
    // The group's side channels (ARP taps, handoffs) carry little and
    // rarely: read at most once per SIDE_READ_EVERY, not every turn (each
    // read is a system call, most of them finding nothing).
    let side = (!d.arp_taps.is_empty() || d.handoff.is_some() || !d.pass_taps.is_empty())
        && now >= d.next_side_read;
    if side {
        d.next_side_read = now + SIDE_READ_EVERY;
    }
    // ARP and neighbour discovery seen by the other processes of the
    // fanout group: learned, muted.
    let taps: &mut [(u16, link::ArpTap)] = if side { &mut d.arp_taps } else { &mut [] };
    for (port, tap) in taps {
        if usize::from(*port) >= ports.len() {
            continue;
        }
        let mut frame = [0u8; TAP_FRAME];
        let (frames, failed) = read_side_tap(tap, &mut frame, |n, frame| {
            d.counters.arp_tap_frames += 1;
            let mut sink = TxQueues {
                ports,
                now,
                counters,
            };
            let mut muted = NeighborMuted {
                inner: &mut sink,
                scratch: &mut d.scratch,
            };
            let meta = RxMeta {
                csum_partial: false,
            };
            stack.receive(now, IfaceId(*port), &frame[..n], meta, &mut muted);
        });
        work |= frames;
        d.counters.arp_tap_errors += u64::from(failed);
    }
    // Frames of queues no process holds: received as the port's own
    // (offered to the others if the flow is not ours), and their neighbour
    // frames shared, as those of our own queue are.
    if side && !d.pass_taps.is_empty() {
        work |= serve_pass_taps(d, stack, ports, counters, now);
    }
    // Frames of our flows that reached another process of the group, and
    // claims of our offers.
    if let Some(h) = d.handoff.as_mut().filter(|_| side) {
        let mut claims = Vec::new();
        let mut declines = Vec::new();
        let wall = std::time::Instant::now();
        for _ in 0..INBOUND_BUDGET {
            let datagram = match h.receive() {
                Ok(Some(datagram)) => datagram,
                Ok(None) => break,
                Err(_) => {
                    d.counters.handoff_errors += 1;
                    break;
                }
            };
            work = true;
            for record in datagram {
                let (port, csum_partial, frame, from) = match record {
                    Ok(link::handoff::Message::Offer {
                        port,
                        csum_partial,
                        frame,
                        from,
                    }) => (port, csum_partial, frame, from),
                    Ok(link::handoff::Message::Neighbor { port, frame }) => {
                        d.counters.handoff_neighbors_received += 1;
                        if usize::from(port) >= ports.len() {
                            d.counters.handoff_errors += 1;
                            continue;
                        }
                        let mut sink = TxQueues {
                            ports,
                            now,
                            counters,
                        };
                        let mut muted = NeighborMuted {
                            inner: &mut sink,
                            scratch: &mut d.scratch,
                        };
                        let meta = RxMeta {
                            csum_partial: false,
                        };
                        stack.receive(now, IfaceId(port), frame, meta, &mut muted);
                        continue;
                    }
                    Ok(link::handoff::Message::Claim { id }) => {
                        if let Some(i) = d.offers.iter().position(|o| o.id == id) {
                            d.offers.remove(i);
                        }
                        continue;
                    }
                    Ok(link::handoff::Message::Decline { id }) => {
                        d.counters.handoff_declined += 1;
                        if let Some(o) = d.offers.iter_mut().find(|o| o.id == id) {
                            o.awaiting = o.awaiting.saturating_sub(1);
                            if o.awaiting == 0 {
                                // Nobody has the flow: ours to answer now.
                                o.deadline = wall;
                            }
                        }
                        continue;
                    }
                    Err(link::handoff::Malformed) => {
                        d.counters.handoff_malformed += 1;
                        continue;
                    }
                };
                d.counters.handoff_received += 1;
                if usize::from(port) >= ports.len() {
                    d.counters.handoff_errors += 1;
                    continue;
                }
                let mut sink = TxQueues {
                    ports,
                    now,
                    counters,
                };
                let meta = RxMeta { csum_partial };
                if stack.receive_handed_over(now, IfaceId(port), frame, meta, &mut sink) {
                    d.counters.handoff_claimed += 1;
                    claims.push(from);
                } else {
                    declines.push(from);
                }
            }
        }
        for from in &claims {
            h.claim(from);
        }
        for from in &declines {
            h.decline(from);
        }
        // Offers nobody claimed: ours to answer.
        // (Those offered to nobody or declined by all are due at once,
        // behind others that wait: the queue is not in deadline order.)
        let mut due = Vec::new();
        if d.offers.iter().any(|o| o.deadline <= wall) {
            for o in std::mem::take(&mut d.offers) {
                if o.deadline <= wall {
                    due.push(o);
                } else {
                    d.offers.push_back(o);
                }
            }
        }
        for o in due {
            work = true;
            d.counters.handoff_expired += 1;
            if o.awaiting > 0 {
                d.counters.handoff_unanswered += 1;
            }
            if usize::from(o.port) >= ports.len() {
                continue;
            }
            let mut sink = TxQueues {
                ports,
                now,
                counters,
            };
            let meta = RxMeta {
                csum_partial: o.csum_partial,
            };
            stack.receive_unclaimed(now, IfaceId(o.port), &o.frame, meta, &mut sink);
        }
    }
    // Offers and claims waiting for room in the other processes' queues.
    if let Some(h) = d.handoff.as_mut().filter(|h| h.has_pending()) {
        let (sent, lost) = h.flush();
        work |= sent > 0;
        d.counters.handoff_lost += lost as u64;
    }
    // The exception path: what waits for the kernel, and what the kernel
    // sends out through the port.
    for (i, k) in d.kni.iter_mut().enumerate() {
        let Some(k) = k else { continue };
        flush_kni(k, &mut d.counters);
        if k.tap.rx_burst(&mut k.rx, MAX_BURST).is_err() {
            counters.link_errors += 1;
        }
        if !k.rx.is_empty() {
            work = true;
        }
        let mut sink = TxQueues {
            ports,
            now,
            counters,
        };
        for b in k.rx.drain(..) {
            let frame = b.data();
            let sent = sink.transmit(IfaceId(i as u16), frame.len(), &mut |out: &mut [u8]| {
                out.copy_from_slice(frame)
            });
            if sent {
                d.counters.kni_from_kernel += 1;
            } else {
                d.counters.kni_tx_drop += 1;
            }
            k.tap.recycle(b);
        }
    }
    work
}

/// Reads the pass taps (see [`Dispatcher::add_pass_tap`]).  Returns
/// whether there was work.
fn serve_pass_taps<L: Link>(
    d: &mut Dispatcher<L::Buf>,
    stack: &mut Stack,
    ports: &mut [Port<L>],
    counters: &mut EngineCounters,
    now: Instant,
) -> bool {
    let mut work = false;
    let mut buf = std::mem::take(&mut d.pass_buf);
    // Out of `d` while read: a frame's handling may offer it (`d.offer`).
    let mut taps = std::mem::take(&mut d.pass_taps);
    for (port, tap) in &mut taps {
        let port = *port;
        if usize::from(port) >= ports.len() {
            continue;
        }
        let (frames, failed) = read_side_tap(tap, &mut buf, |got, buf| {
            if got.truncated {
                d.counters.pass_tap_truncated += 1;
                return;
            }
            d.counters.pass_tap_frames += 1;
            let frame = &buf[..got.len];
            if d.share_neighbors && classify(frame).is_neighbor_discovery() {
                if let Some(h) = d.handoff.as_mut() {
                    h.share_neighbor(port, frame);
                    d.counters.handoff_neighbors_shared += 1;
                }
            }
            let meta = RxMeta {
                csum_partial: got.csum_partial,
            };
            let mut sink = TxQueues {
                ports,
                now,
                counters,
            };
            stack.receive(now, IfaceId(port), frame, meta, &mut sink);
            if stack.take_handoff() {
                d.offer(usize::from(port), got.csum_partial, frame);
            }
        });
        work |= frames;
        d.counters.pass_tap_errors += u64::from(failed);
    }
    d.pass_taps = taps;
    d.pass_buf = buf;
    work
}

/// A side channel of the group read a frame at a time into a buffer.
trait SideTap {
    /// What a read says of the frame (its length, or more).
    type Got;
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<Self::Got>>;
}

impl SideTap for link::ArpTap {
    type Got = usize;
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        link::ArpTap::recv(self, buf)
    }
}

impl SideTap for link::PassTap {
    type Got = link::pass_tap::Passed;
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<Self::Got>> {
        link::PassTap::recv(self, buf)
    }
}

/// Reads up to `INBOUND_BUDGET` frames from `tap` into `buf`, handing
/// each to `each` with the buffer, until it has none; a failed read ends
/// the tap's turn.  Returns (whether a frame came, whether a read failed).
fn read_side_tap<T: SideTap>(
    tap: &mut T,
    buf: &mut [u8],
    mut each: impl FnMut(T::Got, &[u8]),
) -> (bool, bool) {
    let mut frames = false;
    for _ in 0..INBOUND_BUDGET {
        match tap.recv(buf) {
            Ok(Some(got)) => {
                frames = true;
                each(got, buf);
            }
            Ok(None) => break,
            Err(_) => return (frames, true),
        }
    }
    (frames, false)
}

/// How often the group's side channels are read.
const SIDE_READ_EVERY: stack::Duration = stack::Duration::from_millis(1);

/// Room for one frame from an ARP tap: an ARP frame is 42 bytes, but a
/// router advertisement with its options or a redirect quoting a packet
/// can fill an Ethernet frame (and a VLAN tag).
const TAP_FRAME: usize = 1518;

type Pending<B> = Vec<(usize, Returned<B>)>;

fn send_back<B>(
    back_to: &mut [Option<Producer<Returned<B>>>],
    pending: &mut Pending<B>,
    origin: usize,
    r: Returned<B>,
    c: &mut DispatchCounters,
) {
    let Some(Some(p)) = back_to.get_mut(origin) else {
        return;
    };
    // Keep the order: once one waits, the rest wait behind it.
    if pending.iter().any(|(o, _)| *o == origin) {
        pending.push((origin, r));
        return;
    }
    if let Err(r) = p.push(r) {
        c.steer_return_waits += 1;
        pending.push((origin, r));
    }
}
