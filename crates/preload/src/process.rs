//! This process's part: the configuration `ustack run` handed over, the
//! engine (started on the first thread that needs it), where an address
//! belongs (ustack or the kernel), the stats file, and fork.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use api::Errno;
use runtime::config::{Config, PreloadMode};

use crate::guard::Inside;
use crate::notes;

/// The environment `ustack run` sets.
pub const ENV_CONFIG: &str = "USTACK_CONFIG";
pub const ENV_SET: &str = "USTACK_SET";
pub const ENV_STATS: &str = "USTACK_STATS";
/// The AF_PACKET fanout group every process of one `ustack run` joins.
pub const ENV_GROUP: &str = "USTACK_GROUP";

/// What the configuration says about addresses, and how to start the engine.
pub struct Settings {
    /// `capi::init`'s command line.
    init_args: Vec<String>,
    /// Every IPv4 address of ustack's interfaces (VIPs too).
    locals: Vec<Ipv4Addr>,
    /// The subnets of the interfaces: (network, mask).
    subnets: Vec<(u32, u32)>,
    /// Whether a port has a gateway (a default route).
    default_route: bool,
    /// Every IPv6 address of ustack's interfaces (`addr6`, `vip_addr6`),
    /// link-local ones aside.
    locals6: Vec<Ipv6Addr>,
    /// Their on-link prefixes: (network, mask).
    subnets6: Vec<(u128, u128)>,
    /// Whether a port has an IPv6 default router: `gateway6`, or one that
    /// router advertisements may give it (`net.inet6.ip6.accept_rtadv`).
    default_route6: bool,
    /// The configuration itself.
    cfg: Config,
}

static SETTINGS: OnceLock<Option<Settings>> = OnceLock::new();

/// What `ustack run` put in the environment, read when the library is
/// loaded: a program may change its environment before it makes a socket
/// (nginx gives its workers a fresh one).
struct Handed {
    config: Option<String>,
    sets: Option<String>,
    stats: Option<String>,
    group: Option<String>,
}

static HANDED: OnceLock<Handed> = OnceLock::new();

/// Reads the environment `ustack run` set (at load time).
pub fn read_environment() {
    HANDED.get_or_init(|| Handed {
        config: std::env::var(ENV_CONFIG).ok(),
        sets: std::env::var(ENV_SET).ok(),
        stats: std::env::var(ENV_STATS).ok(),
        group: std::env::var(ENV_GROUP).ok(),
    });
}

fn handed() -> &'static Handed {
    read_environment();
    HANDED.get().expect("set just above")
}

