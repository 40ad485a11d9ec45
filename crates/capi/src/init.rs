//! Starting the engine from a configuration file and running its loop with
//! the application inside.

use std::cell::Cell;
use std::ffi::{CStr, OsStr};
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use api::Errno;
use link::Link;
use runtime::config::{Config, LinkSpec};
use runtime::stats::{self, StatsFile};
use runtime::{Engine, PortLink};

use crate::{ret_int, ret_unit};

/// What `ustack_init` takes from the command line (F-Stack's `ff_init`
/// options, and those of ustack's programs).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct InitArgs {
    /// `--conf FILE` (`-c FILE`, `--config FILE`).
    pub conf: Option<PathBuf>,
    /// `--set section.key=value`, applied over the file in order.
    pub sets: Vec<String>,
    /// `--stats FILE`: every counter as `name value` lines, rewritten
    /// every 100 ms while the loop runs.
    pub stats: Option<PathBuf>,
    /// `--proc-type primary|secondary|auto` (`-t`).
    pub proc_type: Option<String>,
    /// `--proc-id N` (`-p`): which core of `lcore_mask` this process runs
    /// on.
    pub proc_id: usize,
    /// `--group-member K/N` (the LD_PRELOAD library's): this process is
    /// the K-th of N sharing the ports (on AF_XDP, its queue).
    pub member: Option<(usize, usize)>,
}

impl InitArgs {
    /// Reads the options it knows, in `--opt VALUE` and `--opt=VALUE`
    /// forms, and leaves the rest (the application's own) alone.
    pub fn parse(args: &[String]) -> Result<InitArgs, String> {
        let mut out = InitArgs::default();
        let mut it = args.iter().skip(1);
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (a.as_str(), None),
            };
            let known = matches!(
                flag,
                "--conf"
                    | "-c"
                    | "--config"
                    | "--set"
                    | "--stats"
                    | "--proc-type"
                    | "-t"
                    | "--proc-id"
                    | "-p"
                    | "--group-member"
            );
            if !known {
                continue;
            }
            let value = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))?,
            };
            match flag {
                "--conf" | "-c" | "--config" => out.conf = Some(value.into()),
                "--set" => out.sets.push(value),
                "--stats" => out.stats = Some(value.into()),
                "--proc-type" | "-t" => out.proc_type = Some(value),
                "--group-member" => {
                    let parsed = value
                        .split_once('/')
                        .and_then(|(k, n)| Some((k.parse().ok()?, n.parse().ok()?)))
                        .filter(|&(k, n): &(usize, usize)| k < n && n <= u16::MAX as usize);
                    out.member = Some(parsed.ok_or_else(|| {
                        format!("{flag} {value}: K/N, member K of N processes (K below N)")
                    })?);
                }
                _ => {
                    out.proc_id = value
                        .parse()
                        .map_err(|_| format!("{flag} {value}: not a process number"))?
                }
            }
        }
        Ok(out)
    }
}

/// Why `ustack_init` failed: the message printed and the errno set.
struct InitError(String, Errno);

impl From<String> for InitError {
    fn from(s: String) -> InitError {
        InitError(s, Errno::EINVAL)
    }
}

static INITIALIZED: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while `ff_run` calls the application: F-Stack's `ff_kevent` and
    /// `ff_epoll_wait` never block there.
    pub(crate) static IN_FF_LOOP: Cell<bool> = const { Cell::new(false) };
    static STATS: std::cell::RefCell<Option<StatsFile>> = const { std::cell::RefCell::new(None) };
    /// The counters of the last write but those an idle engine moves by
    /// itself (see [`write_stats`]).
    static LAST_WRITTEN: std::cell::RefCell<Vec<(String, u64)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Counters that change while an engine only sleeps: its wake-ups and
/// idle time.
fn moves_while_idle(name: &str) -> bool {
    matches!(
        name,
        "engine_loops" | "engine_idle_sleeps" | "engine_idle_us"
    )
}

/// The program name for messages: argv[0]'s last part.
fn program(args: &[String]) -> String {
    args.first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "ustack".to_string())
}

