//! The benchmark's processes: a server or a client, on ustack or on the
//! kernel, pinned to a core; and the in-process pair used for instruction
//! counts and profiles.
//!
//! A process talks to the orchestrator through its standard streams: it
//! prints `ready` once it serves, `result ...` when it has measured,
//! `memory ...` when asked by a `report` line on its standard input, and it
//! stops when its standard input closes.

use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use runtime::{AppContext, Application};
use stack::SocketHandle;

use crate::kernel::{self, KernelNet};
use crate::logic::{Budget, Client, Measure, Server, Workload};
use crate::mem;
use crate::net::Family;
use crate::rust_async;
use crate::us::{self, UsNet};

/// Which stack a process runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Ustack,
    Linux,
    /// ustack through the async Rust API (`rust_async.rs`).
    RustAsync,
}

impl std::str::FromStr for Which {
    type Err = String;
    fn from_str(s: &str) -> Result<Which, String> {
        match s {
            "ustack" | "us" => Ok(Which::Ustack),
            "linux" | "kernel" => Ok(Which::Linux),
            "rust_async" => Ok(Which::RustAsync),
            _ => Err(format!("unknown stack {s:?} (ustack, rust_async or linux)")),
        }
    }
}

/// What a process is told on its command line.
#[derive(Debug, Clone)]
pub struct ProcArgs {
    pub which: Which,
    pub cpu: Option<usize>,
    pub port: u16,
    /// The shm link's file (ustack).
    pub link: PathBuf,
    pub workload: Workload,
    pub budget: Budget,
    /// The kernel side's `epoll_wait` timeout when nothing is ready.
    pub epoll_timeout: Duration,
    /// IPv4 or IPv6.
    pub family: Family,
}

/// The orchestrator's requests, read from standard input by a thread.
struct Control {
    stop: Arc<AtomicBool>,
    report: Arc<AtomicBool>,
}

