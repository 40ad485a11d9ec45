//! Helpers for the tests that talk to the kernel: commands, a cleanup
//! guard, ARP frames, and waiting for a frame.

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
