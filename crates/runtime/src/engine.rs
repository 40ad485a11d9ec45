//! The per-core engine loop: `rx burst -> stack -> application -> timers ->
//! tx burst`, with idle sleep and deferred transmit (`pkt_tx_delay`).

use stack::ipv6::addr::AddrState;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use link::{Link, LinkStats, PacketBuffer, TxPlaced, MAX_BURST};
use stack::{FrameSink, IfaceId, Instant, RxMeta, Stack, TxMeta};

use crate::clock::Clock;
use crate::control::capture::LiveCapture;
use crate::control::EngineControl;

mod dispatch;
mod lend;
mod soft_gso;

pub use dispatch::{
    mesh, open_kni, DispatchCounters, Dispatcher, FrameHook, HookVerdict, KniPort, MeshEnd,
};
use soft_gso::SoftGso;
pub use soft_gso::SOFT_GSO_MAX;

/// Timing of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// How long to wait for frames when a turn found no work (`[dpdk]
    /// idle_sleep`); zero busy-polls.
    pub idle_sleep: Duration,
    /// How long a partial burst may wait before it is sent (`[dpdk]
    /// pkt_tx_delay`); zero sends at the end of every turn.
    pub pkt_tx_delay: Duration,
    /// How often the stack's timers run.
    pub timer_tick: Duration,
    /// The ports (bit N: port N, the first 64) that cut TCP super-frames
    /// in software (`[portN] gso`) where their link has no segmentation
    /// offload of its own ([`Link::tso_max`] 0).
    pub soft_gso_ports: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            idle_sleep: Duration::from_micros(0),
            pkt_tx_delay: Duration::from_micros(100),
            timer_tick: Duration::from_millis(1),
            soft_gso_ports: 0,
        }
    }
}

/// Ring storage the stack frees before the engine hands the heap's empty
/// pages back to the system.
const HEAP_TRIM_BYTES: u64 = 1 << 20;
/// The least time between two such hand-backs (a trim walks the heap's
/// free lists: tens of milliseconds for gigabytes).
const HEAP_TRIM_INTERVAL: Duration = Duration::from_secs(1);

/// Counters of the loop itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineCounters {
    pub loops: u64,
    pub idle_sleeps: u64,
    pub tx_bursts: u64,
    /// Frames dropped because the link's transmit ring stayed full.
    pub tx_drop_ring_full: u64,
    /// Frames the stack emitted larger than a link buffer.
    pub tx_drop_oversize: u64,
    /// Frames received on a port taken down (`ustack ifconfig PORT down`).
    pub rx_drop_port_down: u64,
    /// Frames the stack sent to a port taken down.
    pub tx_drop_port_down: u64,
    /// Control frames (ARP, ICMP) sent from the link's reserve: the pool
    /// had nothing else left.
    pub tx_control_from_reserve: u64,
    pub link_errors: u64,
    /// Times a port's addresses could not be written into its XDP
    /// program's maps (`Engine::sync_served_addresses`).
    pub served_addresses_failed: u64,
    /// Frames a port received before it joined its fanout group, while it
    /// was a bystander getting a copy of every frame: the group's members
    /// had them, so they are dropped (`procgroup::share_ports_engine`).
    pub rx_drop_before_group_join: u64,
    /// Microseconds from the start of a turn that found no work to the
    /// start of the next (the idle sleep included): `ustack top`'s busy
    /// share is the rest of the wall time.
    pub idle_us: u64,
    /// TCP super-frames cut in software (`[portN] gso`), and the
    /// segments they made that were placed on a link.
    pub gso_super_frames: u64,
    pub gso_segments_sent: u64,
    /// Super-frames the cut could not read (none from the stack's own
    /// writing): dropped.
    pub gso_refused: u64,
}

/// What an application sees on each turn of the loop.
pub struct AppContext<'a> {
    pub now: Instant,
    pub stack: &'a mut Stack,
    pub sink: &'a mut dyn FrameSink,
}

/// An application that runs on the engine's thread (run to completion).
pub trait Application {
    /// Does what is ready; returns whether it did anything.
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool;

    /// The application has nothing left to do: [`Engine::run`] returns
    /// (after sending what is queued).  Servers never finish; a client
    /// finishes when its work is done.
    fn finished(&self) -> bool {
        false
    }
}

/// A port: a link and the frames waiting to go out of it.
pub struct Port<L: Link> {
    pub link: L,
    txq: Vec<L::Buf>,
    oldest_queued: Option<Instant>,
    /// A live capture of the port (`ustack pcap`); while there is one,
    /// every frame sent goes through `txq`, where it is seen once written.
    tap: Option<Box<LiveCapture>>,
    /// Frames at the front of `txq` the capture has seen (left there by
    /// a full ring, sent with the next burst).
    tx_captured: usize,
    /// Taken down: its frames are dropped and counted both ways.
    down: bool,
    /// Captured, down, or holding a super-frame to cut: its frames take
    /// the slow paths, which see to it.
    diverted: bool,
    /// Software GSO, on a port whose link has no TSO (`[portN] gso`).
    gso: Option<Box<SoftGso>>,
}

impl<L: Link> Port<L> {
    fn refresh_diverted(&mut self) {
        self.diverted = self.down || self.tap.is_some() || self.gso_pending();
    }

    /// Whether a super-frame waits to be cut.
    fn gso_pending(&self) -> bool {
        self.gso.as_ref().is_some_and(|g| g.pending())
    }

    /// A frame received on a diverted port: shown to the capture;
    /// whether it goes on to the stack (not when the port is down).
    #[cold]
    #[inline(never)]
    fn divert_rx(&mut self, frame: &[u8], counters: &mut EngineCounters) -> bool {
        if self.down {
            counters.rx_drop_port_down += 1;
            return false;
        }
        if let Some(tap) = self.tap.as_deref_mut() {
            tap.record(frame, false);
        }
        true
    }
}

/// Transmit queues seen by the stack as a [`FrameSink`].
struct TxQueues<'a, L: Link> {
    ports: &'a mut [Port<L>],
    now: Instant,
    counters: &'a mut EngineCounters,
}

/// Frames a port may queue beyond a burst before the oldest are dropped
/// (a link whose ring stays full must not grow the queue without bound).
const MAX_TXQ: usize = 8 * MAX_BURST;

