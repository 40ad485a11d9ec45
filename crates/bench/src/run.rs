//! `ustack-bench run`: every workload on both stacks, in batches of
//! interleaved pairs of runs (`stats.rs`: medians with min..max, the ratio
//! as the median of per-pair ratios, a batch run again while its spread is
//! over 25%, and flagged `unstable` if it stays so), a table on stdout and
//! JSON under `bench/results/` (`report.rs`).
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
use std::time::{Duration, Instant, SystemTime};

use crate::chart::render_svg;
use crate::cprog;
use crate::mem;
use crate::net::Family;
use crate::nginx::{self, NginxBench, RunFigures};
use crate::report::{fmt_value, load_average, render_json, render_table, when_utc, Row, RunFacts};
use crate::servers::{self, ServerBench, ServerFigures};
use crate::specs::{Kind, Spec, Way, SPECS};
use crate::stats::{self, Batch};
use crate::stream::{self, StreamBench, StreamFigures};
use crate::Flags;

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
    /// The measured window of the program workloads (wrk, iperf3,
    /// redis-benchmark, dnsperf), in whole seconds.
    nginx_seconds: u64,
    /// Batches of `runs` pairs a workload may run, the first included,
    /// while its spread stays above the limit (`stats.rs`).
    max_batches: usize,
    /// The shorter of the two windows of the C server under callgrind.
    callgrind_window_ms: u64,
    /// Workloads that start later than this many seconds into the run
    /// get one batch, not `max_batches` (the run's time stays bounded).
    rerun_budget_s: u64,
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
        Proc::spawn_cmd(exe, args, what)
    }

    fn spawn_cmd(exe: &Path, args: &[String], what: &str) -> Result<Proc, String> {
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

    /// Sends it SIGTERM.
    fn signal_term(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
    }

    /// Asks it to stop with SIGTERM (the C programs' stop request), waits
    /// up to 5 s, then kills it.
    fn terminate(mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal_term();
        }
        self.stop();
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
    /// The batches the current workload may run (`Options::max_batches`,
    /// or 1 past the rerun budget).
    batches_now: usize,
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
    ) -> Result<(Proc, Proc, String), String> {
        let (mut sargs, port, link) = self.common(which, 0, family);
        sargs.insert(0, "server".into());
        let mut server = Proc::spawn(&self.exe, &sargs, &format!("{which} server"))?;
        let ready = server.expect("ready", Duration::from_secs(20))?;
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
            Ok(c) => Ok((server, c, ready)),
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
        let (server, mut client, _) = self.start(which, spec.family, &extra)?;
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

    /// For a C server and client over a new shared-memory link: a new
    /// port, the link's path, and the server's and the client's ustack
    /// configuration files (the server's creates the link).
    fn c_pair_files(&mut self) -> Result<(String, String, PathBuf, PathBuf), String> {
        let port = self.next_port();
        let link = self.link_path();
        let dir = std::env::temp_dir().join(format!("ustack-bench-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let (sini, cini) = (dir.join("server.ini"), dir.join("client.ini"));
        for (p, create) in [(&sini, true), (&cini, false)] {
            std::fs::write(p, cprog::ustack_ini(&link, create))
                .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        }
        Ok((port.to_string(), link, sini, cini))
    }

    /// One timed run of the C programs (`cprog.rs`): units per second.
    fn c_rate_run(&mut self, which: &str, spec: &Spec) -> Result<f64, String> {
        let (port_s, link, sini, cini) = self.c_pair_files()?;
        let sargs = vec!["server".to_string(), "--port".into(), port_s.clone()];
        let s = cprog::command(&self.exe, spec, which, 0, Some(&sini), &sargs)?;
        let what = format!("{which} {} server", spec.way.name());
        let mut server = Proc::spawn_cmd(&s.program, &s.args, &what)?;
        if let Err(e) = server.expect("ready", Duration::from_secs(20)) {
            server.terminate();
            let _ = std::fs::remove_file(&link);
            return Err(e);
        }
        let cargs = vec![
            "client".to_string(),
            "--port".into(),
            port_s,
            "--server".into(),
            cprog::server_ip(which).into(),
            "--workload".into(),
            spec.workload.into(),
            "--warmup-ms".into(),
            self.opt.warmup_ms.to_string(),
            "--window-ms".into(),
            self.opt.window_ms.to_string(),
        ];
        let got = cprog::command(&self.exe, spec, which, 1, Some(&cini), &cargs).and_then(|c| {
            let what = format!("{which} {} client", spec.way.name());
            let mut client = Proc::spawn_cmd(&c.program, &c.args, &what)?;
            let limit =
                Duration::from_millis(self.opt.warmup_ms + self.opt.window_ms) + cprog::SLACK;
            let got = client.expect("result", limit);
            client.terminate();
            got
        });
        server.terminate();
        let _ = std::fs::remove_file(&link);
        let w = words(&got?);
        let units = num(&w, "units")?;
        let secs = num(&w, "elapsed_us")? / 1e6;
        if secs <= 0.0 {
            return Err("empty window".into());
        }
        Ok(units / secs * spec.scale)
    }

    /// Callgrind on the C ping-pong's server through `spec.way`, the
    /// client at full speed for `window`: the server's whole-program
    /// instructions and the requests it served.
    fn c_callgrind_run(
        &mut self,
        spec: &Spec,
        window: Duration,
        out: &Path,
    ) -> Result<(f64, f64), String> {
        let (port_s, link, sini, cini) = self.c_pair_files()?;
        let sargs = vec!["server".to_string(), "--port".into(), port_s.clone()];
        let s = cprog::command(&self.exe, spec, "ustack", 0, Some(&sini), &sargs)?;
        // taskset -c 0 valgrind ... PROGRAM ARGS
        let mut args = s.args.clone();
        let program_at = 2;
        let mut vg = vec![
            "valgrind".to_string(),
            "--tool=callgrind".into(),
            "--dump-instr=no".into(),
            "--collect-jumps=no".into(),
            format!("--callgrind-out-file={}", out.display()),
        ];
        vg.append(&mut args.split_off(program_at));
        args.extend(vg);
        let mut server = Proc::spawn_cmd(&s.program, &args, "callgrind server")?;
        if let Err(e) = server.expect("ready", Duration::from_secs(120)) {
            server.terminate();
            let _ = std::fs::remove_file(&link);
            return Err(e);
        }
        let cargs = vec![
            "client".to_string(),
            "--port".into(),
            port_s,
            "--server".into(),
            cprog::server_ip("ustack").into(),
            "--workload".into(),
            spec.workload.into(),
            "--warmup-ms".into(),
            "0".into(),
            "--window-ms".into(),
            window.as_millis().to_string(),
        ];
        let ran = cprog::command(&self.exe, spec, "ustack", 1, Some(&cini), &cargs).and_then(|c| {
            let mut client = Proc::spawn_cmd(&c.program, &c.args, "callgrind client")?;
            let got = client.expect("result", window + Duration::from_secs(120));
            client.terminate();
            got
        });
        server.signal_term();
        let served = server.expect("served", Duration::from_secs(120));
        server.terminate();
        let _ = std::fs::remove_file(&link);
        ran?;
        let served = num(&words(&served?), "units")?;
        let text = std::fs::read_to_string(out)
            .map_err(|e| format!("cannot read {}: {e}", out.display()))?;
        let total = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("totals:")
                    .or_else(|| l.strip_prefix("summary:"))
            })
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .ok_or_else(|| format!("no totals in {}", out.display()))?;
        Ok((total, served))
    }

    /// One idle-connection run: bytes per connection end, and a note.
    ///
    /// Measured alike on both stacks: the growth of both processes'
    /// anonymous resident memory (`RssAnon`: the server's from its start,
    /// the client's from before it connects) plus the growth of the
    /// kernel's socket caches and TCP memory (`mem::socket_delta`; on
    /// ustack, what its sockets hold in the kernel, if anything), over
    /// both ends of every connection.
    ///
    /// The kernel's connections are spread over pairs of processes of at
    /// most [`KERNEL_CONNS_PER_PROCESS`] each (a process may hold 20,000
    /// open files here), each pair on its own server port (so each has
    /// its own ephemeral ports); ustack's are one pair, as a ustack
    /// program holds them (no file descriptors; the idle client alternates
    /// between two server ports, `logic::ECHO2`, for ports enough).
    fn memory_run(&mut self, which: &str, spec: &Spec) -> Result<(f64, String), String> {
        let Ok(crate::logic::Workload::IdleConns { count }) = spec.workload.parse() else {
            return Err(format!("{}: not an idle:N workload", spec.workload));
        };
        let pairs = if which == "ustack" {
            1
        } else {
            count.div_ceil(KERNEL_CONNS_PER_PROCESS)
        };
        let before = mem::kernel_snapshot();
        let mut procs = Vec::new();
        let mut started = Ok(());
        for k in 0..pairs {
            let share = count / pairs + usize::from(k < count % pairs);
            let extra = vec![
                "--workload".into(),
                format!("idle:{share}"),
                "--settle-ms".into(),
                // Idle for 3 s before measuring: long enough for a stack's
                // caches to give back what the burst of connecting used
                // (ustack's ring cache decays in two 0.5 s periods).
                "3000".into(),
            ];
            match self.start(which, spec.family, &extra) {
                Ok(p) => procs.push(p),
                Err(e) => {
                    started = Err(e);
                    break;
                }
            }
        }
        let outcome = started.and_then(|()| {
            let limit = Duration::from_secs(180);
            let (mut conns, mut client_anon, mut server_anon) = (0.0, 0.0, 0.0);
            let (mut held_c, mut held_s, mut conns_c, mut conns_s) = (0.0, 0.0, 0.0, 0.0);
            for (server, client, ready) in procs.iter_mut() {
                let result = words(&client.expect("result", limit)?);
                conns += num(&result, "units")?;
                let c = words(
                    &client.expect(if which == "ustack" { "memory" } else { "kmem" }, limit)?,
                );
                server.send("report");
                let s = words(&server.expect("memory", limit)?);
                let ready = words(ready);
                client_anon += (num(&c, "rss_anon_kb")? - num(&c, "rss_anon_before_kb")?) * 1024.0;
                server_anon += (num(&s, "rss_anon_kb")? - num(&ready, "rss_anon_kb")?) * 1024.0;
                if which == "ustack" {
                    held_c += num(&c, "tcp_bytes")? + num(&c, "pool_bytes")?;
                    held_s += num(&s, "tcp_bytes")? + num(&s, "pool_bytes")?;
                    conns_c += num(&c, "tcp_conns")?;
                    conns_s += num(&s, "tcp_conns")?;
                }
            }
            if conns < count as f64 {
                return Err(format!("{conns} of {count} connections up"));
            }
            let after = mem::kernel_snapshot();
            let ends = 2.0 * conns;
            let (kernel, detail) = mem::socket_delta(&before, &after);
            let total = client_anon + server_anon + kernel as f64;
            let mut note = format!(
                "{which}: {conns} conns over {pairs} pair(s) of processes; anonymous RSS grew \
                 {client_anon:.0} B in the clients, {server_anon:.0} B in the servers; the \
                 kernel's socket caches and TCP memory grew {kernel} B ({detail}); {:.0} B per \
                 end",
                total / ends
            );
            if which == "ustack" {
                let _ = write!(
                    note,
                    "; the stacks' own accounting: {:.0} B per end (client {held_c} B in \
                     {conns_c} conns, server {held_s} B in {conns_s} conns)",
                    (held_c + held_s) / ends,
                );
            }
            Ok((total / ends, note))
        });
        for (server, client, _) in procs {
            client.stop();
            server.stop();
        }
        outcome
    }
}

