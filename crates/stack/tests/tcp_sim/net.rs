//! The simulated network: two stacks, a link with seeded impairments in
//! each direction, virtual time that jumps to the next event, a trace of
//! the last frames and a hash of every frame delivered.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use stack::rand::Rng;

use crate::monitor::Monitor;
use stack::{
    Duration, IfaceId, Instant, InterfaceConfig, Ipv6Config, LendLimits, LentFrame, RxFrame,
    RxMeta, Shutdown, SocketError, SocketHandle, Stack, StackConfig, TcpInfo, TcpState, VecSink,
};

pub const IF0: IfaceId = IfaceId(0);
/// Frames kept for the failure report.
const TRACE_LEN: usize = 48;
/// Work done at one instant before the run is called a livelock.
const MAX_ROUNDS_PER_INSTANT: u32 = 100_000;
/// Frames and timer runs in one run before it is called a storm (the
/// largest transfers take about a hundred thousand).
const MAX_EVENTS: u64 = 3_000_000;

/// A delivered frame lent to the receiving stack (odd seeds): the sim
/// checks that every one comes back through the released list, none
/// dropped inside the stack.
struct SimFrame {
    bytes: Vec<u8>,
    dropped: Arc<AtomicU64>,
}

impl Drop for SimFrame {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

impl RxFrame for SimFrame {
    fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Frames lent to the stacks, and their way back.
struct Lending {
    limits: LendLimits,
    /// Frames given to `receive_lent`.
    given: u64,
    /// Frames that came back (not kept, or released).
    back: u64,
    /// Frames dropped (we drop each one that comes back).
    dropped: Arc<AtomicU64>,
    scratch: Vec<LentFrame>,
}

/// Parts per million.
pub type Ppm = u32;

/// The impairments of one direction of the link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Impair {
    pub loss: Ppm,
    pub dup: Ppm,
    /// A reordered frame is held back by up to `reorder_gap` more.
    pub reorder: Ppm,
    pub reorder_gap: Duration,
    pub corrupt: Ppm,
    pub delay: Duration,
    /// Extra delay in `0..=jitter`, never reordering by itself.
    pub jitter: Duration,
    /// Bits per second (serialization delay), or unlimited.
    pub rate: Option<u64>,
    /// Bytes waiting for serialization at most (tail drop beyond).
    pub queue: Option<usize>,
    /// ECN-capable frames marked Congestion Experienced (as an AQM
    /// would, in place of dropping them).
    pub ce_mark: Ppm,
}

impl Impair {
    /// Nothing but delay and jitter (which keeps order).
    pub fn is_clean(&self) -> bool {
        *self
            == Impair {
                delay: self.delay,
                jitter: self.jitter,
                ..Impair::default()
            }
    }
}

fn pct(p: Ppm) -> String {
    format!("{}.{:02}%", p / 10_000, (p % 10_000) / 100)
}

impl fmt::Display for Impair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "loss {} dup {} reorder {} (gap {:?}) corrupt {} delay {:?} jitter {:?}",
            pct(self.loss),
            pct(self.dup),
            pct(self.reorder),
            self.reorder_gap,
            pct(self.corrupt),
            self.delay,
            self.jitter
        )?;
        if let Some(r) = self.rate {
            write!(f, " rate {} kbit/s", r / 1000)?;
        }
        if let Some(q) = self.queue {
            write!(f, " queue {q} B")?;
        }
        if self.ce_mark > 0 {
            write!(f, " ce-mark {}", pct(self.ce_mark))?;
        }
        Ok(())
    }
}

/// What happened to frames in one direction.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirStats {
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub tail_dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// ECN-capable frames marked Congestion Experienced.
    pub ce_marked: u64,
    /// Sent after the link died.
    pub cut: u64,
    /// TCP segments occupying sequence space (data, SYN, FIN) that no intact
    /// copy of reached the other side: the sender must send them again.
    pub lost_segments: u64,
}

