//! Frames larger than a UMEM chunk, received in pieces (`XDP_USE_SG`).
//!
//! In generic (SKB) mode XDP runs on the kernel's socket buffers, after a
//! veth peer with TSO/GSO (the default) or GRO on a NIC has made TCP
//! super-frames of up to 64 KB. Without multi-buffer the kernel drops every
//! frame longer than a chunk (counted in its `rx_dropped`), and a stream
//! through such a peer stalls on retransmissions. Bound with `XDP_USE_SG`
//! the socket gets such a frame as several descriptors, each but the last
//! marked `XDP_PKT_CONTD`; the link copies their bytes into one buffer,
//! gives the chunks back, and cuts the frame into MTU-sized TCP segments
//! (`gso.rs`) in chunks of its own, as the sender's NIC would have.
//!
//! The kernel made such a frame from segments it had vouched for (its own
//! sender, or GRO after the NIC checked each segment), so it comes with
//! its checksum in the partial form (the pseudo-header's sum); one with a
//! whole checksum is verified over all of it before it is cut. Anything
//! that is not TCP over IPv4 or IPv6, or longer than [`MAX_GATHERED`], is
//! counted as oversize and dropped.

use crate::gso::{NotSplit, TcpSuperFrame};

/// The largest frame gathered: an IP packet of 64 KB with an Ethernet
/// header and one VLAN tag.
pub const MAX_GATHERED: usize = 65_535 + 18;

/// What became of a gathered frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Gathered<'a> {
    /// A TCP super-frame to cut into segments.
    Tcp(TcpSuperFrame, &'a [u8]),
    /// TCP whose whole checksum did not verify: dropped.
    BadChecksum,
    /// Not TCP, or too long: dropped.
    Oversize,
}

/// The pieces of one frame as they arrive.
#[derive(Debug, Default)]
pub struct Gather {
    bytes: Vec<u8>,
    /// Pieces are being gathered (a descriptor marked `XDP_PKT_CONTD`
    /// came, and its frame's last piece has not).
    active: bool,
    /// The frame grew past [`MAX_GATHERED`]: the rest of its pieces are
    /// dropped.
    too_long: bool,
}

impl Gather {
    /// Whether a frame's pieces are being gathered.
    pub fn active(&self) -> bool {
        self.active
    }

    /// Adds one piece.
    pub fn push(&mut self, piece: &[u8]) {
        if !self.active {
            self.active = true;
            self.too_long = false;
            self.bytes.clear();
        }
        if self.too_long || self.bytes.len() + piece.len() > MAX_GATHERED {
            self.too_long = true;
            return;
        }
        self.bytes.extend_from_slice(piece);
    }

    /// The frame is whole (its last piece pushed): what it is, to be cut
    /// into IP packets of at most `mtu` bytes.
    pub fn finish(&mut self, mtu: usize) -> Gathered<'_> {
        self.active = false;
        if self.too_long {
            return Gathered::Oversize;
        }
        let frame = &self.bytes[..];
        let partial = wire::partial_checksum::holds_partial_form(frame);
        match TcpSuperFrame::parse(frame, mtu, partial) {
            Ok(sf) => Gathered::Tcp(sf, frame),
            Err(NotSplit::BadChecksum) => Gathered::BadChecksum,
            Err(NotSplit::NotTcp) => Gathered::Oversize,
        }
    }

    /// Drops a frame whose pieces stopped coming (a bad descriptor among
    /// them).
    pub fn abandon(&mut self) {
        self.active = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ones_sum(b: &[u8]) -> u32 {
        b.chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum()
    }

    fn fold(mut s: u32) -> u16 {
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    /// An IPv4 TCP frame carrying `payload`, its checksum whole or (with
    /// `partial`) the pseudo-header's sum, as an offloading sender leaves it.
    fn tcp_frame(payload: &[u8], partial: bool) -> Vec<u8> {
        let tcp_len = 20 + payload.len();
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        f[20] = 0x40;
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 99, 15, 1]);
        f[30..34].copy_from_slice(&[10, 99, 15, 2]);
        let ip_sum = !fold(ones_sum(&f[14..34]));
        f[24..26].copy_from_slice(&ip_sum.to_be_bytes());
        f[34..36].copy_from_slice(&40000u16.to_be_bytes());
        f[36..38].copy_from_slice(&7u16.to_be_bytes());
        f[38..42].copy_from_slice(&1000u32.to_be_bytes());
        f[46] = 5 << 4;
        f[47] = 0x18; // PSH, ACK
        f[48..50].copy_from_slice(&65535u16.to_be_bytes());
        f.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&f[26..34]);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        let pseudo_sum = fold(ones_sum(&pseudo));
        let field = if partial {
            pseudo_sum
        } else {
            !fold(u32::from(pseudo_sum) + ones_sum(&f[34..]))
        };
        f[50..52].copy_from_slice(&field.to_be_bytes());
        f
    }

    fn gather(g: &mut Gather, frame: &[u8], piece: usize) {
        for p in frame.chunks(piece) {
            g.push(p);
        }
    }

    /// The payload the segments of a gathered frame carry, in order.
    fn payload_of_segments(g: &mut Gather, mtu: usize) -> Vec<u8> {
        let Gathered::Tcp(sf, frame) = g.finish(mtu) else {
            panic!("not cut");
        };
        let mut out = Vec::new();
        for i in 0..sf.segments() {
            let mut seg = vec![0u8; sf.segment_len(i)];
            sf.write_segment(frame, i, &mut seg);
            assert!(seg.len() <= 14 + mtu, "segment {i} of {} bytes", seg.len());
            out.extend_from_slice(&seg[54..]);
        }
        out
    }

    #[test]
    fn pieces_of_a_super_frame_become_segments_carrying_its_payload() {
        let payload: Vec<u8> = (0..60_000u32).map(|i| (i * 7 % 253) as u8).collect();
        for partial in [true, false] {
            let mut g = Gather::default();
            gather(&mut g, &tcp_frame(&payload, partial), 1792);
            assert!(g.active());
            assert_eq!(
                payload_of_segments(&mut g, 1500),
                payload,
                "partial {partial}"
            );
            assert!(!g.active());
        }
    }

    #[test]
    fn a_whole_checksum_that_fails_drops_the_frame() {
        let payload = vec![0x5a; 10_000];
        let mut f = tcp_frame(&payload, false);
        f[5000] ^= 0x10;
        let mut g = Gather::default();
        gather(&mut g, &f, 1792);
        assert_eq!(g.finish(1500), Gathered::BadChecksum);
    }

    #[test]
    fn what_is_not_tcp_or_too_long_is_oversize_and_the_next_frame_is_whole() {
        let mut udp = tcp_frame(&[1; 5000], true);
        udp[23] = 17;
        let mut g = Gather::default();
        gather(&mut g, &udp, 1792);
        assert_eq!(g.finish(1500), Gathered::Oversize);

        let mut g = Gather::default();
        for _ in 0..40 {
            g.push(&[0u8; 1792]);
        }
        assert_eq!(g.finish(1500), Gathered::Oversize);
        let payload = vec![9u8; 3000];
        gather(&mut g, &tcp_frame(&payload, true), 1792);
        assert_eq!(payload_of_segments(&mut g, 1500), payload);
    }

    #[test]
    fn an_abandoned_frame_leaves_nothing_behind() {
        let payload = vec![3u8; 4000];
        let mut g = Gather::default();
        g.push(&[0xff; 1000]);
        g.abandon();
        assert!(!g.active());
        gather(&mut g, &tcp_frame(&payload, true), 1792);
        assert_eq!(payload_of_segments(&mut g, 1500), payload);
    }
}