/// The configuration with `lcore_mask` narrowed to this process's core
/// (`--proc-id`), and that core.
fn narrow_to_process(
    cfg: &mut Config,
    proc_id: usize,
    program: &str,
) -> Result<Option<usize>, InitError> {
    let cores = runtime::cores::engine_cores(cfg);
    let Some(core) = cores.get(proc_id).copied() else {
        return Err(format!(
            "--proc-id {proc_id}: lcore_mask selects {} core(s)",
            cores.len()
        )
        .into());
    };
    if let Some(c) = core {
        if cores.len() > 1 {
            eprintln!(
                "{program}: lcore_mask selects {} cores; this process (--proc-id {proc_id}) runs \
                 one engine on core {c} and shares its ports with the other processes",
                cores.len()
            );
        }
        // One bit: the hexadecimal digit of the core, then zero digits.
        let mask = format!("{:x}{}", 1u32 << (c % 4), "0".repeat(c / 4));
        cfg.apply_set(&format!("dpdk.lcore_mask={mask}"))
            .map_err(|e| e.to_string())?;
    }
    Ok(core)
}

fn build(args: &InitArgs, program: &str) -> Result<Engine<PortLink>, InitError> {
    // Every process of a configuration is alike here (no process holds
    // state the others attach to): primary and secondary only say which
    // starts first, which `--proc-id` already orders.
    match args.proc_type.as_deref() {
        None | Some("primary") | Some("secondary") | Some("auto") => {}
        Some(other) => {
            return Err(format!("--proc-type {other}: primary, secondary or auto").into())
        }
    }
    let path = args
        .conf
        .as_ref()
        .ok_or_else(|| "no configuration: --conf FILE".to_string())?;
    let mut cfg = Config::from_file(path).map_err(|e| e.to_string())?;
    for s in &args.sets {
        cfg.apply_set(s).map_err(|e| e.to_string())?;
    }
    for w in &cfg.warnings {
        eprintln!("{program}: warning: {w}");
    }
    let processes = runtime::cores::engine_cores(&cfg).len();
    let group = runtime::procgroup::group_for(&cfg);
    let core = narrow_to_process(&mut cfg, args.proc_id, program)?;
    // Names this process's control sockets (`ustack -p N`).
    runtime::control::set_proc_id(args.proc_id as u32);
    crate::sysctl::note_config(&cfg);
    let seed = link::os::random_seed().map_err(|e| {
        InitError(
            format!("cannot read a random seed: {e}"),
            Errno(e.raw_os_error().unwrap_or(libc::EIO)),
        )
    })?;
    let setup_err = |e: runtime::setup::SetupError| {
        let errno = match &e {
            runtime::setup::SetupError::Open { error, .. } => {
                error.raw_os_error().unwrap_or(libc::ENODEV)
            }
            _ => libc::EINVAL,
        };
        InitError(e.to_string(), Errno(errno))
    };
    let engine = if processes > 1 {
        // F-Stack's multi-process mode: this process is engine `proc_id`
        // of `processes`, each its own process on its own core, sharing
        // the ports through one fanout group (runtime::procgroup).
        if cfg.kni.enable {
            return Err(
                "[kni] with several processes (lcore_mask of several cores): the \
                        exception path needs one process"
                    .to_string()
                    .into(),
            );
        }
        let steering = stack::steer::FlowSteering::new(processes as u16, args.proc_id as u16);
        if let Some(p) = cfg.ports.iter().find(|p| p.link == LinkSpec::Dpdk) {
            // Checked before the EAL starts.
            if !runtime::procgroup::dpdk_share_by_copy(&cfg) {
                return Err(format!(
                    "[port{}] with lcore_mask of several cores (multi-process): {}",
                    p.id,
                    runtime::procgroup::DPDK_SHARED
                )
                .into());
            }
            if let Some(o) = cfg.ports.iter().find(|p| p.link != LinkSpec::Dpdk) {
                return Err(format!(
                    "[port{}] link={} beside link=dpdk ports with several processes: all of them \
                     link=dpdk, or none",
                    o.id,
                    runtime::setup::link_name(&o.link)
                )
                .into());
            }
            // Each process its own EAL: a primary of its own file prefix.
            let prefix = cfg.dpdk.file_prefix.clone().unwrap_or_else(|| "rte".into());
            let own = format!("{prefix}-proc{}", args.proc_id);
            cfg.apply_set(&format!("dpdk.file_prefix={own}"))
                .and_then(|()| cfg.apply_set("dpdk.proc_type=primary"))
                .map_err(|e| e.to_string())?;
            eprintln!(
                "{program}: link=dpdk: --proc-id {} runs an EAL of its own (file_prefix {own}) \
                 with its own af_packet vdev, which receives every frame of the interface (its \
                 fanout group is its own); it keeps the flows whose hash is its own",
                args.proc_id
            );
            let mut engine = runtime::setup::build_engine_steered(&cfg, seed, Some(steering))
                .map_err(setup_err)?;
            engine.share_by_copy(args.proc_id, processes);
            if let Some(c) = core {
                link::os::pin_to_cpu(c).map_err(|e| {
                    InitError(format!("cannot pin to core {c}: {e}"), Errno::EINVAL)
                })?;
            }
            return Ok(engine);
        }
        let mut engine =
            runtime::setup::build_engine_steered(&cfg, seed, Some(steering)).map_err(setup_err)?;
        let in_place =
            runtime::procgroup::share_ports_as(&mut engine, &cfg, group, args.proc_id, JOIN_WAIT)
                .map_err(setup_err)?;
        if !in_place {
            eprintln!(
                "{program}: --proc-id {}: the processes before it did not all join within {}s \
                 (start them in --proc-id order); replies to its outgoing connections may \
                 reach another process first and be handed over",
                args.proc_id,
                JOIN_WAIT.as_secs()
            );
        }
        engine
    } else if let Some((k, n)) = args.member {
        // One process of a `ustack run` group (the library joins the
        // group itself): on AF_XDP the link binds queue K of N.
        let steering = stack::steer::FlowSteering::new(n as u16, k as u16);
        runtime::setup::build_engine_steered(&cfg, seed, Some(steering)).map_err(setup_err)?
    } else if runtime::cores::needs_engines(&cfg) {
        // The exception path ([kni]) comes with the multi-engine setup,
        // here with one engine.
        let mut slots = runtime::cores::build_engines(&cfg, seed).map_err(setup_err)?;
        slots.remove(0).into_engine()
    } else {
        runtime::setup::build_engine(&cfg, seed).map_err(setup_err)?
    };
    if let Some(c) = core {
        link::os::pin_to_cpu(c)
            .map_err(|e| InitError(format!("cannot pin to core {c}: {e}"), Errno::EINVAL))?;
    }
    Ok(engine)
}

