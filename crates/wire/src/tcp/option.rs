//! TCP options (RFC 9293 section 3.2, RFC 7323, RFC 2018).
//!
//! No-panic contract: [`TcpOption::parse`] and the [`TcpOptions`] iterator
//! accept any bytes. A length byte that is missing, below 2, beyond the end
//! of the option space, or wrong for a known kind gives `Malformed`, and the
//! iterator stops after yielding that error. [`TcpOption::emit`] returns
//! `Truncated` instead of writing past the buffer.

use crate::{Error, Result};

mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WS: u8 = 3;
    pub const SACK_PERM: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TS: u8 = 8;
}

/// Most SACK blocks an option can carry in 40 bytes of option space.
pub const MAX_SACK_BLOCKS: usize = 4;

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    EndOfList,
    NoOperation,
    MaxSegmentSize(u16),
    WindowScale(u8),
    SackPermitted,
    /// Up to four (left edge, right edge) blocks.
    SackRange([Option<(u32, u32)>; MAX_SACK_BLOCKS]),
    Timestamp {
        tsval: u32,
        tsecr: u32,
    },
    /// Any other kind; `data` excludes the kind and length bytes.
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    u32::from_be_bytes(a)
}

impl<'a> TcpOption<'a> {
    /// Parse the option at the start of `buf`; returns the bytes after it.
    /// An empty `buf` is `Truncated`.
    pub fn parse(buf: &'a [u8]) -> Result<(&'a [u8], TcpOption<'a>)> {
        let (&k, after_kind) = buf.split_first().ok_or(Error::Truncated)?;
        match k {
            kind::END => return Ok((after_kind, TcpOption::EndOfList)),
            kind::NOP => return Ok((after_kind, TcpOption::NoOperation)),
            _ => {}
        }
        let len = usize::from(*after_kind.first().ok_or(Error::Malformed)?);
        if len < 2 {
            return Err(Error::Malformed);
        }
        let (opt, rest) = buf.split_at_checked(len).ok_or(Error::Malformed)?;
        let data = &opt[2..];
        let option = match (k, len) {
            (kind::MSS, 4) => TcpOption::MaxSegmentSize(u16::from_be_bytes([data[0], data[1]])),
            (kind::WS, 3) => TcpOption::WindowScale(data[0]),
            (kind::SACK_PERM, 2) => TcpOption::SackPermitted,
            (kind::SACK, 10 | 18 | 26 | 34) => {
                let mut blocks = [None; MAX_SACK_BLOCKS];
                for (slot, b) in blocks.iter_mut().zip(data.chunks_exact(8)) {
                    *slot = Some((be32(&b[..4]), be32(&b[4..])));
                }
                TcpOption::SackRange(blocks)
            }
            (kind::TS, 10) => TcpOption::Timestamp {
                tsval: be32(&data[..4]),
                tsecr: be32(&data[4..]),
            },
            (kind::MSS | kind::WS | kind::SACK_PERM | kind::SACK | kind::TS, _) => {
                return Err(Error::Malformed)
            }
            (k, _) => TcpOption::Unknown { kind: k, data },
        };
        Ok((rest, option))
    }

    /// Bytes this option takes when emitted.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::SackRange(b) => 2 + 8 * b.iter().flatten().count(),
            TcpOption::Timestamp { .. } => 10,
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option at the start of `buf`; returns the bytes written.
    /// `Truncated` if it does not fit; `Malformed` for an unknown option
    /// whose data is too long for a length byte.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if len > 255 {
            return Err(Error::Malformed);
        }
        let out = buf.get_mut(..len).ok_or(Error::Truncated)?;
        // `out` is exactly `len` bytes, so the fixed offsets below are in range.
        if let Some(l) = out.get_mut(1) {
            *l = len as u8;
        }
        match *self {
            TcpOption::EndOfList => out[0] = kind::END,
            TcpOption::NoOperation => out[0] = kind::NOP,
            TcpOption::MaxSegmentSize(v) => {
                out[0] = kind::MSS;
                out[2..4].copy_from_slice(&v.to_be_bytes());
            }
            TcpOption::WindowScale(v) => {
                out[0] = kind::WS;
                out[2] = v;
            }
            TcpOption::SackPermitted => out[0] = kind::SACK_PERM,
            TcpOption::SackRange(blocks) => {
                out[0] = kind::SACK;
                for (chunk, (l, r)) in out[2..].chunks_exact_mut(8).zip(blocks.iter().flatten()) {
                    chunk[..4].copy_from_slice(&l.to_be_bytes());
                    chunk[4..].copy_from_slice(&r.to_be_bytes());
                }
            }
            TcpOption::Timestamp { tsval, tsecr } => {
                out[0] = kind::TS;
                out[2..6].copy_from_slice(&tsval.to_be_bytes());
                out[6..10].copy_from_slice(&tsecr.to_be_bytes());
            }
            TcpOption::Unknown { kind, data } => {
                out[0] = kind;
                out[2..].copy_from_slice(data);
            }
        }
        Ok(len)
    }
}

