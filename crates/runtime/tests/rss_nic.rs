//! A model NIC with RSS (`MemoryLink::multi_queue`: Toeplitz hash, an
//! indirection table, a queue per engine) in front of 2 and 4 engines:
//! when the engines know the NIC's key and table, every frame the NIC
//! puts on a queue belongs to that queue's engine (nothing is handed
//! between engines), for connections the peer opens and connections the
//! engines open (their source ports are chosen so the replies hash home).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use link::nic_rss::{self, EthtoolDevice, Rxfh};
use stack::steer::{RssSteering, SYMMETRIC_KEY};
use stack::{InterfaceConfig, Stack, StackConfig};

mod nic_model;
use nic_model::{Nic, Setup};

const PEER: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 2);
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 2, 2];

fn stack(addr: Ipv4Addr, mac: [u8; 6], seed: u64) -> Stack {
    let mut s = Stack::new(StackConfig {
        seed,
        ..StackConfig::default()
    });
    s.add_interface(&InterfaceConfig::new("mem", mac, addr, 24))
        .unwrap();
    s
}

/// The NIC's receive side, parsed as hardware does (not with ustack's
/// own classifier): IPv4 TCP/UDP by addresses and ports, fragments and
/// other IPv4 by addresses, anything else to queue 0.
fn nic_queue(rss: &RssSteering, frame: &[u8]) -> usize {
    let be16 = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    if frame.len() < 34 || be16(12) != 0x0800 {
        return 0;
    }
    let ip = &frame[14..];
    let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    let queue = if matches!(ip[9], 6 | 17) && !fragment && frame.len() >= 14 + ihl + 4 {
        let sport = be16(14 + ihl);
        let dport = be16(14 + ihl + 2);
        rss.queue_of_flow(src, sport, dst, dport)
    } else {
        rss.queue_of_addresses(src, dst)
    };
    usize::from(queue)
}

/// The peer behind the NIC's wire and a server engine on each of the
/// NIC's queues (`nic_model`); `aware`: the engines know the NIC's RSS
/// (else they steer by ustack's flow hash).
fn setup(engines: usize, aware: bool) -> Setup {
    let rss = RssSteering::round_robin(&SYMMETRIC_KEY, 128, engines as u16).unwrap();
    setup_behind(rss, aware)
}

/// As `setup`, behind a NIC with RSS `rss`.
fn setup_behind(rss: RssSteering, aware: bool) -> Setup {
    let rss = Arc::new(rss);
    let choose = {
        let rss = rss.clone();
        Arc::new(move |f: &[u8]| nic_queue(&rss, f))
    };
    let nic = Nic {
        queues: usize::from(rss.queues()),
        choose,
        known: aware.then_some(rss),
    };
    let mut setup = Setup::new(
        nic,
        stack(PEER, [2, 0, 0, 0, 2, 1], 1),
        |e| stack(SERVER, SERVER_MAC, 10 + e as u64),
        SERVER_MAC,
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        b"hello over rss",
    );
    setup.peer.0.announce();
    setup
}

fn run(engines: usize) {
    run_behind(setup(engines, true));
}

fn run_behind(mut setup: Setup) {
    let engines = setup.servers.len();
    // Connections the peer opens (passive for the engines), and
    // connections each engine opens (active).
    let (passive, active) = (64, 16);
    setup.connect_both_ways(
        (passive, SocketAddr::new(IpAddr::V4(SERVER), 80)),
        (active, SocketAddr::new(IpAddr::V4(PEER), 7)),
    );
    let servers = &setup.servers;
    let mut evaluations = 0;
    let mut picks = 0;
    for (e, (engine, app)) in servers.iter().enumerate() {
        let d = engine.dispatch_counters().unwrap();
        assert_eq!(
            d.steer_forwarded, 0,
            "{engines} engines: engine {e} handed frames on: {d:?}"
        );
        assert!(
            app.accepted > 0,
            "{engines} engines: engine {e} accepted none of the peer's connections"
        );
        let (p, ev) = engine.stack.port_choice_rss_effort();
        assert_eq!(p, active as u64);
        picks += p;
        evaluations += ev;
    }
    println!(
        "{engines} engines: {passive} passive and {} active connections, steer_forwarded 0 on \
         every engine; accepted per engine {:?}; port choice: {evaluations} Toeplitz hashes for \
         {picks} ports ({:.1} per port)",
        active * engines,
        servers.iter().map(|(_, a)| a.accepted).collect::<Vec<_>>(),
        evaluations as f64 / picks as f64
    );
    assert!(
        evaluations <= picks * engines as u64 * 3,
        "port choice took {evaluations} hashes for {picks} ports"
    );
}

