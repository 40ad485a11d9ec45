//! `ustack-async-echo --config FILE [--port N]`: the echo service on TCP and
//! UDP port 7 (or N), written as straight-line async Rust on ustack's
//! runtime (crates/rt): a task accepts, a task per connection echoes until
//! the peer's EOF and then closes, a task echoes datagrams.  The tasks run
//! inside the engine loop, on the engine's thread (one runtime per engine
//! with `[dpdk] lcore_mask`).

#![forbid(unsafe_code)]

use std::net::{Ipv4Addr, Shutdown};
use std::process::ExitCode;
use std::time::Duration;

use apps::RunOptions;
use rt::{TcpListener, TcpStream, UdpSocket};

const PROGRAM: &str = "ustack-async-echo";

fn main() -> ExitCode {
    let opts = RunOptions {
        describe: true,
        counters: true,
    };
    let result = apps::async_run::run_async(PROGRAM, std::env::args().skip(1), opts, |args, id| {
        let port = parse_port(&args.rest);
        async move { serve(port?, id).await }
    });
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{PROGRAM}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse_port(rest: &[String]) -> Result<u16, String> {
    let mut port = 7;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--port" => {
                port = it
                    .next()
                    .and_then(|p| p.parse().ok())
                    .filter(|&p| p != 0)
                    .ok_or("--port needs a port number")?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(port)
}

async fn serve(port: u16, engine: usize) -> Result<(), String> {
    let any = (Ipv4Addr::UNSPECIFIED, port);
    let tcp =
        TcpListener::bind(any).map_err(|e| format!("cannot listen on TCP port {port}: {e}"))?;
    let udp = UdpSocket::bind(any).map_err(|e| format!("cannot open UDP port {port}: {e}"))?;
    eprintln!("{PROGRAM}: engine {engine}: serving echo on UDP port {port} and TCP port {port}");
    rt::spawn(udp_echo(udp));
    loop {
        match tcp.accept().await {
            Ok((conn, _peer)) => {
                rt::spawn(tcp_echo(conn));
            }
            Err(e) => {
                // Out of sockets or memory: let connections finish.
                eprintln!("{PROGRAM}: accept: {e}");
                rt::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Echoes until the peer's EOF, then closes (a FIN once the echo is sent).
/// A reset or another error ends the connection.
async fn tcp_echo(conn: TcpStream) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match conn.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if conn.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    let _ = conn.shutdown(Shutdown::Write);
}

/// Sends every datagram back to its sender.
async fn udp_echo(udp: UdpSocket) {
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from) = match udp.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{PROGRAM}: UDP receive: {e}");
                rt::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        // A datagram that cannot be sent back (no route, no neighbor) is
        // the stack's to count; the service goes on.
        let _ = udp.send_to(&buf[..n], from).await;
    }
}
