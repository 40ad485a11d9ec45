//! The control plane: a Unix socket per engine, served inside the engine
//! loop, through which the `ustack` command reads and changes a running
//! engine.
//!
//! Engine `E` of process `P` listens on `DIR/PREFIX/P.E.sock`: `DIR` is
//! `[control] dir` (default [`DEFAULT_RUN_DIR`]), `PREFIX` the `[dpdk]
//! file_prefix` (default `ustack`), `P` the process's `--proc-id` (0 when
//! it has none).  When a live engine already answers there (two programs
//! started from one configuration without `--proc-id`), the socket is
//! `P-PID.E.sock` instead, `PID` the process id.  The file goes when the
//! engine does.
//!
//! Requests and replies are [`proto`]'s; [`server`] serves the socket with
//! bounded work per turn; [`client`] is the other end, for the CLI and the
//! metrics endpoint.

pub mod capture;
pub mod client;
pub mod filter;
mod handle;
pub mod metrics;
pub mod prometheus;
pub mod proto;
pub mod server;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use link::Link;

use crate::config::{Config, Sysctls};
use crate::engine::Engine;
pub use server::{BindError, ControlCounters, ControlServer};

/// The default run directory.
pub const DEFAULT_RUN_DIR: &str = "/run/ustack";
/// The prefix when the configuration has no `file_prefix`.
pub const DEFAULT_PREFIX: &str = "ustack";

static PROC_ID: AtomicU32 = AtomicU32::new(0);

/// Sets this process's number among those sharing a configuration
/// (F-Stack's `--proc-id`), which names its control sockets.
pub fn set_proc_id(id: u32) {
    PROC_ID.store(id, Ordering::Relaxed);
}

pub fn proc_id() -> u32 {
    PROC_ID.load(Ordering::Relaxed)
}

/// The directory of the control sockets of a configuration's processes.
pub fn socket_dir(cfg: &Config) -> PathBuf {
    cfg.control
        .dir
        .join(cfg.dpdk.file_prefix.as_deref().unwrap_or(DEFAULT_PREFIX))
}

/// Where a control socket lives and what its engine is.
#[derive(Debug, Clone)]
pub struct ControlSpec {
    pub dir: PathBuf,
    pub engine: u32,
    pub sysctls: Sysctls,
    /// `[metrics] listen`: started with the process's first engine.
    pub metrics: Option<std::net::SocketAddr>,
}

impl ControlSpec {
    /// Engine `engine`'s control socket by `cfg`, or `None` when `[control]
    /// enable=0`.
    pub fn from_config(cfg: &Config, engine: u32) -> Option<ControlSpec> {
        cfg.control.enable.then(|| ControlSpec {
            dir: socket_dir(cfg),
            engine,
            sysctls: cfg.sysctls.clone(),
            metrics: cfg.metrics.listen,
        })
    }

    /// Binds the socket: `P.E.sock`, or `P-PID.E.sock` when a live engine
    /// holds the first.
    pub fn bind(&self) -> Result<ControlServer, (PathBuf, BindError)> {
        let proc = proc_id();
        let first = self.dir.join(format!("{proc}.{}.sock", self.engine));
        match ControlServer::bind(&first) {
            Err(BindError::InUse) => {
                let own = self.dir.join(format!(
                    "{proc}-{}.{}.sock",
                    std::process::id(),
                    self.engine
                ));
                ControlServer::bind(&own).map_err(|e| (own, e))
            }
            r => r.map_err(|e| (first, e)),
        }
    }
}

/// What an engine keeps to answer its control socket.
pub struct EngineControl<L: Link> {
    pub(crate) server: ControlServer,
    pub(crate) proc_id: u32,
    pub(crate) engine: u32,
    pub(crate) started: std::time::Instant,
    pub(crate) sysctls: Sysctls,
    /// Every counter of the engine (the stats file's).
    pub(crate) counters: fn(&Engine<L>) -> Vec<(String, u64)>,
}

impl<L: Link> EngineControl<L> {
    pub fn new(
        server: ControlServer,
        spec: &ControlSpec,
        counters: fn(&Engine<L>) -> Vec<(String, u64)>,
    ) -> Self {
        EngineControl {
            server,
            proc_id: proc_id(),
            engine: spec.engine,
            started: std::time::Instant::now(),
            sysctls: spec.sysctls.clone(),
            counters,
        }
    }

    pub fn path(&self) -> &Path {
        self.server.path()
    }

    pub fn counters(&self) -> &ControlCounters {
        self.server.counters()
    }

    /// The fds whose readability is work for the socket (an idle engine
    /// waits on them too).
    pub fn wait_fds(&self) -> impl Iterator<Item = std::os::fd::RawFd> + '_ {
        self.server.wait_fds()
    }

    /// One bounded step of the socket for `engine`.
    pub(crate) fn serve(&mut self, engine: &mut Engine<L>) -> bool {
        let EngineControl { server, .. } = self;
        // The handler reads the rest of `self`; the server is borrowed
        // apart from it.
        let mut ctx = ControlContext {
            proc_id: self.proc_id,
            engine: self.engine,
            started: self.started,
            sysctls: &mut self.sysctls,
            counters: self.counters,
            control_counters: server.counters().clone(),
        };
        let work = server.serve(&mut |req| handle::handle(engine, &mut ctx, req));
        engine.end_abandoned_captures(std::time::Instant::now());
        work
    }
}

/// What [`handle::handle`] needs of [`EngineControl`].
pub(crate) struct ControlContext<'a, L: Link> {
    pub proc_id: u32,
    pub engine: u32,
    pub started: std::time::Instant,
    /// The sysctls in force (the configuration's, and what was set since).
    pub sysctls: &'a mut Sysctls,
    pub counters: fn(&Engine<L>) -> Vec<(String, u64)>,
    /// The socket's own counters as the turn began (the socket is out of
    /// the engine while it is served).
    pub control_counters: ControlCounters,
}

/// Opens engine `spec.engine`'s control socket and attaches it to
/// `engine`; says on stderr why when it cannot (the engine runs without).
pub fn attach<L: Link>(
    engine: &mut Engine<L>,
    spec: &ControlSpec,
    counters: fn(&Engine<L>) -> Vec<(String, u64)>,
) {
    if let Some(addr) = spec.metrics {
        metrics::start_once(addr, &spec.dir);
    }
    match spec.bind() {
        Ok(server) => engine.set_control(EngineControl::new(server, spec, counters)),
        Err((path, e)) => eprintln!(
            "ustack: no control socket for engine {} ({}: {e}); `ustack` commands will not \
             reach it",
            spec.engine,
            path.display()
        ),
    }
}
