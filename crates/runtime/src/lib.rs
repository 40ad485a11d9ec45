//! The per-core engine: the loop that joins links, the stack and the
//! application, plus configuration and statistics.

pub mod clock;
pub mod config;
pub mod control;
pub mod cores;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod engine;
pub mod heap;
pub mod ports;
pub mod procgroup;
pub mod setup;
pub mod stats;
pub mod steer;
pub mod xdp;

pub use engine::{AppContext, Application, Engine, EngineConfig, EngineCounters, IdlePlan};
pub use ports::{PortBuf, PortLink};
