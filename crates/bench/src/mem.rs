//! Memory figures: this process's resident set, and the kernel's slab and
//! TCP socket memory.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// This process's resident set (`VmRSS`), in KiB.
pub fn rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    field_kb(&s, "VmRSS:")
}

/// This process's anonymous resident memory (`RssAnon`), in KiB: its
/// heap and stacks, where a program keeps its connections; the shared
/// link's file pages (`RssShmem`, a fixed cost like a NIC's rings) are
/// not in it.
pub fn rss_anon_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    field_kb(&s, "RssAnon:")
}

fn field_kb(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// What the kernel holds, at one moment.
#[derive(Debug, Clone, Default)]
pub struct KernelSnapshot {
    /// `/proc/meminfo` `Slab`, in KiB.
    pub slab_kb: u64,
    /// `/proc/net/sockstat` `TCP: ... mem`, in pages (socket buffers).
    pub tcp_mem_pages: u64,
    /// `/proc/slabinfo`: bytes of each cache (objects × object size).
    pub caches: BTreeMap<String, u64>,
}

/// Reads the kernel's figures (zeros where a file cannot be read).
pub fn kernel_snapshot() -> KernelSnapshot {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let tcp_mem_pages = sockstat
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words
                .iter()
                .position(|&w| w == "mem")
                .and_then(|i| words.get(i + 1)?.parse().ok())
        })
        .unwrap_or(0);
    let mut caches = BTreeMap::new();
    if let Ok(s) = std::fs::read_to_string("/proc/slabinfo") {
        for l in s.lines().skip(2) {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let (Some(name), Some(Ok(objs)), Some(Ok(size))) = (
                w.first(),
                w.get(2).map(|x| x.parse::<u64>()),
                w.get(3).map(|x| x.parse::<u64>()),
            ) {
                caches.insert(name.to_string(), objs * size);
            }
        }
    }
    KernelSnapshot {
        slab_kb: field_kb(&meminfo, "Slab:").unwrap_or(0),
        tcp_mem_pages,
        caches,
    }
}

/// The slab caches a TCP socket's kernel objects live in: the socket
/// itself, its inode and file, the dentry sockfs gives it, and an epoll
/// watch; a ustack socket's placeholder fd costs a `filp` slot at most.
pub const SOCKET_CACHES: &[&str] = &[
    "TCP",
    "TCPv6",
    "request_sock_TCP",
    "sock_inode_cache",
    "filp",
    "dentry",
    "eventpoll_epi",
    "eventpoll_pwq",
];

/// The growth from `a` to `b` of the socket caches ([`SOCKET_CACHES`])
/// plus TCP's socket memory (each at least zero), in bytes, and the growth of each cache as
/// `name:bytes` words.
pub fn socket_delta(a: &KernelSnapshot, b: &KernelSnapshot) -> (i64, String) {
    let mut total = ((b.tcp_mem_pages as i64 - a.tcp_mem_pages as i64) * 4096).max(0);
    let mut detail = format!("tcp_mem:{total}");
    for name in SOCKET_CACHES {
        // A cache that shrank did so for someone else (the machine's other
        // work): counted as no growth, never against the figure.
        let d = (b.caches.get(*name).copied().unwrap_or(0) as i64
            - a.caches.get(*name).copied().unwrap_or(0) as i64)
            .max(0);
        total += d;
        let _ = write!(detail, ",{name}:{d}");
    }
    (total, detail)
}

/// The growth from `a` to `b` as `key=value` words: `slab_bytes`,
/// `tcp_mem_bytes`, and `top=` the caches that grew most.
pub fn kernel_delta(a: &KernelSnapshot, b: &KernelSnapshot) -> String {
    let slab = (b.slab_kb as i64 - a.slab_kb as i64) * 1024;
    let tcp = (b.tcp_mem_pages as i64 - a.tcp_mem_pages as i64) * 4096;
    let mut grew: Vec<(i64, &str)> = b
        .caches
        .iter()
        .map(|(k, &v)| {
            (
                v as i64 - a.caches.get(k).copied().unwrap_or(0) as i64,
                k.as_str(),
            )
        })
        .filter(|&(d, _)| d > 0)
        .collect();
    grew.sort_unstable_by(|x, y| y.cmp(x));
    let mut top = String::new();
    for (d, name) in grew.iter().take(8) {
        if !top.is_empty() {
            top.push(',');
        }
        let _ = write!(top, "{name}:{d}");
    }
    format!("slab_bytes={slab} tcp_mem_bytes={tcp} top={top}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_growth_counts_the_socket_caches_and_never_a_shrink() {
        let snap = |tcp: u64, dentry: u64, other: u64, pages: u64| KernelSnapshot {
            slab_kb: 0,
            tcp_mem_pages: pages,
            caches: [
                ("TCP".to_string(), tcp),
                ("dentry".to_string(), dentry),
                ("kmalloc-64".to_string(), other),
            ]
            .into_iter()
            .collect(),
        };
        let (total, detail) = socket_delta(&snap(1000, 500, 0, 1), &snap(3000, 100, 9999, 2));
        // TCP grew 2000, dentry shrank (0), kmalloc-64 is not a socket
        // cache, TCP memory grew a page.
        assert_eq!(total, 2000 + 4096);
        assert!(
            detail.contains("TCP:2000") && detail.contains("dentry:0"),
            "{detail}"
        );
    }
}