impl<L: Link> Port<L> {
    /// Whether frames wait to be sent: in our queue, or in the link's own.
    fn has_queued(&self) -> bool {
        !self.txq.is_empty() || self.link.tx_pending() != 0 || (self.diverted && self.gso_pending())
    }
}

#[inline(always)]
fn flush<L: Link>(port: &mut Port<L>, counters: &mut EngineCounters) {
    if port.diverted {
        cut_super_frame(port, counters);
    }
    let pending = port.link.tx_pending() != 0;
    if !pending && port.txq.is_empty() {
        return;
    }
    counters.tx_bursts += 1;
    if pending && port.link.tx_flush().is_err() {
        counters.link_errors += 1;
    }
    if !port.txq.is_empty() {
        flush_txq(port, counters);
    }
    if !port.has_queued() {
        port.oldest_queued = None;
    }
}

/// [`flush`] of the frames in the port's own queue (a link that keeps no
/// queue, or answers of the frame hook).
#[inline(never)]
fn flush_txq<L: Link>(port: &mut Port<L>, counters: &mut EngineCounters) {
    if let Some(tap) = port.tap.as_deref_mut() {
        for b in port.txq.iter().skip(port.tx_captured) {
            tap.record(b.data(), true);
        }
    }
    if port.link.tx_burst(&mut port.txq).is_err() {
        counters.link_errors += 1;
    }
    if port.txq.len() > MAX_TXQ {
        let excess = port.txq.len() - MAX_TXQ;
        for buf in port.txq.drain(..excess) {
            port.link.recycle(buf);
        }
        counters.tx_drop_ring_full += excess as u64;
    }
    port.tx_captured = port.txq.len();
}

impl<L: Link> FrameSink for TxQueues<'_, L> {
    fn transmit(&mut self, iface: IfaceId, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        self.transmit_with(iface, len, TxMeta::default(), fill)
    }

    fn transmit_with(
        &mut self,
        iface: IfaceId,
        len: usize,
        meta: TxMeta,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> bool {
        match self.frame(iface, len, meta) {
            Some(buf) => {
                fill(buf);
                true
            }
            None => false,
        }
    }

    fn frame(&mut self, iface: IfaceId, len: usize, meta: TxMeta) -> Option<&mut [u8]> {
        let port = self.ports.get_mut(usize::from(iface.0))?;
        if meta.reserve {
            return place_control_frame(port, len, meta, self.now, self.counters);
        }
        // The usual frame joins a burst with room, in place: asked about
        // first, it takes no step out of line.
        if port.txq.len() + port.link.tx_pending() < MAX_BURST
            && port.link.tx_fits_in_place(len)
            && !port.diverted
            && meta.gso_size == 0
        {
            return place_frame(port, len, meta, self.now, self.counters);
        }
        place_frame_slow(port, len, meta, self.now, self.counters)
    }

    fn lends_frames(&self) -> bool {
        true
    }
}

/// Whether `cfg` asks for software GSO on port `port`.
fn soft_gso_on(cfg: &EngineConfig, port: usize) -> bool {
    port < 64 && cfg.soft_gso_ports & (1 << port) != 0
}

/// Lends `len` bytes for a frame on `port`, whose burst has room.
#[inline(always)]
fn place_frame<'a, L: Link>(
    port: &'a mut Port<L>,
    len: usize,
    meta: TxMeta,
    now: Instant,
    counters: &mut EngineCounters,
) -> Option<&'a mut [u8]> {
    let Port {
        link,
        txq,
        oldest_queued,
        ..
    } = port;
    match link.tx_place_sized(len, meta.csum_partial, meta.gso_size) {
        TxPlaced::InPlace(buf) => {
            oldest_queued.get_or_insert(now);
            Some(buf)
        }
        placed => queue_placed(placed, txq, oldest_queued, (len, meta), now, counters),
    }
}

/// [`place_frame`] of any other frame (a full burst, or a link that does
/// not lend in place: not cold, as that is every frame of such a link): a
/// full burst leaves before it is queued, not after (the lent frame must
/// stay unsent until it is written).
#[inline(never)]
fn place_frame_slow<'a, L: Link>(
    port: &'a mut Port<L>,
    len: usize,
    meta: TxMeta,
    now: Instant,
    counters: &mut EngineCounters,
) -> Option<&'a mut [u8]> {
    if port.down {
        counters.tx_drop_port_down += 1;
        return None;
    }
    if port.diverted {
        // The super-frame before this frame leaves before it.
        cut_super_frame(port, counters);
    }
    if meta.gso_size != 0 && port.gso.is_some() {
        return lend_super_frame(port, len, meta, now, counters);
    }
    if port.txq.len() + port.link.tx_pending() >= MAX_BURST {
        flush(port, counters);
    }
    if port.tap.is_some() {
        return place_frame_captured(port, len, meta, now, counters);
    }
    place_frame(port, len, meta, now, counters)
}

/// Lends the port's software GSO buffer for a super-frame, cut when the
/// port's next frame is placed or its queue flushed.
#[inline(never)]
fn lend_super_frame<'a, L: Link>(
    port: &'a mut Port<L>,
    len: usize,
    meta: TxMeta,
    now: Instant,
    counters: &mut EngineCounters,
) -> Option<&'a mut [u8]> {
    let gso = port.gso.as_deref_mut()?;
    let Some(buf) = gso.lend(len, meta.gso_size, now) else {
        counters.tx_drop_oversize += 1;
        return None;
    };
    port.diverted = true;
    port.oldest_queued.get_or_insert(now);
    Some(buf)
}

