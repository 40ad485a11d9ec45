//! One engine per core (`[dpdk] lcore_mask`): each engine is a thread
//! pinned to its core with a whole stack of its own and its own queue on
//! every port; engines share nothing on the data path.
//!
//! How a port gives each engine its queue:
//! - `af_packet`: one packet socket per engine on the interface, joined in
//!   engine order to a fanout group whose BPF program computes ustack's
//!   flow hash (`link::fanout`), so the kernel hands each engine exactly
//!   the flows that hash to it, whatever queue they arrived on.
//! - `tap`: one queue per engine of a multi-queue TAP; the kernel spreads
//!   its frames over the queues by its own hash, and software steering (the
//!   dispatcher, `engine::dispatch`) hands each frame to its engine over a
//!   lock-free ring.
//! - `af_xdp`: one AF_XDP socket per engine on the interface's queue of the
//!   same number (`crate::xdp`); the NIC's RSS picks the queue, and the
//!   dispatcher steers frames that landed on another engine's queue. (The
//!   XDP program cannot do this steering itself: the kernel delivers to an
//!   AF_XDP socket only frames of the queue it is bound to.)
//! - `dpdk`: queue pair `e` of the port for engine `e`, each queue with a
//!   pool of its own (`crate::dpdk`); the port's RSS (the symmetric key with
//!   `symmetric_rss`) or, without RSS, the driver picks the queue, and the
//!   dispatcher steers as for AF_XDP.
//!
//! Either way an outgoing connection's source port is chosen so that the
//! reply hashes to the engine that opened it (`stack::steer`), ARP is seen
//! by every engine, and route changes are applied by every engine
//! ([`Control::broadcast`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use link::{AfPacketLink, Link, TapLink, TapOptions};
use stack::steer::FlowSteering;
use stack::Stack;

use crate::config::{Config, LinkSpec, PortConfig};
use crate::control::ControlSpec;
use crate::engine::{mesh, open_kni, AppContext, Application, Dispatcher, Engine, KniPort};
use crate::ports::PortLink;
use crate::setup::{
    engine_config, fault_config, link_name, port_pool, ring_config, stack_config, SetupError,
};
use crate::steer::KniFilter;

/// Frames a ring between two engines holds.
const MESH_RING: usize = 1024;

/// A port's queue for one engine, opened on the starting thread (fanout
/// groups are joined in engine order) and handed to the engine's thread.
/// Not boxed: one per queue, moved once into the engine's port (boxing
/// AF_PACKET's would put an indirection on its receive path).
#[allow(clippy::large_enum_variant)]
pub enum QueueLink {
    AfPacket(AfPacketLink),
    Tap(TapLink),
    AfXdp(Box<link::AfXdpLink>),
    #[cfg(feature = "dpdk")]
    Dpdk(link::dpdk::DpdkLink),
}

impl QueueLink {
    fn into_port_link(self) -> PortLink {
        match self {
            QueueLink::AfPacket(l) => PortLink::AfPacket(l),
            QueueLink::Tap(l) => PortLink::Tap(l),
            QueueLink::AfXdp(l) => PortLink::AfXdp(l),
            #[cfg(feature = "dpdk")]
            QueueLink::Dpdk(l) => PortLink::Dpdk(l),
        }
    }

    fn info(&self) -> &link::LinkInfo {
        match self {
            QueueLink::AfPacket(l) => l.info(),
            QueueLink::Tap(l) => l.info(),
            QueueLink::AfXdp(l) => l.info(),
            #[cfg(feature = "dpdk")]
            QueueLink::Dpdk(l) => l.info(),
        }
    }
}

impl crate::setup::LinkInfoSource for QueueLink {
    fn mtu(&self) -> usize {
        self.info().mtu
    }
    fn mac(&self) -> [u8; 6] {
        self.info().mac
    }
}

/// An engine ready to run: its number, the core it is pinned to (none
/// without `lcore_mask`), and its parts, which become an [`Engine`] on its
/// own thread.
pub struct EngineSlot {
    pub id: usize,
    pub core: Option<usize>,
    stack: Stack,
    links: Vec<QueueLink>,
    fault: Option<crate::setup::FaultDirections>,
    dispatcher: Option<Dispatcher<<PortLink as Link>::Buf>>,
    cfg: crate::engine::EngineConfig,
    control: Option<ControlSpec>,
    /// Each port's capture (`[pcap]`), made on the starting thread.
    captures: Vec<Option<link::PcapSeries>>,
}

