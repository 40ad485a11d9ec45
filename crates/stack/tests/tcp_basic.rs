//! TCP between two stacks over a perfect in-memory wire, time stepping.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use stack::{
    Duration, IfaceId, Instant, InterfaceConfig, RxMeta, Shutdown, SocketError, Stack, StackConfig,
    TcpState, VecSink,
};

const IF0: IfaceId = IfaceId(0);

fn stack(last: u8, seed: u64) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig {
        name: format!("p{last}"),
        mac: [2, 0, 0, 0, 0, last],
        mtu: 1500,
        addr: Ipv4Addr::new(10, 99, 1, last),
        prefix_len: 24,
        broadcast: None,
        gateway: None,
        extra_addrs: vec![],
    })
    .unwrap();
    s
}

struct Net {
    a: Stack,
    b: Stack,
    sa: VecSink,
    sb: VecSink,
    now: Instant,
}

impl Net {
    fn new() -> Self {
        Net {
            a: stack(1, 1),
            b: stack(2, 2),
            sa: VecSink::default(),
            sb: VecSink::default(),
            now: Instant::from_secs(1),
        }
    }

    /// Delivers frames both ways and runs timers, `steps` times 1 ms.
    fn run(&mut self, steps: usize) {
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

fn addr(last: u8, port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 99, 1, last)), port)
}

#[test]
fn handshake_transfer_and_close() {
    let mut n = Net::new();
    let l = n.b.tcp_listen(addr(2, 80), 16).unwrap();
    let c =
        n.a.tcp_connect(n.now, addr(2, 80), None, &mut n.sa)
            .unwrap();
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::SynSent);
    n.run(5);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Established);
    let (s, peer) = n.b.tcp_accept(l).unwrap();
    assert_eq!(peer, n.a.tcp_local_addr(c).unwrap());
    assert_eq!(n.b.tcp_state(s).unwrap(), TcpState::Established);
    let info = n.a.tcp_info(c).unwrap();
    assert!(info.timestamps && info.sack, "options negotiated: {info:?}");

    // 3 MB from a to b, then 1 MB from b to a.
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i * 7 + i / 1000) as u8)
        .collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..20_000 {
        if sent < data.len() {
            match n.a.tcp_send(n.now, c, &data[sent..], &mut n.sa) {
                Ok(k) => sent += k,
                Err(SocketError::WouldBlock) => {}
                Err(e) => panic!("send: {e}"),
            }
        }
        n.run(1);
        loop {
            match n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb) {
                Ok(0) => panic!("early EOF"),
                Ok(k) => got.extend_from_slice(&buf[..k]),
                Err(SocketError::WouldBlock) => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        if got.len() == data.len() {
            break;
        }
    }
    assert_eq!(got.len(), data.len());
    assert!(got == data, "bytes intact");
    assert_eq!(
        n.a.counters().tcp_retransmitted_segments,
        0,
        "no loss, no retransmission"
    );

    // Half-close from a: b reads EOF but can still send.
    n.a.tcp_shutdown(n.now, c, Shutdown::Write, &mut n.sa)
        .unwrap();
    n.run(5);
    assert_eq!(n.b.tcp_recv(n.now, s, &mut buf, &mut n.sb), Ok(0));
    assert_eq!(n.b.tcp_state(s).unwrap(), TcpState::CloseWait);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::FinWait2);
    let back = vec![0x5au8; 1_000_000];
    let mut sent = 0;
    let mut got = 0;
    for _ in 0..10_000 {
        if sent < back.len() {
            if let Ok(k) = n.b.tcp_send(n.now, s, &back[sent..], &mut n.sb) {
                sent += k;
            }
        }
        n.run(1);
        while let Ok(k) = n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa) {
            assert!(k > 0 && buf[..k].iter().all(|&x| x == 0x5a));
            got += k;
        }
        if got == back.len() {
            break;
        }
    }
    assert_eq!(got, back.len());
    n.b.tcp_close(n.now, s, &mut n.sb).unwrap();
    n.run(5);
    assert_eq!(n.a.tcp_recv(n.now, c, &mut buf, &mut n.sa), Ok(0));
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::TimeWait);
    n.a.tcp_close(n.now, c, &mut n.sa).unwrap();
    // TIME_WAIT lasts 2 * MSL (60 s by default), then the slot is freed.
    n.run(61_000);
    assert_eq!(n.a.socket_count(), 0);
    assert_eq!(n.b.socket_count(), 1, "only the listener");
}

#[test]
fn connect_to_closed_port_is_refused() {
    let mut n = Net::new();
    let c =
        n.a.tcp_connect(n.now, addr(2, 81), None, &mut n.sa)
            .unwrap();
    n.run(5);
    assert_eq!(n.a.tcp_state(c).unwrap(), TcpState::Closed);
    assert_eq!(
        n.a.tcp_take_error(c).unwrap(),
        Some(SocketError::ConnectionRefused)
    );
    assert_eq!(n.b.counters().rx_drop_tcp_no_socket, 1);
    assert_eq!(n.b.counters().tcp_resets_sent, 1);
}
