//! Helpers for the tests that talk to the kernel: commands, a cleanup
//! guard, veth pairs, ARP frames, and waiting for a frame.

use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Link, PacketBuffer, MAX_BURST};

/// Runs a command, panicking with its output if it fails.
pub fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A veth pair in this namespace named `<tag>A<pid>` and `<tag>B<pid>`,
/// IPv6 off on both ends so that only the test's frames cross it, and
/// the guard that deletes it.
pub fn quiet_veth_pair(tag: &str) -> (String, String, Cleanup) {
    let pid = std::process::id();
    let (na, nb) = (format!("{tag}A{pid}"), format!("{tag}B{pid}"));
    let cleanup = Cleanup::new(vec![vec![
        "ip".into(),
        "link".into(),
        "del".into(),
        na.clone(),
    ]]);
    run(&[
        "ip", "link", "add", &na, "type", "veth", "peer", "name", &nb,
    ]);
    for n in [&na, &nb] {
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6"), "1");
    }
    (na, nb, cleanup)
}

/// A veth pair: `outer` in this namespace (no address; the link under
/// test takes it), `inner` in a network namespace of its own with
/// 10.99.y.1/24 and its loopback up, IPv6 off on both ends; all removed on
/// drop.
pub struct NsVeth {
    pub outer: String,
    pub inner: String,
    pub ns: String,
    pub y: u8,
    _cleanup: Cleanup,
}

impl NsVeth {
    /// The pair `<prefix>A<pid>` / `<prefix>B<pid>` in namespace
    /// `ustk-<prefix><pid>`, with the kernel's queues per CPU.
    pub fn new(prefix: &str, y: u8) -> NsVeth {
        NsVeth::make(prefix, y, &[])
    }

    /// As [`NsVeth::new`] with one queue each way, for a link that binds
    /// queue 0 (a veth made with a queue per CPU spreads the peer's frames
    /// over all of them).
    pub fn with_one_queue(prefix: &str, y: u8) -> NsVeth {
        NsVeth::make(prefix, y, &["numtxqueues", "1", "numrxqueues", "1"])
    }

    fn make(prefix: &str, y: u8, queues: &[&str]) -> NsVeth {
        let pid = std::process::id();
        let outer = format!("{prefix}A{pid}");
        let inner = format!("{prefix}B{pid}");
        let ns = format!("ustk-{prefix}{pid}");
        let cleanup = Cleanup::new(vec![
            vec!["ip".into(), "netns".into(), "del".into(), ns.clone()],
            vec!["ip".into(), "link".into(), "del".into(), outer.clone()],
        ]);
        run(&["ip", "netns", "add", &ns]);
        let mut add = vec!["ip", "link", "add", &outer];
        add.extend_from_slice(queues);
        add.extend_from_slice(&["type", "veth", "peer", "name", &inner]);
        add.extend_from_slice(queues);
        run(&add);
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{outer}/disable_ipv6"), "1");
        run(&["ip", "link", "set", &inner, "netns", &ns]);
        run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
        ]);
        let addr = format!("10.99.{y}.1/24");
        run(&["ip", "-n", &ns, "addr", "add", &addr, "dev", &inner]);
        run(&["ip", "-n", &ns, "link", "set", &inner, "up"]);
        run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        NsVeth {
            outer,
            inner,
            ns,
            y,
            _cleanup: cleanup,
        }
    }

    /// The kernel side's address, 10.99.y.1.
    pub fn peer_ip(&self) -> [u8; 4] {
        [10, 99, self.y, 1]
    }

    /// The address the tests give the link's end, 10.99.y.2.
    pub fn our_ip(&self) -> String {
        format!("10.99.{}.2", self.y)
    }

    /// Sets the kernel side's transmit checksum offload.
    pub fn peer_tx_offload(&self, on: bool) {
        let on = if on { "on" } else { "off" };
        run(&[
            "ip",
            "netns",
            "exec",
            &self.ns,
            "ethtool",
            "-K",
            &self.inner,
            "tx",
            on,
        ]);
    }

    /// Makes the kernel side send to [`NsVeth::our_ip`] at `mac` without
    /// asking by ARP.
    pub fn peer_neigh(&self, mac: [u8; 6]) {
        let macs = mac.map(|b| format!("{b:02x}")).join(":");
        run(&[
            "ip",
            "-n",
            &self.ns,
            "neigh",
            "replace",
            &self.our_ip(),
            "lladdr",
            &macs,
            "dev",
            &self.inner,
            "nud",
            "permanent",
        ]);
    }

    /// Runs `f` on a thread inside the namespace.
    pub fn in_ns<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap();
            // SAFETY: setns on a namespace file we hold open; it changes only
            // this short-lived thread's network namespace.
            let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .unwrap()
    }
}

/// Runs its commands when dropped (also when a test panics), ignoring
/// their failures: the things they remove may already be gone.
pub struct Cleanup(Vec<Vec<String>>);

impl Cleanup {
    pub fn new(commands: Vec<Vec<String>>) -> Cleanup {
        Cleanup(commands)
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for cmd in &self.0 {
            let _ = Command::new(&cmd[0])
                .args(&cmd[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A broadcast ARP request (padded to 60 bytes) asking who has `target`.
pub fn arp_request(mac: [u8; 6], ip: [u8; 4], target: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x06]); // ARP
    f.extend_from_slice(&[0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]); // Ethernet/IPv4, request
    f.extend_from_slice(&mac);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f.resize(60, 0);
    f
}

/// Whether `frame` is an ARP reply to `mac` from `sender`.
pub fn is_arp_reply_from(frame: &[u8], mac: [u8; 6], sender: [u8; 4]) -> bool {
    frame.len() >= 42
        && frame[0..6] == mac
        && frame[12..14] == [0x08, 0x06]
        && frame[20..22] == [0x00, 0x02]
        && frame[28..32] == sender
}

/// Receives until `keep` has accepted `want` frames or `timeout` passes;
/// returns the accepted frames' bytes and flags. Every buffer is recycled.
pub fn receive<L: Link>(
    link: &mut L,
    want: usize,
    timeout: Duration,
    mut keep: impl FnMut(&L::Buf) -> bool,
) -> Vec<(Vec<u8>, bool)> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        if let Some(fd) = link.rx_fd() {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one live pollfd, as the count says.
            unsafe { libc::poll(&mut pfd, 1, 20) };
        }
        link.rx_burst(&mut out, MAX_BURST).expect("rx_burst");
        for b in out.drain(..) {
            if keep(&b) {
                got.push((b.data().to_vec(), b.csum_partial()));
            }
            link.recycle(b);
        }
    }
    got
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
