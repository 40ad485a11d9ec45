//! `ustack-bench`: ustack beside the Linux kernel, in the same run.
//!
//! ```text
//! ustack-bench run [--runs N] [--max-batches B] [--mem-runs N] [--warmup-ms MS]
//!                  [--window-ms MS] [--out DIR] [--only NAME|WAY|NAME@WAY,...]
//!                  [--callgrind-count N] [--callgrind-window-ms MS] [--nginx-seconds S]
//! ustack-bench server --stack ustack|rust_async|linux --port P [--link FILE] [--cpu N] [--family 4|6]
//! ustack-bench client --stack ustack|rust_async|linux --port P --workload W [--link FILE] [--family 4|6]
//!                     [--cpu N] [--warmup-ms MS --window-ms MS | --count N | --settle-ms MS]
//! ustack-bench pair --workload W --count N [--step-us US] [--family 4|6]
//! ustack-bench scale --count N [--ports P] [--settle-ms MS] [--budget-bytes B]
//! ```
//!
//! `run` is what `make bench` calls: every workload through each way in
//! (`specs.rs`), on both stacks, in batches of interleaved pairs of runs
//! (`stats.rs`), then a table, `bench/results/latest.json` and
//! `latest.svg` (`report.rs`, `chart.rs`). The other
//! subcommands are its processes (see `proc.rs`); `pair` runs both ustack
//! engines in one thread, for callgrind; `scale` holds N idle connections
//! between two engines in one thread and checks memory per connection.
//!
//! `USTACK_BENCH_SET` (lines of `k=v`) is handed to every `ustack run`
//! as `--set`s, to measure a configuration variant.
//!
//! Workloads for `--workload`: `pingpong:N`, `short:N`, `stream`, `udp:N`,
//! `idle:N` (see `logic.rs`).

mod chart;
mod cprog;
mod kernel;
mod logic;
mod mem;
mod net;
mod nginx;
mod proc;
mod report;
mod run;
mod rust_async;
mod servers;
mod specs;
mod stats;
mod stream;
mod us;
mod veth;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use logic::{Budget, Workload};
use proc::{ProcArgs, Which};

fn usage() -> String {
    "usage: ustack-bench run|server|client|pair|scale [options] (see the source's header)".into()
}

/// `--flag value` pairs, in order.
struct Flags(Vec<(String, String)>);

impl Flags {
    fn parse(args: &[String]) -> Result<Flags, String> {
        let mut out = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(name) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a:?}"));
            };
            let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            out.push((name.to_string(), v.clone()));
        }
        Ok(Flags(out))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn parse_or<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: cannot understand {v:?}")),
        }
    }

    fn check_known(&self, known: &[&str]) -> Result<(), String> {
        match self.0.iter().find(|(n, _)| !known.contains(&n.as_str())) {
            Some((n, _)) => Err(format!("unknown option --{n}")),
            None => Ok(()),
        }
    }
}

fn proc_args(f: &Flags) -> Result<ProcArgs, String> {
    f.check_known(&[
        "stack",
        "cpu",
        "port",
        "link",
        "workload",
        "warmup-ms",
        "window-ms",
        "count",
        "settle-ms",
        "epoll-timeout-us",
        "family",
    ])?;
    let which: Which = f.get("stack").ok_or("--stack is needed")?.parse()?;
    let budget = if let Some(n) = f.get("count") {
        Budget::Count(n.parse().map_err(|_| "--count: a number")?)
    } else if let Some(ms) = f.get("settle-ms") {
        Budget::Settle(Duration::from_millis(
            ms.parse().map_err(|_| "--settle-ms: a number")?,
        ))
    } else {
        Budget::Time {
            warmup: Duration::from_millis(f.parse_or("warmup-ms", 1000u64)?),
            window: Duration::from_millis(f.parse_or("window-ms", 2000u64)?),
        }
    };
    Ok(ProcArgs {
        which,
        cpu: f
            .get("cpu")
            .map(str::parse)
            .transpose()
            .map_err(|_| "--cpu: a number")?,
        port: f.parse_or("port", 20000u16)?,
        link: PathBuf::from(
            f.get("link")
                .unwrap_or("/dev/shm/ustack-bench.link")
                .to_string(),
        ),
        workload: f.get("workload").unwrap_or("pingpong:1").parse()?,
        budget,
        epoll_timeout: Duration::from_micros(f.parse_or("epoll-timeout-us", 0u64)?),
        family: f.get("family").unwrap_or("4").parse()?,
    })
}

fn main_inner() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        return Err(usage());
    };
    let flags = Flags::parse(rest)?;
    match cmd.as_str() {
        "server" => proc::server(&proc_args(&flags)?),
        "client" => proc::client(&proc_args(&flags)?),
        "pair" => {
            flags.check_known(&["workload", "count", "port", "step-us", "family"])?;
            let w: Workload = flags.get("workload").unwrap_or("pingpong:1").parse()?;
            proc::pair(
                w,
                flags.parse_or("count", 20_000u64)?,
                flags.parse_or("port", 7000u16)?,
                Duration::from_micros(flags.parse_or("step-us", 1u64)?),
                flags.get("family").unwrap_or("4").parse()?,
            )
        }
        "scale" => {
            flags.check_known(&["count", "ports", "settle-ms", "budget-bytes"])?;
            proc::scale(
                flags.parse_or("count", 20_000usize)?,
                flags.parse_or("ports", 2u16)?,
                Duration::from_millis(flags.parse_or("settle-ms", 3000u64)?),
                flags
                    .get("budget-bytes")
                    .map(str::parse::<f64>)
                    .transpose()
                    .map_err(|e| format!("--budget-bytes: {e}"))?,
            )
        }
        "run" => run::main(&flags),
        "-h" | "--help" | "help" => {
            println!("{}", usage());
            Ok(())
        }
        other => Err(format!("unknown command {other:?}; {}", usage())),
    }
}

fn main() -> ExitCode {
    match main_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ustack-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
