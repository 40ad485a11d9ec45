//! Programs people run beside nginx: Debian's redis-server under
//! redis-benchmark (`SET` and `GET`), and Knot DNS under dnsperf, each on
//! the Linux kernel and under `ustack run`, in nginx's topology
//! (`veth.rs`: the server on core 0 in one namespace, the load generator
//! on core 1 in another, a veth between them with RPS on both ends so
//! each side pays for its own receive, segmentation offloads off).
//! ustack's engine reaches the veth by AF_PACKET and busy polls, as in
//! nginx's first row.
//!
//! Per run: a fresh server, checked to answer (`redis-cli ping`, a
//! dnsperf of one second), a warm-up, then the load measured; around it,
//! `/proc/stat` for both cores, so the notes show which core is the
//! saturated one (the server's should be; a load generator near 100%
//! means the figure is its, not the server's).
//!
//! - redis: `redis-server` with persistence off, one client connection
//!   per load thread; `redis-benchmark -c 50 -n N -t set|get -d 64`;
//!   the figure is its requests per second.
//! - DNS: `knotd` with one UDP and one TCP worker serving one zone of a
//!   few A records (`example.bench.`), dnsperf (`-c 1 -T 1 -l S`,
//!   `-q 100` queries in flight) asking for them; the figure is its
//!   queries per second, a run with lost queries over 1% counting as
//!   failed.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::veth::{
    core_ticks, tail, which, Offloads, Rps, Topology, CLIENT_CPU, PREFIX, SERVER_CPU, SERVER_IP,
};

/// Which program a row runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    RedisSet,
    RedisGet,
    Knot,
}

impl Program {
    /// From a row's workload: `redis:set`, `redis:get`, `dns:knot`.
    pub fn from_workload(w: &str) -> Result<Program, String> {
        match w {
            "redis:set" => Ok(Program::RedisSet),
            "redis:get" => Ok(Program::RedisGet),
            "dns:knot" => Ok(Program::Knot),
            _ => Err(format!("unknown program workload {w:?}")),
        }
    }

    fn tools(self) -> &'static [&'static str] {
        match self {
            Program::RedisSet | Program::RedisGet => &[
                "redis-server",
                "redis-benchmark",
                "redis-cli",
                "taskset",
                "ip",
            ],
            Program::Knot => &["knotd", "dnsperf", "taskset", "ip"],
        }
    }
}

/// The figures of one run.
#[derive(Debug, Default, Clone)]
pub struct ServerFigures {
    /// Requests (queries) per second.
    pub rate: f64,
    pub server_core_busy: f64,
    pub client_core_busy: f64,
}

