//! IPv4 (RFC 791): input with reassembly, output with routing, neighbor
//! resolution and fragmentation.

mod input;
mod output;

pub(crate) use input::Ipv4Datagram;
pub(crate) use output::{Ipv4Path, ATOMIC_IDENT};
pub use output::{Ipv4Send, SendError};