impl Control {
    fn spawn() -> Control {
        let stop = Arc::new(AtomicBool::new(false));
        let report = Arc::new(AtomicBool::new(false));
        let (s, r) = (Arc::clone(&stop), Arc::clone(&report));
        std::thread::spawn(move || {
            let stdin = io::stdin();
            for line in stdin.lock().lines() {
                match line.as_deref().map(str::trim) {
                    Ok("report") => r.store(true, Ordering::Release),
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            s.store(true, Ordering::Release);
        });
        Control { stop, report }
    }

    fn stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn take_report(&self) -> bool {
        self.report.load(Ordering::Relaxed) && self.report.swap(false, Ordering::AcqRel)
    }
}

pub(crate) fn say(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn pin(cpu: Option<usize>) -> Result<(), String> {
    if let Some(c) = cpu {
        link::os::pin_to_cpu(c).map_err(|e| format!("cannot pin to cpu {c}: {e}"))?;
    }
    link::os::raise_nofile_limit().map_err(|e| format!("cannot raise the fd limit: {e}"))?;
    Ok(())
}

pub(crate) fn result_line(m: &Measure) -> String {
    format!(
        "result units={} elapsed_us={} errors={}",
        m.units,
        m.elapsed.as_micros(),
        m.errors
    )
}

/// The server on ustack as an engine application.
struct ServerApp(Server<SocketHandle>);

impl Application for ServerApp {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        self.0.step(&mut UsNet { ctx })
    }
}

/// The client on ustack as an engine application.
struct ClientApp(Client<SocketHandle>);

impl Application for ClientApp {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        self.0.step(&mut UsNet { ctx })
    }
}

fn us_memory_line(engine: &runtime::Engine<link::ShmLink>, conns: usize) -> String {
    let m = us::memory(engine);
    format!(
        "memory tcp_bytes={} tcp_conns={} pool_bytes={} app_conns={conns} rss_kb={} \
         rss_anon_kb={}",
        m.tcp_bytes,
        m.tcp_conns,
        m.pool_bytes_held,
        mem::rss_kb().unwrap_or(0),
        mem::rss_anon_kb().unwrap_or(0)
    )
}

/// `ustack-bench server`: serves until its standard input closes.
pub fn server(a: &ProcArgs) -> Result<(), String> {
    pin(a.cpu)?;
    let ctl = Control::spawn();
    match a.which {
        Which::RustAsync => rust_async::server(a, Arc::clone(&ctl.stop))?,
        Which::Ustack => {
            let seed = link::os::random_seed().map_err(|e| e.to_string())?;
            let mut engine = us::server_engine(&a.link, seed, us::TIMER_TICK, a.family)
                .map_err(|e| format!("{}: {e}", a.link.display()))?;
            let server = us::with_net(&mut engine, |net| Server::new(net, a.family, a.port))
                .map_err(|e| format!("cannot listen: {e}"))?;
            let mut app = ServerApp(server);
            engine.announce();
            say(&format!(
                "ready rss_kb={} rss_anon_kb={}",
                mem::rss_kb().unwrap_or(0),
                mem::rss_anon_kb().unwrap_or(0)
            ));
            while !ctl.stop() {
                engine.turn(&mut app);
                if ctl.take_report() {
                    say(&us_memory_line(&engine, app.0.connections()));
                }
            }
            let st = app.0.stats;
            eprintln!(
                "ustack-bench: ustack server: accepted {} closed {} errors {}; engine {:?}",
                st.accepted,
                st.closed,
                st.errors,
                engine.counters()
            );
        }
        Which::Linux => {
            let mut net = KernelNet::new(a.epoll_timeout).map_err(|e| e.to_string())?;
            let mut server = Server::new(&mut net, a.family, a.port)
                .map_err(|e| format!("cannot listen: {e}"))?;
            say(&format!(
                "ready rss_kb={} rss_anon_kb={}",
                mem::rss_kb().unwrap_or(0),
                mem::rss_anon_kb().unwrap_or(0)
            ));
            while !ctl.stop() {
                server.step(&mut net);
                if ctl.take_report() {
                    say(&format!(
                        "memory app_conns={} rss_kb={} rss_anon_kb={}",
                        server.connections(),
                        mem::rss_kb().unwrap_or(0),
                        mem::rss_anon_kb().unwrap_or(0)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `ustack-bench client`: runs the workload, prints its result; an idle
/// connection workload then prints its memory and waits for its standard
/// input to close.
pub fn client(a: &ProcArgs) -> Result<(), String> {
    pin(a.cpu)?;
    let ctl = Control::spawn();
    let idle = matches!(a.workload, Workload::IdleConns { .. });
    match a.which {
        Which::RustAsync => rust_async::client(a, Arc::clone(&ctl.stop))?,
        Which::Ustack => {
            let seed = link::os::random_seed().map_err(|e| e.to_string())?;
            let mut engine = us::client_engine(&a.link, seed, us::TIMER_TICK, a.family)
                .map_err(|e| format!("{}: {e}", a.link.display()))?;
            let rss_before = mem::rss_kb().unwrap_or(0);
            let anon_before = mem::rss_anon_kb().unwrap_or(0);
            let server = us::server_ip(a.family);
            let mut app = ClientApp(Client::new(a.workload, server, a.port, a.budget));
            engine.announce();
            let mut turns = 0u64;
            while app.0.result().is_none() {
                engine.turn(&mut app);
                turns += 1;
                if turns.is_multiple_of(1024) && ctl.stop() {
                    return Err("stopped before the end".into());
                }
            }
            let m = app.0.result().expect("measured");
            say(&result_line(&m));
            if idle {
                say(&format!(
                    "{} rss_before_kb={rss_before} rss_anon_before_kb={anon_before}",
                    us_memory_line(&engine, app.0.open_sockets())
                ));
                while !ctl.stop() {
                    engine.turn(&mut app);
                }
            }
            eprintln!(
                "ustack-bench: ustack client: {} turns, engine {:?}, links {:?}",
                turns,
                engine.counters(),
                engine.link_stats()
            );
        }
        Which::Linux => {
            let before = if idle {
                Some(mem::kernel_snapshot())
            } else {
                None
            };
            let mut net = KernelNet::new(a.epoll_timeout).map_err(|e| e.to_string())?;
            let anon_before = mem::rss_anon_kb().unwrap_or(0);
            let server = kernel::server_ip(a.family);
            let mut c = Client::new(a.workload, server, a.port, a.budget);
            let mut steps = 0u64;
            while c.result().is_none() {
                c.step(&mut net);
                steps += 1;
                if steps.is_multiple_of(1024) && ctl.stop() {
                    return Err("stopped before the end".into());
                }
            }
            let m = c.result().expect("measured");
            say(&result_line(&m));
            if let Some(before) = before {
                let after = mem::kernel_snapshot();
                say(&format!(
                    "kmem {} app_conns={} rss_anon_kb={} rss_anon_before_kb={anon_before}",
                    mem::kernel_delta(&before, &after),
                    c.open_sockets(),
                    mem::rss_anon_kb().unwrap_or(0)
                ));
                while !ctl.stop() {
                    c.step(&mut net);
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    Ok(())
}

#[inline(never)]
fn server_turn<A: Application>(
    e: &mut runtime::Engine<link::ShmLink>,
    now: stack::Instant,
    app: &mut A,
) -> bool {
    e.turn_at(now, app)
}

#[inline(never)]
fn client_turn<A: Application>(
    e: &mut runtime::Engine<link::ShmLink>,
    now: stack::Instant,
    app: &mut A,
) -> bool {
    e.turn_at(now, app)
}

/// `ustack-bench pair`: both ustack engines in this one thread, over a
/// shm link, taking turns until the client has done `count` units: for
/// callgrind, whose figures for `server_turn` and `client_turn` are each
/// side's instructions. No core is pinned and nothing spins idle.
///
/// The engines run on a virtual clock that advances `step` per turn, not
/// on the real one: under callgrind, which runs the program some 50 times
/// slower, real time would fire the stack's timers (the tick, delayed
/// ACKs, the wheel) that many times more often per packet than at full
/// speed. A step of 1 µs is about what a turn takes at full speed.
pub fn pair(
    workload: Workload,
    count: u64,
    port: u16,
    step: Duration,
    family: Family,
) -> Result<(), String> {
    let path = PathBuf::from(format!("/dev/shm/ustack-bench-pair-{}", std::process::id()));
    let mut se = us::server_engine(&path, 1, us::TIMER_TICK, family).map_err(|e| e.to_string())?;
    let mut ce = us::client_engine(&path, 2, us::TIMER_TICK, family).map_err(|e| e.to_string())?;
    let server = us::with_net(&mut se, |net| Server::new(net, family, port))
        .map_err(|e| format!("cannot listen: {e}"))?;
    let mut sapp = ServerApp(server);
    let server_ip = us::server_ip(family);
    let mut capp = ClientApp(Client::new(workload, server_ip, port, Budget::Count(count)));
    se.announce();
    ce.announce();
    let step = step.as_micros() as u64;
    let mut now = 1_000_000u64;
    let mut turns = 0u64;
    while capp.0.result().is_none() {
        server_turn(&mut se, stack::Instant::from_micros(now), &mut sapp);
        now += step;
        client_turn(&mut ce, stack::Instant::from_micros(now), &mut capp);
        now += step;
        turns += 1;
        if turns > count.saturating_mul(1000).max(10_000_000) {
            return Err(format!(
                "no progress: {} of {count} after {turns} turns",
                capp.0.count()
            ));
        }
    }
    let m = capp.0.result().expect("measured");
    say(&format!(
        "{} turns={turns} server_frames={:?} client_frames={:?}",
        result_line(&m),
        se.link_stats().first().map(|s| (s.rx_frames, s.tx_frames)),
        ce.link_stats().first().map(|s| (s.rx_frames, s.tx_frames)),
    ));
    Ok(())
}

/// `ustack-bench scale`: one ustack engine holds `count` established idle
/// connections from another over the shared-memory link (both in this
/// thread, as `pair`), spread over `ports` server ports (each gives the
/// client's address its own ephemeral ports), then idle for `settle`;
/// prints the time to establish them and memory per connection end,
/// measured as the memory row measures it (anonymous RSS growth plus the
/// kernel's socket caches, which a ustack socket does not touch). Fails
/// when memory per end is over `budget` bytes.
pub fn scale(
    count: usize,
    ports: u16,
    settle: Duration,
    budget: Option<f64>,
) -> Result<(), String> {
    let family = Family::V4;
    let port = 7000;
    let path = PathBuf::from(format!(
        "/dev/shm/ustack-bench-scale-{}",
        std::process::id()
    ));
    let mut se = us::server_engine(&path, 1, us::TIMER_TICK, family).map_err(|e| e.to_string())?;
    let mut ce = us::client_engine(&path, 2, us::TIMER_TICK, family).map_err(|e| e.to_string())?;
    // Offsets past the server's own four listeners, two apart.
    let offsets: Vec<u16> = (0..ports.max(1)).map(|k| 10 + 2 * k).collect();
    let server = us::with_net(&mut se, |net| {
        let mut server = Server::new(net, family, port)?;
        for &off in &offsets {
            server.listen_echo(net, family, port, off)?;
        }
        Ok::<_, io::Error>(server)
    })
    .map_err(|e| format!("cannot listen: {e}"))?;
    let mut sapp = ServerApp(server);
    let mut client = Client::new(
        Workload::IdleConns { count },
        us::server_ip(family),
        port,
        Budget::Count(count as u64),
    );
    client.set_idle_ports(offsets);
    let mut capp = ClientApp(client);
    se.announce();
    ce.announce();
    let kernel_before = mem::kernel_snapshot();
    let anon_before = mem::rss_anon_kb().unwrap_or(0);
    let heap_before = heap_in_use();
    // Both engines on the clock, in turn.
    let start = std::time::Instant::now();
    let mut turns = 0u64;
    while capp.0.result().is_none() {
        se.turn(&mut sapp);
        ce.turn(&mut capp);
        turns += 1;
        if turns.is_multiple_of(1 << 20) && start.elapsed() > Duration::from_secs(3600) {
            return Err(format!(
                "{} of {count} connections up in an hour",
                capp.0.count()
            ));
        }
    }
    let up = start.elapsed();
    let idle_from = std::time::Instant::now();
    while idle_from.elapsed() < settle {
        se.turn(&mut sapp);
        ce.turn(&mut capp);
    }
    let anon = mem::rss_anon_kb().unwrap_or(0);
    let (kernel, detail) = mem::socket_delta(&kernel_before, &mem::kernel_snapshot());
    let ends = 2.0 * count as f64;
    let per_end = ((anon.saturating_sub(anon_before)) as f64 * 1024.0 + kernel as f64) / ends;
    let (tcp_s, conns_s) = se.stack.tcp_memory();
    let (tcp_c, conns_c) = ce.stack.tcp_memory();
    say(&format!(
        "scale conns={count} server_conns={} client_conns={conns_c} ports={ports} \
         up_ms={} conns_per_s={:.0} bytes_per_end={per_end:.0} \
         stack_bytes_per_end={:.0} heap_in_use_per_end={:.0} rss_anon_grew_kb={} \
         kernel_socket_bytes={kernel} ({detail}) client_errors={} trim_full_scans={} budget={}",
        conns_s,
        up.as_millis(),
        count as f64 / up.as_secs_f64(),
        (tcp_s + tcp_c) as f64 / ends,
        heap_in_use().saturating_sub(heap_before) as f64 / ends,
        anon.saturating_sub(anon_before),
        capp.0.errors(),
        se.stack.tcp_trim_full_scans() + ce.stack.tcp_trim_full_scans(),
        budget.map_or("none".to_string(), |b| format!("{b:.0}")),
    ));
    if capp.0.errors() > 0 {
        // An idle connection that failed (reset, timed out, or got bytes
        // it did not ask for) was replaced by another: the count is met,
        // but the engine lost one it held.
        return Err(format!("{} connections failed on the way", capp.0.errors()));
    }
    if conns_s < count || conns_c < count {
        return Err(format!(
            "{conns_s} server and {conns_c} client connections open of {count}"
        ));
    }
    if let Some(b) = budget {
        if per_end > b {
            return Err(format!(
                "{per_end:.0} bytes per connection end, over the budget of {b:.0}"
            ));
        }
    }
    Ok(())
}

/// Bytes the C allocator has handed out and not had back (glibc).
fn heap_in_use() -> usize {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct.
    unsafe { libc::mallinfo2() }.uordblks
}
