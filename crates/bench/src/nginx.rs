//! `nginx_preload_keepalive_600b`: Debian's nginx, unmodified, on the Linux
//! kernel and under `ustack run` (`libustack_preload.so`), the same
//! configuration on the same core against the same wrk load, in one run.
//!
//! The topology: two network namespaces joined by a veth,
//! `10.99.200.0/24`. nginx runs in the server namespace, wrk in the client
//! namespace (`10.99.200.1`). On the kernel the server's end of the veth
//! has `10.99.200.2`; under `ustack run` it has no address, and ustack's
//! configuration gives it to port 0, AF_PACKET on that end. Its engine
//! busy polls (`idle_sleep=0`, as the other ustack workloads) and keeps
//! the default `pkt_tx_delay` (100 us, F-Stack's), unlike the other
//! workloads' 0: with 0 the library sends what each `write`/`sendfile`
//! queued at once (a program may block elsewhere next), so every response
//! is a burst of its own, one AF_PACKET `sendto` and one IPI to the peer's
//! core each: 54k requests/s where the default, which sends a turn's
//! responses together (25 frames a burst), gives 98k.
//!
//! nginx: `worker_processes 1`, `listen 80 reuseport`, `sendfile on` with
//! `tcp_nopush on` (TCP_CORK: the headers and the file leave as one
//! segment, on both stacks; without it each response is two segments on
//! both), keep-alive (a million requests per connection), a 600-byte
//! `index.html`, `access_log off` (a log line per request is a write to a
//! file, the same for both stacks, and would only dilute the figure).
//!
//! Fairness on two cores. nginx (master and worker) is pinned to core 0
//! with taskset, wrk (`-t1 -c100`) to core 1. A veth hands a frame to the
//! peer by `netif_rx` on the sending core, so without more the kernel's
//! receive processing of each side would run on the *other* side's core:
//! the kernel nginx's TCP input would be paid by wrk's core, and wrk's by
//! nginx's (that way the kernel's nginx measured 115k requests/s to
//! ustack's 98k on a quiet machine: its TCP input ran on wrk's idle half
//! of core 1, while ustack's core carried wrk's TCP input). RPS moves an
//! end's receive processing to the core RPS names, and the workload is
//! measured with two placements, each a row:
//!
//! - `Rps::Both` (`nginx_preload_keepalive_600b`, the one with the goal):
//!   RPS on each end, server end to core 0 and client end to core 1, so
//!   each side pays for its own receive: on the kernel, nginx's core runs
//!   its TCP/IP input; under ustack, the same core runs the kernel's part
//!   of AF_PACKET (the copy into the ring, and the kernel's own look at a
//!   frame for an address it does not have). What a side transmits is paid
//!   by the sender, and on a veth that includes the inter-processor
//!   interrupt that hands each frame to the peer's core: per `sendfile` on
//!   the kernel, per burst on ustack. In this VM an IPI is a write to the
//!   x2APIC that exits to the hypervisor: `perf record -C 0` found 44% of
//!   the kernel nginx's core in `native_write_msr` (ustack's: 4%), far
//!   more than an IPI costs on bare metal, so this row shows ustack's
//!   batching at its most visible.
//! - `Rps::ServerOnly` (`..._rps_server`): RPS on the server's end only, as
//!   issue 20's reference figures: the server pays for its own receive,
//!   and its core also runs wrk's TCP input inline as it transmits (no
//!   IPI), the same work for both stacks, which narrows the ratio.
//!
//! - `..._af_xdp`: `Rps::Both`, with ustack's engine on AF_XDP instead of
//!   AF_PACKET, the XDP program in the kernel's generic path. Native XDP
//!   on a veth runs the program, and the copy into the UMEM, in the
//!   veth's NAPI poll, which the *sender* schedules on its own core; XDP
//!   runs before RPS, so nothing can move it, and wrk's core would pay for
//!   the server's receive (one run here gave 192k requests/s that way,
//!   3.2x). Generic XDP runs in the receive path after RPS, on the
//!   server's core: the server pays for the kernel's socket buffer, the
//!   program and the copy, as it pays for AF_PACKET's in the first row.
//!   On a NIC, native mode runs in the NIC's interrupt on the server's
//!   side, without a socket buffer.
//!
//! Both ends have TSO and GSO off (nginx's responses are one segment
//! either way).
//!
//! The kernel's side keeps its checksum offload: its TCP reaches ustack
//! with partial checksums, marked by AF_PACKET and recognised by the
//! AF_XDP link (`link::partial_form`).
//!
//! What is measured, per run (each run a fresh nginx): a curl from the
//! client namespace checks the page byte for byte, wrk warms up for a
//! second, then wrk runs for the window; requests/s is wrk's. Around the
//! window: `/proc/stat` for cores 0 and 1 (busy = everything but idle and
//! iowait: the server's core including the softirq work RPS moved there,
//! and the load generator's, to show which one is saturated), and the
//! nginx worker's own CPU time from `/proc/PID/stat`. A server core that
//! is less than fully busy on the kernel means the load generator, not
//! nginx, set the pace; ustack's engine polls, so its core is always busy,
//! and the load generator's core says whether it had more to give. The
//! figures per core are requests per CPU-second of core 0.
//!
//! A run fails (and is reported as failed, its figure not used) when wrk
//! reports any socket error or non-2xx response, when nginx's error log
//! has an `alert`, `crit` or `emerg` line, or when under `ustack run` the
//! worker's engine did not carry the connections.