#[test]
fn two_engines_behind_a_nic_with_rss_steer_nothing() {
    run(2);
}

#[test]
fn four_engines_behind_a_nic_with_rss_steer_nothing() {
    run(4);
}

/// Without the NIC's key and table, the engines steer by ustack's own flow
/// hash and hand over the frames the NIC put on another's queue: the case
/// the RSS steering removes.
#[test]
fn engines_unaware_of_the_nics_rss_hand_frames_over() {
    let mut setup = setup(4, false);
    setup.peer.1.to_open = 64;
    setup.peer.1.open_to = Some(SocketAddr::new(IpAddr::V4(SERVER), 80));
    setup.run_until(|peer, _| peer.echoed == 64);
    let forwarded: u64 = setup
        .servers
        .iter()
        .map(|(e, _)| e.dispatch_counters().unwrap().steer_forwarded)
        .sum();
    assert!(
        forwarded > 0,
        "the flow hash and the NIC's Toeplitz hash disagree"
    );
}

/// A NIC whose RSS ustack may not change (every ethtool set refused), with
/// a key of its own (not symmetric) and a table of its own (not round
/// robin): ustack reads them back through ethtool's commands
/// (`link::nic_rss`, as the AF_XDP port does at start), and the engines
/// that compute them steer nothing.
struct ReadOnlyNic {
    key: Vec<u8>,
    table: Vec<u32>,
}

impl EthtoolDevice for ReadOnlyNic {
    fn request(&self, buf: &mut [u8]) -> std::io::Result<()> {
        let cmd = u32::from_ne_bytes(buf[..4].try_into().unwrap());
        match cmd {
            nic_rss::ETHTOOL_GRSSH => {
                let q = Rxfh::decode(buf).unwrap();
                let full = q.indir_size != 0;
                let a = Rxfh {
                    cmd,
                    indir_size: self.table.len() as u32,
                    key_size: self.key.len() as u32,
                    hfunc: nic_rss::ETH_RSS_HASH_TOP,
                    input_xfrm: 0,
                    indir: if full { self.table.clone() } else { vec![] },
                    key: if full { self.key.clone() } else { vec![] },
                }
                .encode();
                buf[..a.len()].copy_from_slice(&a);
                Ok(())
            }
            nic_rss::ETHTOOL_GRXFH => {
                buf[8..16].copy_from_slice(&nic_rss::RXH_ADDRESSES_AND_PORTS.to_ne_bytes());
                Ok(())
            }
            _ => Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
        }
    }
}

#[test]
fn four_engines_behind_a_nic_whose_rss_is_read_back_through_ethtool_steer_nothing() {
    // Microsoft's verification key, and a table in blocks of 16 spread
    // backwards over the 4 queues.
    let key: Vec<u8> = vec![
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];
    let table: Vec<u32> = (0..128u32).map(|i| 3 - (i / 16) % 4).collect();
    let nic = ReadOnlyNic {
        key: key.clone(),
        table: table.clone(),
    };
    let read = nic_rss::program_or_read(&nic, 4).unwrap();
    assert!(!read.programmed, "every set was refused");
    assert_eq!(read.key, key);
    assert_eq!(
        read.reta,
        table.iter().map(|&q| q as u16).collect::<Vec<_>>()
    );
    let rss = RssSteering::new(&read.key[..40], read.reta, 4).unwrap();
    run_behind(setup_behind(rss, true));
}
