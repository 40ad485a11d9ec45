//! `tcp_stream_preload_af_packet`: one TCP stream into iperf3 (Debian's,
//! unmodified) on the Linux kernel and under `ustack run`, the same
//! server core and the same client, in one run: the single-stream
//! throughput a user sees, over a veth as every container has it.
//! `tcp_stream_preload_af_packet_send`: the same the other way, the server
//! sending (`iperf3 -c -R`).
//!
//! The topology is nginx's (`veth.rs`): `iperf3 -s` pinned to core 0 in
//! the server namespace, `iperf3 -c` pinned to core 1 in the client
//! namespace, RPS on both ends so each side pays for its own receive.
//! Unlike nginx's, the veth keeps its default offloads: the kernel client
//! sends TSO/GSO super-frames, which AF_PACKET hands to ustack whole and
//! ustack cuts into segments (`link::gso`), and the kernel server gets
//! them through GRO.  ustack's engine busy polls (`idle_sleep=0`) on
//! AF_PACKET with its default buffers (receive auto-tuning grows the
//! window).
//!
//! Per run: a fresh server (`iperf3 -s -4` on both: ustack has no IPv6
//! yet), a 1-second stream as warm-up (retried until
//! the server answers), then the stream measured for the window; the
//! figure is what iperf3's receiver counted, in Gbit/s.  Around the
//! window, `/proc/stat` for both cores.  A run fails when iperf3 fails or
//! when under `ustack run` the engine did not carry the stream.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::servers::Running;
use crate::veth::{
    core_ticks, read_stats, tail, which, Offloads, Rps, Topology, CLIENT_CPU, PREFIX, SERVER_CPU,
    SERVER_IP,
};

/// What `make bench` needs for this workload.
pub const TOOLS: &[&str] = &["iperf3", "taskset", "ip"];

/// `iperf 3.12`, as `iperf3 --version` says.
pub fn version() -> String {
    Command::new("iperf3")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.split(" (").next().unwrap_or(l).trim().to_string())
        })
        .unwrap_or_else(|| "iperf3".into())
}

/// The figures of one run.
#[derive(Debug, Default, Clone)]
pub struct StreamFigures {
    pub gbits: f64,
    /// Retransmissions the kernel client counted.
    pub retransmits: u64,
    pub server_core_busy: f64,
    pub client_core_busy: f64,
    /// ustack only: the engine's bytes received (sent, for the reverse
    /// row) and super-frames received (sent).
    pub engine: Option<(u64, u64)>,
}

/// What iperf3's client printed at the end: the receiver's rate in
/// Mbit/s and the sender's retransmissions.
pub fn parse_iperf3(out: &str) -> Result<(f64, u64), String> {
    let mut rate = None;
    let mut retr = 0;
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = w.iter().position(|x| *x == "Mbits/sec") else {
            continue;
        };
        if w.last() == Some(&"receiver") {
            rate = w.get(at - 1).and_then(|x| x.parse::<f64>().ok());
        } else if w.last() == Some(&"sender") {
            retr = w.get(at + 1).and_then(|x| x.parse().ok()).unwrap_or(0);
        }
    }
    rate.map(|r| (r, retr))
        .ok_or_else(|| format!("cannot read iperf3's report:\n{out}"))
}

/// The namespaces, the veth and ustack's configuration, for every run.
pub struct StreamBench {
    net: Topology,
    dir: PathBuf,
    launcher: PathBuf,
    iperf3: PathBuf,
    ini: PathBuf,
    window: Duration,
    /// The server sends (`iperf3 -c -R`).
    reverse: bool,
}

