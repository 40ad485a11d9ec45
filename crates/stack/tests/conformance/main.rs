//! TCP conformance scripts in the spirit of packetdrill: each `#[test]`
//! injects segments into one stack on a simulated clock and checks the
//! segments it emits, for one behaviour of one RFC section (named in its
//! doc comment).  `coverage.rs` lists which scripts cover which RFC
//! section; the README's "TCP conformance coverage" table is generated
//! from that list and checked against it.

mod ack;
mod addresses;
mod close;
mod coverage;
mod ecn;
mod harness;
mod icmp;
mod isn;
mod listen;
mod options;
mod recovery;
mod requirements;
mod rfc5961;
mod rfc9293;
mod rto;
mod sack;
mod timers;
mod urgent;
mod v6;
mod window;
