//! `ustack-echo --config FILE [--port N | --listen ADDRESS:PORT]`: the
//! echo service on ustack, on UDP and TCP port 7 (or N) of every address,
//! IPv4 and IPv6 (`[::]`, dual stack), or on one address
//! (`--listen 10.0.0.1:7`, `--listen [fd99::1]:7`; `--listen 0.0.0.0:7`
//! for IPv4 only).  On SIGTERM it prints, after the engine's counters,
//! each engine's echo counters: `udp_send_errors` (replies not sent, of
//! which `udp_send_no_buffer` for want of a packet buffer) and the TCP
//! side's connections and errors.

#![forbid(unsafe_code)]

use std::net::{Ipv6Addr, SocketAddr};
use std::process::ExitCode;

use apps::echo::EchoApp;
use apps::tcp_echo::TcpEchoApp;
use apps::{Both, RunOptions};

fn main() -> ExitCode {
    let opts = RunOptions {
        describe: true,
        counters: true,
    };
    let served = apps::run_engines(
        "ustack-echo",
        std::env::args().skip(1),
        opts,
        |args, stack| {
            let mut at = SocketAddr::from((Ipv6Addr::UNSPECIFIED, 7));
            let mut it = args.rest.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--port" => {
                        let port = it
                            .next()
                            .and_then(|p| p.parse().ok())
                            .filter(|&p| p != 0)
                            .ok_or("--port needs a port number")?;
                        at.set_port(port);
                    }
                    "--listen" => {
                        at = it
                            .next()
                            .and_then(|a| a.parse::<SocketAddr>().ok())
                            .filter(|a| a.port() != 0)
                            .ok_or("--listen needs ADDRESS:PORT (IPv6 in brackets)")?;
                    }
                    other => return Err(format!("unknown argument {other:?}")),
                }
            }
            let udp = EchoApp::bind(stack, at).map_err(|e| format!("cannot open UDP {at}: {e}"))?;
            let tcp = TcpEchoApp::bind(stack, at)
                .map_err(|e| format!("cannot listen on TCP {at}: {e}"))?;
            let (port, ip) = (at.port(), at.ip());
            eprintln!("ustack-echo: serving echo on UDP port {port} and TCP port {port} of {ip}");
            Ok(Both(udp, tcp))
        },
    );
    match served {
        Ok(engines) => {
            for (i, Both(udp, tcp)) in engines.iter().enumerate() {
                let t = tcp.stats;
                eprintln!(
                    "ustack-echo: engine {i}: udp_send_errors={} udp_send_no_buffer={} \
                     tcp_accepted={} tcp_closed={} tcp_errors={} tcp_bytes={}",
                    udp.send_errors, udp.send_no_buffer, t.accepted, t.closed, t.errors, t.bytes
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ustack-echo: {e}");
            ExitCode::FAILURE
        }
    }
}