use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::veth::{
    children, core_ticks, process_ticks, read_stats, sh, tail, which, Offloads, Topology,
    CLIENT_CPU, PREFIX, SERVER_CPU, SERVER_IP, USER_HZ,
};

/// wrk's load.
const WRK_THREADS: u32 = 1;
const WRK_CONNECTIONS: u32 = 100;
/// The page.
const PAGE_BYTES: usize = 600;

/// What `make bench` needs for this workload beyond the others.
pub const TOOLS: &[&str] = &["nginx", "wrk", "curl", "taskset", "ip", "ethtool"];

/// `nginx/1.22.1`, as `nginx -v` says.
pub fn version() -> String {
    Command::new("nginx")
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            let t = String::from_utf8_lossy(&o.stderr).into_owned();
            t.trim().rsplit(' ').next().map(str::to_string)
        })
        .unwrap_or_else(|| "nginx".into())
}

/// One run's figures.
#[derive(Debug, Clone, Default)]
pub struct RunFigures {
    pub rps: f64,
    pub requests: f64,
    pub seconds: f64,
    /// The busy share of the server's core (0) and the client's (1).
    pub server_core_busy: f64,
    pub client_core_busy: f64,
    /// The nginx worker's CPU time over the window, in seconds.
    pub worker_cpu_s: f64,
    /// ustack only: the worker engine's passive opens and
    /// retransmissions over the window.
    pub engine: Option<(u64, u64)>,
    /// What the library said on stderr (what it does not handle, by name).
    pub said: Vec<String>,
}

impl RunFigures {
    /// Requests per CPU-second of the server's core.
    pub fn per_core(&self) -> f64 {
        self.requests / (self.server_core_busy * self.seconds).max(1e-9)
    }

    /// Microseconds of the server's core per request.
    pub fn core_us_per_request(&self) -> f64 {
        self.server_core_busy * self.seconds * 1e6 / self.requests.max(1.0)
    }
}

pub use crate::veth::Rps;

impl Rps {
    pub fn describe(self) -> &'static str {
        match self {
            Rps::Both => "RPS on both ends: each side's receive processing on its own core",
            Rps::ServerOnly => {
                "RPS on the server's end only: the server's receive processing on its core, \
                 and wrk's there too, inline as the server transmits"
            }
        }
    }
}

/// How ustack's engine reaches the server's end of the veth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerLink {
    /// `link=af_packet`: a copy out of the kernel's ring per frame.
    AfPacket,
    /// `link=af_xdp`, the XDP program in the kernel's generic path
    /// (see the module's comment for why not native on a veth).
    AfXdpGeneric,
}

impl ServerLink {
    pub fn describe(self) -> &'static str {
        match self {
            ServerLink::AfPacket => "AF_PACKET on the veth",
            ServerLink::AfXdpGeneric => {
                "AF_XDP on the veth, the XDP program in the generic path (after RPS, so the \
                 server's core pays for its own receive)"
            }
        }
    }
}

/// A workload's placement and link, from its spec: `nginx:rps=both`,
/// `nginx:rps=server`, `nginx:rps=both:link=af_xdp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub rps: Rps,
    pub link: ServerLink,
}

impl Setup {
    pub fn from_workload(w: &str) -> Result<Setup, String> {
        let mut rps = None;
        let mut link = ServerLink::AfPacket;
        let bad = || format!("nginx workload {w:?}: nginx:rps=both|server[:link=af_packet|af_xdp]");
        let mut parts = w.split(':');
        if parts.next() != Some("nginx") {
            return Err(bad());
        }
        for kv in parts {
            match kv.split_once('=') {
                Some(("rps", "both")) => rps = Some(Rps::Both),
                Some(("rps", "server")) => rps = Some(Rps::ServerOnly),
                Some(("link", "af_packet")) => link = ServerLink::AfPacket,
                Some(("link", "af_xdp")) => link = ServerLink::AfXdpGeneric,
                _ => return Err(bad()),
            }
        }
        Ok(Setup {
            rps: rps.ok_or_else(bad)?,
            link,
        })
    }
}

