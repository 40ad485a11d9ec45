//! `ustack-echo --config FILE`: the echo service on ustack (UDP port 7).

use std::process::ExitCode;

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
                        .ok_or("--port needs a port number")?;
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let app = apps::echo::EchoApp::new(stack, port)
            .map_err(|e| format!("cannot open UDP port {port}: {e}"))?;
        eprintln!("ustack-echo: serving echo on UDP port {port}");
        Ok(Box::new(app))
    })
}
