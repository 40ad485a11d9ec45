//! Packet formats for ustack.
//!
//! Every protocol has two types: a zero-copy *view* over a byte buffer
//! (`XxxPacket<T: AsRef<[u8]>>`) and a plain *repr* struct (`XxxRepr`).
//!
//! # The no-panic contract
//!
//! Every byte from the wire is hostile. A view is built with
//! `new_checked(buf)`, which validates every length the accessors depend on
//! once; after it returns `Ok`, no accessor of the view can panic, whatever
//! the bytes are. `new_unchecked` exists for emitting into a buffer the caller
//! sized with `buffer_len()`; accessors on an unchecked view over a too-short
//! buffer may panic, so never use it on received bytes. `Repr::parse` never
//! panics either: it returns an [`Error`].
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

use core::fmt;

#[macro_use]
mod macros;

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ndp;
pub mod tcp;
pub mod udp;
pub mod vlan;

#[cfg(test)]
mod test_util;

pub use arp::{ArpHardware, ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{
    Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, Icmpv4TimeExceeded,
};
pub use icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr,
    Icmpv6TimeExceeded,
};
pub use ip::IpProtocol;
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6FragmentHeader, Ipv6FragmentRepr, Ipv6HeaderChain, Ipv6Packet, Ipv6Repr};
pub use ndp::{NdpOption, NdpOptionRepr, NdpOptionType, NdpOptions, NdpPrefixInformation};
pub use tcp::{SeqNumber, TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanHeader, VlanRepr};

/// Why a buffer could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than a length (fixed or from a header field) requires.
    Truncated,
    /// A field holds a value the format does not allow.
    Malformed,
    /// The checksum does not verify.
    BadChecksum,
    /// Valid, but a variant this crate does not handle.
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::BadChecksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
        };
        f.write_str(s)
    }
}

impl core::error::Error for Error {}

/// Result of parsing.
pub type Result<T> = core::result::Result<T, Error>;

/// Who handles an upper-layer (UDP, TCP, ICMP) checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ChecksumMode {
    /// Software: `parse` verifies the checksum and rejects the packet with
    /// [`Error::BadChecksum`]; `emit` computes the full checksum.
    #[default]
    Full,
    /// Offloaded: `parse` does not verify (the NIC did, or the kernel left a
    /// `CHECKSUM_PARTIAL` frame on a veth/TAP); `emit` writes only the
    /// pseudo-header sum, not inverted, into the checksum field, which is what
    /// a NIC (or virtio-net `VIRTIO_NET_HDR_F_NEEDS_CSUM`) completes.
    Offload,
}

impl ChecksumMode {
    /// True for [`ChecksumMode::Full`].
    pub const fn is_full(self) -> bool {
        matches!(self, ChecksumMode::Full)
    }
}