struct InFlight {
    at: Instant,
    order: u64,
    frame: Vec<u8>,
    corrupted: bool,
    /// Not corrupted, or only where nothing checks.
    intact: bool,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

/// One direction of the link.
struct Dir {
    imp: Impair,
    queue: BinaryHeap<Reverse<InFlight>>,
    /// When the serializer is free again.
    busy_until: Instant,
    /// The latest delivery time of an in-order frame (jitter keeps order).
    last_at: Instant,
    stats: DirStats,
}

/// A host: a stack and the frames it sent during the current call.
pub struct Host {
    pub stack: Stack,
    pub sink: VecSink,
    ready: Vec<SocketHandle>,
}

/// One line of the trace.
#[derive(Clone)]
struct TraceEntry {
    at: Instant,
    dir: usize,
    what: &'static str,
    summary: String,
}

/// The network.  Host 0 is `a` (10.99.1.1), host 1 is `b` (10.99.1.2);
/// direction 0 carries a's frames to b, direction 1 b's to a.
pub struct Net {
    pub now: Instant,
    pub hosts: Vec<Host>,
    dirs: [Dir; 2],
    rng: Rng,
    order: u64,
    trace: VecDeque<TraceEntry>,
    /// Every frame delivered, in order, with its time and direction.
    hash: u64,
    pub events: u64,
    /// Print every frame as it is delivered (replay with USTACK_SIM_TRACE).
    pub verbose: bool,
    /// From this time on, every frame is lost (the peer vanished).
    pub cut: Option<Instant>,
    monitor: Monitor,
    /// The first rule the monitor saw broken.
    violation: Option<String>,
    /// Odd seeds deliver frames as lent frames (zero-copy receive).
    lending: Option<Lending>,
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

thread_local! {
    static IPV6: Cell<bool> = const { Cell::new(false) };
}

/// The runs of this thread use IPv6 addresses (`run_seed_with` draws it
/// from the seed).
pub fn use_ipv6(on: bool) {
    IPV6.with(|c| c.set(on));
}

pub fn ipv6() -> bool {
    IPV6.with(Cell::get)
}

pub fn host_ip4(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 1, i as u8 + 1)
}

pub fn host_ip6(i: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd99, 0, 0, 1, 0, 0, 0, i as u16 + 1)
}

pub fn addr(i: usize, port: u16) -> SocketAddr {
    if ipv6() {
        SocketAddr::new(IpAddr::V6(host_ip6(i)), port)
    } else {
        SocketAddr::new(IpAddr::V4(host_ip4(i)), port)
    }
}

impl Net {
    pub fn new(seed: u64, cfgs: [StackConfig; 2], mtus: [usize; 2], imps: [Impair; 2]) -> Net {
        // Bounds from the seed (not its generator, so that the draws of
        // every seed stay as they were): tight ones make holding fall back
        // to copying often.
        let lending = (seed % 2 == 1).then(|| Lending {
            limits: LendLimits {
                frames: [3, 16, 1024][(seed / 2 % 3) as usize],
                frames_per_conn: [1, 4, 64][(seed / 6 % 3) as usize],
                min_payload: [0, 200][(seed / 18 % 2) as usize],
            },
            given: 0,
            back: 0,
            dropped: Arc::new(AtomicU64::new(0)),
            scratch: Vec::new(),
        });
        let hosts = cfgs
            .into_iter()
            .zip(mtus)
            .enumerate()
            .map(|(i, (mut cfg, mtu))| {
                // Addresses usable at once, no router solicitations: only
                // the flows' frames and neighbor discovery on the wire.
                cfg.ip6_dad_count = 0;
                cfg.ip6_accept_rtadv = false;
                let mut stack = Stack::new(cfg);
                stack
                    .add_interface(&InterfaceConfig {
                        mtu,
                        ..InterfaceConfig::new(
                            format!("sim{i}"),
                            [2, 0, 0, 0, 0, i as u8 + 1],
                            host_ip4(i),
                            24,
                        )
                    })
                    .expect("interface");
                if ipv6() {
                    stack
                        .enable_ipv6(
                            Instant::ZERO,
                            IF0,
                            &Ipv6Config {
                                addrs: vec![(host_ip6(i), 64)],
                                gateway: None,
                            },
                        )
                        .expect("IPv6");
                }
                if let Some(l) = &lending {
                    stack.set_rx_lending(IF0, l.limits);
                }
                Host {
                    stack,
                    sink: VecSink::default(),
                    ready: Vec::new(),
                }
            })
            .collect();
        let dir = |imp| Dir {
            imp,
            queue: BinaryHeap::new(),
            busy_until: Instant::ZERO,
            last_at: Instant::ZERO,
            stats: DirStats::default(),
        };
        Net {
            now: Instant::from_secs(1),
            hosts,
            dirs: [dir(imps[0]), dir(imps[1])],
            rng: Rng::new(seed ^ 0x4c49_4e4b),
            order: 0,
            trace: VecDeque::with_capacity(TRACE_LEN),
            hash: 0xcbf2_9ce4_8422_2325,
            events: 0,
            verbose: false,
            cut: None,
            monitor: Monitor::default(),
            violation: None,
            lending,
        }
    }