impl EngineSlot {
    /// The engine, on the thread that will run it.
    pub fn into_engine(self) -> Engine<PortLink> {
        let fault = self.fault;
        let mut captures = self.captures.into_iter();
        let links = self
            .links
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let l = crate::setup::captured(l.into_port_link(), captures.next().flatten());
                match (i, &fault) {
                    (0, Some(fd)) => fd.wrap(l),
                    _ => l,
                }
            })
            .collect();
        let mut engine = Engine::new(self.stack, links, self.cfg);
        if let Some(d) = self.dispatcher {
            engine.set_dispatcher(d);
        }
        if let Some(spec) = &self.control {
            crate::control::attach(&mut engine, spec, engine_snapshot);
        }
        engine
    }
}

/// Whether the configuration needs [`build_engines`] (several engines, or
/// the exception path) rather than one plain engine.
pub fn needs_engines(cfg: &Config) -> bool {
    engine_cores(cfg).len() > 1 || cfg.kni.enable
}

/// The cores engines run on: one per core of `lcore_mask`, or one engine on
/// the starting thread, not pinned, without it.
pub fn engine_cores(cfg: &Config) -> Vec<Option<usize>> {
    match &cfg.dpdk.lcore_mask {
        Some(mask) if !mask.is_empty() => mask.iter().map(|c| Some(c as usize)).collect(),
        _ => vec![None],
    }
}

/// A per-engine seed from the process's: engines have different secrets.
fn engine_seed(seed: u64, id: usize) -> u64 {
    seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn open_err(port: &PortConfig) -> impl Fn(std::io::Error) -> SetupError + '_ {
    move |error| SetupError::Open {
        port: port.id,
        link: link_name(&port.link),
        error,
    }
}

/// Opens one port's queue for every engine.
fn open_port(
    cfg: &Config,
    port: &PortConfig,
    engines: usize,
) -> Result<Vec<QueueLink>, SetupError> {
    let err = open_err(port);
    crate::setup::tso_note(&cfg.dpdk, port);
    let mut links = Vec::with_capacity(engines);
    match &port.link {
        LinkSpec::AfPacket(ifname) => {
            let mut group = None;
            for _ in 0..engines {
                let l = AfPacketLink::open(ifname, port_pool(port), &ring_config(&cfg.dpdk, port))
                    .map_err(&err)?;
                if engines > 1 {
                    group = Some(l.join_fanout(group).map_err(&err)?);
                }
                links.push(l);
            }
            if engines > 1 {
                links[0].set_fanout_program().map_err(&err)?;
            }
            Ok(links.into_iter().map(QueueLink::AfPacket).collect())
        }
        LinkSpec::Tap(ifname) => {
            let mut opts = TapOptions {
                multi_queue: engines > 1,
                mac: port.mac,
                ..TapOptions::default()
            };
            let mut tap_links = Vec::with_capacity(engines);
            for _ in 0..engines {
                let t = TapLink::open_with(ifname, port_pool(port), &opts).map_err(&err)?;
                // Every queue speaks for the same stack address.
                opts.mac = Some(t.info().mac);
                tap_links.push(QueueLink::Tap(t));
            }
            Ok(tap_links)
        }
        // Engine `e` on queue `e`; the NIC's RSS spreads flows over the
        // queues and the dispatcher hands each frame to its engine.
        LinkSpec::AfXdp(ifname) => Ok(crate::xdp::open_queues(
            ifname,
            port,
            &cfg.kni,
            engines,
            !cfg.dpdk.tx_csum_offload_skip,
        )
        .map_err(&err)?
        .into_iter()
        .map(|l| QueueLink::AfXdp(Box::new(l)))
        .collect()),
        // Queue pair `e` for engine `e`.
        #[cfg(feature = "dpdk")]
        LinkSpec::Dpdk => Ok(crate::dpdk::open_queues(&cfg.dpdk, port, engines)
            .map_err(&err)?
            .into_iter()
            .map(QueueLink::Dpdk)
            .collect()),
        LinkSpec::ShmCreate(_) | LinkSpec::ShmAttach(_) => Err(SetupError::PortIncomplete {
            port: port.id,
            what: "link=shm_create:/shm_attach: one engine only (a shared-memory link has one \
                   queue pair)",
        }),
        #[cfg(not(feature = "dpdk"))]
        LinkSpec::Dpdk => {
            let _ = cfg;
            Err(SetupError::MissingFeature {
                port: port.id,
                link: link_name(&port.link),
                feature: "dpdk",
            })
        }
    }
}