/// A server started in a process group of its own (`process_group(0)`),
/// the whole group stopped on drop: TERM, then KILL after 3 s.
pub(crate) struct Running {
    pub child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

/// The namespaces, the files and the tools, for every run of one row.
pub struct ServerBench {
    program: Program,
    net: Topology,
    dir: PathBuf,
    launcher: PathBuf,
    ini: PathBuf,
    warmup: Duration,
    window: Duration,
}

/// The zone's names dnsperf asks for.
const NAMES: &[&str] = &["www", "mail", "ns1", "api", "cdn", "db"];

impl ServerBench {
    pub fn setup(
        exe: &Path,
        program: Program,
        warmup: Duration,
        window: Duration,
    ) -> Result<ServerBench, String> {
        let missing: Vec<&str> = program
            .tools()
            .iter()
            .copied()
            .filter(|t| which(t).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "not installed: {} (scripts/install-deps.sh installs them)",
                missing.join(", ")
            ));
        }
        let bin = exe.parent().unwrap_or(Path::new("."));
        let launcher = bin.join("ustack");
        if !launcher.is_file() || !bin.join("libustack_preload.so").is_file() {
            return Err(
                "no ustack or libustack_preload.so: cargo build --release -p tools -p preload"
                    .into(),
            );
        }
        let dir = std::env::temp_dir().join(format!("ustack-bench-srv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let net = Topology::create("prog", Rps::Both, Offloads::SegmentationOff)?;
        let write = |p: &Path, data: String| {
            std::fs::write(p, data).map_err(|e| format!("cannot write {}: {e}", p.display()))
        };
        let ini = dir.join("ustack.ini");
        write(
            &ini,
            format!(
                "[dpdk]\nidle_sleep=0\n[port0]\nlink=af_packet:{}\naddr={SERVER_IP}/{PREFIX}\n",
                net.if_server
            ),
        )?;
        if program == Program::Knot {
            let mut zone = String::from(
                "$ORIGIN example.bench.\n$TTL 3600\n@ SOA ns1 admin 1 7200 3600 1209600 3600\n\
                 @ NS ns1\n",
            );
            for (i, n) in NAMES.iter().enumerate() {
                let _ = writeln!(zone, "{n} A 192.0.2.{}", i + 1);
            }
            write(&dir.join("example.bench.zone"), zone)?;
            write(
                &dir.join("knot.conf"),
                format!(
                    "server:\n    rundir: \"{d}\"\n    listen: 0.0.0.0@53\n    udp-workers: 1\n    \
                     tcp-workers: 1\n    background-workers: 1\n\
                     database:\n    storage: \"{d}\"\n\
                     log:\n  - target: stderr\n    any: warning\n\
                     zone:\n  - domain: example.bench.\n    storage: \"{d}\"\n    \
                     file: \"example.bench.zone\"\n",
                    d = dir.display()
                ),
            )?;
            let queries: String = NAMES
                .iter()
                .map(|n| format!("{n}.example.bench. A\n"))
                .collect();
            write(&dir.join("queries"), queries)?;
        }
        Ok(ServerBench {
            program,
            net,
            dir,
            launcher,
            ini,
            warmup,
            window,
        })
    }

    fn start(&self, ustack: bool, out_path: &Path) -> Result<Running, String> {
        let cpu = SERVER_CPU.to_string();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.net.ns_server, "taskset", "-c", &cpu]);
        if ustack {
            cmd.arg(&self.launcher)
                .arg("run")
                .arg("--config")
                .arg(&self.ini)
                .args(launcher_sets())
                .arg("--");
        }
        match self.program {
            Program::RedisSet | Program::RedisGet => {
                cmd.args([
                    "redis-server",
                    "--port",
                    "6379",
                    "--bind",
                    "0.0.0.0",
                    "--protected-mode",
                    "no",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                ])
                .arg("--dir")
                .arg(&self.dir);
            }
            Program::Knot => {
                cmd.arg("knotd").arg("-c").arg(self.dir.join("knot.conf"));
            }
        }
        let out = std::fs::File::create(out_path)
            .map_err(|e| format!("cannot create {}: {e}", out_path.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().map_err(|e| e.to_string())?))
            .stderr(Stdio::from(out))
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        Ok(Running { child })
    }

    /// Runs the load generator for `d` (zero: a short check) in the
    /// client's namespace on core 1; its output.
    fn load(&self, d: Duration) -> Result<String, String> {
        let cpu = CLIENT_CPU.to_string();
        let secs = d.as_secs().max(1).to_string();
        let args: Vec<String> = match self.program {
            Program::RedisSet | Program::RedisGet => {
                // A request count for about the window at 100k/s (a check
                // asks for 2000); the rate is redis-benchmark's own,
                // whatever the count.
                let n = if d.is_zero() {
                    2000
                } else {
                    100_000 * d.as_secs().max(1)
                }
                .to_string();
                let t = if self.program == Program::RedisSet {
                    "set"
                } else {
                    "get"
                };
                [
                    "redis-benchmark",
                    "-h",
                    SERVER_IP,
                    "-p",
                    "6379",
                    "-c",
                    "50",
                    "-n",
                    &n,
                    "-d",
                    "64",
                    "-t",
                    t,
                    "--csv",
                ]
                .map(str::to_string)
                .to_vec()
            }
            Program::Knot => {
                let q = self.dir.join("queries").display().to_string();
                [
                    "dnsperf", "-s", SERVER_IP, "-d", &q, "-l", &secs, "-c", "1", "-T", "1", "-q",
                    "100", "-t", "1",
                ]
                .map(str::to_string)
                .to_vec()
            }
        };
        // A load generator that waits forever on a lost connection would
        // stop the whole benchmark: it gets ten times its window and 30 s
        // (redis-benchmark's count is for 100k requests/s).
        let limit = (10 * d.as_secs().max(1) + 30).to_string();
        let mut full = vec![
            "timeout".to_string(),
            "-k".into(),
            "2".into(),
            limit,
            "taskset".into(),
            "-c".into(),
            cpu,
        ];
        full.extend(args);
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let out = self
            .net
            .in_client(&refs)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", refs[7]))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return Err(format!("{}: {}: {}", refs[7], out.status, text.trim()));
        }
        Ok(text)
    }

    /// `redis-cli ping` from the client's namespace: `PONG` or an error.
    fn redis_ping(&self) -> Result<(), String> {
        let out = self
            .net
            .in_client(&[
                "timeout",
                "-k",
                "1",
                "3",
                "redis-cli",
                "-h",
                SERVER_IP,
                "-p",
                "6379",
                "ping",
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        let said = String::from_utf8_lossy(&out.stdout);
        if said.trim() == "PONG" {
            Ok(())
        } else {
            Err(format!("redis-cli ping: {}", said.trim()))
        }
    }

    fn rate(&self, out: &str) -> Result<f64, String> {
        match self.program {
            Program::RedisSet | Program::RedisGet => parse_redis_csv(out),
            Program::Knot => parse_dnsperf(out),
        }
    }

    /// One run on `which` ("ustack" or "linux").
    pub fn run(&self, which: &str) -> Result<ServerFigures, String> {
        let ustack = which == "ustack";
        self.net.server_address(!ustack)?;
        let out_path = self.dir.join(format!("{which}.out"));
        let server = self.start(ustack, &out_path)?;
        // Until it answers (redis-benchmark would wait on a refused
        // connection), then a short load.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let answered = match self.program {
                Program::RedisSet | Program::RedisGet => self.redis_ping(),
                Program::Knot => Ok(()),
            }
            .and_then(|()| self.load(Duration::ZERO))
            .and_then(|o| self.rate(&o));
            match answered {
                Ok(_) => break,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("{which}: {e}; server: {}", tail(&out_path)))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(300)),
            }
        }
        if self.warmup > Duration::from_secs(1) {
            self.load(self.warmup)?;
        }
        let (b0, t0) = core_ticks(SERVER_CPU)?;
        let (cb0, ct0) = core_ticks(CLIENT_CPU)?;
        let text = self.load(self.window)?;
        let (b1, t1) = core_ticks(SERVER_CPU)?;
        let (cb1, ct1) = core_ticks(CLIENT_CPU)?;
        drop(server);
        let busy = |b0: u64, b1: u64, t0: u64, t1: u64| (b1 - b0) as f64 / (t1 - t0).max(1) as f64;
        Ok(ServerFigures {
            rate: self.rate(&text)?,
            server_core_busy: busy(b0, b1, t0, t1),
            client_core_busy: busy(cb0, cb1, ct0, ct1),
        })
    }
}

