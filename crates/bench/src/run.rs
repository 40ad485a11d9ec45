//! `ustack-bench run`: every workload on both stacks, a few runs each, the
//! median with min and max, a table on stdout and JSON under
//! `bench/results/`.
//!
//! Each run of a workload starts a fresh server (core 0) and client
//! (core 1), two processes of this same binary; for ustack they are joined
//! by a shared-memory link, for Linux by loopback. The runs of ustack and
//! Linux alternate, so that a drift of the machine touches both alike.
//!
//! `mem_per_idle_conn` counts both ends of every connection (on ustack,
//! the client's stack and the server's stack; on Linux, all of the
//! kernel's growth) and divides by the number of ends (2 × 10k): the figure
//! is what one end of an idle connection costs, which is what a server
//! holding 10k idle clients pays per client.
//!
//! `instr_per_pingpong` runs `ustack-bench pair` (both engines in one
//! thread) under callgrind twice, with N and 2N round trips on one
//! connection, and divides the growth of each side's instructions (the
//! inclusive cost of `server_turn` and `client_turn`) by N: start-up and
//! the handshake cancel out.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::net::Family;
use crate::nginx::{self, NginxBench, RunFigures};
use crate::stream::{self, StreamBench, StreamFigures};
use crate::Flags;

/// How a figure compares with the goal.
#[derive(Debug, Clone, Copy)]
enum Goal {
    /// ustack at least this many times the kernel.
    RatioAtLeast(f64),
    /// ustack's figure below this.
    Below(f64),
    None,
}

impl Goal {
    fn describe(self) -> String {
        match self {
            Goal::RatioAtLeast(r) if r <= 1.0 => ">= kernel".into(),
            Goal::RatioAtLeast(r) => format!(">= {r}x"),
            Goal::Below(v) => format!("< {v}"),
            Goal::None => "-".into(),
        }
    }

