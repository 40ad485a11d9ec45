//! `ustack-http --config FILE [--port N]`: an HTTP/1.1 server on ustack
//! (port 80 by default): `GET /` (600 bytes), `GET /bytes/N`, `HEAD`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use apps::http::server::{HttpServer, ServerConfig};
use apps::RunOptions;

const PROGRAM: &str = "ustack-http";

fn main() -> ExitCode {
    let opts = RunOptions {
        describe: true,
        counters: true,
    };
    let result = apps::run_engines(PROGRAM, std::env::args().skip(1), opts, |args, stack| {
        let mut cfg = ServerConfig::default();
        let mut it = args.rest.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--port" => {
                    cfg.port = it
                        .next()
                        .and_then(|p| p.parse().ok())
                        .filter(|&p| p != 0)
                        .ok_or("--port needs a port number")?;
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let port = cfg.port;
        let app = HttpServer::new(stack, cfg)
            .map_err(|e| format!("cannot listen on TCP port {port}: {e}"))?;
        eprintln!("{PROGRAM}: serving HTTP on TCP port {port}");
        Ok(app)
    });
    match result {
        Ok(apps) => {
            for app in apps {
                eprintln!("{PROGRAM}: {}", app.stats);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{PROGRAM}: {e}");
            ExitCode::FAILURE
        }
    }
}