/// The most idle connections one kernel-side process of the memory
/// workload holds (each end is a file descriptor, and a process may have
/// 20,000 here).
const KERNEL_CONNS_PER_PROCESS: usize = 16_000;

/// Batches of `runs` pairs of runs (see `stats.rs`), ustack and the
/// kernel in turn, into the row; returns each stack's figures of the
/// reported (last) batch's runs that succeeded, for the notes.
fn interleaved<F>(
    row: &mut Row,
    runs: usize,
    max_batches: usize,
    mut run: impl FnMut(&str) -> Result<F, String>,
    value: impl Fn(&F) -> f64,
) -> BTreeMap<&'static str, Vec<F>> {
    let mut figs: BTreeMap<&'static str, Vec<F>> = BTreeMap::new();
    let higher_better = row.spec.higher_better;
    row.batches = stats::batches(runs, max_batches, higher_better, |r| {
        if r == 1 {
            // A new batch: only the reported one's figures make the notes.
            figs.clear();
        }
        let mut one = |which: &'static str| match run(which) {
            Ok(f) => {
                let v = value(&f);
                figs.entry(which).or_default().push(f);
                Some(Ok(v))
            }
            Err(e) => {
                eprintln!("  {which} run {r}: {e}");
                Some(Err(e))
            }
        };
        let u = one("ustack");
        let l = one("linux");
        (u, l)
    });
    figs
}

