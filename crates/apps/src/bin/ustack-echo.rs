//! `ustack-echo --config FILE [--port N]`: the echo service on ustack, on
//! UDP and TCP port 7 (or N).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use apps::echo::EchoApp;
use apps::tcp_echo::TcpEchoApp;
use apps::Both;

fn main() -> ExitCode {
    apps::serve("ustack-echo", std::env::args().skip(1), |args, stack| {
        let mut port = 7;
        let mut it = args.rest.iter();
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
        let udp =
            EchoApp::new(stack, port).map_err(|e| format!("cannot open UDP port {port}: {e}"))?;
        let tcp = TcpEchoApp::new(stack, port)
            .map_err(|e| format!("cannot listen on TCP port {port}: {e}"))?;
        eprintln!("ustack-echo: serving echo on UDP port {port} and TCP port {port}");
        Ok(Box::new(Both(udp, tcp)))
    })
}
