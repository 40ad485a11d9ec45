//! What every program on ustack shares: the command line, loading the
//! configuration, building the engine, signals, and statistics.

#![forbid(unsafe_code)]

pub mod async_run;
pub mod connect_echo;
pub mod echo;
pub mod http;
pub mod ready;
pub mod tcp_echo;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use link::Link;
use runtime::config::Config;
use runtime::stats::{self, StatsFile};
use runtime::{AppContext, Application, Engine, PortLink};
use stack::Stack;

/// The options every ustack program takes.
#[derive(Debug, Default)]
pub struct CommonArgs {
    pub config: Option<PathBuf>,
    /// `--set section.key=value`, applied over the file in order.
    pub overrides: Vec<String>,
    /// `--stats FILE`: counters written there as `name value` lines.
    pub stats: Option<PathBuf>,
    /// Arguments the program handles itself.
    pub rest: Vec<String>,
}

impl CommonArgs {
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<CommonArgs, String> {
        let mut out = CommonArgs::default();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            let mut value = |flag: &str| it.next().ok_or_else(|| format!("{flag} needs a value"));
            match a.as_str() {
                "--config" | "--conf" | "-c" => out.config = Some(value(&a)?.into()),
                "--set" => out.overrides.push(value(&a)?),
                "--stats" => out.stats = Some(value(&a)?.into()),
                _ => out.rest.push(a),
            }
        }
        Ok(out)
    }
}

/// Loads the configuration named on the command line, printing its warnings.
pub fn load_config(program: &str, args: &CommonArgs) -> Result<Config, String> {
    let path = args.config.as_ref().ok_or_else(|| {
        format!("usage: {program} --config FILE [--set section.key=value]... [--stats FILE]")
    })?;
    let mut cfg = Config::from_file(path).map_err(|e| e.to_string())?;
    for o in &args.overrides {
        cfg.apply_set(o).map_err(|e| e.to_string())?;
    }
    for w in &cfg.warnings {
        eprintln!("{program}: warning: {w}");
    }
    Ok(cfg)
}

/// One line per interface: name, link, address, MAC, MTU.
pub(crate) fn describe(engine: &Engine<PortLink>) -> Vec<String> {
    engine
        .stack
        .interfaces()
        .iter()
        .zip(engine.ports())
        .map(|(i, l)| {
            let m = i.mac;
            format!(
                "{} {}:{} {} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} mtu {}{}",
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
                i.mtu,
                if l.fault_stats().is_some() {
                    " (fault injection on)"
                } else {
                    ""
                }
            )
        })
        .chain(
            // VLAN interfaces, after the ports.
            engine
                .stack
                .interfaces()
                .iter()
                .filter(|i| i.vlan.is_some())
                .map(|i| format!("{} {} mtu {} fib {}", i.name, i.addr_text(), i.mtu, i.fib)),
        )
        .collect()
}

/// Runs a server: builds the engine from the command line, lets `make_app`
/// open its sockets, and runs until SIGINT or SIGTERM.
///
/// With `[dpdk] lcore_mask` selecting several cores, `make_app` runs once
/// per engine, on the engine's thread (see [`run_engines`]).
pub fn serve(
    program: &str,
    args: impl IntoIterator<Item = String>,
    make_app: impl Fn(&CommonArgs, &mut Stack) -> Result<Box<dyn Application + Send>, String> + Sync,
) -> ExitCode {
    let opts = RunOptions {
        describe: true,
        counters: true,
    };
    match run_engines(program, args, opts, |a, s| make_app(a, s).map(Dyn)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{program}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// An application behind a box, as one.
struct Dyn(Box<dyn Application + Send>);

impl Application for Dyn {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        self.0.poll(ctx)
    }

    fn finished(&self) -> bool {
        self.0.finished()
    }
}

/// Two applications on one engine, polled in turn (at most one of them may
/// use [`Stack::drain_ready`]).
pub struct Both<A, B>(pub A, pub B);

impl<A: Application, B: Application> Application for Both<A, B> {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let a = self.0.poll(ctx);
        let b = self.1.poll(ctx);
        a || b
    }

    fn finished(&self) -> bool {
        self.0.finished() && self.1.finished()
    }
}

/// What [`run`] prints on stderr.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// The interfaces, at the start.
    pub describe: bool,
    /// The nonzero counters, at the end.
    pub counters: bool,
}

