//! `ustack-async-client --config FILE [--connections N] [--bytes N]
//! [--timeout SECS] ADDRESS:PORT` (`10.0.0.1:7` or `[fd99::1]:7`): a TCP echo client written as
//! straight-line async Rust on ustack's runtime (crates/rt).  N
//! connections (default 10) at once, each in its own task: connect (bounded
//! by the timeout, default 5 s), send N bytes (default 100000) of a pattern
//! while reading the echo in a second task, shut the write side, read to
//! EOF, compare.  Exit status 0 when every connection came back whole; a
//! refused connection or a timeout says so on stderr.

#![forbid(unsafe_code)]

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use apps::RunOptions;
use rt::TcpStream;

const PROGRAM: &str = "ustack-async-client";

struct Opts {
    remote: SocketAddr,
    connections: usize,
    bytes: usize,
    timeout: Duration,
}

fn main() -> ExitCode {
    let opts = RunOptions {
        describe: false,
        counters: false,
    };
    let result = apps::async_run::run_async(PROGRAM, std::env::args().skip(1), opts, |args, id| {
        let o = parse(&args.rest);
        async move { run(o?, id).await }
    });
    match result {
        Ok(outs) if outs.iter().all(|o| *o == Some(true)) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{PROGRAM}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn parse(rest: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        remote: SocketAddr::from(([0, 0, 0, 0], 0)),
        connections: 10,
        bytes: 100_000,
        timeout: Duration::from_secs(5),
    };
    let mut remote = None;
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        let mut num = |flag: &str| {
            it.next()
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| *v >= 0.0)
                .ok_or(format!("{flag} needs a number"))
        };
        match a.as_str() {
            "--connections" => o.connections = num("--connections")? as usize,
            "--bytes" => o.bytes = num("--bytes")? as usize,
            "--timeout" => o.timeout = Duration::from_secs_f64(num("--timeout")?),
            r if remote.is_none() => {
                remote = Some(
                    r.parse()
                        .map_err(|_| format!("{r:?} is not ADDRESS:PORT"))?,
                )
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    o.remote = remote.ok_or(format!(
        "usage: {PROGRAM} --config FILE [--connections N] [--bytes N] [--timeout SECS] ADDRESS:PORT"
    ))?;
    Ok(o)
}

/// Byte `i` of connection `conn`'s payload.
fn pattern_byte(conn: usize, i: usize) -> u8 {
    (i.wrapping_mul(31).wrapping_add(conn * 7) % 251) as u8
}

/// What went wrong on one connection, in words.
fn say(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        io::ErrorKind::TimedOut => "timed out".to_string(),
        _ => e.to_string(),
    }
}

/// One connection: connect, echo `bytes`, check.
async fn exchange(
    remote: SocketAddr,
    conn: usize,
    bytes: usize,
    limit: Duration,
) -> io::Result<()> {
    let stream = rt::timeout(limit, TcpStream::connect(remote)).await??;
    let stream = Rc::new(stream);
    let writer = rt::spawn({
        let stream = stream.clone();
        async move {
            let mut chunk = vec![0u8; 8192];
            let mut sent = 0;
            while sent < bytes {
                let n = chunk.len().min(bytes - sent);
                for (k, b) in chunk[..n].iter_mut().enumerate() {
                    *b = pattern_byte(conn, sent + k);
                }
                stream.write_all(&chunk[..n]).await?;
                sent += n;
            }
            stream.shutdown(Shutdown::Write)
        }
    });
    let check = async {
        let mut buf = vec![0u8; 16384];
        let mut got = 0;
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            if let Some(k) = (0..n).find(|&k| buf[k] != pattern_byte(conn, got + k)) {
                return Err(io::Error::other(format!("byte {} differs", got + k)));
            }
            got += n;
        }
        if got != bytes {
            return Err(io::Error::other(format!("{got} bytes back of {bytes}")));
        }
        Ok(())
    };
    // The echo must be back within four timeouts; a writer still stuck
    // (the peer stopped reading) is dropped with its task.
    match rt::timeout(limit.max(Duration::from_secs(1)) * 4, check).await {
        Ok(Ok(())) => writer.await,
        Ok(Err(e)) => {
            writer.abort();
            Err(e)
        }
        Err(elapsed) => {
            writer.abort();
            Err(elapsed.into())
        }
    }
}

async fn run(o: Opts, engine: usize) -> Result<bool, String> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..o.connections)
        .map(|c| rt::spawn(exchange(o.remote, c, o.bytes, o.timeout)))
        .collect();
    let mut failed = Vec::new();
    for (c, t) in tasks.into_iter().enumerate() {
        if let Err(e) = t.await {
            failed.push(format!("connection {c}: {}", say(&e)));
        }
    }
    let took = start.elapsed().as_secs_f64();
    if failed.is_empty() {
        eprintln!(
            "{PROGRAM}: engine {engine}: {} connections x {} bytes echoed intact by {} in {took:.2} s",
            o.connections, o.bytes, o.remote
        );
        Ok(true)
    } else {
        eprintln!(
            "{PROGRAM}: engine {engine}: {} of {} connections to {} failed in {took:.2} s; first: {}",
            failed.len(),
            o.connections,
            o.remote,
            failed[0]
        );
        Ok(false)
    }
}
