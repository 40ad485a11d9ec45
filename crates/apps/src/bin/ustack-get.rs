//! `ustack-get --config FILE [-o FILE] [--timeout SECS] [-v] URL`: fetches
//! an `http://A.B.C.D[:PORT]/path` or `http://[IPV6][:PORT]/path` over
//! ustack and writes the body to stdout (or FILE).  Exit status 0 when the server answered 2xx and the
//! whole body arrived; 1 with a message on stderr otherwise (refused,
//! reset, timed out, short body, non-2xx, bad response).
//!
//! `--timeout SECS` (default 30) bounds the time without progress: to
//! connect, to get the response, between pieces of the body.

#![forbid(unsafe_code)]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use apps::http::client::{HttpGet, OpenOutput};
use apps::http::url::parse_url;
use apps::RunOptions;
use stack::Duration;

const PROGRAM: &str = "ustack-get";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verbose = args.iter().any(|a| a == "-v" || a == "--verbose");
    let opts = RunOptions {
        describe: verbose,
        counters: verbose,
    };
    let mut out_path: Option<PathBuf> = None;
    let result = apps::run(PROGRAM, args, opts, |args, _stack| {
        let mut url = None;
        let mut timeout = 30.0f64;
        let mut it = args.rest.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "-o" | "--output" => {
                    out_path = Some(it.next().ok_or("-o needs a file name")?.into());
                }
                "--timeout" => {
                    timeout = it
                        .next()
                        .and_then(|t| t.parse().ok())
                        .filter(|t: &f64| t.is_finite() && *t > 0.0)
                        .ok_or("--timeout needs a number of seconds")?;
                }
                "-v" | "--verbose" => {}
                u if !u.starts_with('-') && url.is_none() => url = Some(parse_url(u)?),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let url = url.ok_or(format!(
            "usage: {PROGRAM} --config FILE [-o FILE] [--timeout SECS] [-v] http://ADDRESS[:PORT]/PATH (IPv6 in brackets)"
        ))?;
        let path = out_path.clone();
        let open: OpenOutput = Box::new(move || -> std::io::Result<Box<dyn Write>> {
            Ok(match &path {
                Some(p) => Box::new(BufWriter::with_capacity(1 << 20, File::create(p)?)),
                None => Box::new(BufWriter::with_capacity(1 << 20, std::io::stdout())),
            })
        });
        Ok(HttpGet::new(url, Duration::from_secs_f64(timeout), open))
    });
    let outcome = match result {
        Ok(app) => app.outcome().cloned(),
        Err(e) => Some(Err(e)),
    };
    match outcome {
        Some(Ok(f)) => {
            let secs = f.elapsed.as_secs_f64();
            eprintln!(
                "{PROGRAM}: {} {}: {} bytes in {secs:.2} s ({:.1} MB/s)",
                f.status,
                f.reason,
                f.bytes,
                f.bytes as f64 / secs.max(1e-6) / 1e6
            );
            ExitCode::SUCCESS
        }
        Some(Err(e)) => {
            eprintln!("{PROGRAM}: {e}");
            if let Some(p) = &out_path {
                let _ = std::fs::remove_file(p);
            }
            ExitCode::FAILURE
        }
        None => {
            eprintln!("{PROGRAM}: interrupted");
            if let Some(p) = &out_path {
                let _ = std::fs::remove_file(p);
            }
            ExitCode::FAILURE
        }
    }
}