/// The nginx workload: `runs` pairs of runs, ustack and the kernel in
/// turn, each a fresh nginx; requests/s into the row, the server's and the
/// load generator's core utilisation and the cost per request into its
/// notes (medians over the runs that succeeded).
fn program_runs(
    exe: &Path,
    row: &mut Row,
    (runs, max_batches): (usize, usize),
    warmup: Duration,
    window: Duration,
) {
    let setup = nginx::Setup::from_workload(row.spec.workload)
        .and_then(|s| NginxBench::setup(exe, s, warmup, window).map(|b| (s, b)));
    let (setup, bench) = match setup {
        Ok(b) => b,
        Err(e) => {
            eprintln!("  nginx: {e}");
            row.setup_failure = Some(e);
            return;
        }
    };
    let figs = interleaved(row, runs, max_batches, |which| bench.run(which), |f| f.rps);
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
        let v: Vec<f64> = figs.get(which)?.iter().map(f).collect();
        stats::median(&v)
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
}

/// The single-stream workload: `runs` pairs of runs, ustack and the
/// kernel in turn, each a fresh iperf3 server; Gbit/s into the row, the
/// cores' utilisation, retransmissions and what the engine saw into its
/// notes (medians over the runs that succeeded).
fn stream_runs(
    exe: &Path,
    row: &mut Row,
    (runs, max_batches): (usize, usize),
    window: Duration,
    reverse: bool,
) {
    let bench = match StreamBench::setup(exe, window, reverse) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("  iperf3: {e}");
            row.setup_failure = Some(e);
            return;
        }
    };
    let figs = interleaved(
        row,
        runs,
        max_batches,
        |which| bench.run(which),
        |f| f.gbits,
    );
    drop(bench);
    let med = |which: &str, f: &dyn Fn(&StreamFigures) -> f64| -> Option<f64> {
        let v: Vec<f64> = figs.get(which)?.iter().map(f).collect();
        stats::median(&v)
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
}