/// The interfaces, as ustack's programs print them.
fn describe(engine: &Engine<PortLink>, program: &str) {
    for (i, l) in engine.stack.interfaces().iter().zip(engine.ports()) {
        let m = i.mac;
        eprintln!(
            "{program}: {} {}:{} {} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} mtu {}",
            i.name,
            l.kind(),
            l.info().name,
            i.addr_text(),
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            i.mtu
        );
    }
}

/// Initialises ustack from the command line: builds the engine the
/// configuration describes and makes the calling thread its engine thread.
pub fn init(args: &[String]) -> Result<(), (String, Errno)> {
    let program = program(args);
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return Err((format!("{program}: already initialised"), Errno::EALREADY));
    }
    init_engine(args).inspect_err(|_| INITIALIZED.store(false, Ordering::SeqCst))
}

/// Builds one more engine as [`init`] builds the first, and makes the
/// calling thread (which has none) its engine thread: a process with an
/// engine per thread (the LD_PRELOAD library, a thread of a program that
/// waits in its own epoll).  Its `--stats` file is its own.
pub fn init_another(args: &[String]) -> Result<(), (String, Errno)> {
    if api::attached() {
        return Err((
            format!("{}: this thread has an engine already", program(args)),
            Errno::EALREADY,
        ));
    }
    init_engine(args)
}

fn init_engine(args: &[String]) -> Result<(), (String, Errno)> {
    let program = program(args);
    let r = (|| {
        let a = InitArgs::parse(args)?;
        let engine = build(&a, &program)?;
        crate::fstack::note_engine_clock(Duration::from_micros(engine.now().total_micros()));
        describe(&engine, &program);
        api::attach(engine);
        let file = a.stats.as_deref().map(StatsFile::new);
        STATS.with(|s| *s.borrow_mut() = file);
        Ok(())
    })();
    r.map_err(|InitError(msg, e): InitError| (format!("{program}: {msg}"), e))
}

