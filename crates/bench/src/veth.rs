//! The two-namespace topology of the program workloads (nginx, iperf3): a
//! server namespace and a client namespace joined by a veth,
//! `10.99.200.0/24`, the server on core 0 and the load generator on
//! core 1, with RPS placing each end's receive processing (see
//! `nginx.rs` for why); and the host helpers those workloads share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The server's and the client's addresses (the interop tests' 10.99/16).
pub const SERVER_IP: &str = "10.99.200.2";
pub const CLIENT_IP: &str = "10.99.200.1";
pub const PREFIX: u8 = 24;
/// The cores: the server on the first, the load generator on the second.
pub const SERVER_CPU: usize = 0;
pub const CLIENT_CPU: usize = 1;
/// /proc's clock ticks per second (USER_HZ, 100 on Linux).
pub const USER_HZ: f64 = 100.0;

/// Where the veth's receive processing runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rps {
    /// Each end's on its own side's core.
    Both,
    /// The server end's on the server's core; the client end's where the
    /// frame was sent (the server's core).
    ServerOnly,
}

/// The veth's segmentation offloads (TSO, GSO) on both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offloads {
    /// As a veth comes (on): a kernel peer sends super-frames.
    Default,
    /// Off on both ends (for one-segment responses they change nothing).
    SegmentationOff,
}

/// The namespaces and the veth; removed on drop.
pub struct Topology {
    pub ns_server: String,
    pub ns_client: String,
    pub if_server: String,
    pub if_client: String,
}

impl Topology {
    /// Makes `usb-{tag}-s-PID` and `usb-{tag}-c-PID` joined by a veth,
    /// the client's end addressed; the server's end has no address (each
    /// run gives it to the kernel or leaves it to ustack).
    pub fn create(tag: &str, rps: Rps, offloads: Offloads) -> Result<Topology, String> {
        let id = std::process::id();
        // What an interrupted earlier run left (its process is gone).
        for line in sh(&["ip", "netns", "list"])?.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let pid = name
                .strip_prefix(&format!("usb-{tag}-s-"))
                .or_else(|| name.strip_prefix(&format!("usb-{tag}-c-")));
            if let Some(pid) = pid {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = sh(&["ip", "netns", "del", name]);
                }
            }
        }
        let t = Topology {
            ns_server: format!("usb-{tag}-s-{id}"),
            ns_client: format!("usb-{tag}-c-{id}"),
            if_server: format!("usb{}s{id}", &tag[..1]),
            if_client: format!("usb{}c{id}", &tag[..1]),
        };
        let (s, c) = (t.ns_server.as_str(), t.ns_client.as_str());
        let (is, ic) = (t.if_server.as_str(), t.if_client.as_str());
        for ns in [s, c] {
            sh(&["ip", "netns", "add", ns])?;
            // No IPv6: no router solicitations or DAD on the link.
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        sh(&[
            "ip", "link", "add", is, "netns", s, "type", "veth", "peer", "name", ic, "netns", c,
        ])?;
        let client_addr = format!("{CLIENT_IP}/{PREFIX}");
        sh(&["ip", "-n", c, "addr", "add", &client_addr, "dev", ic])?;
        let client_rps = match rps {
            Rps::Both => Some(CLIENT_CPU),
            Rps::ServerOnly => None,
        };
        for (ns, ifc, cpu) in [(s, is, Some(SERVER_CPU)), (c, ic, client_rps)] {
            if offloads == Offloads::SegmentationOff {
                sh(&[
                    "ip", "netns", "exec", ns, "ethtool", "-K", ifc, "tso", "off", "gso", "off",
                ])?;
            }
            // RPS: this end's receive processing on its side's core, or
            // none. `ip netns exec` mounts the namespace's own /sys.
            let want = cpu.map_or(0, |c| 1u64 << c);
            let mask = format!("{want:x}");
            let file = format!("/sys/class/net/{ifc}/queues/rx-0/rps_cpus");
            sh(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sh",
                "-c",
                &format!("echo {mask} > {file} && cat {file}"),
            ])
            .and_then(|got| {
                if u64::from_str_radix(got.trim().replace(',', "").as_str(), 16).ok() == Some(want)
                {
                    Ok(())
                } else {
                    Err(format!("{file}: {got:?} after writing {mask}"))
                }
            })?;
            sh(&["ip", "-n", ns, "link", "set", ifc, "up"])?;
        }
        Ok(t)
    }

    /// Gives the server's end its address on the kernel (`kernel`), or
    /// none (ustack has it); forgets the client's neighbours.
    pub fn server_address(&self, kernel: bool) -> Result<(), String> {
        let (s, c) = (self.ns_server.as_str(), self.ns_client.as_str());
        sh(&["ip", "-n", s, "addr", "flush", "dev", &self.if_server])?;
        if kernel {
            let server_addr = format!("{SERVER_IP}/{PREFIX}");
            sh(&[
                "ip",
                "-n",
                s,
                "addr",
                "add",
                &server_addr,
                "dev",
                &self.if_server,
            ])?;
        }
        sh(&["ip", "-n", c, "neigh", "flush", "dev", &self.if_client])?;
        Ok(())
    }

    /// A command run in the client's namespace.
    pub fn in_client(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_client]).args(args);
        c
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.ns_server, &self.ns_client] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

/// Runs a command to completion; its stdout, or what went wrong.
pub fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The first of `PATH`'s directories that holds `name`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `cpuN` of `/proc/stat`: (busy, total) ticks.
pub fn core_ticks(cpu: usize) -> Result<(u64, u64), String> {
    let stat = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .ok_or_else(|| format!("no {name} in /proc/stat"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 8 {
        return Err(format!("/proc/stat: {line:?}"));
    }
    // user nice system idle iowait irq softirq steal
    let total: u64 = v.iter().sum();
    Ok((total - v[3] - v[4], total))
}

/// utime + stime of a process, in ticks.
pub fn process_ticks(pid: u32) -> Result<u64, String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    let f: Vec<&str> = s
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    // After the name: state is field 3, utime 14 and stime 15.
    match (
        f.get(11).and_then(|x| x.parse::<u64>().ok()),
        f.get(12).and_then(|x| x.parse::<u64>().ok()),
    ) {
        (Some(u), Some(s)) => Ok(u + s),
        _ => Err(format!("/proc/{pid}/stat: cannot read the CPU times")),
    }
}

/// The last lines of a file, on one line.
pub fn tail(path: &Path) -> String {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = t.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// The `name value` lines of a `--stats` file.
pub fn read_stats(path: &Path) -> BTreeMap<String, u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(s) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let ppid = s
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|x| x.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out.sort_unstable();
    out
}
