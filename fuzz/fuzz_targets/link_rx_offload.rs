//! What a packet socket's `virtio_net_hdr` and a peer's super-frames can
//! hold, read and cut as the AF_PACKET link does on receive: the header
//! checked against its frame, then a TCP super-frame cut at the header's
//! segment size and a UDP super-frame cut into its datagrams. None may
//! panic, and every piece cut lies within its buffer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use link::gso::TcpSuperFrame;
use link::udp_gso::UdpSuperFrame;
use link::vnet_hdr::{self, GsoKind, VNET_HDR_LEN};

fuzz_target!(|data: &[u8]| {
    let Some((head, frame)) = data.split_at_checked(VNET_HDR_LEN + 1) else {
        return;
    };
    let mut h = [0u8; VNET_HDR_LEN];
    h.copy_from_slice(&head[..VNET_HDR_LEN]);
    let tagged = head[VNET_HDR_LEN] & 1 != 0;
    let len = frame.len() + if tagged { 4 } else { 0 };
    let mtu = 68 + usize::from(head[VNET_HDR_LEN]) * 8;
    let Ok(v) = vnet_hdr::parse_rx(&h, frame, len) else {
        return;
    };
    let Some(g) = v.gso else {
        return;
    };
    let mut out = vec![0u8; 65_536 + 64];
    match g.kind {
        GsoKind::Udp => {
            if let Ok(sf) = UdpSuperFrame::parse(frame, usize::from(g.size)) {
                for i in 0..sf.datagrams().min(512) {
                    let n = sf.datagram_len(i);
                    assert!(n <= frame.len());
                    sf.write_datagram(frame, i, &mut out[..n]);
                }
            }
        }
        GsoKind::TcpV4 | GsoKind::TcpV6 => {
            if let Ok(sf) = TcpSuperFrame::parse(frame, mtu, v.needs_csum) {
                let sf = sf.cut_at(usize::from(g.size));
                for i in 0..sf.segments().min(512) {
                    let n = sf.segment_len(i);
                    assert!(n <= frame.len());
                    sf.write_segment(frame, i, &mut out[..n]);
                }
            }
        }
    }
});