/// The namespaces, the veth and nginx's files, for every run of the
/// workload; removed on drop.
pub struct NginxBench {
    net: Topology,
    dir: PathBuf,
    launcher: PathBuf,
    nginx: PathBuf,
    page: Vec<u8>,
    conf: PathBuf,
    ini: PathBuf,
    warmup: Duration,
    window: Duration,
}

fn nginx_conf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "\
daemon off;
master_process on;
worker_processes 1;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{
    worker_connections 4096;
}}
http {{
    types {{
        text/html html;
    }}
    default_type application/octet-stream;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 65;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 80 reuseport;
        server_name _;
        root {d}/www;
    }}
}}
"
    )
}

fn ustack_ini(if_server: &str, link: ServerLink) -> String {
    let link = match link {
        ServerLink::AfPacket => format!("link=af_packet:{if_server}"),
        ServerLink::AfXdpGeneric => format!("link=af_xdp:{if_server}\nxdp_mode=generic"),
    };
    format!(
        "\
[dpdk]
idle_sleep=0
[port0]
{link}
addr={SERVER_IP}/{PREFIX}
"
    )
}

/// The 600-byte page: HTML whose body is padding.
fn page() -> Vec<u8> {
    let head = b"<!DOCTYPE html>\n<html><body><p>ustack-bench nginx</p>\n<p>";
    let tail = b"</p></body></html>\n";
    let mut p = head.to_vec();
    p.resize(PAGE_BYTES - tail.len(), b'x');
    p.extend_from_slice(tail);
    p
}

/// What wrk said.
#[derive(Debug, Default)]
struct WrkReport {
    requests: f64,
    seconds: f64,
    rps: f64,
    socket_errors: u64,
    non_2xx: u64,
}

fn parse_wrk(out: &str) -> Result<WrkReport, String> {
    let mut r = WrkReport::default();
    let mut have = (false, false);
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            [n, "requests", "in", t, ..] => {
                r.requests = n.parse().map_err(|_| format!("wrk: {line:?}"))?;
                r.seconds = t
                    .trim_end_matches(',')
                    .trim_end_matches('s')
                    .parse()
                    .map_err(|_| format!("wrk: {line:?}"))?;
                have.0 = true;
            }
            ["Requests/sec:", v] => {
                r.rps = v.parse().map_err(|_| format!("wrk: {line:?}"))?;
                have.1 = true;
            }
            ["Socket", "errors:", rest @ ..] => {
                r.socket_errors = rest
                    .iter()
                    .filter_map(|x| x.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                r.non_2xx = n.parse().unwrap_or(u64::MAX);
            }
            _ => {}
        }
    }
    if have != (true, true) {
        return Err(format!("cannot read wrk's report:\n{out}"));
    }
    Ok(r)
}

/// nginx, started in its own process group; stopped (the whole group)
/// on drop.
struct Nginx {
    child: Child,
}

impl Nginx {
    fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // nginx's fast shutdown: the master stops its worker and exits.
            let _ = sh(&["kill", "-TERM", &self.child.id().to_string()]);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Whatever is left of the group (a worker whose master died).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

impl NginxBench {
    /// Checks the tools, writes nginx's files and makes the topology.
    pub fn setup(
        exe: &Path,
        setup: Setup,
        warmup: Duration,
        window: Duration,
    ) -> Result<NginxBench, String> {
        let missing: Vec<&str> = TOOLS
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
        let nginx = which("nginx").expect("checked");
        let bin = exe.parent().unwrap_or(Path::new("."));
        let launcher = bin.join("ustack");
        let lib = bin.join("libustack_preload.so");
        if !launcher.is_file() || !lib.is_file() {
            return Err(format!(
                "no {} or {}: cargo build --release --workspace",
                launcher.display(),
                lib.display()
            ));
        }
        let id = std::process::id();
        let dir = std::env::temp_dir().join(format!("ustack-bench-nginx-{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www"))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let page = page();
        let conf = dir.join("nginx.conf");
        let ini = dir.join("ustack.ini");
        // Segmentation off: nginx's responses are one segment either way.
        let net = Topology::create("nginx", setup.rps, Offloads::SegmentationOff)?;
        let write = |p: &Path, data: &[u8]| {
            std::fs::write(p, data).map_err(|e| format!("cannot write {}: {e}", p.display()))
        };
        write(&dir.join("www/index.html"), &page)?;
        write(&conf, nginx_conf(&dir).as_bytes())?;
        write(&ini, ustack_ini(&net.if_server, setup.link).as_bytes())?;
        Ok(NginxBench {
            net,
            dir,
            launcher,
            nginx,
            page,
            conf,
            ini,
            warmup,
            window,
        })
    }