    fn met(self, ustack: Option<f64>, ratio: Option<f64>) -> Option<bool> {
        match self {
            Goal::RatioAtLeast(r) => ratio.map(|x| x >= r),
            Goal::Below(v) => ustack.map(|x| x < v),
            Goal::None => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A client workload measured over a time window, both stacks.
    Rate,
    /// Idle connections' memory, both stacks.
    Memory,
    /// A program people run (nginx) under `ustack run` and on the kernel,
    /// driven by a load generator (`nginx.rs`).
    Program,
    /// One TCP stream into iperf3 under `ustack run` and on the kernel,
    /// over a veth with its default offloads (`stream.rs`).
    Stream,
    /// Callgrind, ustack only.
    Instructions,
}

struct Spec {
    name: &'static str,
    kind: Kind,
    /// The client's `--workload`.
    workload: &'static str,
    unit: &'static str,
    /// From units per second to the unit shown.
    scale: f64,
    goal: Goal,
    /// Higher figures are better (else lower).
    higher_better: bool,
    /// IPv4 or IPv6 (rate and instruction workloads).
    family: Family,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "tcp_pingpong_64b_1conn",
        kind: Kind::Rate,
        workload: "pingpong:1",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_pingpong_64b_100conn",
        kind: Kind::Rate,
        workload: "pingpong:100",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_pingpong_64b_100conn_ipv6",
        kind: Kind::Rate,
        workload: "pingpong:100",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V6,
    },
    Spec {
        name: "tcp_pingpong_64b_1000conn",
        kind: Kind::Rate,
        workload: "pingpong:1000",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_short_conn",
        kind: Kind::Rate,
        workload: "short:64",
        unit: "connections/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_stream_1conn",
        kind: Kind::Rate,
        workload: "stream",
        unit: "Gbit/s",
        scale: 8e-9,
        goal: Goal::RatioAtLeast(1.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_stream_preload_af_packet",
        kind: Kind::Stream,
        workload: "iperf3:af_packet",
        unit: "Gbit/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(1.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "tcp_stream_preload_af_packet_send",
        kind: Kind::Stream,
        workload: "iperf3:af_packet:send",
        unit: "Gbit/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(1.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "udp_reqresp_64b",
        kind: Kind::Rate,
        workload: "udp:100",
        unit: "round trips/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "udp_reqresp_64b_ipv6",
        kind: Kind::Rate,
        workload: "udp:100",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(10.0),
        higher_better: true,
        family: Family::V6,
    },
    Spec {
        name: "nginx_preload_keepalive_600b",
        kind: Kind::Program,
        workload: "nginx:rps=both",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(2.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "nginx_preload_keepalive_600b_af_xdp",
        kind: Kind::Program,
        workload: "nginx:rps=both:link=af_xdp",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::RatioAtLeast(2.0),
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "nginx_preload_keepalive_600b_rps_server",
        kind: Kind::Program,
        workload: "nginx:rps=server",
        unit: "requests/s",
        scale: 1.0,
        goal: Goal::None,
        higher_better: true,
        family: Family::V4,
    },
    Spec {
        name: "mem_per_idle_conn",
        kind: Kind::Memory,
        workload: "idle:10000",
        unit: "bytes",
        scale: 1.0,
        goal: Goal::Below(2048.0),
        higher_better: false,
        family: Family::V4,
    },
    Spec {
        name: "instr_per_pingpong",
        kind: Kind::Instructions,
        workload: "pingpong:1",
        unit: "instructions",
        scale: 1.0,
        goal: Goal::Below(1500.0),
        higher_better: false,
        family: Family::V4,
    },
    Spec {
        name: "instr_per_pingpong_ipv6",
        kind: Kind::Instructions,
        workload: "pingpong:1",
        unit: "instructions",
        scale: 1.0,
        goal: Goal::Below(1500.0),
        higher_better: false,
        family: Family::V6,
    },
];

/// The options of `run`.
struct Options {
    runs: usize,
    mem_runs: usize,
    warmup_ms: u64,
    window_ms: u64,
    out: PathBuf,
    only: Option<Vec<String>>,
    callgrind_count: u64,
    epoll_timeout_us: u64,
    /// wrk's window for the nginx workload, in whole seconds.
    nginx_seconds: u64,
}

/// The figures of one workload on one stack.
#[derive(Debug, Default, Clone)]
struct Samples {
    values: Vec<f64>,
    failures: Vec<String>,
}

impl Samples {
    fn sorted(&self) -> Vec<f64> {
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        v
    }
    fn median(&self) -> Option<f64> {
        let v = self.sorted();
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[n / 2]),
            n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    }
    fn min(&self) -> Option<f64> {
        self.sorted().first().copied()
    }
    fn max(&self) -> Option<f64> {
        self.sorted().last().copied()
    }
}

/// One row of the results.
struct Row {
    spec: &'static Spec,
    ustack: Samples,
    linux: Samples,
    /// Details worth printing under the table.
    notes: Vec<String>,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        let (u, l) = (self.ustack.median()?, self.linux.median()?);
        if u <= 0.0 || l <= 0.0 {
            return None;
        }
        Some(if self.spec.higher_better {
            u / l
        } else {
            l / u
        })
    }
}

/// A child process of the benchmark and the lines it prints.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    what: String,
}