/// # Safety
/// `argv` points to `argc` readable C strings (as `main` receives them).
pub(crate) unsafe fn args_of(argc: c_int, argv: *const *const c_char) -> Vec<String> {
    if argv.is_null() {
        return Vec::new();
    }
    (0..argc.max(0) as usize)
        .filter_map(|i| {
            // SAFETY: `argc` readable pointers (the caller's promise).
            let p = unsafe { *argv.add(i) };
            // SAFETY: a NUL-terminated string (the caller's promise).
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
        .collect()
}

/// `ustack_init(argc, argv)`: `--conf FILE` and the F-Stack options.
///
/// # Safety
/// `argv` points to `argc` readable C strings.
#[no_mangle]
pub unsafe extern "C" fn ustack_init(argc: c_int, argv: *const *const c_char) -> c_int {
    // SAFETY: passed on from the caller.
    let args = unsafe { args_of(argc, argv) };
    ret_unit(init(&args).map_err(|(msg, e)| {
        eprintln!("{msg}");
        e
    }))
}

/// `ustack_init_conf(path)`: the configuration file alone.
///
/// # Safety
/// `path` is null or a readable C string.
#[no_mangle]
pub unsafe extern "C" fn ustack_init_conf(path: *const c_char) -> c_int {
    if path.is_null() {
        return ret_int(Err(crate::EFAULT));
    }
    // SAFETY: a NUL-terminated string (the caller's promise).
    let p = OsStr::from_bytes(unsafe { CStr::from_ptr(path) }.to_bytes());
    let args = vec![
        "ustack".to_string(),
        "--conf".to_string(),
        p.to_string_lossy().into_owned(),
    ];
    ret_unit(init(&args).map_err(|(msg, e)| {
        eprintln!("{msg}");
        e
    }))
}

/// The application's loop callback.
pub type LoopFn = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

/// How long a process of several waits for those before it to join.
const JOIN_WAIT: Duration = Duration::from_secs(10);

/// How often the stats file is rewritten.
const STATS_EVERY: Duration = Duration::from_millis(100);

fn snapshot() -> Option<Vec<(String, u64)>> {
    api::with_engine::<PortLink, _>(0, |e| runtime::cores::engine_snapshot(e))
        .ok()
        .flatten()
}

/// Rewrites the `--stats` file (if any) with the engine's counters now.
/// Returns whether anything but the idle counters (`moves_while_idle`)
/// changed since the last write: a caller that sleeps need not wake for
/// the next rewrite when nothing did.
pub fn write_stats() -> bool {
    // At exit the thread's locals may be gone: nothing to write then.
    STATS
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let f = s.as_mut()?;
            let snap = snapshot()?;
            if let Err(e) = f.write(stats::render(&snap)) {
                eprintln!("ustack: cannot write statistics: {e}");
            }
            let mut seen: Vec<(String, u64)> = snap;
            seen.retain(|(k, _)| !moves_while_idle(k));
            LAST_WRITTEN
                .try_with(|last| {
                    let mut last = last.borrow_mut();
                    let changed = *last != seen;
                    *last = seen;
                    changed
                })
                .ok()
        })
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// In a child after fork whose parent had initialised ustack: the engine
/// was the parent's (see `api::forget_after_fork`), so this process may
/// initialise its own.  The stats file is the parent's too: forgotten.
pub fn forget_after_fork() {
    if let Ok(f) = STATS.try_with(|s| s.borrow_mut().take()) {
        std::mem::forget(f);
    }
    INITIALIZED.store(false, Ordering::SeqCst);
}

/// Runs the loop: the engine steps, and `f(arg)` after each step.
/// `fstack`: F-Stack's `ff_run` (the callback's result is ignored, only
/// `ff_stop_run` ends it); else `ustack_run` (a nonzero result ends it and
/// is returned).
pub(crate) fn run_loop(f: Option<LoopFn>, arg: *mut c_void, fstack: bool) -> api::Result<c_int> {
    if !INITIALIZED.load(Ordering::SeqCst) {
        return Err(Errno::ENODEV);
    }
    let has_stats = STATS.with(|s| s.borrow().is_some());
    let mut next_stats = Instant::now();
    let mut result = 0;
    IN_FF_LOOP.with(|c| c.set(fstack));
    let r = api::run(|| {
        if STOP.load(Ordering::Relaxed) {
            return false;
        }
        if let Some(f) = f {
            // SAFETY: the application's callback with the argument it gave.
            let r = unsafe { f(arg) };
            if !fstack && r != 0 {
                result = r;
                return false;
            }
        }
        if has_stats && Instant::now() >= next_stats {
            write_stats();
            next_stats = Instant::now() + STATS_EVERY;
        }
        true
    });
    IN_FF_LOOP.with(|c| c.set(false));
    STOP.store(false, Ordering::SeqCst);
    write_stats();
    r.map(|()| result)
}

/// Runs the engine loop, calling `loop_fn(arg)` after each step, until
/// `loop_fn` returns nonzero (returned) or `ustack_stop` is called (0).
///
/// # Safety
/// `loop_fn` is null or a function that may be called with `arg`.
#[no_mangle]
pub unsafe extern "C" fn ustack_run(loop_fn: Option<LoopFn>, arg: *mut c_void) -> c_int {
    ret_int(run_loop(loop_fn, arg, false))
}

/// Ends `ustack_run` after the current step.  Async-signal-safe.
#[no_mangle]
pub extern "C" fn ustack_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// One step of the engine (rx, stack, timers, tx, other threads' calls)
/// for a caller that runs its own loop: 1 if anything happened, 0 if not.
#[no_mangle]
pub extern "C" fn ustack_step() -> c_int {
    ret_int(api::step().map(c_int::from))
}

/// Closes every socket, epoll and kqueue of the engine thread and drops the
/// engine; printing its nonzero counters on stderr.  `ustack_init` may be
/// called again afterwards.
#[no_mangle]
pub extern "C" fn ustack_fini() -> c_int {
    if !INITIALIZED.load(Ordering::SeqCst) {
        return ret_int(Err(Errno::ENODEV));
    }
    if let Some(snap) = snapshot() {
        let nonzero: Vec<String> = snap
            .into_iter()
            .filter(|(_, v)| *v > 0)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        eprintln!("ustack: stopped; counters: {}", nonzero.join(" "));
    }
    stop_engine();
    0
}

/// Ends the calling thread's engine quietly: its counters written a last
/// time, its objects closed, the engine dropped (its links closed), so
/// that [`init`] may start one again.
pub fn stop_engine() {
    stop_thread_engine();
    INITIALIZED.store(false, Ordering::SeqCst);
}

/// [`stop_engine`] for an engine of [`init_another`].
pub fn stop_thread_engine() {
    write_stats();
    let _ = STATS.try_with(|s| *s.borrow_mut() = None);
    api::detach();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fstack_command_lines() {
        let a = InitArgs::parse(&args(&[
            "prog",
            "--conf",
            "f.ini",
            "--proc-type=primary",
            "--proc-id",
            "0",
            "-x",
            "app",
        ]))
        .unwrap();
        assert_eq!(a.conf, Some(PathBuf::from("f.ini")));
        assert_eq!(a.proc_type.as_deref(), Some("primary"));
        assert_eq!(a.proc_id, 0);
        let a = InitArgs::parse(&args(&[
            "prog",
            "-c",
            "g.ini",
            "-p",
            "1",
            "--set",
            "dpdk.idle_sleep=0",
        ]))
        .unwrap();
        assert_eq!(a.conf, Some(PathBuf::from("g.ini")));
        assert_eq!(a.proc_id, 1);
        assert_eq!(a.sets, vec!["dpdk.idle_sleep=0".to_string()]);
        assert!(InitArgs::parse(&args(&["prog", "--conf"])).is_err());
        assert!(InitArgs::parse(&args(&["prog", "--proc-id=x"])).is_err());
        let a = InitArgs::parse(&args(&["prog", "--group-member", "1/2"])).unwrap();
        assert_eq!(a.member, Some((1, 2)));
        for bad in ["2/2", "1", "a/b", "0/0"] {
            assert!(InitArgs::parse(&args(&["prog", "--group-member", bad])).is_err());
        }
    }

    #[test]
    fn lcore_mask_narrowed_to_the_process_core() {
        let mut cfg = Config::parse(
            "[dpdk]\nlcore_mask=22\n[port0]\nlink=tap:t0\naddr=10.99.1.2/24\n",
            "t.ini",
        )
        .unwrap();
        // Cores 1 and 5; process 1 runs on core 5.
        assert_eq!(narrow_to_process(&mut cfg, 1, "t").ok(), Some(Some(5)));
        assert_eq!(runtime::cores::engine_cores(&cfg), vec![Some(5)]);
        assert!(narrow_to_process(&mut cfg, 1, "t").is_err());
    }
}
