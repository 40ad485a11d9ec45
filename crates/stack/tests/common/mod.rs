//! What the stack's two-stack tests share: a stack with one interface on
//! the test subnet 10.99.1.0/24, addresses on it, and two such stacks
//! joined by a perfect wire.  (Each test file is its own crate and uses
//! part of this.)
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{
    Duration, IfaceId, Instant, InterfaceConfig, RxMeta, SocketHandle, Stack, StackConfig,
    TcpState, VecSink,
};

/// A stack made with `config`, with one interface: host `last` of
/// 10.99.1.0/24, MAC 02:00:00:00:00:`last`, MTU 1500.
pub fn stack_on_subnet(last: u8, config: StackConfig) -> Stack {
    let mut s = Stack::new(config);
    s.add_interface(&InterfaceConfig::new(
        format!("p{last}"),
        [2, 0, 0, 0, 0, last],
        Ipv4Addr::new(10, 99, 1, last),
        24,
    ))
    .unwrap();
    s
}

/// As [`stack_on_subnet`] with the default configuration, seeded by
/// `seed`.
pub fn seeded_stack_on_subnet(last: u8, seed: u64) -> Stack {
    stack_on_subnet(
        last,
        StackConfig {
            seed,
            ..StackConfig::default()
        },
    )
}

/// Host `last` of the test subnet, port `port`.
pub fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 1, last)), port)
}

/// Two stacks, `a` at host 1 and `b` at host 2 of the test subnet (seeded
/// 1 and 2), over a perfect in-memory wire: what each sends waits in its
/// sink until [`Net::run`] delivers it.
pub struct Net {
    pub a: Stack,
    pub b: Stack,
    pub sa: VecSink,
    pub sb: VecSink,
    pub now: Instant,
}

impl Net {
    pub fn new() -> Net {
        Net {
            a: seeded_stack_on_subnet(1, 1),
            b: seeded_stack_on_subnet(2, 2),
            sa: VecSink::default(),
            sb: VecSink::default(),
            now: Instant::from_secs(1),
        }
    }

    /// Delivers frames both ways and runs timers, `steps` times 1 ms.
    pub fn run(&mut self, steps: usize) {
        const IF0: IfaceId = IfaceId(0);
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

    /// A connection from `a` to `b`'s new listener on `port`, established
    /// and accepted: (a's socket, b's socket).
    pub fn connect(&mut self, port: u16) -> (SocketHandle, SocketHandle) {
        let l = self.b.tcp_listen(addr(2, port), 16).unwrap();
        let c = self
            .a
            .tcp_connect(self.now, addr(2, port), None, &mut self.sa)
            .unwrap();
        self.run(5);
        assert_eq!(self.a.tcp_state(c).unwrap(), TcpState::Established);
        let (s, _) = self.b.tcp_accept(l).unwrap();
        (c, s)
    }
}