impl Drop for ServerBench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `--set k=v` for `ustack run`, one per line of `USTACK_BENCH_SET`: to
/// measure a configuration variant (`port0.rx_ring=v3`) of the rows
/// that run programs under `ustack run` (redis, Knot, nginx, iperf3).
pub fn launcher_sets() -> Vec<String> {
    let sets = std::env::var("USTACK_BENCH_SET").unwrap_or_default();
    sets.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .flat_map(|kv| ["--set".to_string(), kv.to_string()])
        .collect()
}

/// redis-benchmark's `--csv`: `"SET","98039.22",...`; the rate of the
/// one test run.
pub fn parse_redis_csv(out: &str) -> Result<f64, String> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.split(',').map(|x| x.trim_matches('"'));
            let name = f.next()?;
            let rate = f.next()?.parse::<f64>().ok()?;
            (name == "SET" || name == "GET").then_some(rate)
        })
        .next()
        .ok_or_else(|| format!("cannot read redis-benchmark's report:\n{out}"))
}

/// dnsperf's `Queries per second:`; a run that lost more than 1% of its
/// queries is an error.
pub fn parse_dnsperf(out: &str) -> Result<f64, String> {
    let mut qps = None;
    let mut lost = None;
    for l in out.lines() {
        let l = l.trim();
        if let Some(v) = l.strip_prefix("Queries per second:") {
            qps = v.trim().parse::<f64>().ok();
        } else if let Some(v) = l.strip_prefix("Queries lost:") {
            // "12 (0.01%)"
            lost = v.split('(').nth(1).and_then(|p| {
                p.trim_end_matches(')')
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .ok()
            });
        }
    }
    let qps = qps.ok_or_else(|| format!("cannot read dnsperf's report:\n{out}"))?;
    match lost {
        Some(p) if p > 1.0 => Err(format!("dnsperf lost {p}% of its queries ({qps:.0} q/s)")),
        _ => Ok(qps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\"\n\"SET\",\"98039.22\",\"0.311\"\n";
        assert_eq!(parse_redis_csv(csv).unwrap(), 98039.22);
        assert!(parse_redis_csv("\"test\",\"rps\"\n").is_err());
        let dns = "  Queries sent:         300000\n  Queries completed:    299990 (100.00%)\n  \
                   Queries lost:         10 (0.00%)\n\n  Queries per second:   99985.123456\n";
        assert_eq!(parse_dnsperf(dns).unwrap(), 99985.123456);
        let lossy = dns.replace("10 (0.00%)", "9000 (3.00%)");
        assert!(parse_dnsperf(&lossy).unwrap_err().contains("lost 3%"));
        assert_eq!(Program::from_workload("redis:get"), Ok(Program::RedisGet));
        assert!(Program::from_workload("redis").is_err());
    }
}
