//! TCP (RFC 9293), divided as FreeBSD divides it: input (segment
//! acceptance and state transitions), output (what to send now), timers,
//! SACK, congestion control behind a small interface, and the generators
//! of initial sequence numbers, ports and SYN cookies.

pub mod cc;
pub mod isn;
pub mod rtt;
pub mod timer_wheel;

mod types;

pub use types::{Readiness, Shutdown, TcpConfig, TcpInfo, TcpState};
mod closed;