/// Cuts the super-frame the port's software GSO holds, if any, into
/// frames placed on its link as any other frame is (in the link's ring
/// or on the port's queue, seen by a capture, through the fault
/// injector). A segment that finds no buffer is lost as a frame would be
/// (counted where the frame's placing counts it); TCP recovers it.
#[cold]
#[inline(never)]
fn cut_super_frame<L: Link>(port: &mut Port<L>, counters: &mut EngineCounters) {
    let Some(since) = port.gso.as_ref().and_then(|g| g.pending_since()) else {
        return;
    };
    // Out of the port while cut: the frames placed meanwhile (a burst's
    // flush too) see no super-frame pending.
    let Some(mut gso) = port.gso.take() else {
        return;
    };
    match gso.take() {
        Some(Ok(cut)) => {
            counters.gso_super_frames += 1;
            let meta = TxMeta {
                csum_partial: cut.csum_partial(),
                ..TxMeta::default()
            };
            for i in 0..cut.segments() {
                let len = cut.segment_len(i);
                let Some(dst) = place_frame_slow(port, len, meta, since, counters) else {
                    continue;
                };
                cut.write(i, dst);
                counters.gso_segments_sent += 1;
            }
        }
        Some(Err(_)) => counters.gso_refused += 1,
        None => {}
    }
    port.gso = Some(gso);
    port.refresh_diverted();
}

/// [`place_frame`] on a port being captured: the frame goes in a buffer
/// of its own on `txq` (never in the link's ring), where [`flush_txq`]
/// shows it to the capture before it leaves.
#[cold]
#[inline(never)]
fn place_frame_captured<'a, L: Link>(
    port: &'a mut Port<L>,
    len: usize,
    meta: TxMeta,
    now: Instant,
    counters: &mut EngineCounters,
) -> Option<&'a mut [u8]> {
    let Port {
        link,
        txq,
        oldest_queued,
        ..
    } = port;
    let Some(mut buf) = link.alloc_tx() else {
        return queue_placed(
            TxPlaced::NoBuffer,
            txq,
            oldest_queued,
            (len, meta),
            now,
            counters,
        );
    };
    if len > buf.capacity() {
        link.recycle(buf);
        return queue_placed(
            TxPlaced::Oversize,
            txq,
            oldest_queued,
            (len, meta),
            now,
            counters,
        );
    }
    buf.set_len(len);
    buf.set_csum_partial(meta.csum_partial);
    queue_placed(
        TxPlaced::Frame(buf),
        txq,
        oldest_queued,
        (len, meta),
        now,
        counters,
    )
}

/// A control frame (ARP, ICMP: [`TxMeta::reserve`]): a buffer of its own,
/// from the link's reserve when the pool has nothing else left, so the
/// host still answers when data has drained the pool.  Out of line: such
/// frames are few.
#[inline(never)]
fn place_control_frame<'a, L: Link>(
    port: &'a mut Port<L>,
    len: usize,
    meta: TxMeta,
    now: Instant,
    counters: &mut EngineCounters,
) -> Option<&'a mut [u8]> {
    if port.down {
        counters.tx_drop_port_down += 1;
        return None;
    }
    if port.txq.len() + port.link.tx_pending() >= MAX_BURST {
        flush(port, counters);
    }
    let placed = match port.link.alloc_tx() {
        Some(buf) => Some(buf),
        None => {
            let buf = port.link.alloc_tx_reserved();
            counters.tx_control_from_reserve += u64::from(buf.is_some());
            buf
        }
    };
    let placed = match placed {
        None => TxPlaced::NoBuffer,
        Some(buf) if len > buf.capacity() => {
            port.link.recycle(buf);
            TxPlaced::Oversize
        }
        Some(mut buf) => {
            buf.set_len(len);
            buf.set_csum_partial(meta.csum_partial);
            TxPlaced::Frame(buf)
        }
    };
    let Port {
        txq, oldest_queued, ..
    } = port;
    queue_placed(placed, txq, oldest_queued, (len, meta), now, counters)
}

/// The frames `frame` lends other than one written in the link's ring
/// (a link that hands buffers out, or none free): out of line, so that
/// one written in place needs no registers saved.
#[inline(never)]
fn queue_placed<'a, B: PacketBuffer>(
    placed: TxPlaced<'a, B>,
    txq: &'a mut Vec<B>,
    oldest_queued: &mut Option<Instant>,
    (len, meta): (usize, TxMeta),
    now: Instant,
    counters: &mut EngineCounters,
) -> Option<&'a mut [u8]> {
    let buf = match placed {
        TxPlaced::InPlace(buf) => buf,
        // A link lends a buffer of the frame's length; one that lends a
        // shorter one is refused here rather than indexed past.
        TxPlaced::Frame(buf) if buf.data().len() < len => {
            counters.tx_drop_oversize += 1;
            return None;
        }
        TxPlaced::Frame(mut buf) => {
            // A super-frame's segment size (only on links with `tso_max`).
            buf.set_gso_size(meta.gso_size);
            txq.push(buf);
            match txq.last_mut() {
                Some(buf) => &mut buf.data_mut()[..len],
                None => return None,
            }
        }
        TxPlaced::NoBuffer => return None,
        TxPlaced::Oversize => {
            counters.tx_drop_oversize += 1;
            return None;
        }
    };
    oldest_queued.get_or_insert(now);
    Some(buf)
}

/// Services port `i`, whose link hands received frames out one at a time,
/// and gives each frame that waits straight to the stack and back to the
/// link: the usual port, with no dispatcher and no lending.  Returns
/// whether any frame came.
#[inline(always)]
fn receive_plain<L: Link>(
    ports: &mut [Port<L>],
    stack: &mut Stack,
    counters: &mut EngineCounters,
    i: usize,
    now: Instant,
) -> bool {
    let link = &mut ports[i].link;
    if link.service().is_err() {
        counters.link_errors += 1;
    }
    match link.rx_ready(MAX_BURST) {
        Ok(0) => return false,
        Ok(_) => {}
        Err(_) => {
            counters.link_errors += 1;
            return false;
        }
    }
    let mut work = false;
    while let Some(buf) = ports[i].link.rx_next() {
        work = true;
        if ports[i].diverted && !ports[i].divert_rx(buf.data(), counters) {
            ports[i].link.recycle(buf);
            continue;
        }
        let meta = RxMeta {
            csum_partial: buf.csum_partial(),
        };
        let mut sink = TxQueues {
            ports,
            now,
            counters,
        };
        stack.receive(now, IfaceId(i as u16), buf.data(), meta, &mut sink);
        ports[i].link.recycle(buf);
    }
    work
}

