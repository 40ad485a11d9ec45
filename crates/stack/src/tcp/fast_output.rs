//! The output half of the fast path: an established connection's ordinary
//! segment (ACK, PSH or FIN, timestamps or no options, no SACK blocks),
//! written straight into the link's frame along the connection's cached
//! path, with no `TcpRepr`, no route and no neighbor lookup.  The bytes
//! are the ones the general path (`send_tcp`) writes; the simulation
//! compares the two bit for bit (`net.inet.tcp.fast_path`).

use core::net::IpAddr;

use wire::checksum;
use wire::ip::IpProtocol;
use wire::tcp::{SeqNumber, TcpFlags};
use wire::ChecksumMode;

use crate::ip::IpLayer;
use crate::sink::FrameSink;
use crate::tcp::conn::TcpConnection;
use crate::time::Instant;

/// A TCP header without options, and with the NOP, NOP, timestamps
/// layout every segment of a connection with timestamps carries.
const PLAIN_HEADER_LEN: usize = 20;
const TIMESTAMP_HEADER_LEN: usize = 32;

impl TcpConnection {
    /// Sends `len` bytes of the send buffer from `seq` with `flags` (ACK
    /// is always set), our ACK, window and timestamps, written in place.
    /// `false`, with nothing sent, when the general path must build the
    /// segment: the fast path is off, SACK blocks are due, the connection
    /// is not IPv4 or has no cached path, or the packet is larger than the
    /// path's MTU.
    pub(crate) fn send_direct(
        &mut self,
        now: Instant,
        flags: TcpFlags,
        seq: SeqNumber,
        len: usize,
        ip: &mut IpLayer,
        sink: &mut dyn FrameSink,
    ) -> bool {
        if !ip.cfg.tcp.fast_path || (self.sack_ok && self.recv.has_out_of_order()) {
            return false;
        }
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (self.local.ip(), self.remote.ip()) else {
            return false;
        };
        ip.refresh_path(&mut self.path, dst, now);
        let Some(path) = self.path else {
            return false;
        };
        let header_len = if self.ts_ok {
            TIMESTAMP_HEADER_LEN
        } else {
            PLAIN_HEADER_LEN
        };
        let total = header_len + len;
        let mut h = [0u8; TIMESTAMP_HEADER_LEN];
        h[0..2].copy_from_slice(&self.local.port().to_be_bytes());
        h[2..4].copy_from_slice(&self.remote.port().to_be_bytes());
        h[4..8].copy_from_slice(&seq.0.to_be_bytes());
        h[8..12].copy_from_slice(&self.rcv_nxt.0.to_be_bytes());
        let offset_flags = ((header_len as u16 / 4) << 12) | (flags | TcpFlags::ACK).bits();
        h[12..14].copy_from_slice(&offset_flags.to_be_bytes());
        h[14..16].copy_from_slice(&self.advertise_window().to_be_bytes());
        if self.ts_ok {
            h[20..24].copy_from_slice(&[1, 1, 8, 10]);
            h[24..28].copy_from_slice(&self.ts_now(now).to_be_bytes());
            h[28..32].copy_from_slice(&self.ts_recent.to_be_bytes());
        }
        let offset = seq - self.data_start();
        let send = &self.send;
        let sent = ip.send_ipv4_on(
            &path,
            src,
            IpProtocol::Tcp,
            self.ip_opts.ttl,
            self.ip_opts.tos,
            total,
            |buf: &mut [u8], mode: ChecksumMode| {
                let (head, payload) = buf.split_at_mut(header_len);
                send.copy_out(offset, payload);
                let pseudo = checksum::pseudo_header_v4(&src, &dst, IpProtocol::Tcp, total as u32);
                let field = match mode {
                    ChecksumMode::Offload => pseudo,
                    // Both parts start at an even offset: their sums add.
                    ChecksumMode::Full => !checksum::combine(&[
                        pseudo,
                        checksum::data(&h[..header_len]),
                        checksum::data(payload),
                    ]),
                };
                head.copy_from_slice(&h[..header_len]);
                head[16..18].copy_from_slice(&field.to_be_bytes());
            },
            sink,
        );
        match sent {
            Some(result) => {
                if result.is_ok() {
                    ip.counters.tcp_segments_sent += 1;
                    ip.counters.tcp_direct_segments += 1;
                }
                true
            }
            None => false,
        }
    }
}