impl Proc {
    fn spawn(exe: &Path, args: &[String], what: &str) -> Result<Proc, String> {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let tag = what.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if std::env::var_os("USTACK_BENCH_VERBOSE").is_some()
                    || line.contains("fail")
                    || line.contains("cannot")
                    || line.contains("panick")
                {
                    eprintln!("  [{tag}] {line}");
                }
            }
        });
        Ok(Proc {
            child,
            stdin,
            lines: rx,
            what: what.to_string(),
        })
    }

    /// The next line that starts with `prefix`, within `timeout`.
    fn expect(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return Ok(l),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!("{}: no {prefix:?} within {timeout:?}", self.what))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string());
                    return Err(format!(
                        "{}: exited before {prefix:?} ({})",
                        self.what,
                        status.unwrap_or_else(|e| e.to_string())
                    ));
                }
            }
        }
    }

    fn send(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{line}");
            let _ = s.flush();
        }
    }

    /// Closes its standard input (the stop request) and waits up to 5 s,
    /// then kills it.
    fn stop(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        eprintln!("  {} did not stop; killing it", self.what);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `key=value` words of a line.
fn words(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn num(w: &BTreeMap<String, String>, key: &str) -> Result<f64, String> {
    w.get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no number {key} in the report"))
}

struct Ctx {
    exe: PathBuf,
    opt: Options,
    port: u16,
    link_seq: u32,
}

impl Ctx {
    /// A fresh base port for each run (the kernel's TIME-WAITs of the last
    /// run stay behind on theirs).
    fn next_port(&mut self) -> u16 {
        self.port = if self.port >= 60000 {
            20000
        } else {
            self.port + 10
        };
        self.port
    }

    fn link_path(&mut self) -> String {
        self.link_seq += 1;
        format!(
            "/dev/shm/ustack-bench-{}-{}.link",
            std::process::id(),
            self.link_seq
        )
    }

    fn common(&mut self, which: &str, cpu: usize, family: Family) -> (Vec<String>, u16, String) {
        let port = self.next_port();
        let link = self.link_path();
        let args = vec![
            "--family".into(),
            family.arg().into(),
            "--stack".into(),
            which.into(),
            "--cpu".into(),
            cpu.to_string(),
            "--port".into(),
            port.to_string(),
            "--link".into(),
            link.clone(),
            "--epoll-timeout-us".into(),
            self.opt.epoll_timeout_us.to_string(),
        ];
        (args, port, link)
    }

    /// Starts a server and a client for one run; returns them once the
    /// client is started.
    fn start(
        &mut self,
        which: &str,
        family: Family,
        client_extra: &[String],
    ) -> Result<(Proc, Proc), String> {
        let (mut sargs, port, link) = self.common(which, 0, family);
        sargs.insert(0, "server".into());
        let mut server = Proc::spawn(&self.exe, &sargs, &format!("{which} server"))?;
        server.expect("ready", Duration::from_secs(20))?;
        let mut cargs: Vec<String> = vec![
            "client".into(),
            "--family".into(),
            family.arg().into(),
            "--stack".into(),
            which.into(),
            "--cpu".into(),
            "1".into(),
            "--port".into(),
            port.to_string(),
            "--link".into(),
            link,
            "--epoll-timeout-us".into(),
            self.opt.epoll_timeout_us.to_string(),
        ];
        cargs.extend_from_slice(client_extra);
        match Proc::spawn(&self.exe, &cargs, &format!("{which} client")) {
            Ok(c) => Ok((server, c)),
            Err(e) => {
                server.stop();
                Err(e)
            }
        }
    }

    /// One timed run: units per second.
    fn rate_run(&mut self, which: &str, spec: &Spec) -> Result<f64, String> {
        let extra = vec![
            "--workload".into(),
            spec.workload.into(),
            "--warmup-ms".into(),
            self.opt.warmup_ms.to_string(),
            "--window-ms".into(),
            self.opt.window_ms.to_string(),
        ];
        let (server, mut client) = self.start(which, spec.family, &extra)?;
        let limit = Duration::from_millis(self.opt.warmup_ms + self.opt.window_ms + 20_000);
        let got = client.expect("result", limit);
        client.stop();
        server.stop();
        let w = words(&got?);
        let units = num(&w, "units")?;
        let secs = num(&w, "elapsed_us")? / 1e6;
        if secs <= 0.0 {
            return Err("empty window".into());
        }
        Ok(units / secs * spec.scale)
    }

    /// One idle-connection run: bytes per connection end, and a note.
    fn memory_run(&mut self, which: &str, spec: &Spec) -> Result<(f64, String), String> {
        let extra = vec![
            "--workload".into(),
            spec.workload.into(),
            "--settle-ms".into(),
            "1000".into(),
        ];
        let (mut server, mut client) = self.start(which, spec.family, &extra)?;
        let outcome = (|| {
            let limit = Duration::from_secs(90);
            let result = words(&client.expect("result", limit)?);
            let conns = num(&result, "units")?;
            let ends = 2.0 * conns;
            if which == "ustack" {
                let c = words(&client.expect("memory", limit)?);
                server.send("report");
                let s = words(&server.expect("memory", limit)?);
                let held = |m: &BTreeMap<String, String>| -> Result<f64, String> {
                    Ok(num(m, "tcp_bytes")? + num(m, "pool_bytes")?)
                };
                let bytes = held(&c)? + held(&s)?;
                let rss = (num(&c, "rss_kb")? - num(&c, "rss_before_kb")?) * 1024.0;
                Ok((
                    bytes / ends,
                    format!(
                        "ustack: {conns} conns; client stack {} B in {} conns, server stack {} B \
                         in {} conns; client RSS grew {:.0} B per conn",
                        held(&c)?,
                        num(&c, "tcp_conns")?,
                        held(&s)?,
                        num(&s, "tcp_conns")?,
                        rss / conns
                    ),
                ))
            } else {
                let k = client.expect("kmem", limit)?;
                let kw = words(&k);
                let bytes = num(&kw, "slab_bytes")? + num(&kw, "tcp_mem_bytes")?;
                Ok((
                    bytes / ends,
                    format!(
                        "linux: {conns} conns; slab grew {} B, TCP socket memory {} B; top caches {}",
                        num(&kw, "slab_bytes")?,
                        num(&kw, "tcp_mem_bytes")?,
                        kw.get("top").map_or("?", String::as_str)
                    ),
                ))
            }
        })();
        client.stop();
        server.stop();
        outcome
    }
}

/// `runs` pairs of runs of a program workload, ustack and the kernel in
/// turn: each run's figure (`value`) into the row, failures as they come;
/// returns every run's figures by stack and the ratio of each pair whose
/// two runs succeeded.
fn interleaved<F>(
    row: &mut Row,
    runs: usize,
    mut run: impl FnMut(&str) -> Result<F, String>,
    value: impl Fn(&F) -> f64,
) -> (BTreeMap<&'static str, Vec<F>>, Vec<f64>) {
    let mut figs: BTreeMap<&'static str, Vec<F>> = BTreeMap::new();
    let mut pairs = Vec::new();
    for r in 0..runs {
        let mut pair = [None, None];
        for (k, which) in ["ustack", "linux"].into_iter().enumerate() {
            let s = if which == "ustack" {
                &mut row.ustack
            } else {
                &mut row.linux
            };
            match run(which) {
                Ok(f) => {
                    s.values.push(value(&f));
                    pair[k] = Some(value(&f));
                    figs.entry(which).or_default().push(f);
                }
                Err(e) => {
                    eprintln!("  {which} run {}: {e}", r + 1);
                    s.failures.push(format!("run {}: {e}", r + 1));
                }
            }
        }
        if let [Some(u), Some(l)] = pair {
            pairs.push(u / l);
        }
    }
    (figs, pairs)
}

/// The nginx workload: `runs` pairs of runs, ustack and the kernel in
/// turn, each a fresh nginx; requests/s into the row, the server's and the
/// load generator's core utilisation and the cost per request into its
/// notes (medians over the runs that succeeded).
fn program_runs(exe: &Path, row: &mut Row, runs: usize, warmup: Duration, window: Duration) {
    let setup = nginx::Setup::from_workload(row.spec.workload)
        .and_then(|s| NginxBench::setup(exe, s, warmup, window).map(|b| (s, b)));
    let (setup, bench) = match setup {
        Ok(b) => b,
        Err(e) => {
            eprintln!("  nginx: {e}");
            row.ustack.failures.push(format!("setup: {e}"));
            row.linux.failures.push(format!("setup: {e}"));
            return;
        }
    };
    let (figs, pairs) = interleaved(row, runs, |which| bench.run(which), |f| f.rps);
    drop(bench);
    let mut said: Vec<&str> = Vec::new();
    for f in figs.get("ustack").into_iter().flatten() {
        for l in &f.said {
            if !said.contains(&l.as_str()) && said.len() < 5 {
                said.push(l);
            }
        }
    }
    if !said.is_empty() {
        row.notes
            .push(format!("the library said: {}", said.join(" | ")));
    }
    let med = |which: &str, f: &dyn Fn(&RunFigures) -> f64| -> Option<f64> {
        Samples {
            values: figs.get(which)?.iter().map(f).collect(),
            failures: Vec::new(),
        }
        .median()
    };
    let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.0}%", 100.0 * x));
    let num = |v: Option<f64>| fmt_value(v);
    row.notes.push(format!(
        "{}, one worker pinned to core 0, `listen 80 reuseport`, sendfile and tcp_nopush on, \
         access_log off, 600-byte page, keep-alive; wrk -t1 -c100 -d{}s pinned to core 1 in \
         another network namespace over a veth ({}); ustack: `ustack run`, {}, busy polling, \
         pkt_tx_delay 100 us",
        nginx::version(),
        window.as_secs(),
        setup.rps.describe(),
        setup.link.describe()
    ));
    row.notes.push(format!(
        "server core 0 busy: ustack {}, linux {}; load generator \
         core 1 busy: ustack {}, linux {}; nginx worker's CPU: ustack {}, linux {} of a core",
        pct(med("ustack", &|f| f.server_core_busy)),
        pct(med("linux", &|f| f.server_core_busy)),
        pct(med("ustack", &|f| f.client_core_busy)),
        pct(med("linux", &|f| f.client_core_busy)),
        pct(med("ustack", &|f| f.worker_cpu_s / f.seconds)),
        pct(med("linux", &|f| f.worker_cpu_s / f.seconds)),
    ));
    let (pu, pl) = (
        med("ustack", &|f| f.per_core()),
        med("linux", &|f| f.per_core()),
    );
    row.notes.push(format!(
        "per CPU-second of the server's core: ustack {} requests ({} us each), linux {} ({} us \
         each), ratio {}",
        num(pu),
        num(med("ustack", &|f| f.core_us_per_request())),
        num(pl),
        num(med("linux", &|f| f.core_us_per_request())),
        match (pu, pl) {
            (Some(u), Some(l)) if l > 0.0 => format!("{:.2}x", u / l),
            _ => "-".into(),
        }
    ));
    if !pairs.is_empty() {
        let s = Samples {
            values: pairs,
            failures: Vec::new(),
        };
        row.notes.push(format!(
            "requests/s ratio per pair of runs: median {:.2}x, {:.2}x..{:.2}x",
            s.median().unwrap_or(0.0),
            s.min().unwrap_or(0.0),
            s.max().unwrap_or(0.0)
        ));
    }
}

/// The single-stream workload: `runs` pairs of runs, ustack and the
/// kernel in turn, each a fresh iperf3 server; Gbit/s into the row, the
/// cores' utilisation, retransmissions and what the engine saw into its
/// notes (medians over the runs that succeeded).
fn stream_runs(exe: &Path, row: &mut Row, runs: usize, window: Duration, reverse: bool) {
    let bench = match StreamBench::setup(exe, window, reverse) {
        Ok(b) => b,
        Err(e) => {
            eprintln!(" iperf3: {e}");
            row.ustack.failures.push(format!("setup: {e}"));
            row.linux.failures.push(format!("setup: {e}"));
            return;
        }
    };
    let (figs, pairs) = interleaved(row, runs, |which| bench.run(which), |f| f.gbits);
    drop(bench);
    let med = |which: &str, f: &dyn Fn(&StreamFigures) -> f64| -> Option<f64> {
        Samples {
            values: figs.get(which)?.iter().map(f).collect(),
            failures: Vec::new(),
        }
        .median()
    };
    let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.0}%", 100.0 * x));
    row.notes.push(format!(
        "{}: `iperf3 -s` pinned to core 0 (ustack: `ustack run`, AF_PACKET on the veth, busy \
         polling, default buffers with receive auto-tuning{}), one stream {} `iperf3 -c -t {}{}` \
         pinned to core 1 in another network namespace; the veth keeps its default offloads \
         (the client's TSO/GSO super-frames reach ustack whole, a 64 KiB buffer each, or are cut \
         into segments when none is free); RPS on both ends; the receiver's rate",
        stream::version(),
        if reverse {
            ", `[dpdk] tso=1`: TCP super-frames of up to 64 KiB to the kernel"
        } else {
            ""
        },
        if reverse { "to" } else { "from" },
        window.as_secs(),
        if reverse { " -R" } else { "" },
    ));
    row.notes.push(format!(
        "server core 0 busy: ustack {}, linux {}; client core 1 busy: ustack {}, linux {}; the \
         sender's retransmissions: ustack {}, linux {}; super-frames ustack's engine {}: {}",
        pct(med("ustack", &|f| f.server_core_busy)),
        pct(med("linux", &|f| f.server_core_busy)),
        pct(med("ustack", &|f| f.client_core_busy)),
        pct(med("linux", &|f| f.client_core_busy)),
        fmt_value(med("ustack", &|f| f.retransmits as f64)),
        fmt_value(med("linux", &|f| f.retransmits as f64)),
        if reverse { "sent" } else { "received" },
        fmt_value(med("ustack", &|f| f.engine.map_or(0.0, |(_, s)| s as f64))),
    ));
    if !pairs.is_empty() {
        let s = Samples {
            values: pairs,
            failures: Vec::new(),
        };
        row.notes.push(format!(
            "Gbit/s ratio per pair of runs: median {:.2}x, {:.2}x..{:.2}x",
            s.median().unwrap_or(0.0),
            s.min().unwrap_or(0.0),
            s.max().unwrap_or(0.0)
        ));
    }
}