/// One engine: a stack, its ports, and the loop that drives them.
pub struct Engine<L: Link> {
    pub stack: Stack,
    ports: Vec<Port<L>>,
    cfg: EngineConfig,
    clock: Clock,
    counters: EngineCounters,
    rx: Vec<L::Buf>,
    next_timer: Instant,
    /// Steering between engines and the exception path, when set.
    dispatch: Option<Dispatcher<L::Buf>>,
    /// Received buffers lent to the stack.
    lent: lend::Lender<L::Buf>,
    /// Turns take [`Engine::turn_one_port`] (see
    /// [`Engine::refresh_turn_kind`]).
    one_port: bool,
    /// IPv6 addresses found duplicate so far, said on stderr.
    duplicates_told: u64,
    /// The stack's freed ring storage when the heap was last trimmed, and
    /// when it may be trimmed again (see [`Engine::return_freed_heap`]).
    heap_trimmed_at: (u64, Instant),
    /// The control socket, when the engine has one.
    control: Option<Box<EngineControl<L>>>,
    /// When the control socket is next looked at.
    next_control: Instant,
    /// When the last turn began, and whether it found work.
    last_turn: Instant,
    last_turn_worked: bool,
}

/// How often a running engine looks at its control socket: often enough
/// that a busy engine answers within milliseconds, seldom enough that the
/// few system calls cost nothing measurable.
const CONTROL_INTERVAL: Duration = Duration::from_millis(1);

impl<L: Link> Engine<L> {
    /// An engine over `links`; link `i` is the stack's interface `i`.
    pub fn new(mut stack: Stack, links: Vec<L>, cfg: EngineConfig) -> Self {
        // A turn receives a burst per port: the ACKs of its in-order data
        // go at the end of the receive phase, one per connection
        // (`Stack::set_ack_per_burst`).
        stack.set_ack_per_burst(true);
        for (i, link) in links.iter().enumerate() {
            if link.tx_checksum_offload() {
                stack.set_tx_checksum_offload(IfaceId(i as u16), true);
            }
            if link.tso_max() > 0 {
                stack.set_tso(IfaceId(i as u16), link.tso_max());
            } else if soft_gso_on(&cfg, i) {
                stack.set_tso(IfaceId(i as u16), SOFT_GSO_MAX);
            }
            if link.rx_ip_checksum_offload() {
                stack.set_rx_ip_checksum_offload(IfaceId(i as u16), true);
            }
        }
        let ports = links
            .into_iter()
            .enumerate()
            .map(|(i, link)| Port {
                gso: (link.tso_max() == 0 && soft_gso_on(&cfg, i))
                    .then(|| Box::new(SoftGso::new(link.tx_checksum_offload()))),
                link,
                txq: Vec::with_capacity(MAX_TXQ + MAX_BURST),
                oldest_queued: None,
                tap: None,
                tx_captured: 0,
                down: false,
                diverted: false,
            })
            .collect();
        let mut engine = Engine {
            stack,
            ports,
            cfg,
            clock: Clock::new(),
            counters: EngineCounters::default(),
            rx: Vec::with_capacity(MAX_BURST),
            next_timer: Instant::ZERO,
            dispatch: None,
            lent: lend::Lender::default(),
            one_port: false,
            duplicates_told: 0,
            heap_trimmed_at: (0, Instant::ZERO),
            control: None,
            next_control: Instant::ZERO,
            last_turn: Instant::ZERO,
            last_turn_worked: true,
        };
        engine.start_lending();
        engine.refresh_turn_kind();
        engine.sync_served_addresses();
        engine
    }

    /// Sets which of each port's own traffic its link's receive filter
    /// sends to the kernel (`[kni]` on AF_XDP under `xdp_program=libxdp`):
    /// at `ustack kni -a`, so the program follows the exception path's
    /// action as the software filter does.
    pub fn serve_kernel_ports(&mut self, mode: link::KernelPorts, tcp: &[u16], udp: &[u16]) {
        for (i, port) in self.ports.iter().enumerate() {
            if let Err(e) = port.link.serve_kernel_ports(mode, tcp, udp) {
                self.counters.served_addresses_failed += 1;
                eprintln!("ustack: port {i}: writing [kni]'s ports into the XDP program: {e}");
            }
        }
    }

    /// Writes each port's addresses (its interface's IPv4 addresses and
    /// subnet broadcast, its IPv6 addresses, link-local and tentative ones
    /// included) into the port link's receive filter, where it has one
    /// (AF_XDP under `xdp_program=libxdp`): frames for them come to ustack,
    /// frames for other addresses go to the kernel. At start and after
    /// every address change (`ustack ifconfig ... alias`/`-alias`); VLAN
    /// interfaces need nothing (tagged frames all come to ustack).
    pub fn sync_served_addresses(&mut self) {
        for (i, port) in self.ports.iter().enumerate() {
            let Some(iface) = self.stack.interface(IfaceId(i as u16)) else {
                continue;
            };
            let mut v4 = iface.addrs().to_vec();
            if !v4.is_empty() && iface.prefix_len < 31 {
                v4.push(iface.broadcast);
            }
            let v6: Vec<std::net::Ipv6Addr> = iface
                .ipv6
                .as_ref()
                .map(|x| x.addrs.iter().map(|a| a.addr).collect())
                .unwrap_or_default();
            if let Err(e) = port.link.serve_addresses(&v4, &v6) {
                self.counters.served_addresses_failed += 1;
                eprintln!(
                    "ustack: {}: writing its addresses into the XDP program: {e}; frames for \
                     addresses left out go to the kernel",
                    iface.name
                );
            }
        }
    }

    /// Puts the dispatcher hook in front of the stack: every received frame
    /// passes it first (software steering between engines, ARP for every
    /// engine, the exception path).
    pub fn set_dispatcher(&mut self, d: Dispatcher<L::Buf>) {
        self.dispatch = Some(d);
        self.refresh_turn_kind();
    }

    /// Decides, after a change to what the engine has (a dispatcher,
    /// lending), whether its turns can be [`Engine::turn_one_port`]'s.
    fn refresh_turn_kind(&mut self) {
        self.one_port = L::RX_ONE_AT_A_TIME
            && self.ports.len() == 1
            && self.dispatch.is_none()
            && !self.lent.any()
            && self.cfg.pkt_tx_delay.is_zero();
    }

