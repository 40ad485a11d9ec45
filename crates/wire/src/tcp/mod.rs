//! TCP segments (RFC 9293), with options (RFC 7323, RFC 2018).
//!
//! No-panic contract: [`TcpPacket::new_checked`] validates, once, that the
//! buffer holds the 20-byte fixed header and that
//! `20 <= header_len (data offset * 4) <= buffer length`; after that no
//! accessor panics. Option bytes are walked by [`TcpOptions`], which returns
//! an error on a lying option length instead of reading past the header.
//! [`TcpRepr::parse`] never panics.
//!
//! The view covers exactly one segment: the buffer must end where the IP
//! payload ends (the segment has no length field of its own), because the
//! payload and the checksum run to the end of the buffer.

mod flags;
mod option;
mod seq;

pub use flags::TcpFlags;
pub use option::{TcpOption, TcpOptions, MAX_SACK_BLOCKS};
pub use seq::SeqNumber;

use core::net::IpAddr;

use crate::checksum;
use crate::ip::IpProtocol;
use crate::{ChecksumMode, Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (4 bits), reserved (3 bits), NS, CWR ... FIN.
    pub const FLAGS: Range<usize> = 12..14;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of the TCP header without options.
pub const HEADER_LEN: usize = field::URGENT.end;
/// Largest TCP header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Most option bytes a header can carry.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

/// A view over a TCP segment (the whole IP payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap without checking. Only for buffers sized by the caller for emitting.
    pub const fn new_unchecked(buffer: T) -> TcpPacket<T> {
        TcpPacket { buffer }
    }

    /// Wrap, checking the fixed header and the data offset.
    pub fn new_checked(buffer: T) -> Result<TcpPacket<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Buffer shorter than 20 or than `header_len`: `Truncated`;
    /// data offset below 5: `Malformed`.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let h = usize::from(self.header_len());
        if h < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if h > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.b()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        let b = &self.b()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber::new(self.u32_at(field::SEQ_NUM))
    }

    /// The acknowledgment field (meaningful only with ACK set).
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber::new(self.u32_at(field::ACK_NUM))
    }

    /// Header length in bytes (data offset * 4).
    pub fn header_len(&self) -> u8 {
        (self.b()[field::FLAGS.start] >> 4) * 4
    }

    /// All control bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits(self.u16_at(field::FLAGS))
    }

    pub fn fin(&self) -> bool {
        self.flags().fin()
    }
    pub fn syn(&self) -> bool {
        self.flags().syn()
    }
    pub fn rst(&self) -> bool {
        self.flags().rst()
    }
    pub fn psh(&self) -> bool {
        self.flags().psh()
    }
    pub fn ack(&self) -> bool {
        self.flags().ack()
    }
    pub fn urg(&self) -> bool {
        self.flags().urg()
    }
    pub fn ece(&self) -> bool {
        self.flags().ece()
    }
    pub fn cwr(&self) -> bool {
        self.flags().cwr()
    }

    /// The window field, unscaled.
    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WIN_SIZE)
    }

    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// The option bytes (20 to `header_len`).
    pub fn options(&self) -> &[u8] {
        self.b()
            .get(HEADER_LEN..usize::from(self.header_len()))
            .unwrap_or(&[])
    }

    /// Iterate over the options.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// The payload (from `header_len` to the end of the buffer).
    pub fn payload(&self) -> &[u8] {
        self.b()
            .get(usize::from(self.header_len())..)
            .unwrap_or(&[])
    }

    /// Sequence space used: payload length plus one for SYN and one for FIN.
    pub fn segment_len(&self) -> usize {
        let f = self.flags();
        self.payload().len() + usize::from(f.syn()) + usize::from(f.fin())
    }

    /// Verify the checksum over the whole buffer with the pseudo header.
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        let b = self.b();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Tcp, b.len() as u32);
        checksum::combine(&[ph, checksum::data(b)]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// The payload with the lifetime of the underlying buffer.
    pub fn into_payload(self) -> &'a [u8] {
        let b: &'a [u8] = self.buffer.as_ref();
        let h = usize::from(b.get(field::FLAGS.start).map_or(0, |v| (v >> 4) * 4));
        b.get(h..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn set_u16_at(&mut self, r: core::ops::Range<usize>, v: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    fn set_u32_at(&mut self, r: core::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    pub fn set_src_port(&mut self, v: u16) {
        self.set_u16_at(field::SRC_PORT, v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        self.set_u16_at(field::DST_PORT, v);
    }

    pub fn set_seq_number(&mut self, v: SeqNumber) {
        self.set_u32_at(field::SEQ_NUM, v.to_u32());
    }

    pub fn set_ack_number(&mut self, v: SeqNumber) {
        self.set_u32_at(field::ACK_NUM, v.to_u32());
    }

    /// Set the header length in bytes (rounded down to a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS.start];
        *b = (*b & 0x0f) | (((len / 4) & 0x0f) << 4);
    }

    /// Set all control bits (keeps the data offset, clears the reserved bits).
    pub fn set_flags(&mut self, flags: TcpFlags) {
        let off = u16::from(self.b()[field::FLAGS.start] & 0xf0) << 8;
        self.set_u16_at(field::FLAGS, off | flags.bits());
    }

    pub fn set_window_len(&mut self, v: u16) {
        self.set_u16_at(field::WIN_SIZE, v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        self.set_u16_at(field::CHECKSUM, v);
    }

    pub fn set_urgent_at(&mut self, v: u16) {
        self.set_u16_at(field::URGENT, v);
    }

    /// Mutable option bytes (empty if they do not fit).
    pub fn options_mut(&mut self) -> &mut [u8] {
        let h = usize::from(self.header_len());
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..h)
            .unwrap_or(&mut [])
    }

    /// Mutable payload (from `header_len` to the end of the buffer).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = usize::from(self.header_len());
        self.buffer.as_mut().get_mut(h..).unwrap_or(&mut [])
    }

    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let b = self.b();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Tcp, b.len() as u32);
        let c = !checksum::combine(&[ph, checksum::data(b)]);
        self.set_checksum(c);
    }

    /// Store the pseudo-header sum (not inverted) for checksum offload.
    pub fn fill_partial_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        let len = self.b().len() as u32;
        self.set_checksum(checksum::pseudo_header(src, dst, IpProtocol::Tcp, len));
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TcpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A TCP segment as plain values.
///
/// `flags` holds every control bit. On emit the ACK bit is taken from
/// `ack_number` (set iff `Some`), whatever `flags` says; on parse
/// `ack_number` is `Some` iff ACK is set, and `flags` keeps ACK too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub flags: TcpFlags,
    pub seq_number: SeqNumber,
    pub ack_number: Option<SeqNumber>,
    /// The window field as sent (unscaled).
    pub window_len: u16,
    /// Window scale option (RFC 7323); values above 14 are clamped to 14 on parse.
    pub window_scale: Option<u8>,
    pub max_seg_size: Option<u16>,
    pub sack_permitted: bool,
    /// SACK blocks (RFC 2018) as (left, right) edges; on emit as many as fit
    /// in the 40 bytes of option space.
    pub sack_ranges: [Option<(u32, u32)>; 3],
    /// Timestamps option (RFC 7323): (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// The urgent pointer field, read and written only with URG set (an
    /// offset from the sequence number; RFC 6093: to the octet after the
    /// urgent data).
    pub urgent_pointer: u16,
    pub payload: &'a [u8],
}

