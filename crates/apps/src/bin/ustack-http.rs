//! `ustack-http --config FILE [--port N | --listen ADDRESS:PORT]`: an
//! HTTP/1.1 server on ustack: `GET /` (600 bytes), `GET /bytes/N`, `HEAD`.
//! It listens on port 80 (or N) of every address, IPv4 and IPv6 (`[::]`,
//! dual stack), or on one address (`--listen [fd99::1]:8080`,
//! `--listen 0.0.0.0:80` for IPv4 only).

#![forbid(unsafe_code)]

use std::net::SocketAddr;
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
                "--listen" => {
                    let at = it
                        .next()
                        .and_then(|a| a.parse::<SocketAddr>().ok())
                        .filter(|a| a.port() != 0)
                        .ok_or("--listen needs ADDRESS:PORT (IPv6 in brackets)")?;
                    (cfg.addr, cfg.port) = (at.ip(), at.port());
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let at = SocketAddr::new(cfg.addr, cfg.port);
        let app =
            HttpServer::new(stack, cfg).map_err(|e| format!("cannot listen on TCP {at}: {e}"))?;
        eprintln!(
            "{PROGRAM}: serving HTTP on TCP port {} of {}",
            at.port(),
            at.ip()
        );
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
