//! Two stacks on a perfect in-memory wire, stepped 1 ms at a time (the
//! socket calls directly, no engine).

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{Duration, IfaceId, Instant, InterfaceConfig, RxMeta, Stack, StackConfig, VecSink};

const IF0: IfaceId = IfaceId(0);

pub fn stack(last: u8, cfg: StackConfig) -> Stack {
    let mut s = Stack::new(cfg);
    s.add_interface(&InterfaceConfig::new(
        format!("p{last}"),
        [2, 0, 0, 0, 0, last],
        Ipv4Addr::new(10, 99, 1, last),
        24,
    ))
    .unwrap();
    s
}

pub struct Net {
    pub a: Stack,
    pub b: Stack,
    pub sa: VecSink,
    pub sb: VecSink,
    pub now: Instant,
}

impl Net {
    pub fn new(a: StackConfig, b: StackConfig) -> Self {
        Net {
            a: stack(1, a),
            b: stack(2, b),
            sa: VecSink::default(),
            sb: VecSink::default(),
            now: Instant::from_secs(1),
        }
    }

    /// Delivers frames both ways and runs timers, `steps` times 1 ms.
    pub fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            for _ in 0..100 {
                if self.sa.frames.is_empty() && self.sb.frames.is_empty() {
                    break;
                }
                for (_, f) in std::mem::take(&mut self.sa.frames) {
                    self.b
                        .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sb);
                }
                for (_, f) in std::mem::take(&mut self.sb.frames) {
                    self.a
                        .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sa);
                }
            }
            self.now += Duration::from_millis(1);
            self.a.poll(self.now, &mut self.sa);
            self.b.poll(self.now, &mut self.sb);
        }
    }
}

pub fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 1, last)), port)
}

pub fn config(seed: u64) -> StackConfig {
    StackConfig {
        seed,
        ..StackConfig::default()
    }
}