fn load() -> Option<Settings> {
    let path = handed().config.clone()?;
    let sets: Vec<String> = handed()
        .sets
        .clone()
        .map(|s| {
            s.split('\n')
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut cfg = match Config::from_file(&path) {
        Ok(c) => c,
        Err(e) => {
            notes::once(format!("{e}: every socket stays with the kernel"));
            return None;
        }
    };
    for s in &sets {
        if let Err(e) = cfg.apply_set(s) {
            notes::once(format!(
                "--set {s}: {e}: every socket stays with the kernel"
            ));
            return None;
        }
    }
    let mut init_args = vec!["libustack_preload".to_string(), "--conf".to_string(), path];
    for s in sets {
        init_args.push("--set".into());
        init_args.push(s);
    }
    Some(Settings::new(cfg, init_args))
}

/// The settings, if this process runs under `ustack run` with a valid
/// configuration (else every socket is the kernel's).
pub fn settings() -> Option<&'static Settings> {
    SETTINGS
        .get_or_init(|| {
            let _g = Inside::enter();
            load()
        })
        .as_ref()
}

/// Whether the engine sends what a call queued at once (`[dpdk]
/// pkt_tx_delay` 0), so the calls that send flush it (`io::sent`); with a
/// delay the engine's own turns send it, and a flush would do nothing.
pub fn sends_at_once() -> bool {
    settings().is_some_and(|s| s.cfg.dpdk.pkt_tx_delay.is_zero())
}

/// The network and mask of `addr/len`.
fn prefix6(addr: Ipv6Addr, len: u8) -> (u128, u128) {
    let mask = u128::MAX
        .checked_shl(128 - u32::from(len.min(128)))
        .unwrap_or(0);
    (u128::from(addr) & mask, mask)
}

/// Whether an IPv6 address only means something with a scope id (an
/// interface), which ustack's sockets do not take: link-local unicast
/// (fe80::/10) and interface- or link-local multicast.
fn needs_scope(ip: Ipv6Addr) -> bool {
    let s = ip.segments()[0];
    s & 0xffc0 == 0xfe80 || (ip.is_multicast() && s & 0x000f <= 2)
}

impl Settings {
    /// The addresses and routes of `cfg`'s ports.
    fn new(cfg: Config, init_args: Vec<String>) -> Settings {
        let mut locals = Vec::new();
        let mut subnets = Vec::new();
        let mut default_route = false;
        let (mut locals6, mut subnets6, mut default_route6) = (Vec::new(), Vec::new(), false);
        for p in &cfg.ports {
            if let Some(v4) = &p.ipv4 {
                locals.push(v4.addr);
                let mask = u32::from(v4.netmask);
                subnets.push((u32::from(v4.addr) & mask, mask));
                default_route |= v4.gateway.is_some();
            }
            locals.extend(p.vip_addrs.iter().copied());
            if let Some(v6) = &p.ipv6 {
                locals6.push(v6.addr);
                subnets6.push(prefix6(v6.addr, v6.prefix_len));
                for &vip in &p.vip_addrs6 {
                    locals6.push(vip);
                    subnets6.push(prefix6(vip, p.vip_prefix_len));
                }
                default_route6 |= v6.gateway.is_some() || cfg.sysctls.ip6_accept_rtadv;
            }
        }
        Settings {
            init_args,
            locals,
            subnets,
            default_route,
            locals6,
            subnets6,
            default_route6,
            cfg,
        }
    }

    /// Whether the configuration gives ustack an IPv6 address (its
    /// AF_INET6 sockets are then ustack's).
    pub fn has_ipv6(&self) -> bool {
        !self.locals6.is_empty()
    }

    /// Whether a socket bound to `ip` is ustack's: the unspecified
    /// address or one of its interfaces' (loopback, link-local and the
    /// host's own addresses are the kernel's).  An IPv4-mapped IPv6
    /// address is decided as its IPv4 address.
    pub fn binds_here(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(v4) => v4.is_unspecified() || self.locals.contains(&v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.binds_here(IpAddr::V4(v4)),
                None => v6.is_unspecified() || self.locals6.contains(&v6),
            },
        }
    }

    /// Whether a connection to `ip` goes through ustack: anything but
    /// loopback (and, for IPv6, the link-local addresses, which need a
    /// scope id) that ustack has a route to.  An IPv4-mapped IPv6 address
    /// is decided as its IPv4 address.
    pub fn routes_here(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4,
                None => return self.routes_here6(v6),
            },
        };
        if ip.is_loopback() || ip.is_unspecified() {
            return false;
        }
        let a = u32::from(ip);
        self.default_route
            || self.locals.contains(&ip)
            || self.subnets.iter().any(|&(net, mask)| a & mask == net)
    }

    fn routes_here6(&self, ip: Ipv6Addr) -> bool {
        if ip.is_loopback() || ip.is_unspecified() || needs_scope(ip) {
            return false;
        }
        let a = u128::from(ip);
        self.default_route6
            || self.locals6.contains(&ip)
            || self.subnets6.iter().any(|&(net, mask)| a & mask == net)
    }
}

const ENGINE_NONE: u8 = 0;
const ENGINE_UP: u8 = 1;
const ENGINE_FAILED: u8 = 2;

/// Whether this process has its engine.
static ENGINE: AtomicU8 = AtomicU8::new(ENGINE_NONE);

/// The process that started the engine [`ENGINE`] describes.  A child
/// made by vfork (Python's subprocess, before it execs) shares this
/// memory and sees the engine up, but is another process: its `_exit` or
/// `exec` must leave the parent's engine and connections alone.
static ENGINE_PID: AtomicU32 = AtomicU32::new(0);

/// Whether the calling process is the one that started this engine (not
/// a vfork child sharing its memory).
fn engine_is_ours() -> bool {
    // SAFETY: getpid takes no arguments; glibc asks the kernel each time,
    // so a vfork child gets its own pid.
    ENGINE_PID.load(Ordering::Acquire) == unsafe { libc::getpid() } as u32
}

/// Held while a thread starts or stops this process's engine.
static STARTING: Mutex<()> = Mutex::new(());

/// Set in a process that forked while it had its engine (the parent).
static FORKED: AtomicBool = AtomicBool::new(false);

impl Settings {
    /// The first `link=dpdk` port's number, if any.
    fn dpdk_port(&self) -> Option<u16> {
        self.cfg
            .ports
            .iter()
            .find(|p| matches!(p.link, runtime::config::LinkSpec::Dpdk))
            .map(|p| p.id)
    }
}