    /// Reads port `port`'s ARP frames and IPv6 neighbour discovery from
    /// `tap` as well, learning from
    /// them without answering (see `Dispatcher::add_arp_tap`); gives the
    /// engine a dispatcher if it has none.
    pub fn add_arp_tap(&mut self, port: u16, tap: link::ArpTap) {
        let d = self
            .dispatch
            .get_or_insert_with(|| Dispatcher::new(0, 1, None, None, Vec::new()));
        d.add_arp_tap(port, tap);
        self.refresh_turn_kind();
    }

    /// Reads port `port`'s frames that no AF_XDP socket of the group took
    /// from `tap` (see `Dispatcher::add_pass_tap`); gives the engine a
    /// dispatcher if it has none.
    pub fn add_pass_tap(&mut self, port: u16, tap: link::PassTap) {
        let d = self
            .dispatch
            .get_or_insert_with(|| Dispatcher::new(0, 1, None, None, Vec::new()));
        d.add_pass_tap(port, tap);
        self.refresh_turn_kind();
    }

    /// Shares flows with the other processes of a fanout group over `h`
    /// (see `Stack::set_flow_handoff`); gives the engine a dispatcher if
    /// it has none.
    pub fn set_flow_handoff(&mut self, h: link::FlowHandoff) {
        let d = self
            .dispatch
            .get_or_insert_with(|| Dispatcher::new(0, 1, None, None, Vec::new()));
        d.set_handoff(h);
        self.stack.set_flow_handoff(true);
        self.refresh_turn_kind();
    }

    /// Copies the ARP and neighbour discovery frames this engine receives
    /// to the group's other processes over its handoff channel (see
    /// [`Engine::set_flow_handoff`]): for links that give each process
    /// only its own queue's frames (AF_XDP).
    pub fn set_share_neighbors(&mut self, on: bool) {
        if let Some(d) = self.dispatch.as_mut() {
            d.set_share_neighbors(on);
        }
    }

    /// This engine is process `member` of `members` that each receive
    /// every frame of the ports (each its own DPDK af_packet vdev, whose
    /// fanout group is its own): it keeps the frames whose flow hash is
    /// its own (the outgoing connections' source ports are chosen for
    /// that, see `FlowSteering`), ARP and neighbour discovery, and leaves
    /// the rest to the others.
    pub fn share_by_copy(&mut self, member: usize, members: usize) {
        let mut d = Dispatcher::new(member, members, None, None, Vec::new());
        d.set_every_member_receives(true);
        self.dispatch = Some(d);
        self.refresh_turn_kind();
    }

    /// Serves `control` from this engine's loop (see [`crate::control`]).
    pub fn set_control(&mut self, control: EngineControl<L>) {
        self.control = Some(Box::new(control));
    }

    /// Port `port`'s live capture, when it has one.
    pub fn capture_mut(&mut self, port: usize) -> Option<&mut LiveCapture> {
        self.ports.get_mut(port)?.tap.as_deref_mut()
    }

    /// Starts capturing port `port` into `capture`; gives it back when the
    /// port has no such port or is being captured already.
    pub fn start_capture(&mut self, port: usize, capture: LiveCapture) -> Result<(), LiveCapture> {
        match self.ports.get_mut(port) {
            Some(p) if p.tap.is_none() => {
                // Frames queued before now are not the capture's.
                p.tx_captured = p.txq.len();
                p.tap = Some(Box::new(capture));
                p.refresh_diverted();
                Ok(())
            }
            _ => Err(capture),
        }
    }

    /// Ends port `port`'s capture, returning it.
    pub fn stop_capture(&mut self, port: usize) -> Option<LiveCapture> {
        let p = self.ports.get_mut(port)?;
        let tap = p.tap.take();
        p.refresh_diverted();
        tap.map(|b| *b)
    }

    /// Takes port `port` up or down (`ustack ifconfig PORT up|down`):
    /// while down, what it receives and what the stack sends to it are
    /// dropped and counted (connections through it retransmit until it is
    /// up again).  Returns whether the port exists.
    pub fn set_port_up(&mut self, port: usize, up: bool) -> bool {
        let Some(p) = self.ports.get_mut(port) else {
            return false;
        };
        p.down = !up;
        p.refresh_diverted();
        true
    }

    /// Whether port `port` is up.
    pub fn port_up(&self, port: usize) -> bool {
        self.ports.get(port).is_some_and(|p| !p.down)
    }

    /// Ends the captures nobody reads any more.
    pub(crate) fn end_abandoned_captures(&mut self, now: std::time::Instant) {
        for p in &mut self.ports {
            if p.tap.as_ref().is_some_and(|t| t.abandoned(now)) {
                p.tap = None;
                p.refresh_diverted();
            }
        }
    }

    /// The control socket, when the engine has one.
    pub fn control(&self) -> Option<&EngineControl<L>> {
        self.control.as_deref()
    }

    /// Looks at the control socket: bounded work (see
    /// `control::server`).  Returns whether anything happened.
    #[cold]
    #[inline(never)]
    fn serve_control(&mut self, now: Instant) -> bool {
        self.next_control = now + CONTROL_INTERVAL;
        let Some(mut control) = self.control.take() else {
            return false;
        };
        let work = control.serve(self);
        self.control = Some(control);
        work
    }

    /// The dispatcher's counters, when there is one.
    pub fn dispatch_counters(&self) -> Option<&DispatchCounters> {
        self.dispatch.as_ref().map(|d| d.counters())
    }

    /// The dispatcher (steering and the exception path), when there is one.
    pub fn dispatcher(&self) -> Option<&Dispatcher<L::Buf>> {
        self.dispatch.as_ref()
    }