    /// Fetches the page from the client's namespace until it comes back
    /// whole, or `timeout`.
    fn check_page(&self, nginx: &mut Nginx, timeout: Duration) -> Result<(), String> {
        let url = format!("http://{SERVER_IP}/index.html");
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = nginx.child.try_wait() {
                return Err(format!("nginx exited ({st}): {}", self.error_log_tail()));
            }
            let out = self
                .net
                .in_client(&["curl", "-sS", "--max-time", "2", &url])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("cannot run curl: {e}"))?;
            if out.status.success() && out.stdout == self.page {
                return Ok(());
            }
            let last = if out.status.success() {
                format!("{} bytes, not the page", out.stdout.len())
            } else {
                String::from_utf8_lossy(&out.stderr).trim().to_string()
            };
            if Instant::now() >= deadline {
                return Err(format!("GET {url}: {last}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn error_log_tail(&self) -> String {
        tail(&self.dir.join("error.log"))
    }

    /// The error log's `alert`, `crit` and `emerg` lines.
    fn error_log_bad(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("error.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                ["[alert]", "[crit]", "[emerg]"]
                    .iter()
                    .any(|t| l.contains(t))
            })
            .map(str::to_string)
            .collect()
    }

    fn wrk(&self, duration: Duration) -> Result<WrkReport, String> {
        let url = format!("http://{SERVER_IP}/index.html");
        let cpu = CLIENT_CPU.to_string();
        let threads = format!("-t{WRK_THREADS}");
        let conns = format!("-c{WRK_CONNECTIONS}");
        let dur = format!("-d{}s", duration.as_secs().max(1));
        let out = self
            .net
            .in_client(&["taskset", "-c", &cpu, "wrk", &threads, &conns, &dur, &url])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run wrk: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return Err(format!("wrk: {}: {text}", out.status));
        }
        parse_wrk(&text)
    }