impl StreamBench {
    pub fn setup(exe: &Path, window: Duration, reverse: bool) -> Result<StreamBench, String> {
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
        let iperf3 = which("iperf3").expect("checked");
        let bin = exe.parent().unwrap_or(Path::new("."));
        let launcher = bin.join("ustack");
        if !launcher.is_file() || !bin.join("libustack_preload.so").is_file() {
            return Err(
                "no ustack or libustack_preload.so: cargo build --release --workspace".into(),
            );
        }
        let dir = std::env::temp_dir().join(format!("ustack-bench-stream-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let net = Topology::create("stream", Rps::Both, Offloads::Default)?;
        let ini = dir.join("ustack.ini");
        std::fs::write(
            &ini,
            format!(
                "[dpdk]\nidle_sleep=0\n{}[port0]\nlink=af_packet:{}\naddr={SERVER_IP}/{PREFIX}\n",
                // Sending, the engine leaves segmentation to the kernel.
                if reverse { "tso=1\n" } else { "" },
                net.if_server
            ),
        )
        .map_err(|e| format!("cannot write {}: {e}", ini.display()))?;
        Ok(StreamBench {
            net,
            dir,
            launcher,
            iperf3,
            ini,
            window,
            reverse,
        })
    }

    fn client(&self, seconds: u64) -> Result<String, String> {
        let cpu = CLIENT_CPU.to_string();
        let t = seconds.to_string();
        let mut args = vec![
            "taskset", "-c", &cpu, "iperf3", "-c", SERVER_IP, "-t", &t, "-f", "m",
        ];
        if self.reverse {
            args.push("-R");
        }
        let out = self
            .net
            .in_client(&args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run iperf3: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return Err(format!("iperf3 -c: {}: {}", out.status, text.trim()));
        }
        Ok(text)
    }

    /// One run on `which` ("ustack" or "linux").
    pub fn run(&self, which: &str) -> Result<StreamFigures, String> {
        let ustack = which == "ustack";
        self.net.server_address(!ustack)?;
        let stats = self.dir.join("stats");
        let out_path = self.dir.join(format!("{which}.out"));
        let out = std::fs::File::create(&out_path)
            .map_err(|e| format!("cannot create {}: {e}", out_path.display()))?;
        let cpu = SERVER_CPU.to_string();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.net.ns_server, "taskset", "-c", &cpu]);
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
        // -4 on both stacks: without it iperf3 listens on an AF_INET6
        // socket (IPv4 as mapped addresses), and ustack has no IPv6 yet.
        cmd.arg(&self.iperf3)
            .args(["-s", "-4"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().map_err(|e| e.to_string())?))
            .stderr(Stdio::from(out))
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start iperf3 -s: {e}"))?;
        let server = Running { child };
        // The warm-up, until the server answers.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.client(1) {
                Ok(_) => break,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("{which}: {e}; server: {}", tail(&out_path)))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
        let stats_file = stats.with_extension(server.child.id().to_string());
        let counters0 = read_stats(&stats_file);
        let (b0, t0) = core_ticks(SERVER_CPU)?;
        let (cb0, ct0) = core_ticks(CLIENT_CPU)?;
        let text = self.client(self.window.as_secs().max(1))?;
        let (b1, t1) = core_ticks(SERVER_CPU)?;
        let (cb1, ct1) = core_ticks(CLIENT_CPU)?;
        let (mbits, retransmits) = parse_iperf3(&text)?;
        let busy = |b0: u64, b1: u64, t0: u64, t1: u64| (b1 - b0) as f64 / (t1 - t0).max(1) as f64;
        let mut fig = StreamFigures {
            gbits: mbits / 1000.0,
            retransmits,
            server_core_busy: busy(b0, b1, t0, t1),
            client_core_busy: busy(cb0, cb1, ct0, ct1),
            engine: None,
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
            let (moved, verb, supers) = if self.reverse {
                (
                    d("port0_link_tx_bytes"),
                    "sent",
                    d("port0_link_tx_super_frames"),
                )
            } else {
                (d("rx_bytes"), "received", d("port0_link_rx_super_frames"))
            };
            fig.engine = Some((moved, supers));
            // The engine carried the stream: about as many bytes as iperf3
            // counted (its rate times the window, within a fifth).
            let want = mbits * 1e6 / 8.0 * self.window.as_secs_f64() * 0.8;
            if (moved as f64) < want {
                return Err(format!(
                    "ustack: the engine ({}) {verb} {moved} bytes while iperf3 counted {mbits:.0} \
                     Mbit/s",
                    stats_file.display()
                ));
            }
        }
        drop(server);
        Ok(fig)
    }
}

impl Drop for StreamBench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_report() {
        let out = "\
[ ID] Interval           Transfer     Bitrate         Retr
[  5]   0.00-5.00   sec  5600 MBytes  9395 Mbits/sec   17             sender
[  5]   0.00-5.00   sec  5598 MBytes  9391 Mbits/sec                  receiver

iperf Done.
";
        assert_eq!(parse_iperf3(out).unwrap(), (9391.0, 17));
        assert!(parse_iperf3("iperf3: error - unable to connect").is_err());
    }
}
