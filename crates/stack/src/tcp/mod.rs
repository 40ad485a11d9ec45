//! TCP (RFC 9293), divided as FreeBSD divides it: input (segment
//! acceptance and state transitions), output (what to send now), timers,
//! SACK, congestion control behind a small interface, and the generators
//! of initial sequence numbers, ports and SYN cookies.

mod api;
mod buffer_cache;
mod byte_ring;
pub mod cc;
pub(crate) mod conn;
mod deadlines;
pub(crate) mod ecn;
pub(crate) mod fast_input;
mod fast_output;
pub(crate) mod icmp_error;
mod input;
pub mod isn;
pub(crate) mod listen;
pub(crate) mod output;
mod recv_buffer;
pub mod rtt;
mod sack;
pub(crate) mod shared;
pub mod timer_wheel;
mod timers;
mod types;
pub(crate) mod urgent;

pub use cc::CcAlgorithm;
pub use types::{EcnMode, Readiness, Shutdown, TcpConfig, TcpInfo, TcpPollView, TcpState};
pub use urgent::OobRead;
