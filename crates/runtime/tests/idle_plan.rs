//! What an idle engine waits for: with links that wake it by an fd it
//! sleeps until a deadline of its own, not `idle_sleep` (which woke an
//! idle program about a thousand times a second for nothing); with a link
//! that has no fd it naps, `idle_sleep` at most.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use link::{Link, LinkInfo, LinkStats, MemoryLink};
use runtime::EngineConfig;

mod common;
use common::{engines, pair};

/// A memory link that names an fd to wake on (an eventfd), as a device's
/// link does.
struct WithFd {
    inner: MemoryLink,
    fd: OwnedFd,
}

impl Link for WithFd {
    type Buf = <MemoryLink as Link>::Buf;

    fn rx_burst(&mut self, out: &mut Vec<Self::Buf>, max: usize) -> io::Result<usize> {
        self.inner.rx_burst(out, max)
    }

    fn alloc_tx(&mut self) -> Option<Self::Buf> {
        self.inner.alloc_tx()
    }

    fn tx_burst(&mut self, bufs: &mut Vec<Self::Buf>) -> io::Result<usize> {
        self.inner.tx_burst(bufs)
    }

    fn recycle(&mut self, buf: Self::Buf) {
        self.inner.recycle(buf)
    }

    fn info(&self) -> &LinkInfo {
        self.inner.info()
    }

    fn stats(&self) -> LinkStats {
        self.inner.stats()
    }

    fn rx_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

fn eventfd() -> OwnedFd {
    // SAFETY: no pointers; the fd returned is checked and owned below.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", io::Error::last_os_error());
    // SAFETY: a fresh fd that nothing else owns.
    unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
}

const IDLE_SLEEP: Duration = Duration::from_millis(1);

fn cfg() -> EngineConfig {
    EngineConfig {
        idle_sleep: IDLE_SLEEP,
        ..EngineConfig::default()
    }
}

#[test]
fn an_engine_whose_links_have_fds_is_not_woken_by_idle_sleep() {
    let (a, b) = pair();
    let fd = eventfd();
    let raw = fd.as_raw_fd();
    let client = WithFd {
        inner: a,
        fd: eventfd(),
    };
    let (_, e) = engines(client, WithFd { inner: b, fd }, cfg());
    let plan = e.idle_plan();
    assert!(plan.pollable);
    assert!(
        plan.fds.contains(&raw),
        "the link's fd is waited on: {plan:?}"
    );
    // Only a deadline of the engine's own may end the sleep, and a stack
    // with nothing to do has none.
    assert_eq!(plan.timeout, None, "{plan:?}");
    assert_eq!(plan.idle_sleep, IDLE_SLEEP);
}

#[test]
fn an_engine_with_a_link_without_fd_naps_idle_sleep_at_most() {
    let (a, b) = pair();
    let (_, e) = engines(a, b, cfg());
    let plan = e.idle_plan();
    assert!(!plan.pollable);
    assert_eq!(plan.timeout, Some(IDLE_SLEEP), "{plan:?}");
}

#[test]
fn a_busy_polling_engine_does_not_sleep() {
    let (a, b) = pair();
    let cfg = EngineConfig {
        idle_sleep: Duration::ZERO,
        ..EngineConfig::default()
    };
    let client = WithFd {
        inner: a,
        fd: eventfd(),
    };
    let server = WithFd {
        inner: b,
        fd: eventfd(),
    };
    let (_, e) = engines(client, server, cfg);
    assert_eq!(e.idle_plan().timeout, Some(Duration::ZERO));
}