/// Runs callgrind on `pair` with `count` round trips; each side's
/// instructions (server, client).
fn callgrind(exe: &Path, out_dir: &Path, count: u64, family: Family) -> Result<(f64, f64), String> {
    let out = out_dir.join(format!(
        "callgrind.pingpong.ipv{}.{count}.out",
        family.arg()
    ));
    let status = Command::new("valgrind")
        .args(["--tool=callgrind", "--dump-instr=no", "--collect-jumps=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args([
            "pair",
            "--workload",
            "pingpong:1",
            "--family",
            family.arg(),
            "--count",
        ])
        .arg(count.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run valgrind (is it installed?): {e}"))?;
    if !status.success() {
        return Err(format!("valgrind: {status}"));
    }
    let ann = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", "--threshold=100"])
        .arg(&out)
        .output()
        .map_err(|e| format!("cannot run callgrind_annotate: {e}"))?;
    let text = String::from_utf8_lossy(&ann.stdout);
    let side = |name: &str| -> Result<f64, String> {
        text.lines()
            .find(|l| l.contains(name) && l.contains("proc.rs:") && !l.contains("=>"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.replace(',', "").parse().ok())
            .ok_or_else(|| format!("no {name} in the callgrind profile {}", out.display()))
    };
    Ok((side("server_turn")?, side("client_turn")?))
}

fn options(f: &Flags) -> Result<Options, String> {
    f.check_known(&[
        "runs",
        "mem-runs",
        "warmup-ms",
        "window-ms",
        "out",
        "only",
        "callgrind-count",
        "epoll-timeout-us",
        "nginx-seconds",
    ])?;
    Ok(Options {
        runs: f.parse_or("runs", 5usize)?.max(1),
        mem_runs: f.parse_or("mem-runs", 3usize)?.max(1),
        warmup_ms: f.parse_or("warmup-ms", 1000u64)?,
        window_ms: f.parse_or("window-ms", 2000u64)?.max(100),
        out: PathBuf::from(f.get("out").unwrap_or("bench/results")),
        only: f
            .get("only")
            .map(|s| s.split(',').map(str::to_string).collect()),
        callgrind_count: f.parse_or("callgrind-count", 20_000u64)?.max(100),
        epoll_timeout_us: f.parse_or("epoll-timeout-us", 0u64)?,
        nginx_seconds: f.parse_or("nginx-seconds", 5u64)?.max(1),
    })
}

pub fn main(f: &Flags) -> Result<(), String> {
    let opt = options(f)?;
    let exe = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    std::fs::create_dir_all(&opt.out)
        .map_err(|e| format!("cannot create {}: {e}", opt.out.display()))?;
    let started = Instant::now();
    let when = SystemTime::now();
    let load_before = load_average();
    if load_before.is_some_and(|l| l > 0.5) {
        eprintln!(
            "ustack-bench: warning: load average {:.2} before the start: other work shares \
             these cores, and the figures will show it",
            load_before.unwrap_or(0.0)
        );
    }
    let selected: Vec<&'static Spec> = SPECS
        .iter()
        .filter(|s| {
            opt.only
                .as_ref()
                .is_none_or(|o| o.iter().any(|n| n == s.name))
        })
        .collect();
    if selected.is_empty() {
        return Err("--only selects no workload".into());
    }
    let mut ctx = Ctx {
        exe: exe.clone(),
        opt,
        port: 20000,
        link_seq: 0,
    };
    let mut rows: Vec<Row> = selected
        .iter()
        .map(|&spec| Row {
            spec,
            ustack: Samples::default(),
            linux: Samples::default(),
            notes: Vec::new(),
        })
        .collect();
    // The memory workload first: the kernel's TIME-WAIT sockets of the
    // other workloads would otherwise expire while it measures.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| match rows[i].spec.kind {
        Kind::Memory => 0,
        Kind::Rate => 1,
        Kind::Program | Kind::Stream => 2,
        Kind::Instructions => 3,
    });
    for i in order {
        let spec = rows[i].spec;
        eprintln!("ustack-bench: {} ...", spec.name);
        match spec.kind {
            Kind::Rate => {
                for r in 0..ctx.opt.runs {
                    for which in ["ustack", "linux"] {
                        let row = &mut rows[i];
                        let s = if which == "ustack" {
                            &mut row.ustack
                        } else {
                            &mut row.linux
                        };
                        match ctx.rate_run(which, spec) {
                            Ok(v) => s.values.push(v),
                            Err(e) => {
                                eprintln!("  {which} run {}: {e}", r + 1);
                                s.failures.push(e);
                            }
                        }
                    }
                }
            }
            Kind::Memory => {
                // Linux's runs back to back (see above), then ustack's.
                for which in ["linux", "ustack"] {
                    for r in 0..ctx.opt.mem_runs {
                        match ctx.memory_run(which, spec) {
                            Ok((v, note)) => {
                                let row = &mut rows[i];
                                if which == "ustack" {
                                    row.ustack.values.push(v);
                                } else {
                                    row.linux.values.push(v);
                                }
                                if r == 0 {
                                    row.notes.push(note);
                                }
                            }
                            Err(e) => {
                                eprintln!("  {which} run {}: {e}", r + 1);
                                let row = &mut rows[i];
                                if which == "ustack" {
                                    row.ustack.failures.push(e);
                                } else {
                                    row.linux.failures.push(e);
                                }
                            }
                        }
                    }
                }
            }
            Kind::Program => {
                let (runs, warmup, window) = (
                    ctx.opt.runs,
                    Duration::from_millis(ctx.opt.warmup_ms.max(1000)),
                    Duration::from_secs(ctx.opt.nginx_seconds),
                );
                program_runs(&exe, &mut rows[i], runs, warmup, window);
            }
            Kind::Stream => {
                let window = Duration::from_secs(ctx.opt.nginx_seconds);
                let reverse = spec.workload.ends_with(":send");
                stream_runs(&exe, &mut rows[i], ctx.opt.runs, window, reverse);
            }
            Kind::Instructions => {
                let n = ctx.opt.callgrind_count;
                // The profiles stay there for a look (callgrind_annotate).
                let dir = std::env::temp_dir().join("ustack-bench");
                let _ = std::fs::create_dir_all(&dir);
                let once = callgrind(&exe, &dir, n, spec.family);
                let twice = callgrind(&exe, &dir, 2 * n, spec.family);
                match (once, twice) {
                    (Ok((s1, c1)), Ok((s2, c2))) => {
                        let server = (s2 - s1) / n as f64;
                        let client = (c2 - c1) / n as f64;
                        let row = &mut rows[i];
                        row.ustack.values.push((server + client) / 2.0);
                        row.notes.push(format!(
                            "instructions per round trip: server {server:.0}, client {client:.0} \
                             (callgrind, {n} and {} round trips on one connection)",
                            2 * n
                        ));
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        eprintln!("  callgrind: {e}");
                        rows[i].ustack.failures.push(e);
                    }
                }
            }
        }
    }
    let elapsed = started.elapsed();
    let table = render_table(&rows);
    println!("{table}");
    for r in &rows {
        for n in &r.notes {
            println!("  {}: {n}", r.spec.name);
        }
    }
    println!(
        "  {} ({} runs of {} ms after {} ms of warm-up; medians, min..max; load average {} \
         before, {} after)",
        when_utc(when),
        ctx.opt.runs,
        ctx.opt.window_ms,
        ctx.opt.warmup_ms,
        load_before.map_or("?".into(), |l| format!("{l:.2}")),
        load_average().map_or("?".into(), |l| format!("{l:.2}")),
    );
    println!("  total time {:.0} s", elapsed.as_secs_f64());
    let json = render_json(&rows, &ctx.opt, when, elapsed);
    let stamp = when_utc(when).replace(':', "-");
    let dated = ctx.opt.out.join(format!("{stamp}.json"));
    let latest = ctx.opt.out.join("latest.json");
    for p in [&dated, &latest] {
        std::fs::write(p, &json).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    println!("  results: {} and {}", latest.display(), dated.display());
    Ok(())
}

fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

fn fmt_samples(s: &Samples) -> String {
    match (s.median(), s.min(), s.max()) {
        (Some(m), Some(lo), Some(hi)) if s.values.len() > 1 => format!(
            "{} ({}..{})",
            fmt_value(Some(m)),
            fmt_value(Some(lo)),
            fmt_value(Some(hi))
        ),
        (Some(m), _, _) => fmt_value(Some(m)),
        _ if !s.failures.is_empty() => "failed".into(),
        _ => "-".into(),
    }
}

fn render_table(rows: &[Row]) -> String {
    let head = [
        "workload", "ustack", "linux", "unit", "ratio", "goal", "met",
    ];
    let mut cells: Vec<[String; 7]> = vec![head.map(str::to_string)];
    for r in rows {
        let ratio = r.ratio();
        let met = r.spec.goal.met(r.ustack.median(), ratio);
        cells.push([
            r.spec.name.to_string(),
            fmt_samples(&r.ustack),
            fmt_samples(&r.linux),
            r.spec.unit.to_string(),
            ratio.map_or("-".into(), |x| format!("{x:.2}x")),
            r.spec.goal.describe(),
            match met {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "-".into(),
            },
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(j, (c, w))| {
                if j == 1 || j == 2 || j == 4 {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    out
}

fn json_num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => {
            if x.abs() >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.3}")
            }
        }
        _ => "null".into(),
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_list(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|&x| json_num(Some(x))).collect();
    format!("[{}]", items.join(", "))
}

fn render_json(rows: &[Row], opt: &Options, when: SystemTime, elapsed: Duration) -> String {
    let mut out = String::from("{\n");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let _ = writeln!(out, "  \"date\": {},", json_str(&when_utc(when)));
    let _ = writeln!(out, "  \"kernel\": {},", json_str(kernel.trim()));
    let _ = writeln!(
        out,
        "  \"cpus\": {},",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        out,
        "  \"runs\": {}, \"warmup_ms\": {}, \"window_ms\": {}, \"seconds\": {:.0},",
        opt.runs,
        opt.warmup_ms,
        opt.window_ms,
        elapsed.as_secs_f64()
    );
    out.push_str("  \"workloads\": [\n");
    for (i, r) in rows.iter().enumerate() {
        let ratio = r.ratio();
        let met = r.spec.goal.met(r.ustack.median(), ratio);
        let _ = write!(
            out,
            "    {{\"name\": {}, \"ustack\": {}, \"linux\": {}, \"unit\": {}, \"ratio\": {}, \
             \"ustack_min\": {}, \"ustack_max\": {}, \"linux_min\": {}, \"linux_max\": {}, \
             \"ustack_runs\": {}, \"linux_runs\": {}, \"goal\": {}, \"met\": {}, \"notes\": [{}]}}",
            json_str(r.spec.name),
            json_num(r.ustack.median()),
            json_num(r.linux.median()),
            json_str(r.spec.unit),
            json_num(ratio),
            json_num(r.ustack.min()),
            json_num(r.ustack.max()),
            json_num(r.linux.min()),
            json_num(r.linux.max()),
            json_list(&r.ustack.values),
            json_list(&r.linux.values),
            json_str(&r.spec.goal.describe()),
            met.map_or("null".into(), |m| m.to_string()),
            r.notes
                .iter()
                .chain(r.ustack.failures.iter())
                .chain(r.linux.failures.iter())
                .map(|n| json_str(n))
                .collect::<Vec<_>>()
                .join(", ")
        );
        out.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    out.push_str("  ]\n}\n");
    out
}

/// The one-minute load average.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC.
fn when_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(when_utc(UNIX_EPOCH), "1970-01-01T00:00:00");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(when_utc(t), "2024-02-29T12:34:56");
    }

    #[test]
    fn medians() {
        let s = Samples {
            values: vec![3.0, 1.0, 2.0],
            failures: vec![],
        };
        assert_eq!(
            (s.median(), s.min(), s.max()),
            (Some(2.0), Some(1.0), Some(3.0))
        );
        let s = Samples {
            values: vec![4.0, 1.0, 2.0, 3.0],
            failures: vec![],
        };
        assert_eq!(s.median(), Some(2.5));
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(json_num(None), "null");
        assert_eq!(json_num(Some(1234.4)), "1234");
    }
}
