//! An engine's control socket: a non-blocking Unix listener and its
//! clients, served a bounded step at a time from the engine loop.
//!
//! Each [`ControlServer::serve`] accepts at most [`ACCEPTS_PER_TURN`]
//! clients, reads at most [`READ_PER_TURN`] bytes, answers at most
//! [`REQUESTS_PER_TURN`] requests and writes at most [`WRITE_PER_TURN`]
//! bytes, so a turn of a busy engine costs little whatever clients do.  A
//! client is answered one request at a time: it is not read again until
//! its reply is written.  A client that sends a line longer than
//! [`MAX_REQUEST`], that makes no progress for [`CLIENT_TIMEOUT`] (a
//! partial request, a reply it does not read), or whose socket fails is
//! dropped and counted.  Beyond [`MAX_CLIENTS`], clients wait in the
//! listener's backlog (the kernel's) until one leaves.  A request that
//! does not parse gets an error reply and is counted.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::proto::{self, ControlError, Reply, Request, MAX_REQUEST};

/// Clients served at once.
pub const MAX_CLIENTS: usize = 16;
/// Clients accepted per turn.
pub const ACCEPTS_PER_TURN: usize = 4;
/// Requests answered per turn, over all clients.
pub const REQUESTS_PER_TURN: usize = 4;
/// Bytes read per turn, over all clients.
pub const READ_PER_TURN: usize = 64 * 1024;
/// Bytes written per turn, over all clients.
pub const WRITE_PER_TURN: usize = 1 << 20;
/// How long a client may make no progress before it is dropped.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// What the control socket has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlCounters {
    pub clients_accepted: u64,
    /// Clients dropped for an over-long request.
    pub clients_dropped_oversize: u64,
    /// Clients dropped for making no progress in [`CLIENT_TIMEOUT`].
    pub clients_dropped_timeout: u64,
    /// Clients whose socket failed (other than closing).
    pub clients_dropped_error: u64,
    pub requests: u64,
    /// Requests that did not parse (answered with an error).
    pub requests_malformed: u64,
    /// Requests answered with an error of the engine (not found, invalid).
    pub requests_failed: u64,
}

impl ControlCounters {
    /// Each counter by name, as the stats file has them.
    pub fn visit(&self, mut f: impl FnMut(&'static str, u64)) {
        f("control_clients_accepted", self.clients_accepted);
        f(
            "control_clients_dropped_oversize",
            self.clients_dropped_oversize,
        );
        f(
            "control_clients_dropped_timeout",
            self.clients_dropped_timeout,
        );
        f("control_clients_dropped_error", self.clients_dropped_error);
        f("control_requests", self.requests);
        f("control_requests_malformed", self.requests_malformed);
        f("control_requests_failed", self.requests_failed);
    }
}

struct Client {
    stream: UnixStream,
    /// Bytes of a request not yet ended by `\n`.
    input: Vec<u8>,
    /// The reply being written, and how much of it is out.
    output: Vec<u8>,
    written: usize,
    last_progress: Instant,
}

enum ClientStep {
    Keep,
    Closed,
    Oversize,
    Failed,
}

/// The listener of one engine and its clients.
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    /// The process that made the socket file; only it removes it (a child
    /// that inherited the engine by fork drops it without unlinking).
    owner: u32,
    clients: Vec<Client>,
    counters: ControlCounters,
}

/// Why a control socket could not be made.
#[derive(Debug)]
pub enum BindError {
    /// A running engine answers on this path.
    InUse,
    Io(io::Error),
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::InUse => f.write_str("another running engine answers on it"),
            BindError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl ControlServer {
    /// Listens on `path` (its directory made if need be); a socket file
    /// left there by an engine that is gone is replaced, one that a live
    /// engine answers on is not.  The socket is the owner's only (mode
    /// 0600): it can change routes.
    pub fn bind(path: &Path) -> Result<ControlServer, BindError> {
        let mut tries = 0;
        let listener = loop {
            tries += 1;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(BindError::Io)?;
            }
            if path.exists() {
                // Only a socket nobody listens on is taken over (a live
                // engine with a full backlog refuses with another error).
                match UnixStream::connect(path) {
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                    _ => return Err(BindError::InUse),
                }
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(BindError::Io(e)),
                    _ => {}
                }
            }
            match UnixListener::bind(path) {
                Ok(l) => break l,
                // Another engine bound the name since we looked.
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Err(BindError::InUse),
                // The directory was removed with the last socket of
                // another process since we made it: make it again.
                Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 3 => {}
                Err(e) => return Err(BindError::Io(e)),
            }
        };
        let cleanup = |e: io::Error| {
            let _ = std::fs::remove_file(path);
            BindError::Io(e)
        };
        listener.set_nonblocking(true).map_err(cleanup)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(cleanup)?;
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
            owner: std::process::id(),
            clients: Vec::new(),
            counters: ControlCounters::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn counters(&self) -> &ControlCounters {
        &self.counters
    }

