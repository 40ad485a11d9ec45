//! The protocol engine: a pure state machine driven by `(now, frame)` and
//! `(now, socket call)`.  It reads no clock, does no I/O and spawns nothing;
//! frames go out through a [`FrameSink`] the caller provides.
#![forbid(unsafe_code)]

pub mod admin;
mod arp;
pub mod config;
pub mod counters;
mod ethernet;
mod icmp;
pub mod iface;
mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod lend;
pub mod neighbor;
pub mod policy;
pub mod rand;
mod ratelimit;
pub mod reassembly;
pub mod route;
pub mod sink;
pub mod socket;
mod stack;
pub mod steer;
pub mod tcp;
pub mod time;
mod udp;
pub mod vlan;

pub use config::StackConfig;
pub use counters::Counters;
pub use iface::{IfaceId, IfaceTraffic, Interface, InterfaceConfig, Vlan};
pub use ipv6::Ipv6Config;
pub use lend::{LendLimits, LentFrame, RxFrame};
pub use policy::{PolicyError, PolicyRule, RuleMatch};
pub use sink::{FrameSink, RxMeta, TxMeta, VecSink};
pub use socket::udp::{UdpMeta, UdpRecv};
pub use socket::{SocketError, SocketHandle};
pub use stack::{Stack, StackError, MAX_INTERFACES};
pub use tcp::{
    CcAlgorithm, EcnMode, OobRead, Readiness, Shutdown, TcpConfig, TcpInfo, TcpPollView, TcpState,
};
pub use time::{Duration, Instant};
pub use udp::MAX_UDP_PAYLOAD;
