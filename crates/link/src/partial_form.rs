//! Partial checksums on links that cannot mark them.
//!
//! A sender on the same host whose interface offers checksum offload (a
//! veth's peer, as every container's interface comes) hands its TCP and
//! UDP over with only the pseudo-header's sum in the checksum field. A
//! link that reads the kernel's socket buffer metadata says so per frame
//! (AF_PACKET's `TP_STATUS_CSUMNOTREADY`); AF_XDP and DPDK's software
//! drivers hand over bytes alone, so such frames would fail verification
//! and every connection through them would stall. On interfaces whose
//! driver can deliver such frames, a frame whose checksum field holds
//! exactly its pseudo-header's sum is marked `csum_partial` as AF_PACKET
//! would have marked it (`wire::partial_checksum`).
//!
//! What remains checked: on those interfaces a TCP or UDP frame passes
//! when its checksum is whole or is exactly the partial form; a frame
//! whose bytes changed after its sender summed them (a bit flip in memory,
//! or `[fault] corrupt`, which completes a partial checksum before it
//! flips a bit) fails as before, unless the change left the field equal to
//! the pseudo-header's sum. No wire lies between a veth's two ends, so no
//! wire corruption is left unchecked. On every other driver (a NIC's
//! frames were summed by the sender or its NIC) nothing changes.

use crate::ifreq::CtlSocket;
use crate::PacketBuffer;

/// Drivers whose received frames may carry a peer's partial checksum: a
/// sender on the same host, not a wire (veth pairs; TAP and macvlan/ipvlan
/// siblings in generic XDP mode).
const SAME_HOST_DRIVERS: &[&str] = &["veth", "tun", "macvlan", "ipvlan", "netkit"];

/// Whether frames received on interface `ifname` may carry partial
/// checksums (its driver is one of [`SAME_HOST_DRIVERS`]); false when the
/// driver cannot be asked.
pub fn may_carry_partial(ifname: &str) -> bool {
    CtlSocket::new()
        .and_then(|c| c.driver(ifname))
        .is_ok_and(|d| SAME_HOST_DRIVERS.contains(&d.as_str()))
}

/// The per-link recogniser: off, or on with its count of frames marked.
#[derive(Debug, Default)]
pub struct PartialForm {
    on: bool,
    marked: u64,
}

impl PartialForm {
    /// On for an interface whose driver may deliver partial checksums.
    pub fn for_interface(ifname: &str) -> PartialForm {
        PartialForm::new(may_carry_partial(ifname))
    }

    pub fn new(on: bool) -> PartialForm {
        PartialForm { on, marked: 0 }
    }

    /// Whether frames are looked at.
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Marks `buf` `csum_partial` when its checksum is in the partial form.
    #[inline]
    pub fn mark<B: PacketBuffer>(&mut self, buf: &mut B) {
        if self.on && !buf.csum_partial() && wire::partial_checksum::holds_partial_form(buf.data())
        {
            buf.set_csum_partial(true);
            self.marked += 1;
        }
    }

    /// Frames marked so far (`LinkStats::rx_csum_partial_form`).
    pub fn marked(&self) -> u64 {
        self.marked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PoolBuf;

    #[test]
    fn loopback_and_missing_interfaces_carry_no_partial_checksums() {
        assert!(!may_carry_partial("lo"));
        assert!(!may_carry_partial("nosuchif0"));
        assert!(!PartialForm::for_interface("lo").is_on());
    }

    /// A UDP frame with `check` in its checksum field.
    fn udp(pool: &mut crate::pool::PacketPool, check: u16) -> PoolBuf {
        let mut b = pool.alloc().unwrap();
        b.set_len(14 + 20 + 8 + 4);
        let f = b.data_mut();
        f.fill(0);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&32u16.to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 99, 0, 1]);
        f[30..34].copy_from_slice(&[10, 99, 0, 2]);
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        f[40..42].copy_from_slice(&check.to_be_bytes());
        f[42..46].copy_from_slice(b"ping");
        b
    }

    #[test]
    fn only_the_partial_form_is_marked_and_only_when_on() {
        let mut pool = crate::pool::PacketPool::new(2048, 8);
        let pseudo = wire::checksum::pseudo_header_v4(
            &[10, 99, 0, 1].into(),
            &[10, 99, 0, 2].into(),
            wire::ip::IpProtocol::Udp,
            12,
        );
        let mut on = PartialForm::new(true);
        let mut partial = udp(&mut pool, pseudo);
        on.mark(&mut partial);
        assert!(partial.csum_partial());
        let mut whole = udp(&mut pool, pseudo);
        assert!(wire::partial_checksum::complete(whole.data_mut()));
        on.mark(&mut whole);
        assert!(
            !whole.csum_partial(),
            "a whole checksum is verified as usual"
        );
        assert_eq!(on.marked(), 1);
        let mut off = PartialForm::new(false);
        let mut b = udp(&mut pool, pseudo);
        off.mark(&mut b);
        assert!(!b.csum_partial());
        assert_eq!(off.marked(), 0);
    }
}