/// Runs a program until SIGINT or SIGTERM, or until the application has
/// finished; hands the application back so that the caller can read its
/// outcome (`finished()` is false after a signal).
pub fn run<A: Application>(
    program: &str,
    args: impl IntoIterator<Item = String>,
    opts: RunOptions,
    make_app: impl FnOnce(&CommonArgs, &mut Stack) -> Result<A, String>,
) -> Result<A, String> {
    let args = CommonArgs::parse(args)?;
    let cfg = load_config(program, &args)?;
    let seed = link::os::random_seed().map_err(|e| format!("cannot read a random seed: {e}"))?;
    let mut engine = runtime::setup::build_engine(&cfg, seed).map_err(|e| e.to_string())?;
    let mut app = make_app(&args, &mut engine.stack)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| format!("cannot handle signals: {e}"))?;
    }
    if opts.describe {
        for line in describe(&engine) {
            eprintln!("{program}: {line}");
        }
    }
    let mut stats_file = args.stats.as_deref().map(StatsFile::new);
    let mut on_tick = |e: &Engine<PortLink>| {
        if let Some(f) = stats_file.as_mut() {
            if let Err(err) = f.write(stats::render(&stats::snapshot(e))) {
                eprintln!("{program}: cannot write statistics: {err}");
            }
        }
    };
    engine
        .run(&mut app, &stop, Duration::from_millis(100), &mut on_tick)
        .map_err(|e| format!("engine: {e}"))?;
    if opts.counters {
        let nonzero: Vec<String> = stats::snapshot(&engine)
            .into_iter()
            .filter(|(_, v)| *v > 0)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        eprintln!("{program}: stopped; counters: {}", nonzero.join(" "));
    }
    Ok(app)
}

/// Runs a program on every engine the configuration asks for (one per core
/// of `[dpdk] lcore_mask`, each pinned to its core with a stack of its own;
/// or, without `lcore_mask` and `[kni]`, one engine on this thread as
/// [`run`] does). `make_app` makes each engine's application on that
/// engine's thread. With several engines the `--stats` file has the sums of
/// all engines' counters, then each engine's as `engineN.name value`.
/// Returns the applications in engine order.
pub fn run_engines<A: Application + Send>(
    program: &str,
    args: impl IntoIterator<Item = String>,
    opts: RunOptions,
    make_app: impl Fn(&CommonArgs, &mut Stack) -> Result<A, String> + Sync,
) -> Result<Vec<A>, String> {
    let args: Vec<String> = args.into_iter().collect();
    let common = CommonArgs::parse(args.clone())?;
    let cfg = load_config(program, &common)?;
    if !runtime::cores::needs_engines(&cfg) {
        return run(program, args, opts, |a, s| make_app(a, s)).map(|a| vec![a]);
    }
    let seed = link::os::random_seed().map_err(|e| format!("cannot read a random seed: {e}"))?;
    let slots = runtime::cores::build_engines(&cfg, seed).map_err(|e| e.to_string())?;
    let engines = slots.len();
    let cores: Vec<String> = slots
        .iter()
        .map(|s| s.core.map_or("-".to_string(), |c| c.to_string()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| format!("cannot handle signals: {e}"))?;
    }
    if opts.describe {
        eprintln!(
            "{program}: {engines} engine(s) on cores {}{}",
            cores.join(","),
            if cfg.kni.enable {
                format!(", exception path on {}N", cfg.kni.ifname)
            } else {
                String::new()
            }
        );
    }
    let (_control, control_rx) = runtime::cores::Control::new(engines);
    let mut stats_file = common.stats.as_deref().map(StatsFile::new);
    let mut last = Vec::new();
    let mut report = |per_engine: &[Vec<(String, u64)>]| {
        last = runtime::cores::combine_snapshots(per_engine);
        if let Some(f) = stats_file.as_mut() {
            if let Err(err) = f.write(stats::render(&last)) {
                eprintln!("{program}: cannot write statistics: {err}");
            }
        }
    };
    let describe = opts.describe;
    let apps = runtime::cores::run_engines(
        slots,
        |id, stack| {
            if describe && id == 0 {
                for i in stack.interfaces() {
                    let m = i.mac;
                    eprintln!(
                        "{program}: {} {} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} mtu {} ({engines} engines)",
                        i.name, i.addr_text(), m[0], m[1], m[2], m[3], m[4], m[5], i.mtu
                    );
                }
            }
            make_app(&common, stack)
        },
        control_rx,
        &stop,
        Duration::from_millis(100),
        &mut report,
    )?;
    if opts.counters {
        let nonzero: Vec<String> = last
            .iter()
            .filter(|(n, v)| {
                *v > 0
                    && (!n.contains('.')
                        || n.ends_with("_link_rx_frames")
                        || n.ends_with(".steer_forwarded"))
            })
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        eprintln!("{program}: stopped; counters: {}", nonzero.join(" "));
    }
    Ok(apps)
}