    pub fn stats(&self, dir: usize) -> DirStats {
        self.dirs[dir].stats
    }

    /// The hash of every frame delivered so far (with times): two runs of
    /// a seed that are the same bit for bit have the same hash.
    pub fn hash(&self) -> u64 {
        fnv(self.hash, &self.now.total_micros().to_le_bytes())
    }

    fn chance(&mut self, p: Ppm) -> bool {
        p > 0 && self.rng.below(1_000_000) < u64::from(p)
    }

    fn below_duration(&mut self, d: Duration) -> Duration {
        let us = d.as_micros() as u64;
        Duration::from_micros(if us == 0 { 0 } else { self.rng.below(us + 1) })
    }

    fn note(&mut self, dir: usize, what: &'static str, frame: &[u8], at: Instant) {
        let entry = TraceEntry {
            at,
            dir,
            what,
            summary: summarize(frame),
        };
        if self.verbose {
            eprintln!("{}", entry.line());
        }
        if self.trace.len() == TRACE_LEN {
            self.trace.pop_front();
        }
        self.trace.push_back(entry);
    }

    /// The last frames, one a line.
    pub fn trace_text(&self) -> String {
        let mut s = String::new();
        for e in &self.trace {
            let _ = writeln!(s, "  {}", e.line());
        }
        s
    }

    /// Puts the frames host `h` sent onto its direction of the link.
    pub fn flush(&mut self, h: usize) {
        let frames = std::mem::take(&mut self.hosts[h].sink.frames);
        for (_, f) in frames {
            self.transmit(h, f);
        }
    }

    fn transmit(&mut self, dir: usize, frame: Vec<u8>) {
        let imp = self.dirs[dir].imp;
        let now = self.now;
        self.dirs[dir].stats.sent += 1;
        if let Err(e) = self.monitor.sent(dir, &frame) {
            self.note(dir, "VIOLATES", &frame, now);
            self.violation.get_or_insert(format!("{e} at {now}"));
        }
        let occupies = occupies_sequence(&frame);
        if self.cut.is_some_and(|t| now >= t) {
            self.dirs[dir].stats.cut += 1;
            self.note(dir, "cut", &frame, now);
            return;
        }
        if self.chance(imp.loss) {
            self.dirs[dir].stats.lost += 1;
            self.dirs[dir].stats.lost_segments += u64::from(occupies);
            self.note(dir, "lost", &frame, now);
            return;
        }
        // Serialization and the bounded queue in front of it.  An
        // unlimited link is 10 Gbit/s, so that time moves.
        let depart;
        {
            let rate = imp.rate.unwrap_or(10_000_000_000);
            let d = &mut self.dirs[dir];
            let start = d.busy_until.max(now);
            if let Some(limit) = imp.queue {
                let waiting = (start - now).as_micros() as u64 * rate / 8_000_000;
                if waiting as usize + frame.len() > limit {
                    d.stats.tail_dropped += 1;
                    d.stats.lost_segments += u64::from(occupies);
                    self.note(dir, "tail-drop", &frame, now);
                    return;
                }
            }
            let tx = Duration::from_micros((frame.len() as u64 * 8_000_000).div_ceil(rate));
            d.busy_until = start + tx;
            depart = d.busy_until;
        }
        let mut frame = frame;
        if imp.ce_mark > 0
            && mark_ce(&mut frame, || {
                self.rng.below(1_000_000) < u64::from(imp.ce_mark)
            })
        {
            self.dirs[dir].stats.ce_marked += 1;
            self.note(dir, "ce-mark", &frame, now);
        }
        let jitter = self.below_duration(imp.jitter);
        let mut at = depart + imp.delay + jitter;
        let reorder = self.chance(imp.reorder);
        if reorder {
            self.dirs[dir].stats.reordered += 1;
            at += Duration::from_micros(1) + self.below_duration(imp.reorder_gap);
        } else {
            let d = &mut self.dirs[dir];
            at = at.max(d.last_at);
            d.last_at = at;
        }
        let mut copies = vec![(at, frame)];
        if self.chance(imp.dup) {
            self.dirs[dir].stats.duplicated += 1;
            let extra = self.below_duration(imp.delay / 2 + Duration::from_micros(500));
            let copy = copies[0].1.clone();
            copies.push((at + extra, copy));
        }
        let mut copies_intact = 0;
        for (at, mut frame) in copies {
            // ARP has no checksum (Ethernet's FCS guards it on a real link):
            // a flipped sender address would poison the neighbor cache.
            let corrupted = !is_arp(&frame) && self.chance(imp.corrupt);
            let mut intact = true;
            if corrupted {
                self.dirs[dir].stats.corrupted += 1;
                let byte = self.rng.below(frame.len() as u64) as usize;
                let bit = self.rng.below(8) as u32;
                intact = harmless_flip(&frame, byte, bit);
                frame[byte] ^= 1 << bit;
            }
            copies_intact += usize::from(intact);
            self.order += 1;
            self.dirs[dir].queue.push(Reverse(InFlight {
                at,
                order: self.order,
                frame,
                corrupted,
                intact,
            }));
        }
        if copies_intact == 0 {
            self.dirs[dir].stats.lost_segments += u64::from(occupies);
        }
    }

