//! (being written by the TCP building-blocks work; this line is replaced)