/// Largest window shift (RFC 7323 section 2.3).
pub const MAX_WINDOW_SCALE: u8 = 14;

impl<'a> TcpRepr<'a> {
    /// A segment with the given ports, flags and numbers, no options, no payload.
    pub fn new(
        src_port: u16,
        dst_port: u16,
        flags: TcpFlags,
        seq_number: SeqNumber,
    ) -> TcpRepr<'a> {
        TcpRepr {
            src_port,
            dst_port,
            flags,
            seq_number,
            ack_number: None,
            window_len: 0,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            urgent_pointer: 0,
            payload: &[],
        }
    }

    /// Parse a segment carried between `src` and `dst`.
    ///
    /// Errors: lengths as in [`TcpPacket::check_len`]; port 0 on either side
    /// or a malformed option: `Malformed`; with [`ChecksumMode::Full`], a
    /// checksum that does not verify: `BadChecksum`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&'a T>,
        src: &IpAddr,
        dst: &IpAddr,
        checksum: ChecksumMode,
    ) -> Result<TcpRepr<'a>> {
        packet.check_len()?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if checksum.is_full() && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let flags = packet.flags();
        let mut repr = TcpRepr::new(
            packet.src_port(),
            packet.dst_port(),
            flags,
            packet.seq_number(),
        );
        repr.ack_number = flags.ack().then(|| packet.ack_number());
        repr.window_len = packet.window_len();
        if flags.urg() {
            repr.urgent_pointer = packet.urgent_at();
        }
        let buf: &'a [u8] = packet.buffer.as_ref();
        let header_len = usize::from(packet.header_len());
        let options = buf.get(HEADER_LEN..header_len).unwrap_or(&[]);
        repr.payload = buf.get(header_len..).unwrap_or(&[]);
        // Header prediction (RFC 7323 appendix A.1's layout): a segment of
        // an established connection carries nothing or exactly NOP, NOP,
        // timestamps; those skip the option walk.
        match *options {
            [] => return Ok(repr),
            [1, 1, 8, 10, v0, v1, v2, v3, e0, e1, e2, e3] => {
                repr.timestamp = Some((
                    u32::from_be_bytes([v0, v1, v2, v3]),
                    u32::from_be_bytes([e0, e1, e2, e3]),
                ));
                return Ok(repr);
            }
            _ => {}
        }
        for option in TcpOptions::new(options) {
            match option? {
                TcpOption::MaxSegmentSize(v) => repr.max_seg_size = Some(v),
                TcpOption::WindowScale(v) => repr.window_scale = Some(v.min(MAX_WINDOW_SCALE)),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::SackRange(blocks) => {
                    for (slot, b) in repr.sack_ranges.iter_mut().zip(blocks) {
                        *slot = b;
                    }
                }
                TcpOption::Timestamp { tsval, tsecr } => repr.timestamp = Some((tsval, tsecr)),
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
            }
        }
        Ok(repr)
    }

    /// Number of SACK blocks emitted: as many as fit beside the other options.
    fn sack_blocks_emitted(&self) -> usize {
        let n = self.sack_ranges.iter().flatten().count();
        if n == 0 {
            return 0;
        }
        let room = MAX_OPTIONS_LEN.saturating_sub(self.options_len_without_sack() + 4);
        n.min(room / 8)
    }

    fn options_len_without_sack(&self) -> usize {
        let mut len = 0;
        if self.max_seg_size.is_some() {
            len += 4;
        }
        if self.timestamp.is_some() {
            len += 12; // NOP NOP TS, or SACK-permitted TS
        } else if self.sack_permitted {
            len += 4; // NOP NOP SACK-permitted
        }
        if self.window_scale.is_some() {
            len += 4; // NOP WS
        }
        len
    }

    /// Option bytes emitted (always a multiple of 4, at most 40).
    pub fn options_len(&self) -> usize {
        let n = self.sack_blocks_emitted();
        let sack = if n > 0 { 4 + 8 * n } else { 0 };
        self.options_len_without_sack() + sack
    }

    /// Header length with options.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Sequence space used: payload plus SYN and FIN.
    pub fn segment_len(&self) -> usize {
        self.payload.len() + usize::from(self.flags.syn()) + usize::from(self.flags.fin())
    }

    /// Write the segment: header, options in Linux's order (MSS,
    /// SACK-permitted+timestamps, window scale, SACK blocks; NOP-padded to
    /// 4-byte words), payload, then the checksum.
    ///
    /// The buffer must be exactly `buffer_len()` bytes (the checksum covers
    /// the whole buffer). With [`ChecksumMode::Offload`] only the
    /// pseudo-header sum is stored.
    ///
    /// Zero copy: to send data already placed after the header in the
    /// buffer, set `payload: &[]` and pass a buffer of
    /// `header_len() + data_len` bytes; nothing is copied and the checksum
    /// still covers the data.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src: &IpAddr,
        dst: &IpAddr,
        checksum: ChecksumMode,
    ) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number.unwrap_or_default());
        packet.set_header_len(self.header_len() as u8);
        let mut flags = self.flags;
        flags.set(TcpFlags::ACK, self.ack_number.is_some());
        packet.set_flags(flags);
        packet.set_window_len(self.window_len);
        packet.set_urgent_at(if self.flags.urg() {
            self.urgent_pointer
        } else {
            0
        });
        self.emit_options(packet.options_mut());
        let payload = packet.payload_mut();
        let n = self.payload.len().min(payload.len());
        payload[..n].copy_from_slice(&self.payload[..n]);
        match checksum {
            ChecksumMode::Full => packet.fill_checksum(src, dst),
            ChecksumMode::Offload => packet.fill_partial_checksum(src, dst),
        }
    }

    fn emit_options(&self, buf: &mut [u8]) {
        // The established connection's options: NOP, NOP, timestamps
        // written at once (the layout `parse` predicts).
        if let (Some((tsval, tsecr)), None, None, false, [None, None, None], 12) = (
            self.timestamp,
            self.max_seg_size,
            self.window_scale,
            self.sack_permitted,
            self.sack_ranges,
            buf.len(),
        ) {
            buf[..4].copy_from_slice(&[1, 1, 8, 10]);
            buf[4..8].copy_from_slice(&tsval.to_be_bytes());
            buf[8..12].copy_from_slice(&tsecr.to_be_bytes());
            return;
        }
        let mut at = 0;
        let mut put = |o: TcpOption| {
            if let Some(b) = buf.get_mut(at..) {
                at += o.emit(b).unwrap_or(0);
            }
        };
        if let Some(mss) = self.max_seg_size {
            put(TcpOption::MaxSegmentSize(mss));
        }
        if let Some((tsval, tsecr)) = self.timestamp {
            if self.sack_permitted {
                put(TcpOption::SackPermitted);
            } else {
                put(TcpOption::NoOperation);
                put(TcpOption::NoOperation);
            }
            put(TcpOption::Timestamp { tsval, tsecr });
        } else if self.sack_permitted {
            put(TcpOption::NoOperation);
            put(TcpOption::NoOperation);
            put(TcpOption::SackPermitted);
        }
        if let Some(ws) = self.window_scale {
            put(TcpOption::NoOperation);
            put(TcpOption::WindowScale(ws));
        }
        let n = self.sack_blocks_emitted();
        if n > 0 {
            let mut blocks = [None; MAX_SACK_BLOCKS];
            for (slot, b) in blocks
                .iter_mut()
                .zip(self.sack_ranges.iter().flatten().take(n))
            {
                *slot = Some(*b);
            }
            put(TcpOption::NoOperation);
            put(TcpOption::NoOperation);
            put(TcpOption::SackRange(blocks));
        }
    }
}

#[cfg(test)]
mod tests;
