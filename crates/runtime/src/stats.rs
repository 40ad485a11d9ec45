//! Statistics of an engine as `name value` lines, written to a file that
//! tools and tests read (until the control socket of the CLI exists).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use link::{Link, LinkStats};

use crate::engine::Engine;
use crate::ports::PortLink;

/// Every counter of an engine: the stack's, the loop's, the control
/// socket's, each port's link and fault injector, by name.
pub fn snapshot(engine: &Engine<PortLink>) -> Vec<(String, u64)> {
    let mut out = snapshot_of(engine);
    for (i, port) in engine.ports().enumerate() {
        // A backend's own counters beyond every link's (DPDK's offloads
        // used, chained frames gathered ...).
        for (name, v) in port.extra_stats() {
            out.push((format!("port{i}_link_{name}"), v));
        }
        if let Some(errors) = port.capture_write_errors() {
            out.push((format!("port{i}_pcap_write_errors"), errors));
        }
        if let Some(f) = port.fault_stats() {
            for (dir, d) in [("rx", f.rx), ("tx", f.tx)] {
                for (name, v) in [
                    ("frames_in", d.frames_in),
                    ("frames_out", d.frames_out),
                    ("lost", d.lost),
                    ("duplicated", d.duplicated),
                    ("reordered", d.reordered),
                    ("corrupted", d.corrupted),
                    ("completed_before_corrupt", d.completed_before_corrupt),
                    ("delayed", d.delayed),
                ] {
                    out.push((format!("port{i}_fault_{dir}_{name}"), v));
                }
            }
        }
    }
    out
}

/// A link's counters by name (`rx_frames`, `tx_bytes` ...).
pub fn link_counters(s: &LinkStats) -> Vec<(String, u64)> {
    [
        ("rx_frames", s.rx_frames),
        ("rx_bytes", s.rx_bytes),
        ("tx_frames", s.tx_frames),
        ("tx_bytes", s.tx_bytes),
        ("rx_dropped", s.rx_dropped),
        ("tx_dropped", s.tx_dropped),
        ("pool_exhausted", s.pool_exhausted),
        ("rx_oversize", s.rx_oversize),
        ("rx_copied", s.rx_copied),
        ("ring_errors", s.ring_errors),
        ("rx_csum_partial_form", s.rx_csum_partial_form),
        ("rx_super_frames", s.rx_super_frames),
        ("rx_super_cut", s.rx_super_cut),
        ("rx_queued_whole", s.rx_queued_whole),
        ("rx_super_bad_checksum", s.rx_super_bad_checksum),
        ("rx_gro_aggregates", s.rx_gro_aggregates),
        ("rx_gro_joined", s.rx_gro_joined),
        ("tx_super_frames", s.tx_super_frames),
        ("tx_kick_short", s.tx_kick_short),
        ("tx_csum_partial", s.tx_csum_partial),
        ("tx_csum_refused", s.tx_csum_refused),
        ("kernel_rx_drop_refused", s.kernel_rx_drop_refused),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .chain(
        s.rx_vnet
            .named()
            .into_iter()
            .map(|(n, v)| (format!("rx_vnet_{n}"), v)),
    )
    .collect()
}

/// [`snapshot`] of an engine over any link: everything but the fault
/// injector's counters.
pub fn snapshot_of<L: Link>(engine: &Engine<L>) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    engine
        .stack
        .counters()
        .visit(|name, v| out.push((name.to_string(), v)));
    // Gauges: what exists now, not what happened.
    let (tcp_bytes, tcp_conns) = engine.stack.tcp_memory_held();
    out.push((
        "sockets_open".to_string(),
        engine.stack.socket_count() as u64,
    ));
    out.push(("tcp_connections".to_string(), tcp_conns as u64));
    out.push(("tcp_memory_bytes".to_string(), tcp_bytes as u64));
    out.push((
        "tcp_memory_per_connection".to_string(),
        tcp_bytes.checked_div(tcp_conns).unwrap_or(0) as u64,
    ));
    // What the memory budget (net.inet.tcp.memory_budget_mb) counts.
    out.push((
        "tcp_memory_accounted_bytes".to_string(),
        engine.stack.tcp_memory_accounted() as u64,
    ));
    let (timer_entries, timer_bytes) = engine.stack.tcp_timer_wheel();
    out.push(("tcp_timer_entries".to_string(), timer_entries as u64));
    out.push(("tcp_timer_bytes".to_string(), timer_bytes as u64));
    let e = engine.counters();
    for (name, v) in [
        ("engine_loops", e.loops),
        ("engine_idle_sleeps", e.idle_sleeps),
        ("engine_tx_bursts", e.tx_bursts),
        ("engine_tx_drop_ring_full", e.tx_drop_ring_full),
        ("engine_tx_drop_oversize", e.tx_drop_oversize),
        ("engine_rx_drop_port_down", e.rx_drop_port_down),
        ("engine_tx_drop_port_down", e.tx_drop_port_down),
        ("engine_tx_control_from_reserve", e.tx_control_from_reserve),
        ("engine_served_addresses_failed", e.served_addresses_failed),
        ("engine_link_errors", e.link_errors),
        (
            "engine_rx_drop_before_group_join",
            e.rx_drop_before_group_join,
        ),
        ("engine_idle_us", e.idle_us),
        ("engine_gso_super_frames", e.gso_super_frames),
        ("engine_gso_segments_sent", e.gso_segments_sent),
        ("engine_gso_refused", e.gso_refused),
    ] {
        out.push((name.to_string(), v));
    }
    if let Some(c) = engine.control() {
        c.counters()
            .visit(|name, v| out.push((name.to_string(), v)));
    }
    for (i, port) in engine.ports().enumerate() {
        for (name, v) in link_counters(&port.stats()) {
            out.push((format!("port{i}_link_{name}"), v));
        }
    }
    // Each VLAN interface's traffic, by port and VLAN id.
    for iface in engine.stack.interfaces() {
        let (Some(vlan), Some(t)) = (iface.vlan, engine.stack.interface_traffic(iface.id)) else {
            continue;
        };
        for (name, v) in [
            ("rx_frames", t.rx_frames),
            ("rx_bytes", t.rx_bytes),
            ("tx_frames", t.tx_frames),
            ("tx_bytes", t.tx_bytes),
            ("tx_drop_no_buffer", t.tx_drop_no_buffer),
            ("rx_drop_down", t.rx_drop_down),
            ("tx_drop_down", t.tx_drop_down),
        ] {
            out.push((format!("port{}_vlan{}_{name}", vlan.port.0, vlan.vid), v));
        }
    }
    out
}

