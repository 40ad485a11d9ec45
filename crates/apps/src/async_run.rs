//! Running an async program (crates/rt) on the engines of a configuration:
//! each engine's thread hands its engine to the socket layer, starts a
//! runtime and runs the program's future inside the engine loop, until the
//! future finishes or SIGINT/SIGTERM; the counters go to `--stats` every
//! 100 ms, as with the other programs.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use runtime::cores::{self, Snapshot};
use runtime::stats::{self, StatsFile};
use runtime::{Engine, PortLink};

use crate::{describe, load_config, CommonArgs, RunOptions};

/// How often the counters are published.
const TICK: Duration = Duration::from_millis(100);

/// Runs `main(args, engine_id)` on every engine the configuration asks for
/// (one per core of `[dpdk] lcore_mask`, or one on this thread), each on a
/// runtime of its own on the engine's thread.  Returns each engine's
/// output, in engine order; `None` for an engine stopped by a signal
/// before its future finished (a server's always is).
pub fn run_async<T, Fut>(
    program: &str,
    args: impl IntoIterator<Item = String>,
    opts: RunOptions,
    main: impl Fn(&CommonArgs, usize) -> Fut + Sync,
) -> Result<Vec<Option<T>>, String>
where
    T: Send,
    Fut: Future<Output = Result<T, String>>,
{
    let args = CommonArgs::parse(args)?;
    let cfg = load_config(program, &args)?;
    let seed = link::os::random_seed().map_err(|e| format!("cannot read a random seed: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| format!("cannot handle signals: {e}"))?;
    }
    let stats_file = Mutex::new(args.stats.as_deref().map(StatsFile::new));
    let write_stats = |all: Vec<(String, u64)>| {
        let mut f = stats_file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = f.as_mut() {
            if let Err(err) = f.write(stats::render(&all)) {
                eprintln!("{program}: cannot write statistics: {err}");
            }
        }
    };
    let (outputs, last) = if !cores::needs_engines(&cfg) {
        let engine = runtime::setup::build_engine(&cfg, seed).map_err(|e| e.to_string())?;
        if opts.describe {
            for line in describe(&engine) {
                eprintln!("{program}: {line}");
            }
        }
        let last = Mutex::new(Vec::new());
        let publish = |snap: Snapshot| {
            write_stats(snap.clone());
            *last.lock().unwrap_or_else(|e| e.into_inner()) = snap;
        };
        let out = drive(engine, &stop, &publish, main(&args, 0))?;
        let last = last.into_inner().unwrap_or_else(|e| e.into_inner());
        (vec![out], last)
    } else {
        let slots = cores::build_engines(&cfg, seed).map_err(|e| e.to_string())?;
        let n = slots.len();
        let snapshots: Mutex<Vec<Snapshot>> = Mutex::new(vec![Vec::new(); n]);
        let report = || {
            let s = snapshots.lock().unwrap_or_else(|e| e.into_inner());
            let all = cores::combine_snapshots(&s);
            write_stats(all.clone());
            all
        };
        let describe_first = opts.describe;
        let results: Vec<Result<Option<T>, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = slots
                .into_iter()
                .map(|slot| {
                    let (main, args, stop, snapshots) = (&main, &args, &stop, &snapshots);
                    std::thread::Builder::new()
                        .name(format!("ustack-engine{}", slot.id))
                        .spawn_scoped(scope, move || {
                            let (id, core) = (slot.id, slot.core);
                            if let Some(c) = core {
                                link::os::pin_to_cpu(c).map_err(|e| {
                                    format!("engine {id}: cannot pin to core {c}: {e}")
                                })?;
                            }
                            let engine = slot.into_engine();
                            if describe_first && id == 0 {
                                for line in describe(&engine) {
                                    eprintln!("{program}: {line} ({n} engines)");
                                }
                            }
                            let publish = |snap: Snapshot| {
                                snapshots.lock().unwrap_or_else(|e| e.into_inner())[id] = snap;
                            };
                            drive(engine, stop, &publish, main(args, id))
                                .map_err(|e| format!("engine {id}: {e}"))
                        })
                        .map_err(|e| format!("cannot start an engine thread: {e}"))
                })
                .collect();
            while handles
                .iter()
                .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
            {
                std::thread::sleep(TICK);
                report();
            }
            handles
                .into_iter()
                .map(|h| {
                    h.and_then(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err("an engine thread panicked".to_string()))
                    })
                })
                .collect()
        });
        let last = report();
        (results.into_iter().collect::<Result<Vec<_>, _>>()?, last)
    };
    if opts.counters {
        let nonzero: Vec<String> = last
            .iter()
            .filter(|(name, v)| *v > 0 && !name.contains('.'))
            .map(|(name, v)| format!("{name}={v}"))
            .collect();
        eprintln!("{program}: stopped; counters: {}", nonzero.join(" "));
    }
    Ok(outputs)
}

/// Runs `main` on `engine` on this thread until it finishes or `stop` is
/// set, publishing the engine's counters every [`TICK`] and at the end.
fn drive<T>(
    engine: Engine<PortLink>,
    stop: &AtomicBool,
    publish: &(dyn Fn(Snapshot) + Sync),
    main: impl Future<Output = Result<T, String>>,
) -> Result<Option<T>, String> {
    let snapshot = || {
        api::with_engine::<PortLink, _>(0, |e| cores::engine_snapshot(e))
            .ok()
            .flatten()
    };
    api::attach(engine);
    let out = (|| {
        let rt = rt::Runtime::new().map_err(|e| format!("runtime: {e}"))?;
        let watch = async {
            while !stop.load(Ordering::Relaxed) {
                if let Some(s) = snapshot() {
                    publish(s);
                }
                rt::sleep(TICK).await;
            }
        };
        let out = rt.block_on(async {
            let mut main = pin!(main);
            let mut watch = pin!(watch);
            std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = main.as_mut().poll(cx) {
                    return Poll::Ready(r.map(Some));
                }
                watch.as_mut().poll(cx).map(|()| Ok(None))
            })
            .await
        });
        // The tasks' sockets close with the runtime (and a last step sends
        // what that queued) before the last counters are read.
        drop(rt);
        let _ = api::step();
        out
    })();
    if let Some(s) = snapshot() {
        publish(s);
    }
    api::detach();
    out
}