/// Builds every engine the configuration asks for: stacks, queues on every
/// port, the rings between engines, the exception path on engine 0.
pub fn build_engines(cfg: &Config, seed: u64) -> Result<Vec<EngineSlot>, SetupError> {
    if cfg.ports.is_empty() {
        return Err(SetupError::NoPorts);
    }
    let cores = engine_cores(cfg);
    let n = cores.len();
    for port in &cfg.ports {
        if let Some(list) = &port.lcore_list {
            if cores.iter().flatten().any(|c| !list.contains(&(*c as u32))) {
                return Err(SetupError::PortIncomplete {
                    port: port.id,
                    what: "lcore_list: every engine serves every port (a subset is not supported)",
                });
            }
        }
    }
    // Queues, port by port (fanout groups are joined in engine order).
    let mut per_engine: Vec<Vec<QueueLink>> = (0..n).map(|_| Vec::new()).collect();
    for port in &cfg.ports {
        for (e, link) in open_port(cfg, port, n)?.into_iter().enumerate() {
            per_engine[e].push(link);
        }
    }
    let rss = if n > 1 {
        ports_rss(cfg, &per_engine, n)
    } else {
        None
    };
    let mut meshes = if n > 1 {
        mesh::<<PortLink as Link>::Buf>(n, MESH_RING)
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    let mut slots = Vec::with_capacity(n);
    for (e, links) in per_engine.into_iter().enumerate() {
        let mut sc = stack_config(cfg, engine_seed(seed, e));
        if n > 1 {
            sc.tcp.steering = Some(FlowSteering {
                rss: rss.clone(),
                ..FlowSteering::new(n as u16, e as u16)
            });
        }
        let mut stack = Stack::new(sc);
        crate::setup::add_interfaces(&mut stack, cfg, &links)?;
        let kni: Vec<Option<KniPort>> = if cfg.kni.enable && e == 0 {
            cfg.ports
                .iter()
                .zip(&links)
                .map(|(port, link)| {
                    // The port's XDP program sends [kni]'s traffic to the
                    // kernel itself: no TAP.
                    if crate::xdp::kernel_path_in_program(port) {
                        return Ok(None);
                    }
                    open_kni(
                        &cfg.kni,
                        port.id,
                        link.info().mac,
                        port_pool(port).buf_size(),
                    )
                    .map(Some)
                    .map_err(|error| SetupError::Open {
                        port: port.id,
                        link: format!("[kni] {}{}", cfg.kni.ifname, port.id),
                        error,
                    })
                })
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let mesh_end = meshes[e].take();
        let dispatcher = (mesh_end.is_some() || cfg.kni.enable).then(|| {
            let filter = cfg.kni.enable.then(|| KniFilter::new(&cfg.kni));
            let mut d = Dispatcher::new(e, n, mesh_end, filter, kni);
            d.set_rss(rss.clone());
            d
        });
        slots.push(EngineSlot {
            id: e,
            core: cores[e],
            stack,
            links,
            fault: fault_config(cfg).map(|mut fd| {
                fd.rx.seed = engine_seed(fd.rx.seed, e);
                fd.tx.seed = fd.rx.seed;
                fd
            }),
            dispatcher,
            cfg: engine_config(cfg),
            control: ControlSpec::from_config(cfg, e as u32),
            captures: cfg
                .ports
                .iter()
                .map(|p| crate::setup::pcap_series(cfg, e, p.id))
                .collect::<Result<_, _>>()?,
        });
    }
    Ok(slots)
}

/// The NIC's RSS every port's queues are spread by, when ustack knows it
/// (DPDK ports whose key and indirection table were programmed or read
/// back) and it is the same on every port: the engines then find a
/// frame's owner and choose source ports as the NIC does.  `None`: the
/// engines steer by ustack's own flow hash (said once per port that has
/// RSS ustack could not use).
fn ports_rss(
    cfg: &Config,
    per_engine: &[Vec<QueueLink>],
    engines: usize,
) -> Option<Arc<stack::steer::RssSteering>> {
    let first = per_engine.first()?;
    let mut found: Option<(Vec<u8>, Vec<u16>, bool)> = None;
    let mut usable = true;
    for (port, link) in cfg.ports.iter().zip(first) {
        let table = match link {
            #[cfg(feature = "dpdk")]
            QueueLink::Dpdk(l) => match l.rss_table() {
                Ok(t) => Some((t.key[..40].to_vec(), t.reta.clone(), t.programmed)),
                Err(why) => {
                    if l.offloads().rss_hf != 0 {
                        eprintln!(
                            "ustack: [port{}] the port's RSS is not known to the engines ({why}): frames are steered to their engine in software",
                            port.id
                        );
                    }
                    None
                }
            },
            QueueLink::AfXdp(l) => match l.rss_table() {
                Some(Ok(t)) => Some((t.key[..40].to_vec(), t.reta.clone(), t.programmed)),
                Some(Err(why)) => {
                    eprintln!(
                        "ustack: [port{}] the interface's RSS is not known to the engines \
                         ({why}): frames are steered to their engine in software",
                        port.id
                    );
                    None
                }
                None => None,
            },
            _ => None,
        };
        match (table, &found) {
            (None, _) => usable = false,
            (Some(t), None) => found = Some(t),
            (Some(t), Some(f)) if t.0 == f.0 && t.1 == f.1 => {}
            (Some(_), Some(_)) => {
                eprintln!(
                    "ustack: [port{}] its RSS key or indirection table differs from port {}'s: frames are steered to their engine in software",
                    port.id, cfg.ports[0].id
                );
                usable = false;
            }
        }
    }
    let (key, reta, programmed) = found.filter(|_| usable)?;
    let entries = reta.len();
    match stack::steer::RssSteering::new(&key, reta, engines as u16) {
        Ok(r) => {
            eprintln!(
                "ustack: RSS: the engines compute the ports' Toeplitz hash and indirection table ({entries} entries, {}): each frame is read by the engine that owns it, and outgoing connections take source ports whose replies the NIC brings back",
                if programmed {
                    "written by ustack"
                } else {
                    "the driver's, read back"
                }
            );
            Some(Arc::new(r))
        }
        Err(e) => {
            eprintln!("ustack: RSS: {e}: frames are steered to their engine in software");
            None
        }
    }
}

/// A change every engine's stack applies (a route added or removed, later
/// from the CLI): run on each engine's thread between two loop turns.
pub type ControlFn = Arc<dyn Fn(&mut Stack) + Send + Sync>;

/// The sending side of the engines' control channels.
#[derive(Clone)]
pub struct Control {
    to: Vec<Sender<ControlFn>>,
}

impl Control {
    /// Channels for `engines` engines: the handle, and one receiver per
    /// engine for [`run_engines`].
    pub fn new(engines: usize) -> (Control, Vec<Receiver<ControlFn>>) {
        let (to, from) = (0..engines).map(|_| channel()).unzip();
        (Control { to }, from)
    }

    /// Has every engine apply `f` to its stack. Returns how many engines
    /// are still there to do it.
    pub fn broadcast(&self, f: impl Fn(&mut Stack) + Send + Sync + 'static) -> usize {
        let f: ControlFn = Arc::new(f);
        self.to
            .iter()
            .filter(|t| t.send(Arc::clone(&f)).is_ok())
            .count()
    }
}

/// The application of one engine, with what the engines share: control
/// messages, and "done" only once every engine's application is done (an
/// engine that stopped early would strand the frames the others hand it).
struct EngineApp<'a, A> {
    app: A,
    control: Option<Receiver<ControlFn>>,
    done: &'a AtomicUsize,
    engines: usize,
    counted: bool,
}

impl<A: Application> Application for EngineApp<'_, A> {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut work = false;
        if let Some(rx) = &self.control {
            loop {
                match rx.try_recv() {
                    Ok(f) => {
                        f(ctx.stack);
                        work = true;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        self.control = None;
                        break;
                    }
                }
            }
        }
        if !self.counted {
            work |= self.app.poll(ctx);
            if self.app.finished() {
                self.counted = true;
                self.done.fetch_add(1, Ordering::AcqRel);
            }
        }
        work
    }

    fn finished(&self) -> bool {
        self.done.load(Ordering::Acquire) >= self.engines
    }
}

