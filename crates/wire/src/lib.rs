//! Packet formats.
#![no_std]
#![forbid(unsafe_code)]
