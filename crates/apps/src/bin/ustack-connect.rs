//! `ustack-connect --config FILE [--count N] [--size BYTES] A.B.C.D:PORT`:
//! every engine opens N connections (default 100) to a TCP echo server,
//! sends BYTES (default 1000) on each, shuts its write side and checks the
//! echo. Exit status 0 when every connection of every engine came back
//! whole; the counts per engine go to stderr.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use apps::connect_echo::ConnectEcho;
use apps::RunOptions;

const PROGRAM: &str = "ustack-connect";

fn main() -> ExitCode {
    let opts = RunOptions {
        describe: true,
        counters: true,
    };
    let engine = AtomicU64::new(0);
    let result = apps::run_engines(PROGRAM, std::env::args().skip(1), opts, |args, _stack| {
        let (mut count, mut size, mut remote) = (100usize, 1000usize, None);
        let mut it = args.rest.iter();
        while let Some(a) = it.next() {
            let mut num = |flag: &str| {
                it.next()
                    .and_then(|v| v.parse::<usize>().ok())
                    .ok_or(format!("{flag} needs a number"))
            };
            match a.as_str() {
                "--count" => count = num("--count")?,
                "--size" => size = num("--size")?,
                r if remote.is_none() => {
                    remote = Some(
                        r.parse()
                            .map_err(|_| format!("{r:?} is not A.B.C.D:PORT"))?,
                    )
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let remote = remote.ok_or(format!(
            "usage: {PROGRAM} --config FILE [--count N] [--size BYTES] A.B.C.D:PORT"
        ))?;
        let tag = engine.fetch_add(1, Ordering::Relaxed);
        Ok(ConnectEcho::new(remote, count, size, tag))
    });
    match result {
        Ok(apps) => {
            let mut all_ok = true;
            for (e, app) in apps.iter().enumerate() {
                eprintln!(
                    "{PROGRAM}: engine {e}: {} connections echoed, {} failed{}",
                    app.stats.ok,
                    app.stats.failed,
                    app.first_error
                        .as_ref()
                        .map_or(String::new(), |w| format!(" (first: {w})"))
                );
                all_ok &= app.stats.failed == 0 && app.finished_ok();
            }
            if all_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("{PROGRAM}: {e}");
            ExitCode::FAILURE
        }
    }
}