    /// The next frame to deliver at or before `now`, over both directions.
    fn pop_due(&mut self) -> Option<(usize, InFlight)> {
        let mut best: Option<(usize, Instant, u64)> = None;
        for (i, d) in self.dirs.iter().enumerate() {
            if let Some(Reverse(f)) = d.queue.peek() {
                if f.at <= self.now && best.is_none_or(|(_, at, o)| (f.at, f.order) < (at, o)) {
                    best = Some((i, f.at, f.order));
                }
            }
        }
        let (i, _, _) = best?;
        self.dirs[i].queue.pop().map(|Reverse(f)| (i, f))
    }

    fn next_frame_at(&self) -> Option<Instant> {
        self.dirs
            .iter()
            .filter_map(|d| d.queue.peek().map(|Reverse(f)| f.at))
            .min()
    }

    /// Frames on the wire, both directions.
    pub fn in_flight(&self) -> usize {
        self.dirs.iter().map(|d| d.queue.len()).sum()
    }

    /// Does all the work due at `now`: delivers frames, runs timers, lets
    /// the application react.  Returns false if there was nothing to do.
    fn round(&mut self, app: &mut dyn App) -> Result<bool, String> {
        let mut did = false;
        while let Some((dir, f)) = self.pop_due() {
            did = true;
            self.events += 1;
            let to = 1 - dir;
            self.dirs[dir].stats.delivered += 1;
            self.note(
                dir,
                if f.corrupted { "corrupt" } else { "deliver" },
                &f.frame,
                f.at,
            );
            self.hash = fnv(self.hash, &f.at.total_micros().to_le_bytes());
            self.hash = fnv(self.hash, &[dir as u8]);
            self.hash = fnv(self.hash, &f.frame);
            if f.intact {
                self.monitor.received(to, &f.frame);
            }
            let now = self.now;
            let host = &mut self.hosts[to];
            match &mut self.lending {
                None => host
                    .stack
                    .receive(now, IF0, &f.frame, RxMeta::default(), &mut host.sink),
                Some(l) => {
                    l.given += 1;
                    let frame = SimFrame {
                        bytes: f.frame,
                        dropped: l.dropped.clone(),
                    };
                    let back = host.stack.receive_lent(
                        now,
                        IF0,
                        frame,
                        RxMeta::default(),
                        &mut host.sink,
                        |f| &f.bytes,
                        |f| Box::new(f),
                    );
                    l.back += u64::from(back.is_some());
                }
            }
            self.flush(to);
        }
        for h in 0..self.hosts.len() {
            if self.hosts[h]
                .stack
                .next_deadline()
                .is_some_and(|d| d <= self.now)
            {
                did = true;
                self.events += 1;
                let now = self.now;
                let host = &mut self.hosts[h];
                host.stack.poll(now, &mut host.sink);
                if let Some(d) = host.stack.next_deadline().filter(|&d| d <= now) {
                    return Err(format!(
                        "host {h}: after poll at {now} the next deadline is {d}: an engine would spin"
                    ));
                }
                self.flush(h);
            }
        }
        for h in 0..self.hosts.len() {
            let host = &mut self.hosts[h];
            host.stack.drain_ready(&mut host.ready);
        }
        if app.step(self)? {
            did = true;
        }
        self.return_frames()?;
        if let Some(v) = self.violation.take() {
            return Err(v);
        }
        Ok(did)
    }

