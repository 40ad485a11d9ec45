//! TCP input while no TCP socket exists: every segment is for a closed port.

use crate::ipv4::Ipv4Datagram;
use crate::sink::FrameSink;
use crate::stack::Stack;
use crate::time::Instant;

impl Stack {
    /// RFC 9293 3.10.7.1 (CLOSED) asks for a reset; the reset generator
    /// comes with the TCP engine, so for now the segment is only counted,
    /// split by whether it was well formed.
    pub(crate) fn tcp_input_closed(
        &mut self,
        _now: Instant,
        d: &Ipv4Datagram<'_>,
        _sink: &mut dyn FrameSink,
    ) {
        let data_offset = d.payload.get(12).map(|b| usize::from(b >> 4) * 4);
        match data_offset {
            Some(off) if off >= 20 && off <= d.payload.len() => {
                self.ip.counters.rx_drop_tcp_no_socket += 1
            }
            _ => self.ip.counters.rx_drop_tcp_malformed += 1,
        }
    }
}