/// Counters by name, as the stats file has them.
pub type Snapshot = Vec<(String, u64)>;

/// The counters of one engine: the stack's, the loop's, the ports', the
/// dispatcher's.
pub fn engine_snapshot(engine: &Engine<PortLink>) -> Vec<(String, u64)> {
    let mut s = crate::stats::snapshot(engine);
    if let Some(d) = engine.dispatch_counters() {
        d.visit(|name, v| s.push((name.to_string(), v)));
    }
    s
}

/// The counters of all engines: the sums first (gauges summed too, but the
/// memory per connection recomputed), then each engine's as
/// `engineN.name value`.
pub fn combine_snapshots(per_engine: &[Vec<(String, u64)>]) -> Vec<(String, u64)> {
    if per_engine.len() == 1 {
        return per_engine[0].clone();
    }
    let mut total: Vec<(String, u64)> = Vec::new();
    for snap in per_engine {
        for (name, v) in snap {
            match total.iter_mut().find(|(n, _)| n == name) {
                Some((_, t)) => *t += v,
                None => total.push((name.clone(), *v)),
            }
        }
    }
    let get = |t: &[(String, u64)], n: &str| t.iter().find(|(k, _)| k == n).map_or(0, |(_, v)| *v);
    let per_conn = get(&total, "tcp_memory_bytes")
        .checked_div(get(&total, "tcp_connections"))
        .unwrap_or(0);
    if let Some((_, v)) = total
        .iter_mut()
        .find(|(n, _)| n == "tcp_memory_per_connection")
    {
        *v = per_conn;
    }
    for (e, snap) in per_engine.iter().enumerate() {
        for (name, v) in snap {
            total.push((format!("engine{e}.{name}"), *v));
        }
    }
    total
}