    /// The fds whose readability means work: the listener (while there is
    /// room for a client), and each client waiting for a request (not those
    /// whose reply is being written).
    pub fn wait_fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        let room = self.clients.len() < MAX_CLIENTS;
        room.then_some(self.listener.as_raw_fd()).into_iter().chain(
            self.clients
                .iter()
                .filter(|c| c.output.is_empty())
                .map(|c| c.stream.as_raw_fd()),
        )
    }

    /// One bounded step: accepts, reads, answers with `handle`, writes.
    /// Returns whether anything happened.
    pub fn serve(
        &mut self,
        handle: &mut dyn FnMut(Request) -> Result<Reply, ControlError>,
    ) -> bool {
        let now = Instant::now();
        let mut work = false;
        let mut read_budget = READ_PER_TURN;
        let mut requests = REQUESTS_PER_TURN;
        let mut write_budget = WRITE_PER_TURN;
        let mut i = 0;
        while i < self.clients.len() {
            let step = self.step_client(
                i,
                now,
                &mut read_budget,
                &mut requests,
                &mut write_budget,
                &mut work,
                handle,
            );
            let drop = match step {
                ClientStep::Keep => {
                    if now.duration_since(self.clients[i].last_progress) > CLIENT_TIMEOUT {
                        self.counters.clients_dropped_timeout += 1;
                        true
                    } else {
                        false
                    }
                }
                ClientStep::Closed => true,
                ClientStep::Oversize => {
                    self.counters.clients_dropped_oversize += 1;
                    true
                }
                ClientStep::Failed => {
                    self.counters.clients_dropped_error += 1;
                    true
                }
            };
            if drop {
                self.clients.swap_remove(i);
                work = true;
            } else {
                i += 1;
            }
        }
        // After the clients, so that those that left make room.
        work | self.accept(now)
    }

    fn accept(&mut self, now: Instant) -> bool {
        let mut work = false;
        for _ in 0..ACCEPTS_PER_TURN {
            if self.clients.len() >= MAX_CLIENTS {
                break;
            }
            match self.listener.accept() {
                Ok((stream, _)) => {
                    work = true;
                    if stream.set_nonblocking(true).is_err() {
                        self.counters.clients_dropped_error += 1;
                        continue;
                    }
                    self.counters.clients_accepted += 1;
                    self.clients.push(Client {
                        stream,
                        input: Vec::new(),
                        output: Vec::new(),
                        written: 0,
                        last_progress: now,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        work
    }

    #[allow(clippy::too_many_arguments)]
    fn step_client(
        &mut self,
        i: usize,
        now: Instant,
        read_budget: &mut usize,
        requests: &mut usize,
        write_budget: &mut usize,
        work: &mut bool,
        handle: &mut dyn FnMut(Request) -> Result<Reply, ControlError>,
    ) -> ClientStep {
        let c = &mut self.clients[i];
        // Write what is pending first; read only once it is all out.
        if let Some(step) = write_pending(c, now, write_budget, work) {
            return step;
        }
        // A request already read whole is answered before reading more.
        if !c.input.contains(&b'\n') && *read_budget > 0 {
            let mut buf = [0u8; 4096];
            let want = buf.len().min(*read_budget);
            match c.stream.read(&mut buf[..want]) {
                Ok(0) => return ClientStep::Closed,
                Ok(n) => {
                    *read_budget -= n;
                    c.input.extend_from_slice(&buf[..n]);
                    c.last_progress = now;
                    *work = true;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return ClientStep::Closed,
                Err(_) => return ClientStep::Failed,
            }
        }
        let Some(end) = c.input.iter().position(|&b| b == b'\n') else {
            if c.input.len() >= MAX_REQUEST {
                return ClientStep::Oversize;
            }
            return ClientStep::Keep;
        };
        if end + 1 > MAX_REQUEST {
            return ClientStep::Oversize;
        }
        if *requests == 0 {
            return ClientStep::Keep;
        }
        *requests -= 1;
        let line: Vec<u8> = c.input.drain(..=end).collect();
        self.counters.requests += 1;
        let reply = match proto::decode_request(&line[..end]) {
            Ok(req) => {
                let r = handle(req);
                if r.is_err() {
                    self.counters.requests_failed += 1;
                }
                r
            }
            Err(e) => {
                self.counters.requests_malformed += 1;
                Err(e)
            }
        };
        let c = &mut self.clients[i];
        c.output = proto::encode_reply(reply);
        c.written = 0;
        c.last_progress = now;
        *work = true;
        // Out at once: an idle engine does not wait for the reply's fd.
        write_pending(c, now, write_budget, work).unwrap_or(ClientStep::Keep)
    }
}

/// Writes what `c` has pending, within the budget.  `None` when all is
/// out (the client can be read); otherwise what to do with the client.
fn write_pending(
    c: &mut Client,
    now: Instant,
    write_budget: &mut usize,
    work: &mut bool,
) -> Option<ClientStep> {
    if c.output.is_empty() {
        return None;
    }
    while c.written < c.output.len() && *write_budget > 0 {
        let end = c.output.len().min(c.written + *write_budget);
        match send_no_signal(&c.stream, &c.output[c.written..end]) {
            Ok(0) => return Some(ClientStep::Closed),
            Ok(n) => {
                c.written += n;
                *write_budget -= n;
                c.last_progress = now;
                *work = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(ClientStep::Keep),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Some(ClientStep::Closed),
            Err(_) => return Some(ClientStep::Failed),
        }
    }
    if c.written < c.output.len() {
        return Some(ClientStep::Keep);
    }
    c.output.clear();
    c.written = 0;
    None
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        if std::process::id() == self.owner {
            let _ = std::fs::remove_file(&self.path);
            // The prefix's directory goes with its last socket (removing a
            // directory that is not empty fails, and is meant to).
            if let Some(dir) = self.path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// `write` without SIGPIPE: a client that went away must not kill a
/// program that does not ignore the signal (a C program on the C ABI).
fn send_no_signal(stream: &UnixStream, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice of `buf.len()` bytes and the fd is the
    // stream's, open while `stream` is borrowed.
    let n = unsafe {
        libc::send(
            stream.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