/// redis or Knot: batches of pairs of runs, ustack and the kernel in
/// turn, each a fresh server; its rate into the row, both cores'
/// utilisation into the notes.
fn server_runs(exe: &Path, row: &mut Row, (runs, max_batches): (usize, usize), window: Duration) {
    let bench = servers::Program::from_workload(row.spec.workload)
        .and_then(|p| ServerBench::setup(exe, p, Duration::from_secs(1), window));
    let bench = match bench {
        Ok(b) => b,
        Err(e) => {
            eprintln!("  {}: {e}", row.spec.name);
            row.setup_failure = Some(e);
            return;
        }
    };
    let figs = interleaved(row, runs, max_batches, |which| bench.run(which), |f| f.rate);
    drop(bench);
    let med = |which: &str, f: &dyn Fn(&ServerFigures) -> f64| -> Option<f64> {
        let v: Vec<f64> = figs.get(which)?.iter().map(f).collect();
        stats::median(&v)
    };
    let pct = |v: Option<f64>| v.map_or("-".into(), |x| format!("{:.0}%", 100.0 * x));
    row.notes.push(format!(
        "the server pinned to core 0 in one network namespace (ustack: `ustack run`, AF_PACKET \
         on the veth, busy polling), the load generator pinned to core 1 in another, {}s \
         measured after a warm-up; RPS on both ends (each side pays for its own receive)",
        window.as_secs()
    ));
    row.notes.push(format!(
        "server core 0 busy: ustack {}, linux {}; load generator core 1 busy: ustack {}, linux \
         {} (a load generator near 100% sets the pace, not the server)",
        pct(med("ustack", &|f| f.server_core_busy)),
        pct(med("linux", &|f| f.server_core_busy)),
        pct(med("ustack", &|f| f.client_core_busy)),
        pct(med("linux", &|f| f.client_core_busy)),
    ));
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
        "max-batches",
        "callgrind-window-ms",
        "rerun-budget-s",
    ])?;
    Ok(Options {
        runs: f.parse_or("runs", 5usize)?.max(1),
        mem_runs: f.parse_or("mem-runs", 5usize)?.max(1),
        warmup_ms: f.parse_or("warmup-ms", 500u64)?,
        window_ms: f.parse_or("window-ms", 1000u64)?.max(100),
        out: PathBuf::from(f.get("out").unwrap_or("bench/results")),
        only: f
            .get("only")
            .map(|s| s.split(',').map(str::to_string).collect()),
        callgrind_count: f.parse_or("callgrind-count", 20_000u64)?.max(100),
        epoll_timeout_us: f.parse_or("epoll-timeout-us", 0u64)?,
        nginx_seconds: f.parse_or("nginx-seconds", 2u64)?.max(1),
        max_batches: f.parse_or("max-batches", 2usize)?.max(1),
        callgrind_window_ms: f.parse_or("callgrind-window-ms", 1000u64)?.max(100),
        rerun_budget_s: f.parse_or("rerun-budget-s", 300u64)?,
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
            opt.only.as_ref().is_none_or(|o| {
                o.iter().any(|n| {
                    n == s.name || n == s.way.name() || *n == format!("{}@{}", s.name, s.way.name())
                })
            })
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
        batches_now: 1,
    };
    let mut rows: Vec<Row> = selected.iter().map(|&spec| Row::new(spec)).collect();
    // The memory workload first: the kernel's TIME-WAIT sockets of the
    // other workloads would otherwise expire while it measures.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| match rows[i].spec.kind {
        Kind::Memory => 0,
        Kind::Rate | Kind::CRate => 1,
        Kind::Program | Kind::Stream | Kind::Server => 2,
        Kind::Instructions | Kind::CInstructions => 3,
    });
    let runs = ctx.opt.runs;
    let rerun_until = Duration::from_secs(ctx.opt.rerun_budget_s);
    for i in order {
        let spec = rows[i].spec;
        // Past the budget a batch is not run again (the row stays
        // flagged unstable if it is): `make bench` keeps to its time.
        let max_batches = if started.elapsed() < rerun_until {
            ctx.opt.max_batches
        } else {
            1
        };
        ctx.batches_now = max_batches;
        eprintln!("ustack-bench: {} ({}) ...", spec.name, spec.way.name());
        match spec.kind {
            Kind::Rate => {
                // The ustack side's program: the core's, or the async one.
                let us_side = if spec.way == Way::RustAsync {
                    "rust_async"
                } else {
                    "ustack"
                };
                rows[i].batches = stats::batches(runs, max_batches, spec.higher_better, |r| {
                    let mut one = |which: &str| {
                        let got = ctx.rate_run(which, spec);
                        if let Err(e) = &got {
                            eprintln!("  {which} run {r}: {e}");
                        }
                        Some(got)
                    };
                    let u = one(us_side);
                    (u, one("linux"))
                });
            }
            Kind::CRate => {
                rows[i].batches = stats::batches(runs, max_batches, spec.higher_better, |r| {
                    let mut one = |which: &str| {
                        let got = ctx.c_rate_run(which, spec);
                        if let Err(e) = &got {
                            eprintln!("  {which} run {r}: {e}");
                        }
                        Some(got)
                    };
                    let u = one("ustack");
                    (u, one("linux"))
                });
            }
            Kind::CInstructions => {
                let dir = std::env::temp_dir().join("ustack-bench");
                let _ = std::fs::create_dir_all(&dir);
                let w = Duration::from_millis(ctx.opt.callgrind_window_ms);
                let name =
                    |k: u32| dir.join(format!("callgrind.{}.server.{k}.out", spec.way.name()));
                let once = ctx.c_callgrind_run(spec, w, &name(1));
                let twice = ctx.c_callgrind_run(spec, 2 * w, &name(2));
                let got = match (once, twice) {
                    (Ok((i1, r1)), Ok((i2, r2))) if r2 > r1 => {
                        rows[i].notes.push(format!(
                            "the whole server process of the C ping-pong ({}, {}) under callgrind: \
                             {i1:.0} instructions for {r1:.0} requests, {i2:.0} for {r2:.0}; per \
                             request the growth over the growth (start-up cancels out; the \
                             engine's clock reads, idle turns, the epoll layer and the C ABI \
                             included); the client at full speed on its own core",
                            spec.workload,
                            spec.way.name()
                        ));
                        Ok((i2 - i1) / (r2 - r1))
                    }
                    (Ok(_), Ok((_, r2))) => {
                        Err(format!("the longer run served {r2} requests, no more"))
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e),
                };
                if let Err(e) = &got {
                    eprintln!("  callgrind: {e}");
                }
                let mut b = Batch::default();
                b.add_pair(1, Some(got), None, spec.higher_better);
                rows[i].batches.push(b);
            }
            Kind::Memory => memory_batches(&mut ctx, &mut rows[i]),
            Kind::Program => {
                let (warmup, window) = (
                    Duration::from_millis(ctx.opt.warmup_ms.max(1000)),
                    Duration::from_secs(ctx.opt.nginx_seconds),
                );
                program_runs(&exe, &mut rows[i], (runs, max_batches), warmup, window);
            }
            Kind::Server => {
                let window = Duration::from_secs(ctx.opt.nginx_seconds);
                server_runs(&exe, &mut rows[i], (runs, max_batches), window);
            }
            Kind::Stream => {
                let window = Duration::from_secs(ctx.opt.nginx_seconds);
                let reverse = spec.workload.ends_with(":send");
                stream_runs(&exe, &mut rows[i], (runs, max_batches), window, reverse);
            }
            Kind::Instructions => {
                let n = ctx.opt.callgrind_count;
                // The profiles stay there for a look (callgrind_annotate).
                let dir = std::env::temp_dir().join("ustack-bench");
                let _ = std::fs::create_dir_all(&dir);
                let once = callgrind(&exe, &dir, n, spec.family);
                let twice = callgrind(&exe, &dir, 2 * n, spec.family);
                let mut b = Batch::default();
                let got = match (once, twice) {
                    (Ok((s1, c1)), Ok((s2, c2))) => {
                        let server = (s2 - s1) / n as f64;
                        let client = (c2 - c1) / n as f64;
                        rows[i].notes.push(format!(
                            "instructions per round trip: server {server:.0}, client {client:.0} \
                             (callgrind, {n} and {} round trips on one connection)",
                            2 * n
                        ));
                        Ok((server + client) / 2.0)
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        eprintln!("  callgrind: {e}");
                        Err(e)
                    }
                };
                // Counted, not timed: one run says it all.
                b.add_pair(1, Some(got), None, spec.higher_better);
                rows[i].batches.push(b);
            }
        }
    }
    let elapsed = started.elapsed();
    println!("{}", render_table(&rows));
    for r in &rows {
        for n in &r.notes {
            println!("  {}: {n}", r.spec.name);
        }
        let b = r.last();
        for f in b.ustack.failures.iter() {
            println!("  {}: ustack {f}", r.spec.name);
        }
        for f in b.linux.failures.iter() {
            println!("  {}: linux {f}", r.spec.name);
        }
        if let Some(e) = &r.setup_failure {
            println!("  {}: setup failed: {e}", r.spec.name);
        }
    }
    let facts = RunFacts {
        when,
        elapsed,
        runs: ctx.opt.runs,
        max_batches: ctx.opt.max_batches,
        warmup_ms: ctx.opt.warmup_ms,
        window_ms: ctx.opt.window_ms,
        load_before,
        load_after: load_average(),
    };
    println!(
        "  {} ({} pairs of runs of {} ms after {} ms of warm-up, at most {} batches; load \
         average {} before, {} after)",
        when_utc(when),
        ctx.opt.runs,
        ctx.opt.window_ms,
        ctx.opt.warmup_ms,
        ctx.opt.max_batches,
        facts.load_before.map_or("?".into(), |l| format!("{l:.2}")),
        facts.load_after.map_or("?".into(), |l| format!("{l:.2}")),
    );
    println!("  total time {:.0} s", elapsed.as_secs_f64());
    let json = render_json(&rows, &facts);
    let stamp = when_utc(when).replace(':', "-");
    let dated = ctx.opt.out.join(format!("{stamp}.json"));
    let latest = ctx.opt.out.join("latest.json");
    for p in [&dated, &latest] {
        std::fs::write(p, &json).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    let title = format!(
        "ustack beside Linux, {} ({} pairs per batch; load average {} before)",
        when_utc(when),
        ctx.opt.runs,
        facts.load_before.map_or("?".into(), |l| format!("{l:.2}"))
    );
    let svg = render_svg(&rows, &title);
    let chart = ctx.opt.out.join("latest.svg");
    for p in [&chart, &ctx.opt.out.join(format!("{stamp}.svg"))] {
        std::fs::write(p, &svg).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    println!(
        "  results: {} and {}; chart: {}",
        latest.display(),
        dated.display(),
        chart.display()
    );
    Ok(())
}

/// The memory workload's batches: the kernel's runs back to back first
/// (see `main`), then ustack's, paired by their order; the same rule for
/// a batch run again as `stats::batches`.
fn memory_batches(ctx: &mut Ctx, row: &mut Row) {
    let spec = row.spec;
    let runs = ctx.opt.mem_runs;
    loop {
        let mut outcomes: BTreeMap<&str, Vec<Result<f64, String>>> = BTreeMap::new();
        for which in ["linux", "ustack"] {
            for r in 1..=runs {
                let got = ctx.memory_run(which, spec).map(|(v, note)| {
                    if r == 1 {
                        // The first run of each stack in the batch reported.
                        row.notes.retain(|n| !n.starts_with(which));
                        row.notes.push(note);
                    }
                    v
                });
                if let Err(e) = &got {
                    eprintln!("  {which} run {r}: {e}");
                }
                outcomes.entry(which).or_default().push(got);
            }
        }
        let mut b = Batch::default();
        let mut us = outcomes.remove("ustack").unwrap_or_default().into_iter();
        let mut lx = outcomes.remove("linux").unwrap_or_default().into_iter();
        for r in 1..=runs {
            b.add_pair(r, us.next(), lx.next(), spec.higher_better);
        }
        let stable = b.stable();
        row.batches.push(b);
        if stable || row.batches.len() >= ctx.batches_now {
            return;
        }
    }
}