/// Runs every engine until `stop` is set or every engine's application has
/// finished: engine `i` on a thread pinned to its core, its application
/// made on that thread by `make_app(i, stack)`. `report` gets every
/// engine's counters about every `tick` and once at the end. Returns the
/// applications, in engine order.
pub fn run_engines<A, F>(
    slots: Vec<EngineSlot>,
    make_app: F,
    control: Vec<Receiver<ControlFn>>,
    stop: &AtomicBool,
    tick: Duration,
    report: &mut dyn FnMut(&[Snapshot]),
) -> Result<Vec<A>, String>
where
    A: Application + Send,
    F: Fn(usize, &mut Stack) -> Result<A, String> + Sync,
{
    let n = slots.len();
    let snapshots: Mutex<Vec<Snapshot>> = Mutex::new(vec![Vec::new(); n]);
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let started = Barrier::new(n);
    let done = AtomicUsize::new(0);
    let mut control: Vec<Option<Receiver<ControlFn>>> = control.into_iter().map(Some).collect();
    control.resize_with(n, || None);
    let publish = |id: usize, e: &Engine<PortLink>| {
        let snap = engine_snapshot(e);
        if let Ok(mut s) = snapshots.lock() {
            s[id] = snap;
        }
    };
    let results: Vec<Result<Option<A>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = slots
            .into_iter()
            .zip(control)
            .map(|(slot, ctl)| {
                let (make_app, errors, started, done, publish) =
                    (&make_app, &errors, &started, &done, &publish);
                std::thread::Builder::new()
                    .name(format!("ustack-engine{}", slot.id))
                    .spawn_scoped(scope, move || -> Result<Option<A>, String> {
                        let id = slot.id;
                        let core = slot.core;
                        let mut engine = slot.into_engine();
                        let made = match core {
                            Some(c) => link::os::pin_to_cpu(c)
                                .map_err(|e| format!("engine {id}: cannot pin to core {c}: {e}")),
                            None => Ok(()),
                        }
                        .and_then(|()| make_app(id, &mut engine.stack));
                        if let Err(e) = &made {
                            if let Ok(mut errs) = errors.lock() {
                                errs.push(e.clone());
                            }
                        }
                        // Nobody runs until every application is made.
                        started.wait();
                        let failed = errors.lock().map_or(true, |e| !e.is_empty());
                        let app = made?;
                        if failed {
                            return Ok(None);
                        }
                        let mut app = EngineApp {
                            app,
                            control: ctl,
                            done,
                            engines: n,
                            counted: false,
                        };
                        engine
                            .run(&mut app, stop, tick, &mut |e| publish(id, e))
                            .map_err(|e| format!("engine {id}: {e}"))?;
                        Ok(Some(app.app))
                    })
                    .map_err(|e| format!("cannot start an engine thread: {e}"))
            })
            .collect();
        // Every engine's counters, while they run.
        while handles
            .iter()
            .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
        {
            std::thread::sleep(tick.min(Duration::from_millis(100)));
            if let Ok(s) = snapshots.lock() {
                report(&s);
            }
        }
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err("an engine thread panicked".to_string())),
                Err(e) => Err(e),
            })
            .collect()
    });
    if let Ok(s) = snapshots.lock() {
        report(&s);
    }
    let mut apps = Vec::with_capacity(n);
    let mut first_err = errors.lock().ok().and_then(|e| e.first().cloned());
    for r in results {
        match r {
            Ok(Some(a)) => apps.push(a),
            Ok(None) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(apps),
    }
}
