//! `ustack netstat`: sockets with state, queues and timers (like
//! `ss -tanoi`); `-s` the per-protocol counters; `-i` the interfaces'
//! counters.

use std::process::ExitCode;

use runtime::control::client::EngineSocket;
use runtime::control::proto::{Reply, Request};

use super::{ask_all, exit, print_json, report_errors, Common, Usage};

/// The protocols of `-s`, as their counters name them.
const PROTOCOLS: &[&str] = &[
    "eth", "vlan", "arp", "ipv4", "icmp", "udp", "tcp", "ipv6", "icmpv6", "ndp",
];

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let (mut stats, mut ifaces, mut details) = (false, false, false);
    for a in args {
        match a.as_str() {
            "-s" => stats = true,
            "-i" => ifaces = true,
            "-a" | "-n" | "-t" | "-u" => {}
            "-o" | "-e" => details = true,
            other => return Err(Usage(format!("unknown argument {other:?}"))),
        }
    }
    let req = if stats {
        Request::Stats
    } else if ifaces {
        Request::Interfaces
    } else {
        Request::Sockets
    };
    let answers = ask_all(sockets, &req);
    if c.json {
        print_json(&answers);
        return Ok(exit(report_errors(&answers)));
    }
    for a in &answers {
        match &a.reply {
            Ok(Reply::Sockets { sockets }) => {
                println!("engine {}:", a.label());
                println!(
                    "{:<6} {:<12} {:>8} {:>8} {:<45} {:<45} timer",
                    "Proto", "State", "Recv-Q", "Send-Q", "Local Address", "Foreign Address"
                );
                for s in sockets {
                    let timer = s
                        .timer
                        .as_ref()
                        .map(|(k, ms)| format!("{k} ({}.{:03}s)", ms / 1000, ms % 1000))
                        .unwrap_or_else(|| "off".into());
                    println!(
                        "{:<6} {:<12} {:>8} {:>8} {:<45} {:<45} {timer}{}",
                        s.proto,
                        s.state,
                        s.recv_q,
                        s.send_q,
                        s.local,
                        s.remote.as_deref().unwrap_or("*:*"),
                        if s.orphan { " orphan" } else { "" }
                    );
                    if let (true, Some(i)) = (details, &s.info) {
                        println!(
                            "\trto:{} rtt:{:.3}/{:.3} mss:{} rcvmss:{} cwnd:{} ssthresh:{} \
                             snd_wnd:{} rcv_wnd:{} retrans:{} bytes_acked:{} bytes_received:{}",
                            i.rto_ms,
                            i.rtt_us as f64 / 1000.0,
                            i.rttvar_us as f64 / 1000.0,
                            i.snd_mss,
                            i.rcv_mss,
                            i.cwnd,
                            i.ssthresh,
                            i.snd_wnd,
                            i.rcv_wnd,
                            i.retrans,
                            i.bytes_acked,
                            i.bytes_received
                        );
                    }
                }
            }
            Ok(Reply::Stats { counters }) => {
                println!("engine {}:", a.label());
                for proto in PROTOCOLS {
                    let lines: Vec<_> = counters
                        .iter()
                        .filter(|(n, v)| *v != 0 && n.split('_').any(|t| t == *proto))
                        .collect();
                    if lines.is_empty() {
                        continue;
                    }
                    println!("{proto}:");
                    for (n, v) in lines {
                        println!("\t{v} {n}");
                    }
                }
            }
            Ok(Reply::Interfaces { interfaces }) => {
                println!("engine {}:", a.label());
                println!(
                    "{:<10} {:>6} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10}",
                    "Name", "Mtu", "Ipkts", "Ibytes", "Idrop", "Opkts", "Obytes", "Odrop"
                );
                for i in interfaces {
                    let get = |n: &str| {
                        i.counters
                            .iter()
                            .find(|(k, _)| k == n)
                            .map_or(0, |(_, v)| *v)
                    };
                    println!(
                        "{:<10} {:>6} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10}",
                        i.name,
                        i.mtu,
                        get("rx_frames"),
                        get("rx_bytes"),
                        get("rx_dropped"),
                        get("tx_frames"),
                        get("tx_bytes"),
                        get("tx_dropped")
                    );
                }
            }
            _ => {}
        }
    }
    Ok(exit(report_errors(&answers)))
}