/// Iterator over the options in a TCP header's option bytes.
///
/// Yields `Ok(option)` until the bytes run out or after `EndOfList`; on a
/// malformed option it yields one `Err` and then stops.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> TcpOptions<'a> {
    /// Iterate over `bytes` (the options part of a TCP header).
    pub fn new(bytes: &'a [u8]) -> TcpOptions<'a> {
        TcpOptions {
            rest: bytes,
            done: false,
        }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        match TcpOption::parse(self.rest) {
            Ok((rest, opt)) => {
                self.rest = rest;
                if opt == TcpOption::EndOfList {
                    self.done = true;
                }
                Some(Ok(opt))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for TcpOptions<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    // Linux SYN options: MSS 1460, SACK-permitted, timestamps, NOP, WS 7.
    const LINUX_SYN_OPTS: [u8; 20] = [
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x9a, 0x3b, 0x1c, 0x05, 0x00, 0x00, 0x00,
        0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn parse_linux_syn_options() {
        let opts: Vec<_> = TcpOptions::new(&LINUX_SYN_OPTS)
            .map(|o| o.unwrap())
            .collect();
        assert_eq!(
            opts,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamp {
                    tsval: 0x9a3b_1c05,
                    tsecr: 0
                },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        // emit them back
        let mut buf = [0u8; 20];
        let mut at = 0;
        for o in &opts {
            at += o.emit(&mut buf[at..]).unwrap();
        }
        assert_eq!(at, 20);
        assert_eq!(buf, LINUX_SYN_OPTS);
    }

    #[test]
    fn sack_blocks() {
        let o = TcpOption::SackRange([Some((1, 2)), Some((0xffff_fff0, 5)), None, None]);
        let mut buf = [0u8; 18];
        assert_eq!(o.emit(&mut buf).unwrap(), 18);
        assert_eq!(buf[..2], [5, 18]);
        let (rest, p) = TcpOption::parse(&buf).unwrap();
        assert!(rest.is_empty());
        assert_eq!(p, o);
        assert_eq!(o.emit(&mut buf[..17]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn end_of_list_stops() {
        let b = [1, 0, 0xff, 0xff];
        let v: Vec<_> = TcpOptions::new(&b).collect();
        assert_eq!(v, [Ok(TcpOption::NoOperation), Ok(TcpOption::EndOfList)]);
    }

    #[test]
    fn unknown_option() {
        let b = [0xfe, 4, 0xab, 0xcd];
        let (rest, o) = TcpOption::parse(&b).unwrap();
        assert!(rest.is_empty());
        assert_eq!(
            o,
            TcpOption::Unknown {
                kind: 0xfe,
                data: &[0xab, 0xcd]
            }
        );
        let mut out = [0u8; 4];
        assert_eq!(o.emit(&mut out).unwrap(), 4);
        assert_eq!(out, b);
    }

    #[test]
    fn length_zero() {
        let v: Vec<_> = TcpOptions::new(&[2, 0, 5, 0xb4]).collect();
        assert_eq!(v, [Err(Error::Malformed)]);
    }

    #[test]
    fn length_one() {
        let v: Vec<_> = TcpOptions::new(&[0xfe, 1, 1, 1]).collect();
        assert_eq!(v, [Err(Error::Malformed)]);
    }

    #[test]
    fn length_overrun() {
        let v: Vec<_> = TcpOptions::new(&[1, 8, 10, 0, 0, 0, 0]).collect();
        assert_eq!(v, [Ok(TcpOption::NoOperation), Err(Error::Malformed)]);
        // kind with no length byte at all
        let v: Vec<_> = TcpOptions::new(&[1, 1, 1, 2]).collect();
        assert_eq!(v.last(), Some(&Err(Error::Malformed)));
    }

    #[test]
    fn wrong_length_for_known_kind() {
        for b in [
            &[2u8, 3, 5][..],
            &[3, 4, 7, 0],
            &[4, 3, 0],
            &[5, 9, 0, 0, 0, 0, 0, 0, 0],
            &[5, 2],
            &[8, 8, 0, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(TcpOption::parse(b).unwrap_err(), Error::Malformed, "{b:?}");
        }
    }

    #[test]
    fn fuzz_no_panic() {
        crate::test_util::fuzz(7, 4000, &LINUX_SYN_OPTS, |b| {
            for o in TcpOptions::new(b).flatten() {
                let mut out = [0u8; 64];
                let _ = o.emit(&mut out);
            }
        });
    }
}
