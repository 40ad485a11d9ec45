//! Two engines on the test's thread joined by an in-memory link (the
//! client at 10.99.1.1, the server at 10.99.1.2), driven by one runtime.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use link::MemoryLink;
use runtime::{Engine, EngineConfig};
use stack::{InterfaceConfig, Stack, StackConfig};

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last) * 7919,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        format!("mem{last}"),
        [2, 0, 0, 0, 6, last],
        Ipv4Addr::new(10, 99, 1, last),
        24,
    ))
    .expect("interface");
    s
}

/// The engines and the runtime of a test: when it ends, the runtime goes
/// (closing the sockets of tasks still pending), then the engines.
pub struct Net {
    rt: Option<rt::Runtime>,
}

impl Net {
    pub fn rt(&self) -> &rt::Runtime {
        self.rt.as_ref().expect("runtime")
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt().block_on(f)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        drop(self.rt.take());
        api::detach();
    }
}

/// Attaches a client and a server engine to this thread and starts a
/// runtime on it.
pub fn net() -> Net {
    let (mut a, mut b) = MemoryLink::pair(1500, 4096);
    a.set_mac([2, 0, 0, 0, 6, 1]);
    b.set_mac([2, 0, 0, 0, 6, 2]);
    let cfg = EngineConfig {
        idle_sleep: Duration::from_micros(100),
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    api::attach(Engine::new(stack(1), vec![a], cfg));
    api::attach(Engine::new(stack(2), vec![b], cfg));
    Net {
        rt: Some(rt::Runtime::new().expect("runtime")),
    }
}

pub fn server(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(SERVER, port)
}

/// A small deterministic generator (xorshift64*), for chunk sizes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `1..=max`.
    pub fn size(&mut self, max: usize) -> usize {
        1 + (self.next() % max as u64) as usize
    }
}

/// `n` bytes of a pattern that differs per `seed`.
pub fn pattern(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..n).map(|_| r.next() as u8).collect()
}

/// `future`'s output, which must come from a wakeup within 5 s: unlike
/// `rt::timeout`, which polls the future once more when its timer fires
/// (and so would hide a missed wakeup), the timer is looked at first.
pub async fn woken<F: std::future::Future>(what: &str, future: F) -> F::Output {
    use std::future::Future;
    let mut future = std::pin::pin!(future);
    let mut timer = std::pin::pin!(rt::sleep(Duration::from_secs(5)));
    std::future::poll_fn(|cx| {
        if timer.as_mut().poll(cx).is_ready() {
            panic!("{what}: not woken within 5 s");
        }
        future.as_mut().poll(cx)
    })
    .await
}
