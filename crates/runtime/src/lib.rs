//! The per-core engine: the loop that joins links, the stack and the
//! application, plus configuration and statistics.

pub mod config;
