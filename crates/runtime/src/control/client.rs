//! The client side of the control sockets: finding the engines that run,
//! and asking them.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::proto::{self, ControlError, Reply, Request};

/// One engine's socket, as found in a run directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EngineSocket {
    /// The configuration's `file_prefix` (the directory's name).
    pub prefix: String,
    /// The process: its `--proc-id`, or `P-PID`.
    pub process: String,
    pub engine: u32,
    pub path: PathBuf,
}

impl EngineSocket {
    /// The process's `--proc-id`.
    pub fn proc_id(&self) -> Option<u32> {
        self.process.split('-').next()?.parse().ok()
    }
}

/// Parses a socket's file name: `P.E.sock` or `P-PID.E.sock`.
fn parse_name(name: &str) -> Option<(String, u32)> {
    let stem = name.strip_suffix(".sock")?;
    let (process, engine) = stem.rsplit_once('.')?;
    let engine = engine.parse().ok()?;
    let mut parts = process.split('-');
    parts.next()?.parse::<u32>().ok()?;
    if let Some(pid) = parts.next() {
        pid.parse::<u32>().ok()?;
    }
    parts
        .next()
        .is_none()
        .then(|| (process.to_string(), engine))
}

/// Every engine socket under `run_dir` (in `run_dir/PREFIX/`, or only
/// `prefix`'s), sorted by prefix, process and engine.
pub fn find_sockets(run_dir: &Path, prefix: Option<&str>) -> io::Result<Vec<EngineSocket>> {
    let mut dirs = Vec::new();
    match prefix {
        Some(p) => dirs.push((p.to_string(), run_dir.join(p))),
        None => {
            for e in std::fs::read_dir(run_dir)? {
                let e = e?;
                if e.file_type()?.is_dir() {
                    dirs.push((e.file_name().to_string_lossy().into_owned(), e.path()));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (prefix, dir) in dirs {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for e in entries {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some((process, engine)) = parse_name(&name) {
                out.push(EngineSocket {
                    prefix: prefix.clone(),
                    process,
                    engine,
                    path: e.path(),
                });
            }
        }
    }
    out.sort_by(|a, b| {
        (&a.prefix, a.proc_id(), &a.process, a.engine).cmp(&(
            &b.prefix,
            b.proc_id(),
            &b.process,
            b.engine,
        ))
    });
    Ok(out)
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum AskError {
    /// The socket could not be reached or failed (a stale file: the
    /// engine is gone).
    Io(io::Error),
    /// The engine answered with an error.
    Engine(ControlError),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Io(e) => write!(f, "{e}"),
            AskError::Engine(e) => write!(f, "{e}"),
        }
    }
}

/// A connection to one engine.
pub struct Connection {
    reader: BufReader<UnixStream>,
    line: Vec<u8>,
}

impl Connection {
    /// Connects, with `timeout` for each read and write.
    pub fn open(path: &Path, timeout: Duration) -> io::Result<Connection> {
        let s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        Ok(Connection {
            reader: BufReader::new(s),
            line: Vec::new(),
        })
    }

    /// Sends `req` and waits for its reply.
    pub fn ask(&mut self, req: &Request) -> Result<Reply, AskError> {
        self.reader
            .get_mut()
            .write_all(proto::encode_request(req).as_bytes())
            .map_err(AskError::Io)?;
        self.line.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.line)
            .map_err(AskError::Io)?;
        if n == 0 || self.line.last() != Some(&b'\n') {
            return Err(AskError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the engine closed the connection",
            )));
        }
        self.line.pop();
        proto::decode_reply(&self.line).map_err(AskError::Engine)
    }
}

/// Asks one engine one thing.
pub fn ask(path: &Path, req: &Request, timeout: Duration) -> Result<Reply, AskError> {
    Connection::open(path, timeout)
        .map_err(AskError::Io)?
        .ask(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names() {
        assert_eq!(parse_name("0.1.sock"), Some(("0".into(), 1)));
        assert_eq!(parse_name("2-4242.0.sock"), Some(("2-4242".into(), 0)));
        assert_eq!(parse_name("0.1.sock.tmp"), None);
        assert_eq!(parse_name("x.1.sock"), None);
        assert_eq!(parse_name("0-x.1.sock"), None);
        assert_eq!(parse_name("0.sock"), None);
    }
}