    /// Takes back the frames the stacks released, and checks that every
    /// lent frame is held or back, none lost inside a stack, and the
    /// bound kept.
    fn return_frames(&mut self) -> Result<(), String> {
        let Some(l) = &mut self.lending else {
            return Ok(());
        };
        let mut held = 0;
        for (h, host) in self.hosts.iter_mut().enumerate() {
            host.stack.take_released_frames(&mut l.scratch);
            let n = host.stack.rx_frames_held();
            if n > l.limits.frames {
                return Err(format!(
                    "host {h} holds {n} frames, over its bound of {}",
                    l.limits.frames
                ));
            }
            held += n as u64;
        }
        l.back += l.scratch.len() as u64;
        l.scratch.clear();
        let dropped = l.dropped.load(Ordering::Relaxed);
        if dropped != l.back || l.given - l.back != held {
            return Err(format!(
                "lent frames: {} given, {} back, {} dropped, {held} held: a frame was lost",
                l.given, l.back, dropped
            ));
        }
        Ok(())
    }

    /// Runs until the application is done, or fails at `limit`.
    pub fn run(&mut self, app: &mut dyn App, limit: Instant) -> Result<(), String> {
        loop {
            let mut rounds = 0;
            while self.round(app)? {
                rounds += 1;
                if rounds > MAX_ROUNDS_PER_INSTANT {
                    return Err(format!(
                        "livelock: no end of work at {} (deadlines a {:?} b {:?} (neighbors {:?}), {} frames due)",
                        self.now,
                        self.hosts[0].stack.next_deadline().map(|t| t.to_string()),
                        self.hosts[1].stack.next_deadline().map(|t| t.to_string()),
                        self.hosts[1].stack.neighbors().next_deadline().map(|t| t.to_string()),
                        self.in_flight()
                    ));
                }
            }
            if app.done(self) {
                return Ok(());
            }
            if self.events > MAX_EVENTS {
                return Err(format!(
                    "storm: {} events by {} and the application is not done",
                    self.events, self.now
                ));
            }
            let next = [
                self.next_frame_at(),
                self.hosts[0].stack.next_deadline(),
                self.hosts[1].stack.next_deadline(),
                app.next_wake(self.now),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else {
                return Err(format!(
                    "stall: nothing left to happen at {} and the application is not done",
                    self.now
                ));
            };
            if next > limit {
                return Err(format!(
                    "stall: not done at the limit {limit} (next event at {next})"
                ));
            }
            // A deadline that poll left in the past would spin the engine.
            self.now = next.max(self.now + Duration::from_micros(1));
        }
    }

    // Socket calls of host `h`, with the frames they send put on the link.

    pub fn ready(&mut self, h: usize) -> Vec<SocketHandle> {
        std::mem::take(&mut self.hosts[h].ready)
    }

    pub fn stack(&self, h: usize) -> &Stack {
        &self.hosts[h].stack
    }

    pub fn listen(&mut self, h: usize, port: u16, backlog: usize) -> SocketHandle {
        self.hosts[h]
            .stack
            .tcp_listen(addr(h, port), backlog)
            .expect("listen")
    }

    pub fn connect(
        &mut self,
        h: usize,
        remote: SocketAddr,
        local: Option<SocketAddr>,
    ) -> Result<SocketHandle, SocketError> {
        let now = self.now;
        let host = &mut self.hosts[h];
        let r = host.stack.tcp_connect(now, remote, local, &mut host.sink);
        self.flush(h);
        r
    }

    pub fn send(&mut self, h: usize, s: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        let now = self.now;
        let host = &mut self.hosts[h];
        let r = host.stack.tcp_send(now, s, data, &mut host.sink);
        self.flush(h);
        r
    }

    pub fn recv(
        &mut self,
        h: usize,
        s: SocketHandle,
        buf: &mut [u8],
    ) -> Result<usize, SocketError> {
        let now = self.now;
        let host = &mut self.hosts[h];
        let r = host.stack.tcp_recv(now, s, buf, &mut host.sink);
        self.flush(h);
        r
    }

    pub fn shutdown(
        &mut self,
        h: usize,
        s: SocketHandle,
        how: Shutdown,
    ) -> Result<(), SocketError> {
        let now = self.now;
        let host = &mut self.hosts[h];
        let r = host.stack.tcp_shutdown(now, s, how, &mut host.sink);
        self.flush(h);
        r
    }

    pub fn close(&mut self, h: usize, s: SocketHandle) -> Result<(), SocketError> {
        let now = self.now;
        let host = &mut self.hosts[h];
        let r = host.stack.tcp_close(now, s, &mut host.sink);
        self.flush(h);
        r
    }

    pub fn set_linger_zero(&mut self, h: usize, s: SocketHandle) -> Result<(), SocketError> {
        self.hosts[h].stack.tcp_set_linger_zero(s, true)
    }

    pub fn abort(&mut self, h: usize, s: SocketHandle) -> Result<(), SocketError> {
        let now = self.now;
        let host = &mut self.hosts[h];
        let r = host.stack.tcp_abort(now, s, &mut host.sink);
        self.flush(h);
        r
    }

    pub fn set_nodelay(&mut self, h: usize, s: SocketHandle) {
        let now = self.now;
        let host = &mut self.hosts[h];
        host.stack
            .tcp_set_nodelay(now, s, true, &mut host.sink)
            .expect("nodelay");
        self.flush(h);
    }

    pub fn set_keepalive(&mut self, h: usize, s: SocketHandle) {
        let now = self.now;
        self.hosts[h]
            .stack
            .tcp_set_keepalive(now, s, true)
            .expect("keepalive");
    }

    pub fn state(&self, h: usize, s: SocketHandle) -> Result<TcpState, SocketError> {
        self.hosts[h].stack.tcp_state(s)
    }

    pub fn info(&self, h: usize, s: SocketHandle) -> Result<TcpInfo, SocketError> {
        self.hosts[h].stack.tcp_info(s)
    }

    pub fn take_error(&mut self, h: usize, s: SocketHandle) -> Option<SocketError> {
        self.hosts[h].stack.tcp_take_error(s).ok().flatten()
    }
}

/// What drives the sockets: called after every batch of work at one
/// instant, and at the times it asks for.
pub trait App {
    /// Does what the application can do now (the ready lists are in
    /// `Net::ready`).  Returns whether it did anything.
    fn step(&mut self, net: &mut Net) -> Result<bool, String>;
    /// Everything happened that should (the run stops).
    fn done(&self, net: &Net) -> bool;
    /// The next time after `now` the application wants to act on its own
    /// (what it wanted by `now` it has had its turn for).
    fn next_wake(&self, now: Instant) -> Option<Instant>;
}

impl TraceEntry {
    fn line(&self) -> String {
        format!(
            "{:>14} {} {:<9} {}",
            self.at.to_string(),
            if self.dir == 0 { "a>b" } else { "b>a" },
            self.what,
            self.summary
        )
    }
}

/// A flipped bit nothing checks: in the source MAC address (but for its
/// multicast bit, which the stack drops), or in the padding after the IP
/// packet.
fn harmless_flip(frame: &[u8], byte: usize, bit: u32) -> bool {
    let ipv6 = frame.get(12..14) == Some(&[0x86, 0xdd]);
    let ip_end = match (frame.get(16..18), frame.get(18..20)) {
        (Some(l), _) if frame[12..14] == [0x08, 0x00] => {
            14 + usize::from(u16::from_be_bytes([l[0], l[1]]))
        }
        (_, Some(l)) if ipv6 => 54 + usize::from(u16::from_be_bytes([l[0], l[1]])),
        _ => frame.len(),
    };
    // IPv6 has no header checksum: its traffic class and flow label (and
    // over TCP, its hop limit) reach no check.
    let ipv6_unchecked = ipv6
        && ((byte == 14 && bit < 4)
            || (15..18).contains(&byte)
            || (byte == 21 && frame.get(20) == Some(&6)));
    (6..12).contains(&byte) && !(byte == 6 && bit == 0) || byte >= ip_end || ipv6_unchecked
}

/// Marks an ECN-capable IP packet Congestion Experienced if `chance`
/// says so (asked only for such packets); whether it did.
fn mark_ce(frame: &mut [u8], chance: impl FnOnce() -> bool) -> bool {
    if frame.len() >= 54 && frame[12..14] == [0x86, 0xdd] {
        // The ECN field: bits 4 and 5 of the IPv6 header's second byte.
        if (frame[15] >> 4) & 3 == 0 || !chance() {
            return false;
        }
        frame[15] |= 0x30;
        return true;
    }
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[15] & 3 == 0 || !chance() {
        return false;
    }
    frame[15] |= 3;
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    frame[24..26].fill(0);
    let sum = !wire::checksum::data(&frame[14..14 + ihl]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    true
}

fn is_arp(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == [0x08, 0x06]
}

/// The TCP segment of an IPv4 or IPv6 frame (IPv6 without extension
/// headers, as the stack sends): (its offset, the end of the packet).
pub fn tcp_bounds(frame: &[u8]) -> Option<(usize, usize)> {
    if frame.len() >= 54 && frame[12..14] == [0x86, 0xdd] && frame[20] == 6 {
        let payload = usize::from(u16::from_be_bytes([frame[18], frame[19]]));
        let end = (54 + payload).min(frame.len());
        return (end >= 54 + 20).then_some((54, end));
    }
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[23] != 6 {
        return None;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let tcp = 14 + ihl;
    let end = (14 + total).min(frame.len());
    (end >= tcp + 20).then_some((tcp, end))
}

fn occupies_sequence(frame: &[u8]) -> bool {
    let Some((tcp, end)) = tcp_bounds(frame) else {
        return false;
    };
    let doff = usize::from(frame[tcp + 12] >> 4) * 4;
    let flags = frame[tcp + 13];
    // RST: nobody retransmits it.
    flags & 0x04 == 0 && (end > tcp + doff || flags & 0x03 != 0)
}

/// One line about a frame: TCP flags, sequence numbers, length, window.
pub fn summarize(frame: &[u8]) -> String {
    if is_arp(frame) {
        let op = frame.get(21).copied().unwrap_or(0);
        return format!("ARP {}", if op == 1 { "request" } else { "reply" });
    }
    let Some((tcp, end)) = tcp_bounds(frame) else {
        return format!("{} bytes (not TCP)", frame.len());
    };
    let t = &frame[tcp..end];
    let be16 = |i: usize| u16::from_be_bytes([t[i], t[i + 1]]);
    let be32 = |i: usize| u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
    let doff = (usize::from(t[12] >> 4) * 4).clamp(20, t.len());
    let fl = t[13];
    let mut flags = String::new();
    for (bit, c) in [(0x02, 'S'), (0x01, 'F'), (0x04, 'R'), (0x08, 'P')] {
        if fl & bit != 0 {
            flags.push(c);
        }
    }
    if fl & 0x10 != 0 {
        flags.push('.');
    }
    let mut s = format!(
        "{}>{} [{}] seq {} ack {} win {} len {}",
        be16(0),
        be16(2),
        flags,
        be32(4),
        be32(8),
        be16(14),
        t.len() - doff
    );
    // Options: MSS, wscale, SACK blocks, timestamps.
    let mut i = 20;
    while i < doff {
        match t[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = t.get(i + 1) else { break };
                let len = usize::from(len);
                if len < 2 || i + len > doff {
                    break;
                }
                let o = &t[i..i + len];
                match (kind, len) {
                    (2, 4) => {
                        let _ = write!(s, " mss {}", u16::from_be_bytes([o[2], o[3]]));
                    }
                    (3, 3) => {
                        let _ = write!(s, " ws {}", o[2]);
                    }
                    (4, 2) => s.push_str(" sackok"),
                    (5, _) => {
                        s.push_str(" sack");
                        for b in o[2..].chunks_exact(8) {
                            let l = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                            let r = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                            let _ = write!(s, " {l}-{r}");
                        }
                    }
                    (8, 10) => {
                        let v = u32::from_be_bytes([o[2], o[3], o[4], o[5]]);
                        let e = u32::from_be_bytes([o[6], o[7], o[8], o[9]]);
                        let _ = write!(s, " ts {v}/{e}");
                    }
                    _ => {
                        let _ = write!(s, " opt{kind}");
                    }
                }
                i += len;
            }
        }
    }
    s
}
