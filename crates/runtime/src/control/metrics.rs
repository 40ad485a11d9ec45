//! `[metrics] listen=ADDR:PORT`: a Prometheus text endpoint on a kernel
//! TCP socket.  A thread of the process (started with its first engine)
//! answers each `GET /metrics` by asking every engine socket of the
//! configuration's run directory for its counters, as `ustack stats
//! --prometheus` does, so one endpoint shows every process of the
//! configuration.  The engines are asked over their control sockets: the
//! endpoint takes nothing from their loops but a request each.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::client;
use super::prometheus::{self, EngineCounters};
use super::proto::{Reply, Request};

/// How long a scraper may take to send its request, and an engine to
/// answer.
const TIMEOUT: Duration = Duration::from_secs(2);
/// The most of a request read.
const MAX_REQUEST: usize = 8192;

static STARTED: AtomicBool = AtomicBool::new(false);

/// Starts the endpoint on `addr` for the engines under `dir` (once per
/// process; later calls do nothing).  Says on stderr when it cannot listen.
pub fn start_once(addr: SocketAddr, dir: &Path) {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let listener = match TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ustack: [metrics] listen={addr}: cannot listen: {e}");
            return;
        }
    };
    let dir = dir.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("ustack-metrics".into())
        .spawn(move || serve(listener, dir));
    if let Err(e) = spawned {
        eprintln!("ustack: [metrics] listen={addr}: cannot start its thread: {e}");
    }
}

fn serve(listener: TcpListener, dir: PathBuf) {
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { continue };
        // One scraper at a time: Prometheus scrapes every few seconds.
        let _ = answer(&mut s, &dir);
    }
}

/// The counters of every engine under `dir`, rendered; an engine that
/// did not answer is named in a comment line (`# ustack: ...`).
pub fn render_dir(dir: &Path) -> String {
    let (run_dir, prefix) = match (dir.parent(), dir.file_name().and_then(|n| n.to_str())) {
        (Some(p), Some(n)) => (p, Some(n)),
        _ => (dir, None),
    };
    let mut notes = String::new();
    let sockets = match client::find_sockets(run_dir, prefix) {
        Ok(s) => s,
        Err(e) => {
            notes.push_str(&format!("# ustack: cannot read {}: {e}\n", dir.display()));
            Vec::new()
        }
    };
    let mut answers = Vec::new();
    for s in &sockets {
        match client::ask(&s.path, &Request::Stats, TIMEOUT) {
            Ok(Reply::Stats { counters }) => answers.push((s, counters)),
            Ok(_) => notes.push_str(&format!(
                "# ustack: engine {}/{}: not a stats reply\n",
                s.process, s.engine
            )),
            Err(e) => notes.push_str(&format!(
                "# ustack: engine {}/{}: {e}\n",
                s.process, s.engine
            )),
        }
    }
    let engines: Vec<_> = answers
        .iter()
        .map(|(s, counters)| EngineCounters {
            process: &s.process,
            engine: s.engine,
            counters,
        })
        .collect();
    notes + &prometheus::render(&engines)
}

fn answer(s: &mut TcpStream, dir: &Path) -> io::Result<()> {
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < MAX_REQUEST {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, body) = match (method, path) {
        ("GET", "/metrics") | ("GET", "/") => ("200 OK", render_dir(dir)),
        ("GET", _) => ("404 Not Found", "not found: try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET\n".to_string()),
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())
}