    /// One run: a fresh nginx on `which` ("ustack" or "linux"), checked,
    /// warmed up and measured.
    pub fn run(&self, which: &str) -> Result<RunFigures, String> {
        let ustack = which == "ustack";
        let s = self.net.ns_server.as_str();
        // The address is the kernel's or ustack's, never both.
        self.net.server_address(!ustack)?;
        let _ = std::fs::remove_file(self.dir.join("error.log"));
        let _ = std::fs::remove_file(self.dir.join("nginx.pid"));
        let stats = self.dir.join("stats");
        let cpu = SERVER_CPU.to_string();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", s, "taskset", "-c", &cpu]);
        if ustack {
            cmd.arg(&self.launcher)
                .arg("run")
                .arg("--config")
                .arg(&self.ini)
                .arg("--stats")
                .arg(&stats)
                .args(crate::servers::launcher_sets())
                .arg("--");
        }
        let prefix = format!("{}/", self.dir.display());
        // What nginx and the library print (the library names what it
        // does not handle there).
        let out_path = self.dir.join(format!("{which}.out"));
        let out = std::fs::File::create(&out_path)
            .map_err(|e| format!("cannot create {}: {e}", out_path.display()))?;
        cmd.arg(&self.nginx)
            .args(["-p", &prefix, "-c"])
            .arg(&self.conf)
            .arg("-e")
            .arg(self.dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().map_err(|e| e.to_string())?))
            .stderr(Stdio::from(out))
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start nginx: {e}"))?;
        let mut nginx = Nginx { child };
        self.check_page(&mut nginx, Duration::from_secs(10))
            .map_err(|e| format!("{which}: {e}; {}", tail(&out_path)))?;
        // `ip netns exec`, taskset and `ustack run` each exec the next: the
        // child is nginx's master.
        let master = nginx.child.id();
        let pid_file = std::fs::read_to_string(self.dir.join("nginx.pid")).unwrap_or_default();
        if pid_file.trim() != master.to_string() {
            return Err(format!("nginx.pid says {pid_file:?}, not {master}"));
        }
        let worker = match children(master).as_slice() {
            [w] => *w,
            other => {
                return Err(format!(
                    "nginx master {master}: workers {other:?}, want one"
                ))
            }
        };
        self.wrk(self.warmup)?;
        let stats_file = stats.with_extension(worker.to_string());
        let counters0 = read_stats(&stats_file);
        let (b0, t0) = core_ticks(SERVER_CPU)?;
        let (cb0, ct0) = core_ticks(CLIENT_CPU)?;
        let w0 = process_ticks(worker)?;
        let r = self.wrk(self.window)?;
        let w1 = process_ticks(worker)?;
        let (b1, t1) = core_ticks(SERVER_CPU)?;
        let (cb1, ct1) = core_ticks(CLIENT_CPU)?;
        let busy = |b0: u64, b1: u64, t0: u64, t1: u64| (b1 - b0) as f64 / (t1 - t0).max(1) as f64;
        let mut fig = RunFigures {
            rps: r.rps,
            requests: r.requests,
            seconds: r.seconds,
            server_core_busy: busy(b0, b1, t0, t1),
            client_core_busy: busy(cb0, cb1, ct0, ct1),
            worker_cpu_s: (w1 - w0) as f64 / USER_HZ,
            ..RunFigures::default()
        };
        if ustack {
            // The stats file is rewritten every 100 ms.
            std::thread::sleep(Duration::from_millis(250));
            let counters1 = read_stats(&stats_file);
            let d = |k: &str| {
                counters1
                    .get(k)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(counters0.get(k).copied().unwrap_or(0))
            };
            let opens = d("tcp_passive_opens");
            fig.engine = Some((opens, d("tcp_retransmitted_segments")));
            if opens < u64::from(WRK_CONNECTIONS) {
                return Err(format!(
                    "ustack: the worker's engine ({}) counted {opens} passive opens for wrk's \
                     {WRK_CONNECTIONS} connections",
                    stats_file.display()
                ));
            }
        }
        nginx.stop();
        if ustack {
            let out = std::fs::read_to_string(&out_path).unwrap_or_default();
            for l in out.lines().filter(|l| l.to_lowercase().contains("ustack")) {
                if !fig.said.iter().any(|x| x == l) {
                    fig.said.push(l.to_string());
                }
            }
        }
        let bad = self.error_log_bad();
        if r.socket_errors > 0 || r.non_2xx > 0 || !bad.is_empty() {
            let mut msg = format!(
                "{which}: {:.0} requests/s with {} socket errors and {} non-2xx responses",
                r.rps, r.socket_errors, r.non_2xx
            );
            if let Some(first) = bad.first() {
                let _ = write!(
                    msg,
                    "; nginx's error log ({} bad lines): {first}",
                    bad.len()
                );
            }
            return Err(msg);
        }
        Ok(fig)
    }
}

impl Drop for NginxBench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_report() {
        let out = "Running 5s test @ http://10.99.200.2/index.html
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.83ms    2.17ms  17.15ms   84.68%
    Req/Sec    36.92k     3.67k   43.89k    70.00%
  183959 requests in 5.01s, 147.02MB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:  36704.88
Transfer/sec:     29.33MB
";
        let r = parse_wrk(out).unwrap();
        assert_eq!(r.requests, 183959.0);
        assert_eq!(r.seconds, 5.01);
        assert_eq!(r.rps, 36704.88);
        assert_eq!(r.socket_errors, 6);
        assert_eq!(r.non_2xx, 7);
        assert!(parse_wrk("nothing").is_err());
    }

    #[test]
    fn workloads_name_placement_and_link() {
        assert_eq!(
            Setup::from_workload("nginx:rps=both").unwrap(),
            Setup {
                rps: Rps::Both,
                link: ServerLink::AfPacket
            }
        );
        assert_eq!(
            Setup::from_workload("nginx:rps=both:link=af_xdp").unwrap(),
            Setup {
                rps: Rps::Both,
                link: ServerLink::AfXdpGeneric
            }
        );
        assert_eq!(
            Setup::from_workload("nginx:rps=server").unwrap().rps,
            Rps::ServerOnly
        );
        for bad in [
            "nginx",
            "nginx:link=af_xdp",
            "nginx:rps=x",
            "ngx:rps=both",
            "nginx:rps=both:z=1",
        ] {
            assert!(Setup::from_workload(bad).is_err(), "{bad}");
        }
        assert!(ustack_ini("v0", ServerLink::AfXdpGeneric)
            .contains("link=af_xdp:v0\nxdp_mode=generic\n"));
    }

    #[test]
    fn the_page_is_600_bytes() {
        assert_eq!(page().len(), PAGE_BYTES);
        assert!(nginx_conf(Path::new("/x")).contains("worker_processes 1;"));
    }
}