    pub fn dispatcher_mut(&mut self) -> Option<&mut Dispatcher<L::Buf>> {
        self.dispatch.as_mut()
    }

    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }

    pub fn ports(&self) -> impl Iterator<Item = &L> {
        self.ports.iter().map(|p| &p.link)
    }

    /// Drops every frame the ports have received and not yet given to the
    /// stack (see [`EngineCounters::rx_drop_before_group_join`]).
    pub fn drop_received_before_group_join(&mut self) {
        let mut bufs = Vec::new();
        for p in &mut self.ports {
            loop {
                match p.link.rx_burst(&mut bufs, link::MAX_BURST) {
                    Ok(n) if n > 0 => {}
                    Ok(_) => break,
                    Err(_) => {
                        self.counters.link_errors += 1;
                        break;
                    }
                }
                for b in bufs.drain(..) {
                    self.counters.rx_drop_before_group_join += 1;
                    p.link.recycle(b);
                }
            }
        }
    }

    pub fn link_stats(&self) -> Vec<LinkStats> {
        self.ports.iter().map(|p| p.link.stats()).collect()
    }

    /// Runs `f` with the stack and the transmit queues between turns: for
    /// code that owns the engine and makes socket calls outside
    /// [`Application::poll`] (the socket layer of `crates/api`).  What `f`
    /// sends leaves with the flush of a following turn.
    pub fn with_context<R>(&mut self, f: impl FnOnce(&mut AppContext<'_>) -> R) -> R {
        let now = self.clock.now();
        let mut sink = TxQueues {
            ports: &mut self.ports,
            now,
            counters: &mut self.counters,
        };
        let r = f(&mut AppContext {
            now,
            stack: &mut self.stack,
            sink: &mut sink,
        });
        if self.lent.any() && self.stack.has_released_frames() {
            self.return_lent();
        }
        r
    }

    /// [`with_context`](Self::with_context) for a call that needs neither
    /// the clock nor the transmit queues (a read that sends nothing): no
    /// clock read.
    pub fn with_stack<R>(&mut self, f: impl FnOnce(&mut Stack) -> R) -> R {
        let r = f(&mut self.stack);
        if self.lent.any() && self.stack.has_released_frames() {
            self.return_lent();
        }
        r
    }

    /// After a turn that found no work, waits as [`run`](Self::run) does
    /// (for a frame, a timer or `idle_sleep`); returns at once when
    /// `idle_sleep` is zero or frames wait to be sent.
    pub fn idle_wait(&mut self) -> io::Result<()> {
        if self.cfg.idle_sleep.is_zero() || self.ports.iter().any(Port::has_queued) {
            return Ok(());
        }
        self.idle(std::time::Instant::now(), None)
    }

    /// Sends the gratuitous ARPs of every address.
    pub fn announce(&mut self) {
        let now = self.clock.now();
        let mut sink = TxQueues {
            ports: &mut self.ports,
            now,
            counters: &mut self.counters,
        };
        self.stack.announce(&mut sink);
        for port in &mut self.ports {
            flush(port, &mut self.counters);
        }
    }

    /// One turn of the loop.  Returns whether anything happened.
    pub fn turn<A: Application + ?Sized>(&mut self, app: &mut A) -> bool {
        let now = self.clock.now();
        self.turn_at(now, app)
    }

    /// One turn of the loop at a reading of
    /// [`monotonic_micros`](crate::clock::monotonic_micros) the caller took
    /// just before (a busy wait loop that reads the clock once a round for
    /// its own deadline): the turn [`turn`](Self::turn) would make then,
    /// without a second read.  Never before the last turn.
    pub fn turn_at_monotonic<A: Application + ?Sized>(
        &mut self,
        monotonic_us: u64,
        app: &mut A,
    ) -> bool {
        let now = self.clock.at(monotonic_us).max(self.last_turn);
        self.turn_at(now, app)
    }

    /// One turn of the loop at `now` instead of the engine's clock, for a
    /// caller that keeps its own time (a simulation, or a profile run under
    /// a tool that slows the program down and would otherwise fire every
    /// timer many times more often per packet).  `now` must not go back.
    pub fn turn_at<A: Application + ?Sized>(&mut self, now: Instant, app: &mut A) -> bool {
        self.note_turn(now);
        if self.one_port {
            return self.turn_one_port(now, app);
        }
        self.counters.loops += 1;
        if self.lent.any() && self.stack.has_released_frames() {
            self.return_lent();
        }
        let mut work = false;
        for i in 0..self.ports.len() {
            work |= if L::RX_ONE_AT_A_TIME && self.dispatch.is_none() && !self.lent.on(i) {
                receive_plain(&mut self.ports, &mut self.stack, &mut self.counters, i, now)
            } else {
                self.receive_port(i, now)
            };
        }
        if let Some(d) = self.dispatch.as_mut() {
            work |= dispatch::serve(d, &mut self.stack, &mut self.ports, &mut self.counters, now);
        }
        self.end_of_burst(now);
        work |= self.poll_app_and_timers(now, app);
        let send_now = work && self.cfg.pkt_tx_delay.is_zero();
        for port in &mut self.ports {
            let due = || {
                port.oldest_queued
                    .is_some_and(|t| now.saturating_since(t) >= self.cfg.pkt_tx_delay)
            };
            if send_now || due() {
                flush(port, &mut self.counters);
            }
        }
        self.last_turn_worked = work;
        work
    }

    /// [`turn_at`](Self::turn_at) of the usual engine: one port, whose
    /// link hands frames out one at a time, no dispatcher, no lending, and
    /// every turn's frames sent at its end.  The general turn does the same
    /// with loops and tests over what this one knows.
    #[inline(always)]
    fn turn_one_port<A: Application + ?Sized>(&mut self, now: Instant, app: &mut A) -> bool {
        self.counters.loops += 1;
        let mut work = receive_plain(&mut self.ports, &mut self.stack, &mut self.counters, 0, now);
        self.end_of_burst(now);
        work |= self.poll_app_and_timers(now, app);
        // With no transmit delay, frames queued outside a turn's work (by
        // `with_context`) go now too.
        if let [port] = &mut self.ports[..] {
            if work || port.oldest_queued.is_some() {
                flush(port, &mut self.counters);
            }
        }
        self.last_turn_worked = work;
        work
    }

    /// Counts the time since the last turn as idle when that turn found
    /// no work.
    #[inline(always)]
    fn note_turn(&mut self, now: Instant) {
        if !self.last_turn_worked {
            self.counters.idle_us += now
                .total_micros()
                .saturating_sub(self.last_turn.total_micros());
        }
        self.last_turn = now;
    }

    /// The ACKs that waited for the end of the turn's receive bursts.
    #[inline(always)]
    fn end_of_burst(&mut self, now: Instant) {
        if !self.stack.has_burst_acks() {
            return;
        }
        let mut sink = TxQueues {
            ports: &mut self.ports,
            now,
            counters: &mut self.counters,
        };
        self.stack.end_of_burst(now, &mut sink);
    }

    /// The middle of a turn: the application's poll, then the stack's
    /// timers when their tick is due, both sending into the transmit
    /// queues.  Returns whether the application did anything.
    #[inline(always)]
    fn poll_app_and_timers<A: Application + ?Sized>(&mut self, now: Instant, app: &mut A) -> bool {
        let mut sink = TxQueues {
            ports: &mut self.ports,
            now,
            counters: &mut self.counters,
        };
        let work = app.poll(&mut AppContext {
            now,
            stack: &mut self.stack,
            sink: &mut sink,
        });
        if now >= self.next_timer {
            self.stack.poll(now, &mut sink);
            self.next_timer = now + self.cfg.timer_tick;
            if self.stack.counters().ndp_dad_duplicates != self.duplicates_told {
                self.tell_duplicates();
            }
            if self.stack.tcp_buffer_released_bytes() >= self.heap_trimmed_at.0 + HEAP_TRIM_BYTES
                && now >= self.heap_trimmed_at.1
            {
                self.return_freed_heap(now);
            }
        }
        if self.control.is_some() && now >= self.next_control {
            return self.serve_control(now) | work;
        }
        work
    }

    /// Hands the heap pages the stack's freed ring storage left empty back
    /// to the system: freed storage stays resident in the allocator's free
    /// lists otherwise, and a burst that once had every connection's rings
    /// in flight would pin its peak for good. At most once per
    /// [`HEAP_TRIM_INTERVAL`], after [`HEAP_TRIM_BYTES`] were freed.
    #[cold]
    fn return_freed_heap(&mut self, now: Instant) {
        self.heap_trimmed_at = (
            self.stack.tcp_buffer_released_bytes(),
            now + HEAP_TRIM_INTERVAL,
        );
        crate::heap::trim();
    }

    /// Says which IPv6 addresses another node holds: the operator must
    /// know that a configured address is not in use.
    #[cold]
    fn tell_duplicates(&mut self) {
        self.duplicates_told = self.stack.counters().ndp_dad_duplicates;
        for iface in self.stack.interfaces() {
            let Some(v6) = &iface.ipv6 else { continue };
            for a in v6.addrs.iter().filter(|a| a.state == AddrState::Duplicate) {
                eprintln!(
                    "ustack: {}: IPv6 address {} is held by another node on the link \
                     (duplicate address detection); it is not used",
                    iface.name, a.addr
                );
            }
        }
    }

    /// Services port `i` and receives what waits on it, through the
    /// dispatcher and lending: every port but that of [`receive_plain`].
    /// Returns whether any frame came.
    #[inline(never)]
    fn receive_port(&mut self, i: usize, now: Instant) -> bool {
        if self.ports[i].link.service().is_err() {
            self.counters.link_errors += 1;
        }
        if !L::RX_ONE_AT_A_TIME {
            return self.receive_burst(i, now);
        }
        let n = match self.ports[i].link.rx_ready(MAX_BURST) {
            Ok(n) => n,
            Err(_) => {
                self.counters.link_errors += 1;
                0
            }
        };
        let mut work = false;
        if n != 0 {
            while let Some(buf) = self.ports[i].link.rx_next() {
                work = true;
                self.receive_frame(i, buf, now);
            }
        }
        work
    }

    /// Receives a burst on port `i` from a link that receives in bursts,
    /// through the engine's queue.  Returns whether any frame came.
    #[inline(never)]
    fn receive_burst(&mut self, i: usize, now: Instant) -> bool {
        let work = match self.ports[i].link.rx_burst(&mut self.rx, MAX_BURST) {
            Ok(n) => n != 0,
            Err(_) => {
                self.counters.link_errors += 1;
                false
            }
        };
        // Taken from the back in the order received: cheaper than a drain
        // for the usual burst of one or a few.
        self.rx.reverse();
        while let Some(buf) = self.rx.pop() {
            self.receive_frame(i, buf, now);
        }
        work
    }

    /// One frame received on port `i` through the dispatcher (when there is
    /// one) to the stack, lent to it when the port lends, and back to its
    /// link unless kept.
    #[inline(never)]
    fn receive_frame(&mut self, i: usize, buf: L::Buf, now: Instant) {
        if self.ports[i].diverted && !self.ports[i].divert_rx(buf.data(), &mut self.counters) {
            self.ports[i].link.recycle(buf);
            return;
        }
        let mut sink = TxQueues {
            ports: &mut self.ports,
            now,
            counters: &mut self.counters,
        };
        let buf = match self.dispatch.as_mut() {
            Some(d) => match dispatch::route(d, sink.ports, i, buf) {
                Some(buf) => buf,
                None => return,
            },
            None => buf,
        };
        let meta = RxMeta {
            csum_partial: buf.csum_partial(),
        };
        let buf = if self.lent.on(i) {
            match self
                .lent
                .receive(&mut self.stack, now, i, buf, meta, &mut sink)
            {
                Some(buf) => buf,
                None => return,
            }
        } else {
            self.stack
                .receive(now, IfaceId(i as u16), buf.data(), meta, &mut sink);
            buf
        };
        if self.stack.take_handoff() {
            if let Some(d) = self.dispatch.as_mut() {
                d.offer(i, meta.csum_partial, buf.data());
            }
        }
        sink.ports[i].link.recycle(buf);
    }

    /// Runs until `stop` is set or the application has finished, calling
    /// `on_tick` about every `tick`.
    pub fn run<A: Application + ?Sized>(
        &mut self,
        app: &mut A,
        stop: &AtomicBool,
        tick: Duration,
        on_tick: &mut dyn FnMut(&Engine<L>),
    ) -> io::Result<()> {
        self.announce();
        let mut next_report = std::time::Instant::now() + tick;
        while !stop.load(Ordering::Relaxed) && !app.finished() {
            let work = self.turn(app);
            let wall = std::time::Instant::now();
            if wall >= next_report {
                on_tick(self);
                next_report = wall + tick;
            }
            if !work && !self.cfg.idle_sleep.is_zero() && !self.ports.iter().any(Port::has_queued) {
                // The next report, and so `stop`, ends the sleep: a flag
                // set by another thread has no fd to wake the engine.
                self.idle(wall, Some(next_report))?;
            }
        }
        for port in &mut self.ports {
            flush(port, &mut self.counters);
        }
        on_tick(self);
        Ok(())
    }

    /// Sleeps until a frame arrives, a timer, a held frame or `until` is
    /// due; on links without an fd, a nap (see [`IdlePlan`]).
    fn idle(
        &mut self,
        wall: std::time::Instant,
        until: Option<std::time::Instant>,
    ) -> io::Result<()> {
        let plan = self.idle_plan_at(wall);
        let limit = until.map(|u| u.saturating_duration_since(wall));
        let timeout = match (plan.timeout, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if timeout.is_some_and(|t| t.is_zero()) {
            return Ok(());
        }
        if !plan.pollable {
            // A link that can only be polled: a short nap instead of a wait.
            let nap = timeout.map_or(IdlePlan::NAP, |t| t.min(IdlePlan::NAP));
            std::thread::sleep(nap);
        } else {
            link::os::wait_readable(&plan.fds, timeout)?;
        }
        self.counters.idle_sleeps += 1;
        Ok(())
    }

    /// How long an idle engine may sleep from now and which fds end the
    /// sleep (readable), for a caller that waits on its own fds too (the
    /// LD_PRELOAD library's epoll_wait, poll and select).  A zero timeout:
    /// do not sleep (`idle_sleep` is zero, or frames wait to be sent).
    pub fn idle_plan(&self) -> IdlePlan {
        if self.cfg.idle_sleep.is_zero() || self.ports.iter().any(Port::has_queued) {
            return IdlePlan {
                timeout: Some(Duration::ZERO),
                fds: Vec::new(),
                pollable: true,
                idle_sleep: self.cfg.idle_sleep,
            };
        }
        self.idle_plan_at(std::time::Instant::now())
    }

    fn idle_plan_at(&self, wall: std::time::Instant) -> IdlePlan {
        let fds = self.wake_fds();
        let pollable = self.ports.iter().all(|p| p.link.rx_fd().is_some());
        // Every link wakes the engine by an fd: nothing but the deadlines
        // below can end the sleep sooner, so `idle_sleep` does not cap it
        // (it woke an idle engine ~1000 times a second for nothing).  A
        // link without one is napped on, `idle_sleep` at most; the rings
        // from this process's other engines are looked at every
        // `idle_sleep` (no fd wakes for them).
        let mesh = self.dispatch.as_ref().is_some_and(Dispatcher::has_mesh);
        let mut timeout = (!pollable || mesh).then_some(self.cfg.idle_sleep);
        let mut due_at = |t: std::time::Instant| {
            let d = t.saturating_duration_since(wall);
            timeout = Some(timeout.map_or(d, |x| x.min(d)));
        };
        // The stack's own earliest deadline, not the next tick (the tick
        // still paces the timers once awake).
        if let Some(due) = self.stack.next_deadline() {
            due_at(self.clock.to_std(due.max(self.next_timer)));
        }
        // Freed ring storage waiting for the heap trim's interval.
        if self.stack.tcp_buffer_released_bytes() >= self.heap_trimmed_at.0 + HEAP_TRIM_BYTES {
            due_at(
                self.clock
                    .to_std(self.heap_trimmed_at.1.max(self.next_timer)),
            );
        }
        for p in &self.ports {
            if let Some(t) = p.link.next_event() {
                due_at(t);
            }
        }
        if let Some(t) = self.dispatch.as_ref().and_then(Dispatcher::next_event) {
            due_at(t);
        }
        IdlePlan {
            timeout,
            fds,
            pollable,
            idle_sleep: self.cfg.idle_sleep,
        }
    }

    /// Sends what the application's calls queued, now, when `pkt_tx_delay`
    /// is zero (F-Stack's "send at once"): for a caller that runs the
    /// engine only inside its own calls (the LD_PRELOAD library) and may
    /// block elsewhere before its next turn.  Cheap when nothing waits.
    pub fn flush_if_immediate(&mut self) {
        if !self.cfg.pkt_tx_delay.is_zero() {
            return;
        }
        for port in &mut self.ports {
            flush(port, &mut self.counters);
        }
    }

    /// Whether a child process that inherited this engine by fork may drop
    /// it (every link's copy can be dropped without disturbing the parent:
    /// `Link::droppable_in_fork_child`).
    pub fn droppable_in_fork_child(&self) -> bool {
        self.ports.iter().all(|p| p.link.droppable_in_fork_child())
    }

    /// Every fd the engine waits on (its links', its dispatcher's): what a
    /// child process must close of an engine it inherited by fork and will
    /// not run.
    pub fn wait_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.wake_fds()
    }

    /// The fds whose readability ends an idle sleep: the links', the
    /// dispatcher's, the control socket's.  Touches no link's rings (a
    /// fork child calls it through [`wait_fds`](Self::wait_fds), where an
    /// AF_XDP link's rings are not mapped).
    fn wake_fds(&self) -> Vec<std::os::fd::RawFd> {
        let mut fds: Vec<_> = self.ports.iter().filter_map(|p| p.link.rx_fd()).collect();
        if let Some(d) = &self.dispatch {
            fds.extend(d.wait_fds());
        }
        if let Some(c) = &self.control {
            fds.extend(c.wait_fds());
        }
        fds
    }

    /// Counts a sleep a caller took by an [`IdlePlan`].
    pub fn note_idle_sleep(&mut self) {
        self.counters.idle_sleeps += 1;
    }
}

/// What an idle engine waits for: readable `fds` (its links, its rings
/// from other engines, its control socket) or `timeout` (`None`: nothing
/// is due, only an fd can end the sleep).  Not `pollable`: a link has no
/// fd, so a sleep must be a nap of at most [`IdlePlan::NAP`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdlePlan {
    pub timeout: Option<Duration>,
    pub fds: Vec<std::os::fd::RawFd>,
    pub pollable: bool,
    /// The configured `idle_sleep`: how often a loop whose callback may
    /// have work of its own (`ff_run`, `ustack_run`) must still turn.
    pub idle_sleep: Duration,
}

impl IdlePlan {
    /// The longest nap when a link cannot be waited on.
    pub const NAP: Duration = Duration::from_micros(50);
}
