//! The DPDK link on hugepages: a process of its own (the EAL starts once
//! per process, and the unit tests run theirs without hugepages).
//!
//! The test reserves 2 MiB hugepages through /proc/sys/vm/nr_hugepages,
//! starts the EAL on them (`--in-memory`: no hugetlbfs mount needed), opens
//! an af_packet virtual device on a veth whose other end is the kernel in a
//! namespace, exchanges ARP with it, checks that the mbufs live in 2 MiB
//! pages, and gives the reservation back (pages still mapped become surplus
//! and return to the kernel when the test process exits).
#![cfg(feature = "dpdk")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use link::dpdk::{eal, DpdkLink, DpdkPortConfig, EalConfig};
use link::{Link, PacketBuffer, MAX_BURST};

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";
/// 64 pages of 2 MiB: DPDK's own structures and one small pool.
const PAGES: u64 = 64;

fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Undoes the test's changes to the machine when dropped.
struct Restore {
    hugepages: u64,
    ns: String,
    veth: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(NR_HUGEPAGES, self.hugepages.to_string());
        for args in [
            vec!["ip", "netns", "del", &self.ns],
            vec!["ip", "link", "del", &self.veth],
        ] {
            let _ = Command::new(args[0])
                .args(&args[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn meminfo(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/meminfo"))
}

#[test]
fn link_on_hugepages() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the hugepage test needs root");
        return;
    }
    assert_eq!(
        meminfo("Hugepagesize:"),
        2048,
        "the test reserves 2 MiB hugepages"
    );
    let old: u64 = std::fs::read_to_string(NR_HUGEPAGES)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = std::process::id();
    let restore = Restore {
        hugepages: old,
        ns: format!("ustk-dh{pid}"),
        veth: format!("udhA{pid}"),
    };
    std::fs::write(NR_HUGEPAGES, (old + PAGES).to_string()).unwrap();
    let free = meminfo("HugePages_Free:");
    assert!(
        free >= PAGES,
        "asked the kernel for {PAGES} more hugepages, {free} are free"
    );

    let (ns, outer, inner) = (&restore.ns, &restore.veth, format!("udhB{pid}"));
    run(&["ip", "netns", "add", ns]);
    run(&[
        "ip", "link", "add", outer, "type", "veth", "peer", "name", &inner,
    ]);
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{outer}/disable_ipv6"), "1");
    run(&["ip", "link", "set", &inner, "netns", ns]);
    run(&[
        "ip",
        "-n",
        ns,
        "addr",
        "add",
        "10.99.97.1/24",
        "dev",
        &inner,
    ]);
    run(&["ip", "-n", ns, "link", "set", &inner, "up"]);
    run(&["ip", "link", "set", outer, "up"]);

    eal::init(&EalConfig {
        no_pci: true,
        file_prefix: Some(format!("ustk-dh{pid}")),
        vdevs: vec![format!("net_af_packet0,iface={outer}")],
        log_level: Some(4),
        ..EalConfig::default()
    })
    .expect("EAL on hugepages");
    let mut link = DpdkLink::open(&DpdkPortConfig {
        pool_size: 1024,
        rx_desc: 256,
        tx_desc: 256,
        ..DpdkPortConfig::new(0)
    })
    .unwrap();
    let used = PAGES + old - meminfo("HugePages_Free:").min(PAGES + old);
    assert!(used > 0, "DPDK took no hugepage");

    let mac = link.info().mac;
    let peer = [10, 99, 97, 1];
    let mut req = Vec::new();
    req.extend_from_slice(&[0xff; 6]);
    req.extend_from_slice(&mac);
    req.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    req.extend_from_slice(&mac);
    req.extend_from_slice(&[10, 99, 97, 2]);
    req.extend_from_slice(&[0; 6]);
    req.extend_from_slice(&peer);
    req.resize(60, 0);
    let mut b = link.alloc_tx().unwrap();
    assert_eq!(
        DpdkLink::page_size_of(&b),
        2 << 20,
        "a transmit mbuf in a 2 MiB page"
    );
    b.set_len(req.len());
    b.data_mut().copy_from_slice(&req);
    let mut v = vec![b];
    while !v.is_empty() {
        link.tx_burst(&mut v).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    let reply = loop {
        assert!(Instant::now() < deadline, "no ARP reply over hugepages");
        link.rx_burst(&mut out, MAX_BURST).unwrap();
        if let Some(i) = out.iter().position(|b| {
            let d = b.data();
            d.len() >= 42 && d[0..6] == mac && d[12..14] == [8, 6] && d[28..32] == peer
        }) {
            break out.swap_remove(i);
        }
        out.clear();
    };
    assert!(link.owns_memory_of(&reply));
    assert_eq!(DpdkLink::page_size_of(&reply), 2 << 20);
    eprintln!(
        "hugepages: {used} of 2 MiB in use by DPDK; ARP reply in a 2 MiB page; {:?}",
        link.stats()
    );
    drop(reply);
    drop(out);
    drop(link);
    drop(restore);
    assert_eq!(
        std::fs::read_to_string(NR_HUGEPAGES).unwrap().trim(),
        old.to_string(),
        "the reservation is given back"
    );
}
