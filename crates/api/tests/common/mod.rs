//! Two engines on the test's thread, joined by an in-memory link: the
//! client at 10.99.1.1 and the server at 10.99.1.2.  Both belong to the
//! thread's worker, so a blocking call on either side drives both.

#![allow(dead_code)]

pub mod net;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub use testnet::engines::{CLIENT, CLIENT6, SERVER, SERVER6};

/// Detaches the thread's worker when the test ends.
pub struct Engines;

impl Drop for Engines {
    fn drop(&mut self) {
        api::detach();
    }
}

/// Attaches a client and a server engine to this thread.
pub fn two_engines() -> Engines {
    testnet::engines::attach_two(4096, stack::TcpConfig::default());
    Engines
}

/// Runs the engines for `ms` milliseconds.
///
/// At least as many steps as an idle machine makes in that time: on a
/// loaded one (CI's two cores running other tests) the sleeps stretch, and
/// a settle counted in time alone left frames unprocessed.
pub fn settle_ms(ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    let min_steps = ms * 20;
    let mut steps = 0;
    while Instant::now() < end || steps < min_steps {
        api::step().expect("step");
        steps += 1;
        std::thread::sleep(Duration::from_micros(50));
    }
}

pub fn server(port: u16) -> SocketAddr {
    SocketAddr::from((SERVER, port))
}

pub fn server6(port: u16) -> SocketAddr {
    SocketAddr::from((SERVER6, port))
}