/// After the program closed a ustack fd.  A process that forked while it
/// had its engine (a pre-fork server's parent) and now holds no ustack fd
/// at all stops its engine: its packet sockets leave the port's fanout
/// group, so the flows the group's hash gave it go to its children, which
/// serve the listeners, instead of waiting in a ring nobody reads (its
/// thread is in waitpid) or meeting an engine without a listener.  A
/// socket it makes later starts an engine again.  In run to completion
/// only the thread that drives the engine stops it.
pub fn after_close() {
    if !FORKED.load(Ordering::Acquire) || api::live_fds() != 0 || !engine_up() {
        return;
    }
    let Some(s) = settings() else { return };
    if s.dpdk_port().is_some() {
        // The children cannot start an engine on a DPDK port (see
        // `refuse_dpdk_child`): this one goes on serving it.
        return;
    }
    let _one = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if !engine_up() || api::live_fds() != 0 {
        return;
    }
    match s.cfg.preload.mode {
        PreloadMode::Rtc => {
            if !api::attached() {
                return;
            }
            capi::stop_engine();
        }
        PreloadMode::Rtw => {
            RTW_EXITING.store(RTW_RELEASE, Ordering::Release);
            let end = Instant::now() + RELEASE_WAIT;
            while RTW_EXITING.load(Ordering::Acquire) != RTW_STOPPED {
                if Instant::now() >= end {
                    notes::once(
                        "the engine's thread did not stop after the last socket closed: it                          stays",
                    );
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            RTW_EXITING.store(RTW_RUNNING, Ordering::Release);
        }
    }
    ENGINE.store(ENGINE_NONE, Ordering::Release);
    notes::once(
        "closed its last ustack socket after forking: its engine stopped and left the port to          the processes it forked (a new socket starts one again)",
    );
}

/// How long [`after_close`] waits for the engine's thread (run to wait)
/// to stop.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Whether this process has started its engine.
pub fn engine_up() -> bool {
    ENGINE.load(Ordering::Acquire) == ENGINE_UP
}

/// Whether this process's engine cannot start (it failed to, or this is a
/// child refused DPDK after fork): its sockets not placed yet are dead
/// (`dead`).
pub fn engine_failed() -> bool {
    ENGINE.load(Ordering::Acquire) == ENGINE_FAILED
}

/// Starts this process's engine on the calling thread if it has none:
/// the thread then drives it (run to completion) whenever it waits.
/// Called inside the guard.
pub fn ensure_engine() -> Result<(), Errno> {
    // One thread starts it; the others wait for it.
    let _one = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    match ENGINE.load(Ordering::Acquire) {
        ENGINE_UP => {
            if let Some(s) = settings() {
                start_thread_engine(s);
            }
            return Ok(());
        }
        ENGINE_FAILED => return Err(Errno(libc::ENETDOWN)),
        _ => {}
    }
    let Some(s) = settings() else {
        return Err(Errno(libc::ENETDOWN));
    };
    // The processes of a run start their engines one at a time, so each
    // sees those before it in the group (its core and place follow).
    let _turn = group_lock();
    let r = match s.cfg.preload.mode {
        PreloadMode::Rtc => start_here(s),
        PreloadMode::Rtw => start_engine_thread(s),
    };
    if r.is_ok() {
        // SAFETY: getpid takes no arguments.
        ENGINE_PID.store(unsafe { libc::getpid() } as u32, Ordering::Release);
    }
    ENGINE.store(
        if r.is_ok() { ENGINE_UP } else { ENGINE_FAILED },
        Ordering::Release,
    );
    r
}

/// An exclusive lock held by the process of the group that is starting
/// its engine: a Unix socket bound to an abstract name, which one socket
/// at a time can hold and which goes with the process (no file is left
/// behind).  `None` if there is no group, or after 5 s of trying (then
/// the processes start unordered).
fn group_lock() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let group = handed().group.as_deref()?;
    // SAFETY: socket takes no pointers.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return None;
    }
    // SAFETY: a fresh fd nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_un is plain data; all-zero is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let name = format!("ustack-g{group}-lock");
    for (d, b) in a.sun_path[1..].iter_mut().zip(name.bytes()) {
        *d = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        // SAFETY: `a` is a live sockaddr_un of at least `len` bytes.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&a as *const libc::sockaddr_un).cast(),
                len as libc::socklen_t,
            )
        };
        if r == 0 {
            return Some(fd);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Starts the engine on the calling thread.
fn start_here(s: &'static Settings) -> Result<(), Errno> {
    let r = start_on_this_thread(s, None);
    if r.is_ok() {
        ENGINES.store(1, Ordering::Release);
    }
    r
}

/// The engines this process has started (its first, and those of threads
/// that got one of their own).
static ENGINES: AtomicUsize = AtomicUsize::new(0);

/// Run to completion, a thread without an engine that starts using the
/// network while the process has its engine already (a thread of a
/// program whose threads each wait in their own epoll: wrk): it gets an
/// engine of its own, on a core of `lcore_mask` that no engine of the
/// port's group holds yet, its own member of the port's fanout group
/// (its outgoing connections' source ports chosen so that their replies
/// reach it).  Without a free core (or without a shared AF_PACKET port)
/// it shares the process's engine, as before.
fn start_thread_engine(s: &'static Settings) {
    thread_local! {
        static TRIED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if s.cfg.preload.mode != PreloadMode::Rtc || api::attached() || TRIED.with(|t| t.replace(true))
    {
        return;
    }
    let cores = runtime::cores::engine_cores(&s.cfg);
    if cores.len() < 2 || handed().group.is_none() || s.packet_sockets_needed() == 0 {
        return;
    }
    let _turn = group_lock();
    let index = ENGINES.load(Ordering::Acquire);
    if start_on_this_thread(s, Some(index)).is_ok() {
        ENGINES.store(index + 1, Ordering::Release);
    }
}

/// Starts an engine on the calling thread: the process's first
/// (`thread_engine` None) or one more (`Some(index)`, its place among
/// the process's engines), which needs a free core and is not started
/// without one (EBUSY).
fn start_on_this_thread(s: &'static Settings, thread_engine: Option<usize>) -> Result<(), Errno> {
    let mut args = s.init_args.clone();
    // lcore_mask: the processes of a run take its cores in turn (the
    // engines already in the group count), one engine each.
    let cores = runtime::cores::engine_cores(&s.cfg);
    let mut place = None;
    if cores.len() > 1 {
        let group: u16 = handed()
            .group
            .as_deref()
            .and_then(|g| g.parse().ok())
            .unwrap_or(0);
        let joined = runtime::procgroup::members(group);
        if thread_engine.is_some() && joined >= cores.len() {
            // Every core has its engine: the thread shares the process's.
            return Err(Errno(libc::EBUSY));
        }
        let k = joined % cores.len();
        place = Some(stack::steer::FlowSteering::new(
            cores.len() as u16,
            k as u16,
        ));
        if s.cfg
            .ports
            .iter()
            .any(|p| matches!(p.link, runtime::config::LinkSpec::AfXdp(_)))
        {
            // AF_XDP: the engine's socket binds queue k of the port.
            args.push("--group-member".into());
            args.push(format!("{k}/{}", cores.len()));
        }
        if let Some(c) = cores[k] {
            args.push("--set".into());
            args.push(format!(
                "dpdk.lcore_mask={:x}{}",
                1u32 << (c % 4),
                "0".repeat(c / 4)
            ));
        }
    }
    if let Some(stats) = &handed().stats {
        // A thread's engine writes a file named by its thread id (ids of
        // threads and processes are of one space: no two alike).
        let id = match thread_engine {
            None => std::process::id(),
            // SAFETY: gettid takes no arguments.
            Some(_) => (unsafe { libc::gettid() }) as u32,
        };
        args.push("--stats".into());
        args.push(format!("{stats}.{id}"));
    }
    let started = match thread_engine {
        None => capi::init(&args),
        Some(_) => capi::init_another(&args),
    };
    match started {
        Ok(()) => {
            if thread_engine.is_none() {
                // Before the group can hand this engine a connection.
                crate::place::listeners_on_new_engine();
            }
            if let Err(e) = share_ports(s, thread_engine.unwrap_or(0)) {
                eprintln!("libustack_preload[{}]: {e}", std::process::id());
                match thread_engine {
                    None => {
                        capi::ustack_fini();
                    }
                    Some(_) => capi::stop_thread_engine(),
                }
                return Err(Errno(libc::ENETDOWN));
            }
            if let Some(i) = thread_engine {
                notes::once(format!(
                    "a thread that waits on its own got an engine of its own (engine {i} of this                      process, its own member of the port's group)"
                ));
            }
            // As the k-th of the lcore_mask's N processes to join, its
            // outgoing connections' replies hash to it once all N have.
            if place.is_some() {
                let _ = api::with_engine::<runtime::PortLink, _>(0, |e| {
                    e.stack.set_flow_steering(place)
                });
            }
            // Made after the engine's thread-locals, so dropped before
            // them when the thread ends (exit() ends the main thread's
            // before its atexit handlers run).
            FINAL_STATS.with(|_| ());
            Ok(())
        }
        Err((msg, e)) if thread_engine.is_some() => {
            notes::once(format!(
                "a thread's own engine did not start ({msg}): it shares the process's"
            ));
            Err(e)
        }
        Err((msg, e)) => {
            eprintln!("{msg}");
            notes::once("the engine did not start: ustack sockets fail with ENETDOWN");
            Err(e)
        }
    }
}

/// Set at exit in run to wait: the engine thread closes the connections,
/// writes its counters and says so.
static RTW_EXITING: AtomicU8 = AtomicU8::new(0);
const RTW_RUNNING: u8 = 0;
const RTW_STOP: u8 = 1;
const RTW_STOPPED: u8 = 2;
/// The engine thread stops and drops its engine, the process living on
/// ([`after_close`]).
const RTW_RELEASE: u8 = 3;

/// Run to wait: the engine on a thread of its own, which runs its loop for
/// the life of the process; the program's threads post their calls to it.
fn start_engine_thread(s: &'static Settings) -> Result<(), Errno> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("ustack-engine".into())
        .spawn(move || {
            // Everything this thread calls is ustack's own.
            std::mem::forget(Inside::enter());
            let r = start_here(s);
            let ok = r.is_ok();
            let _ = tx.send(r);
            if !ok {
                return;
            }
            let _ = api::run(|| {
                tick_stats();
                RTW_EXITING.load(Ordering::Acquire) == RTW_RUNNING
            });
            let release = RTW_EXITING.load(Ordering::Acquire) == RTW_RELEASE;
            close_for_exit();
            if release {
                capi::stop_engine();
            } else {
                capi::write_stats();
            }
            RTW_EXITING.store(RTW_STOPPED, Ordering::Release);
        });
    if let Err(e) = spawned {
        notes::once(format!(
            "cannot start the engine's thread (run to wait): {e}"
        ));
        return Err(Errno(libc::ENETDOWN));
    }
    let r = rx.recv().unwrap_or(Err(Errno(libc::ENETDOWN)));
    // Once per process image: a child forked in run to wait inherits the
    // registration and starts an engine thread of its own.
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    if r.is_ok() {
        // SAFETY: registers a plain function to run at exit.
        AT_EXIT.call_once(|| unsafe {
            libc::atexit(rtw_at_exit);
        });
    }
    r
}

/// At exit in run to wait: the engine thread ends the connections as the
/// kernel would and writes its counters, while the process waits a little.
extern "C" fn rtw_at_exit() {
    if !engine_up() {
        // A child that never started its own engine thread.
        return;
    }
    RTW_EXITING.store(RTW_STOP, Ordering::Release);
    let end = Instant::now() + exit_linger() + EXIT_FLUSH * 2;
    while RTW_EXITING.load(Ordering::Acquire) != RTW_STOPPED && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Joins this process's engine to the fanout group of the `ustack run`
/// it belongs to, so that the processes it forks share its ports.
fn share_ports(s: &Settings, index: usize) -> Result<(), String> {
    let Some(group) = handed().group.clone() else {
        return Ok(());
    };
    let group: u16 = group
        .parse()
        .map_err(|_| format!("{ENV_GROUP}={group}: not a fanout group id"))?;
    let several = runtime::cores::engine_cores(&s.cfg).len() > 1;
    if let Some(p) = s.cfg.ports.iter().find(|p| match p.link {
        runtime::config::LinkSpec::AfPacket(_) => false,
        // A queue per process: one per core of lcore_mask.
        runtime::config::LinkSpec::AfXdp(_) => !several,
        _ => true,
    }) {
        // This port cannot be shared between processes: this one serves
        // it alone.
        notes::once(format!(
            "[port{}] link={}: one process serves this port (processes that share a port \
             need link=af_packet, or link=af_xdp with an lcore_mask of a core per process); \
             a process forked from this one cannot start an engine beside it",
            p.id,
            runtime::setup::link_name(&p.link)
        ));
        return Ok(());
    }
    api::with_engine::<runtime::PortLink, _>(0, |e| {
        runtime::procgroup::share_ports_engine(e, &s.cfg, group, index)
    })
    .map_err(|e| format!("the engine: {e}"))?
    .ok_or("the engine is not of the configured kind")?
    .map_err(|e| e.to_string())
}

/// Before `_exit` (which skips the thread's destructors): the connections
/// of the engine this thread drives end as at `exit`; not in a vfork
/// child whose exec failed, whose `_exit` ends only itself.
pub fn before_exit() {
    if !engine_up() || !engine_is_ours() {
        return;
    }
    if !api::attached() {
        // Run to wait: the engine's thread ends the connections and
        // writes the counters, as at exit.
        if settings().is_some_and(|s| s.cfg.preload.mode == PreloadMode::Rtw) {
            rtw_at_exit();
        }
        return;
    }
    let _g = Inside::enter();
    close_for_exit();
    capi::write_stats();
}

/// Before an `exec` (crate::exec): the new image has no engine, so the
/// connections the program closed deliver their data and FIN first, as
/// the kernel would deliver them after the exec, within `exit_linger`, and
/// the counters are written a last time.  Nothing else is closed: an exec
/// that fails leaves the process as it was.  Only the thread that drives
/// the engine can turn it (run to completion); in run to wait, or from
/// another thread, what the engine has not sent by the exec is lost, said
/// once.
pub fn before_exec() {
    if !engine_up() || !engine_is_ours() {
        return;
    }
    if !api::attached() {
        notes::once(
            "exec from a thread that does not drive this process's engine (or in run to wait):              data the program's closed connections had not delivered yet is lost with the engine",
        );
        return;
    }
    let _g = Inside::enter();
    let linger = exit_linger();
    if let Ok(reset) = api::finish_closes(EXIT_FLUSH, linger) {
        if reset > 0 {
            notes::once(format!(
                "{reset} closed connection(s) still delivering data at exec were reset after \
                 [preload] exit_linger={} ms",
                linger.as_millis()
            ));
        }
    }
    capi::write_stats();
}

/// # Safety
/// As `_exit`'s.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: libc::c_int) -> ! {
    if !crate::guard::inside() {
        before_exit();
    }
    // SAFETY: the caller's status.
    unsafe { crate::real::exit_now(status) }
}

/// Writes the stats file a last time when the engine's thread ends.
struct FinalStats;

impl Drop for FinalStats {
    fn drop(&mut self) {
        let _g = Inside::enter();
        // The program's connections end as the kernel would end them at
        // exit, and the FINs leave before the engine goes.
        close_for_exit();
        capi::write_stats();
    }
}

/// How long an exiting process keeps its engine turning for the closes
/// of its connections to leave.
const EXIT_FLUSH: Duration = Duration::from_millis(50);

/// `[preload] exit_linger`: how long closed connections may keep an
/// exiting process's engine turning.
fn exit_linger() -> Duration {
    settings().map_or(Duration::ZERO, |s| s.cfg.preload.exit_linger)
}

/// Ends the calling thread's connections as the kernel would at exit:
/// FINs, and the data still queued delivered first, within `exit_linger`.
fn close_for_exit() {
    let linger = exit_linger();
    if let Ok(reset) = api::close_all(EXIT_FLUSH, linger) {
        if reset > 0 {
            notes::once(format!(
                "{reset} closed connection(s) still delivering data when the process exited were \
                 reset after [preload] exit_linger={} ms",
                linger.as_millis()
            ));
        }
    }
}

thread_local! {
    static FINAL_STATS: FinalStats = const { FinalStats };
}

thread_local! {
    /// When the stats file is next due, and the waits since the clock was
    /// last read ([`tick_stats_busy`]).
    static NEXT_STATS: std::cell::Cell<(Option<Instant>, u32)> =
        const { std::cell::Cell::new((None, 0)) };
    /// Whether the last rewrite changed counters (see [`stats_deadline`]).
    static STATS_MOVING: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

const STATS_EVERY: Duration = Duration::from_millis(100);

/// Rewrites the stats file when it is due (the engine's thread, from its
/// waits).
pub fn tick_stats() {
    let now = Instant::now();
    let due = NEXT_STATS.with(|n| match n.get() {
        (Some(t), _) if now < t => false,
        _ => {
            n.set((Some(now + STATS_EVERY), 0));
            true
        }
    });
    if due {
        STATS_MOVING.set(capi::write_stats());
    }
}

/// When a sleeping wait must wake to rewrite the stats file: its next
/// rewrite while the last one changed counters (so that the file catches
/// up with the last activity), none once a rewrite found nothing new (an
/// idle wait then sleeps until something happens; the wait's next round
/// after that rewrites it).
pub fn stats_deadline() -> Option<Instant> {
    if !STATS_MOVING.get() {
        return None;
    }
    NEXT_STATS.with(|n| n.get().0)
}

/// `left` of a wait, shortened to the stats file's next rewrite when one
/// is due ([`stats_deadline`]).
pub fn until_stats(left: Option<Duration>) -> Option<Duration> {
    match stats_deadline() {
        None => left,
        Some(t) => {
            let d = t.saturating_duration_since(Instant::now());
            Some(left.map_or(d, |l| l.min(d)))
        }
    }
}

/// [`tick_stats`] from a wait's first look, which a program's busy loop
/// makes many times a millisecond: the clock is read every
/// [`BUSY_TICK_EVERY`]th time (a wait that sleeps ticks after its sleep).
pub fn tick_stats_busy() {
    let look = NEXT_STATS.with(|n| {
        let (t, k) = n.get();
        n.set((t, k.wrapping_add(1)));
        k.is_multiple_of(BUSY_TICK_EVERY)
    });
    if look {
        tick_stats();
    }
}

const BUSY_TICK_EVERY: u32 = 32;

impl Settings {
    /// How many packet sockets an engine of this configuration opens
    /// (a link and an ARP tap per AF_PACKET port).
    /// The first `link=af_xdp` port's number, if any.
    pub fn af_xdp_port(&self) -> Option<u16> {
        self.cfg
            .ports
            .iter()
            .find(|p| matches!(p.link, runtime::config::LinkSpec::AfXdp(_)))
            .map(|p| p.id)
    }

    pub fn packet_sockets_needed(&self) -> usize {
        self.cfg
            .ports
            .iter()
            .filter(|p| matches!(p.link, runtime::config::LinkSpec::AfPacket(_)))
            .count()
            * 2
    }
}

/// In a child after fork: the parent's engine is not the child's.  It is
/// forgotten (nothing sent, no shared ring touched, its packet sockets
/// closed in the child); the listeners and bound UDP sockets the child
/// inherited are set up again, pending, for an engine of its own; the
/// connections stay the parent's (their numbers, still held, fail).
pub extern "C" fn child_after_fork() {
    crate::table::count_fork();
    crate::privileges::forget_after_fork();
    // The parent's forks are not the child's.
    FORKED.store(false, Ordering::Release);
    let held = FORK_HOLD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if ENGINE.load(Ordering::Acquire) != ENGINE_UP {
        return;
    }
    let _g = Inside::enter();
    let (fds, inherited) = api::forget_after_fork_held(held);
    // The engine thread of run to wait is the parent's: a new one starts
    // when the child first needs it.
    RTW_EXITING.store(RTW_RUNNING, Ordering::Release);
    for fd in fds {
        // SAFETY: the parent's engine's fds, which nothing in the child
        // uses any more.
        unsafe { crate::real::close(fd) };
    }
    capi::forget_after_fork();
    let refused = refuse_dpdk_child();
    if !refused {
        ENGINE.store(ENGINE_NONE, Ordering::Release);
    }
    let mut t = crate::table::lock();
    t.each_epoll(|s| s.ustack = None);
    for i in inherited {
        use crate::table::SetOpt;
        if i.connection && !refused {
            // The parent's: its number stays held, as a kernel fd.
            continue;
        }
        let int = |on: bool| on as libc::c_int;
        let mut opts = vec![
            SetOpt::int(libc::SOL_SOCKET, libc::SO_REUSEADDR, int(i.reuseaddr)),
            SetOpt::int(libc::SOL_SOCKET, libc::SO_REUSEPORT, int(i.reuseport)),
        ];
        // Before the bind, as the parent set it: it decides whether an
        // AF_INET6 listener on [::] takes IPv4 connections too.
        if i.domain == libc::AF_INET6 {
            opts.push(SetOpt::int(
                libc::IPPROTO_IPV6,
                libc::IPV6_V6ONLY,
                int(i.v6only),
            ));
        }
        if i.mark != 0 {
            opts.push(SetOpt::new(
                libc::SOL_SOCKET,
                libc::SO_MARK,
                &i.mark.to_ne_bytes(),
            ));
        }
        t.add_pending(
            i.fd,
            crate::table::Pending {
                domain: i.domain,
                ty: if i.stream {
                    libc::SOCK_STREAM
                } else {
                    libc::SOCK_DGRAM
                },
                protocol: 0,
                nonblock: i.nonblock,
                opts,
                bound: Some(i.local),
                backlog: (i.stream && !i.connection).then_some(INHERITED_BACKLOG),
                errored_file: false,
                connection: i.connection,
            },
        );
    }
    drop(t);
    if !refused {
        notes::once(
            "forked after this process started its engine: the child sets up the listeners it \
             inherited again on an engine of its own; the connections stay the parent's",
        );
    }
}

/// In a child forked while its parent had its engine on a `link=dpdk`
/// port: DPDK's EAL was started in this process image and cannot start
/// again here (its memory, its threads and the port's queues are the
/// parent's), so the child gets no engine.  Said at the fork, by name,
/// with what to use instead; the sockets it inherited (listeners, bound
/// UDP sockets and connections) are pending, and dead (`dead`): they behave
/// as Linux's sockets whose network went down (epoll_ctl works, a wait
/// reports EPOLLERR | EPOLLHUP, accept, read and write fail with
/// ENETDOWN); the parent keeps the port.  Returns whether the child was
/// refused.
fn refuse_dpdk_child() -> bool {
    let Some(port) = settings().and_then(Settings::dpdk_port) else {
        return false;
    };
    ENGINE.store(ENGINE_FAILED, Ordering::Release);
    notes::once(format!(
        "[port{port}] link=dpdk: forked after this process started its engine, and DPDK's EAL \
         cannot start again in a forked child: this child has no engine and its ustack sockets \
         are as sockets whose network went down (waits report an error, accept, read and \
         write fail with ENETDOWN; the parent keeps the port); for workers of their own use \
         link=af_packet, or link=af_xdp with an lcore_mask of a core per process"
    ));
    true
}

/// The workers held while a thread forks in run to wait (the engine is on
/// its own thread, not the forking one).
static FORK_HOLD: Mutex<Option<api::ForkHold>> = Mutex::new(None);

/// pthread_atfork's prepare: in run to wait, the engine's thread stops
/// between two steps for the fork, so the child can take its engine
/// apart (close the parent's packet sockets and rings in the child, set
/// the listeners up again); in run to completion the forking thread is
/// the engine's and nothing needs holding.
pub extern "C" fn before_fork() {
    if !engine_up() || crate::guard::inside() {
        return;
    }
    let _g = Inside::enter();
    let held = api::hold_for_fork();
    *FORK_HOLD.lock().unwrap_or_else(|e| e.into_inner()) = held;
}

/// pthread_atfork's parent side: the held engine goes on.
pub extern "C" fn parent_after_fork() {
    crate::table::count_fork();
    let held = FORK_HOLD.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(h) = held {
        let _g = Inside::enter();
        h.release();
    }
    if engine_up() {
        FORKED.store(true, Ordering::Release);
    }
}

/// The backlog of a listener set up again in a child (the parent's is not
/// kept): the kernel's default ceiling, which `kern.ipc.somaxconn` caps.
const INHERITED_BACKLOG: libc::c_int = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(ports: &str) -> Settings {
        let text = format!("[dpdk]\nlcore_mask=1\nport_list=0\n\n{ports}");
        let cfg = Config::parse(&text, "test.ini").unwrap_or_else(|e| panic!("{e}"));
        Settings::new(cfg, Vec::new())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ipv4_only_has_no_ipv6() {
        let s = settings("[port0]\naddr=10.99.1.2\nnetmask=255.255.255.0\n");
        assert!(!s.has_ipv6());
        assert!(s.binds_here(ip("10.99.1.2")) && s.binds_here(ip("0.0.0.0")));
        assert!(!s.binds_here(ip("127.0.0.1")) && !s.binds_here(ip("10.99.1.3")));
        assert!(s.routes_here(ip("10.99.1.1")));
        // No gateway: off the subnet is the kernel's.
        assert!(!s.routes_here(ip("10.98.0.1")));
        assert!(!s.routes_here(ip("127.0.0.1")));
        assert!(!s.routes_here(ip("fd99::1")), "no IPv6 route at all");
    }

    #[test]
    fn ipv6_binds_to_its_addresses_and_the_unspecified_one() {
        let s = settings(
            "[port0]\naddr=10.99.1.2\nnetmask=255.255.255.0\naddr6=fd99:1::2/64\n\
             vip_addr6=fd98::7\nvip_prefix_len=120\n",
        );
        assert!(s.has_ipv6());
        for here in [
            "::",
            "fd99:1::2",
            "fd98::7",
            "::ffff:10.99.1.2",
            "::ffff:0.0.0.0",
        ] {
            assert!(s.binds_here(ip(here)), "{here}");
        }
        for kernel in [
            "::1",
            "fe80::1",
            "fd99:1::3",
            "::ffff:127.0.0.1",
            "::ffff:10.99.1.3",
        ] {
            assert!(!s.binds_here(ip(kernel)), "{kernel}");
        }
    }

    #[test]
    fn ipv6_routes_on_link_and_by_the_default_router() {
        let no_rtadv = "[freebsd.sysctl]\nnet.inet6.ip6.accept_rtadv=0\n";
        let s = settings(&format!(
            "[port0]\naddr=10.99.1.2\nnetmask=255.255.255.0\naddr6=fd99:1::2/64\n\
             vip_addr6=fd98::7\nvip_prefix_len=120\n{no_rtadv}"
        ));
        for here in [
            "fd99:1::1",
            "fd99:1::ffff:1",
            "fd98::80",
            "::ffff:10.99.1.1",
        ] {
            assert!(s.routes_here(ip(here)), "{here}");
        }
        // Loopback, the unspecified address, what needs a scope id, off
        // link without a router, and mapped addresses by their IPv4 rule.
        for kernel in [
            "::1",
            "::",
            "fe80::1",
            "febf::1",
            "ff02::1",
            "fd99:2::1",
            "fd98::1:0",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.98.0.1",
        ] {
            assert!(!s.routes_here(ip(kernel)), "{kernel}");
        }

        // gateway6 is a default route ...
        let s = settings(&format!(
            "[port0]\naddr6=fd99:1::2/64\ngateway6=fd99:1::1\n{no_rtadv}"
        ));
        assert!(s.routes_here(ip("2001:db8::1")) && s.routes_here(ip("ff05::1")));
        assert!(!s.routes_here(ip("fe80::1")) && !s.routes_here(ip("::1")));
        // ... and so is a router that advertisements may bring.
        let s = settings("[port0]\naddr6=fd99:1::2/64\n");
        assert!(s.routes_here(ip("2001:db8::1")));
        assert!(!s.routes_here(ip("10.0.0.1")), "no IPv4 route");
    }

    #[test]
    fn prefixes() {
        let a: Ipv6Addr = "fd99:1:2:3:4:5:6:7".parse().unwrap();
        assert_eq!(prefix6(a, 128), (u128::from(a), u128::MAX));
        assert_eq!(prefix6(a, 0), (0, 0));
        let (net, mask) = prefix6(a, 64);
        assert_eq!(
            Ipv6Addr::from(net),
            "fd99:1:2:3::".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(mask, u128::MAX << 64);
    }
}
