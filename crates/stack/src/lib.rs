//! The protocol engine.
#![forbid(unsafe_code)]
