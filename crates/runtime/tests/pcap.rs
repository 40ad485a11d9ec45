//! `[pcap]`'s capture as an engine drives it: a port behind
//! `PortLink::Captured` writes every frame both ways to its pcap series,
//! readable as classic pcap once the engine is gone.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use link::{MemoryLink, PcapLink, PcapSeries};
use runtime::{AppContext, Application, Engine, EngineConfig, PortLink};
use stack::{InterfaceConfig, SocketHandle, Stack, StackConfig};

fn stack(last: u8) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed: u64::from(last),
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new(
        format!("mem{last}"),
        [2, 0, 0, 0, 4, last],
        Ipv4Addr::new(10, 99, 4, last),
        24,
    ))
    .unwrap();
    s
}

/// Sends one datagram to 10.99.4.2:7 and waits for it back.
struct Ping {
    sock: SocketHandle,
    sent: bool,
    back: bool,
}

impl Application for Ping {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let dst: SocketAddr = "10.99.4.2:7".parse().unwrap();
        if !self.sent {
            self.sent = ctx
                .stack
                .udp_send_to(ctx.now, self.sock, dst, None, b"captured", ctx.sink)
                .is_ok();
            return true;
        }
        let mut buf = [0u8; 64];
        if ctx.stack.udp_recv_from(self.sock, &mut buf).is_ok() {
            self.back = true;
        }
        false
    }
}

struct Echo(SocketHandle);

impl Application for Echo {
    fn poll(&mut self, ctx: &mut AppContext<'_>) -> bool {
        let mut buf = [0u8; 64];
        while let Ok(got) = ctx.stack.udp_recv_from(self.0, &mut buf) {
            let _ = ctx.stack.udp_send_to(
                ctx.now,
                self.0,
                got.meta.src,
                None,
                &buf[..got.len],
                ctx.sink,
            );
        }
        false
    }
}

/// The records of a classic pcap file: (captured length, original length,
/// bytes).
fn records(bytes: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
    assert_eq!(&bytes[..4], &0xa1b2_c3d4u32.to_le_bytes(), "pcap magic");
    let mut out = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let word = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
        let (cap, orig) = (word(8), word(12));
        let data = bytes[at + 16..at + 16 + cap as usize].to_vec();
        at += 16 + cap as usize;
        out.push((cap, orig, data));
    }
    assert_eq!(at, bytes.len(), "no partial record");
    out
}

#[test]
fn a_captured_port_writes_every_frame_both_ways() {
    let dir = std::env::temp_dir().join(format!("ustack-pcap-engine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (mut la, mut lb) = MemoryLink::pair(1500, 64);
    la.set_mac([2, 0, 0, 0, 4, 1]);
    lb.set_mac([2, 0, 0, 0, 4, 2]);
    let series = PcapSeries::create(dir.join("cap"), 40, 1 << 20).unwrap();
    let captured = PortLink::Captured(Box::new(PcapLink::new(PortLink::Memory(la), series)));
    let cfg = EngineConfig {
        pkt_tx_delay: Duration::ZERO,
        ..EngineConfig::default()
    };
    let mut client = Engine::new(stack(1), vec![captured], cfg);
    let mut server = Engine::new(stack(2), vec![PortLink::Memory(lb)], cfg);
    let mut echo = Echo(server.stack.udp_bind("0.0.0.0:7".parse().unwrap()).unwrap());
    let mut ping = Ping {
        sock: client
            .stack
            .udp_bind("0.0.0.0:4000".parse().unwrap())
            .unwrap(),
        sent: false,
        back: false,
    };
    for _ in 0..200 {
        client.turn(&mut ping);
        server.turn(&mut echo);
        if ping.back {
            break;
        }
    }
    assert!(ping.back, "the echo came back");
    let stats = runtime::stats::snapshot(&client);
    assert!(stats.contains(&("port0_pcap_write_errors".to_string(), 0)));
    drop(client);
    let recs = records(&std::fs::read(dir.join("cap-0.pcap")).unwrap());
    // ARP request and reply, the datagram and its echo.
    assert_eq!(recs.len(), 4, "{recs:?}");
    let ethertype = |r: &(u32, u32, Vec<u8>)| u16::from_be_bytes([r.2[12], r.2[13]]);
    assert_eq!(
        recs.iter().map(ethertype).collect::<Vec<_>>(),
        vec![0x0806, 0x0806, 0x0800, 0x0800]
    );
    // The datagrams are cut to the snap length and say how long they were.
    let udp_len = 14 + 20 + 8 + b"captured".len() as u32;
    assert_eq!((recs[2].0, recs[2].1), (40, udp_len));
    assert_eq!(&recs[2].2[30..34], &[10, 99, 4, 2], "to the server");
    assert_eq!(&recs[3].2[26..30], &[10, 99, 4, 2], "from the server");
    std::fs::remove_dir_all(&dir).unwrap();
}