/// Renders a snapshot, one `name value` per line.
pub fn render(stats: &[(String, u64)]) -> String {
    let mut s = String::new();
    for (name, v) in stats {
        s.push_str(name);
        s.push(' ');
        s.push_str(&v.to_string());
        s.push('\n');
    }
    s
}

/// Writes snapshots to a file, atomically (a reader never sees half).
///
/// Each snapshot is written over the previous one in a second file
/// (`FILE.tmp`, kept), which then trades names with `FILE`
/// (`renameat2(RENAME_EXCHANGE)`). Not a fresh file renamed over `FILE`:
/// on ext4 a rename over an existing file starts the writeback of the
/// renamed file's data (`auto_da_alloc`), and so does closing a file
/// truncated to nothing. In the engine's thread that took 0.4-3 ms per
/// snapshot on this machine's /tmp, against about 0.1 ms this way
/// (`scripts/nginx-kernel-costs.sh`: the nginx worker's `rename`s, 3 ms
/// each, ten a second). A file system without the exchange gets the
/// plain rename.
pub struct StatsFile {
    path: PathBuf,
    tmp: PathBuf,
    last: String,
}

impl StatsFile {
    pub fn new(path: &Path) -> Self {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        StatsFile {
            path: path.to_path_buf(),
            tmp: tmp.into(),
            last: String::new(),
        }
    }

    pub fn write(&mut self, text: String) -> std::io::Result<()> {
        if text == self.last {
            return Ok(());
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.tmp)?;
        f.write_all_at(text.as_bytes(), 0)?;
        f.set_len(text.len() as u64)?;
        drop(f);
        if !exchange(&self.tmp, &self.path)? {
            std::fs::rename(&self.tmp, &self.path)?;
        }
        self.last = text;
        Ok(())
    }
}

/// Trades the names of `a` and `b` atomically. `Ok(false)` when it cannot
/// (`b` does not exist yet, or the file system has no exchange): a plain
/// rename then does.
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both are NUL-terminated paths that live for the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn snapshot_text(i: usize) -> String {
        // Lengths differ from one snapshot to the next: a shorter one must
        // not keep the tail of a longer one.
        let mut s = String::new();
        for line in 0..(1 + i % 7) * 300 {
            s.push_str(&format!("counter_{line} {i}\n"));
        }
        s.push_str("end 1\n");
        s
    }

    /// Every read of the file, while snapshots are written as fast as they
    /// come, is one whole snapshot; the last one stays.
    #[test]
    fn a_reader_sees_whole_snapshots_only() {
        let dir = std::env::temp_dir().join(format!("ustack-stats-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.1");
        let mut file = StatsFile::new(&path);
        file.write(snapshot_text(0)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (path, done) = (path.clone(), done.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !done.load(Ordering::Relaxed) {
                    let text = std::fs::read_to_string(&path).expect("the file is always there");
                    let i: usize = text
                        .lines()
                        .next()
                        .and_then(|l| l.split(' ').nth(1))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| panic!("a snapshot without its first line: {text:?}"));
                    assert_eq!(text, snapshot_text(i), "read {reads}: not a whole snapshot");
                    reads += 1;
                }
                reads
            })
        };
        for i in 1..2000 {
            file.write(snapshot_text(i)).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        let reads = reader.join().unwrap();
        assert!(reads > 0);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), snapshot_text(1999));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The exchange trades two files' contents, and says when it cannot
    /// (no second file yet) instead of failing.
    #[test]
    fn exchange_trades_names_or_says_it_cannot() {
        let dir = std::env::temp_dir().join(format!("ustack-exchange-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "A").unwrap();
        assert!(!exchange(&a, &b).unwrap(), "b does not exist");
        std::fs::write(&b, "B").unwrap();
        assert!(exchange(&a, &b).unwrap());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "B");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "A");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
