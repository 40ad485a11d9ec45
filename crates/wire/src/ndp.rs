//! Neighbor Discovery options (RFC 4861 section 4.6).
//!
//! No-panic contract: [`NdpOption::new_checked`] checks, once, that the
//! option's type and length bytes are present, that the length is not zero
//! and that `length * 8` bytes fit in the buffer; after that no accessor
//! panics. The [`NdpOptions`] iterator yields an error on a zero length or
//! an overrun (RFC 4861 section 4.6: such packets must be discarded) and
//! then stops. [`NdpOptionRepr::parse`] never panics.

use core::net::Ipv6Addr;

use crate::ethernet::EthernetAddress;
use crate::ipv6::Ipv6Repr;
use crate::{Error, Result};

enum_with_unknown! {
    /// NDP option type.
    pub enum NdpOptionType(u8) {
        SourceLinkLayerAddr = 1,
        TargetLinkLayerAddr = 2,
        PrefixInformation = 3,
        RedirectedHeader = 4,
        Mtu = 5,
    }
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    /// Length in units of 8 octets, including type and length.
    pub const LENGTH: usize = 1;
    pub const DATA_START: usize = 2;
    // Link-layer address options.
    pub const LLADDR: Range<usize> = 2..8;
    // Prefix information.
    pub const PREFIX_LEN: usize = 2;
    pub const PREFIX_FLAGS: usize = 3;
    pub const VALID_LIFETIME: Range<usize> = 4..8;
    pub const PREFERRED_LIFETIME: Range<usize> = 8..12;
    pub const PREFIX: Range<usize> = 16..32;
    // MTU.
    pub const MTU: Range<usize> = 4..8;
    // Redirected header: 6 reserved bytes, then the quoted packet.
    pub const REDIRECTED: usize = 8;
}

const PREFIX_FLAG_ON_LINK: u8 = 0x80;
const PREFIX_FLAG_AUTONOMOUS: u8 = 0x40;
/// Length of a Prefix Information option.
pub const PREFIX_INFO_LEN: usize = 32;
/// Length of a link-layer address option for Ethernet.
pub const LLADDR_OPTION_LEN: usize = 8;

/// A view over one NDP option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NdpOption<T: AsRef<[u8]>> {
    buffer: T,
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    u32::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> NdpOption<T> {
    pub const fn new_unchecked(buffer: T) -> NdpOption<T> {
        NdpOption { buffer }
    }

    /// Wrap, checking the length byte (see the module doc).
    pub fn new_checked(buffer: T) -> Result<NdpOption<T>> {
        let o = Self::new_unchecked(buffer);
        o.check_len()?;
        Ok(o)
    }

    /// Fewer than 2 bytes or fewer than `length * 8`: `Truncated`;
    /// length 0: `Malformed`.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        let units = *b.get(field::LENGTH).ok_or(Error::Truncated)?;
        if units == 0 {
            return Err(Error::Malformed);
        }
        if b.len() < usize::from(units) * 8 {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn option_type(&self) -> NdpOptionType {
        NdpOptionType::from(self.buffer.as_ref().get(field::TYPE).copied().unwrap_or(0))
    }

    /// Option length in bytes (`length * 8`).
    pub fn option_len(&self) -> usize {
        usize::from(
            self.buffer
                .as_ref()
                .get(field::LENGTH)
                .copied()
                .unwrap_or(0),
        ) * 8
    }

    /// The option bytes after type and length, up to `option_len()`.
    pub fn data(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(field::DATA_START..self.option_len())
            .unwrap_or(&[])
    }

    /// The whole option (type and length included).
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref().get(..self.option_len()).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NdpOption<T> {
    pub fn set_option_type(&mut self, t: NdpOptionType) {
        self.buffer.as_mut()[field::TYPE] = t.into();
    }

    /// Set the length field, in units of 8 bytes.
    pub fn set_length_units(&mut self, units: u8) {
        self.buffer.as_mut()[field::LENGTH] = units;
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.option_len();
        self.buffer
            .as_mut()
            .get_mut(field::DATA_START..end)
            .unwrap_or(&mut [])
    }
}

/// The Prefix Information option (RFC 4861 section 4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NdpPrefixInformation {
    pub prefix_len: u8,
    /// L flag.
    pub on_link: bool,
    /// A flag (SLAAC).
    pub autonomous: bool,
    /// Seconds; 0xffffffff is infinity.
    pub valid_lifetime: u32,
    /// Seconds; 0xffffffff is infinity.
    pub preferred_lifetime: u32,
    pub prefix: Ipv6Addr,
}

/// One NDP option as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpOptionRepr<'a> {
    SourceLinkLayerAddr(EthernetAddress),
    TargetLinkLayerAddr(EthernetAddress),
    PrefixInformation(NdpPrefixInformation),
    /// The quoted packet of a Redirect: its IPv6 header and the bytes after it.
    RedirectedHeader {
        header: Ipv6Repr,
        data: &'a [u8],
    },
    Mtu(u32),
    /// Any other type; `data` excludes type and length.
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

impl<'a> NdpOptionRepr<'a> {
    /// Parse one option. Link-layer address options shorter than an
    /// Ethernet address, and Prefix Information / MTU options of the wrong
    /// length: `Malformed`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(opt: &NdpOption<&'a T>) -> Result<NdpOptionRepr<'a>> {
        opt.check_len()?;
        let b: &'a [u8] = opt.buffer.as_ref();
        let o = b.get(..opt.option_len()).ok_or(Error::Truncated)?;
        let mac = || {
            o.get(field::LLADDR)
                .and_then(EthernetAddress::from_bytes)
                .ok_or(Error::Malformed)
        };
        Ok(match opt.option_type() {
            NdpOptionType::SourceLinkLayerAddr => NdpOptionRepr::SourceLinkLayerAddr(mac()?),
            NdpOptionType::TargetLinkLayerAddr => NdpOptionRepr::TargetLinkLayerAddr(mac()?),
            NdpOptionType::PrefixInformation => {
                if o.len() != PREFIX_INFO_LEN {
                    return Err(Error::Malformed);
                }
                let flags = o[field::PREFIX_FLAGS];
                let mut prefix = [0u8; 16];
                prefix.copy_from_slice(&o[field::PREFIX]);
                NdpOptionRepr::PrefixInformation(NdpPrefixInformation {
                    prefix_len: o[field::PREFIX_LEN],
                    on_link: flags & PREFIX_FLAG_ON_LINK != 0,
                    autonomous: flags & PREFIX_FLAG_AUTONOMOUS != 0,
                    valid_lifetime: be32(&o[field::VALID_LIFETIME]),
                    preferred_lifetime: be32(&o[field::PREFERRED_LIFETIME]),
                    prefix: Ipv6Addr::from(prefix),
                })
            }
            NdpOptionType::RedirectedHeader => {
                let quoted = o.get(field::REDIRECTED..).ok_or(Error::Malformed)?;
                let (header, data) = Ipv6Repr::parse_quoted(quoted)?;
                NdpOptionRepr::RedirectedHeader { header, data }
            }
            NdpOptionType::Mtu => {
                if o.len() != 8 {
                    return Err(Error::Malformed);
                }
                NdpOptionRepr::Mtu(be32(&o[field::MTU]))
            }
            NdpOptionType::Unknown(kind) => NdpOptionRepr::Unknown {
                kind,
                data: o.get(field::DATA_START..).unwrap_or(&[]),
            },
        })
    }

    /// Bytes the option takes when emitted (a multiple of 8).
    pub fn buffer_len(&self) -> usize {
        let raw = match self {
            NdpOptionRepr::SourceLinkLayerAddr(_) | NdpOptionRepr::TargetLinkLayerAddr(_) => {
                LLADDR_OPTION_LEN
            }
            NdpOptionRepr::PrefixInformation(_) => PREFIX_INFO_LEN,
            NdpOptionRepr::RedirectedHeader { header, data } => {
                field::REDIRECTED + header.buffer_len() + data.len()
            }
            NdpOptionRepr::Mtu(_) => 8,
            NdpOptionRepr::Unknown { data, .. } => field::DATA_START + data.len(),
        };
        raw.div_ceil(8) * 8
    }

    /// Write the option (zero-padded to a multiple of 8) at the start of
    /// `buf`; returns the bytes written. `Truncated` if it does not fit,
    /// `Malformed` if it is longer than 255 * 8 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if len > 255 * 8 {
            return Err(Error::Malformed);
        }
        let o = buf.get_mut(..len).ok_or(Error::Truncated)?;
        o.fill(0);
        o[field::LENGTH] = (len / 8) as u8;
        let kind = match *self {
            NdpOptionRepr::SourceLinkLayerAddr(mac) => {
                o[field::LLADDR].copy_from_slice(&mac.0);
                NdpOptionType::SourceLinkLayerAddr
            }
            NdpOptionRepr::TargetLinkLayerAddr(mac) => {
                o[field::LLADDR].copy_from_slice(&mac.0);
                NdpOptionType::TargetLinkLayerAddr
            }
            NdpOptionRepr::PrefixInformation(p) => {
                o[field::PREFIX_LEN] = p.prefix_len;
                o[field::PREFIX_FLAGS] = if p.on_link { PREFIX_FLAG_ON_LINK } else { 0 }
                    | if p.autonomous {
                        PREFIX_FLAG_AUTONOMOUS
                    } else {
                        0
                    };
                o[field::VALID_LIFETIME].copy_from_slice(&p.valid_lifetime.to_be_bytes());
                o[field::PREFERRED_LIFETIME].copy_from_slice(&p.preferred_lifetime.to_be_bytes());
                o[field::PREFIX].copy_from_slice(&p.prefix.octets());
                NdpOptionType::PrefixInformation
            }
            NdpOptionRepr::RedirectedHeader { header, data } => {
                let q = &mut o[field::REDIRECTED..];
                let hl = header.buffer_len();
                header.emit(&mut crate::ipv6::Ipv6Packet::new_unchecked(&mut q[..hl]));
                q[hl..hl + data.len()].copy_from_slice(data);
                NdpOptionType::RedirectedHeader
            }
            NdpOptionRepr::Mtu(mtu) => {
                o[field::MTU].copy_from_slice(&mtu.to_be_bytes());
                NdpOptionType::Mtu
            }
            NdpOptionRepr::Unknown { kind, data } => {
                o[field::DATA_START..field::DATA_START + data.len()].copy_from_slice(data);
                NdpOptionType::Unknown(kind)
            }
        };
        o[field::TYPE] = kind.into();
        Ok(len)
    }
}

/// The 8-byte Source Link-Layer Address option for `mac`, ready to pass as
/// NDP `options`.
pub fn source_lladdr_option(mac: EthernetAddress) -> [u8; LLADDR_OPTION_LEN] {
    lladdr_option(NdpOptionType::SourceLinkLayerAddr, mac)
}

/// The 8-byte Target Link-Layer Address option for `mac`.
pub fn target_lladdr_option(mac: EthernetAddress) -> [u8; LLADDR_OPTION_LEN] {
    lladdr_option(NdpOptionType::TargetLinkLayerAddr, mac)
}

fn lladdr_option(kind: NdpOptionType, mac: EthernetAddress) -> [u8; LLADDR_OPTION_LEN] {
    let m = mac.0;
    [kind.into(), 1, m[0], m[1], m[2], m[3], m[4], m[5]]
}

/// Iterator over NDP options.
///
/// Yields every option in order; on a zero length or an option that runs
/// past the end, yields one `Err` and stops. Options are walked with their
/// raw length; an option that parses but whose contents are malformed for
/// its type yields an `Err` for that option too.
#[derive(Debug, Clone)]
pub struct NdpOptions<'a> {
    rest: &'a [u8],
    done: bool,
}

impl<'a> NdpOptions<'a> {
    pub fn new(bytes: &'a [u8]) -> NdpOptions<'a> {
        NdpOptions {
            rest: bytes,
            done: false,
        }
    }
}

impl<'a> Iterator for NdpOptions<'a> {
    type Item = Result<NdpOptionRepr<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.rest.is_empty() {
            return None;
        }
        let opt = match NdpOption::new_checked(self.rest) {
            Ok(o) => o,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let len = opt.option_len();
        let r = NdpOptionRepr::parse(&opt);
        self.rest = self.rest.get(len..).unwrap_or(&[]);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}

impl core::iter::FusedIterator for NdpOptions<'_> {}

/// Check that `bytes` is a well-formed option list: no zero length, no
/// overrun, every known option well formed.
pub fn check_options(bytes: &[u8]) -> Result<()> {
    NdpOptions::new(bytes).try_for_each(|o| o.map(|_| ()))
}

/// The first Source (`target == false`) or Target (`true`) Link-Layer
/// Address option in a well-formed option list.
pub fn find_lladdr(bytes: &[u8], target: bool) -> Option<EthernetAddress> {
    NdpOptions::new(bytes).find_map(|o| match o {
        Ok(NdpOptionRepr::SourceLinkLayerAddr(m)) if !target => Some(m),
        Ok(NdpOptionRepr::TargetLinkLayerAddr(m)) if target => Some(m),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::IpProtocol;
    use std::vec::Vec;

    const MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

    #[test]
    fn lladdr() {
        let b = source_lladdr_option(MAC);
        assert_eq!(b, [1, 1, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        let o = NdpOption::new_checked(&b[..]).unwrap();
        assert_eq!(o.option_type(), NdpOptionType::SourceLinkLayerAddr);
        assert_eq!(
            NdpOptionRepr::parse(&o).unwrap(),
            NdpOptionRepr::SourceLinkLayerAddr(MAC)
        );
        let mut out = [0u8; 8];
        NdpOptionRepr::TargetLinkLayerAddr(MAC)
            .emit(&mut out)
            .unwrap();
        assert_eq!(out, target_lladdr_option(MAC));
        assert_eq!(find_lladdr(&out, true), Some(MAC));
        assert_eq!(find_lladdr(&out, false), None);
    }

    #[test]
    fn prefix_information_round_trip() {
        let p = NdpOptionRepr::PrefixInformation(NdpPrefixInformation {
            prefix_len: 64,
            on_link: true,
            autonomous: true,
            valid_lifetime: 2_592_000,
            preferred_lifetime: 604_800,
            prefix: "2001:db8:1::".parse().unwrap(),
        });
        let mut b = [0u8; 32];
        assert_eq!(p.emit(&mut b).unwrap(), 32);
        assert_eq!(
            b,
            [
                3, 4, 64, 0xc0, 0x00, 0x27, 0x8d, 0x00, 0x00, 0x09, 0x3a, 0x80, 0, 0, 0, 0, 0x20,
                0x01, 0x0d, 0xb8, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        let o = NdpOption::new_checked(&b[..]).unwrap();
        assert_eq!(NdpOptionRepr::parse(&o).unwrap(), p);
    }

    #[test]
    fn mtu_and_unknown_and_redirected() {
        let opts = [
            NdpOptionRepr::Mtu(1500),
            NdpOptionRepr::Unknown {
                kind: 25,
                data: &[0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            },
            NdpOptionRepr::RedirectedHeader {
                header: Ipv6Repr {
                    src_addr: "2001:db8::1".parse().unwrap(),
                    dst_addr: "2001:db8::2".parse().unwrap(),
                    next_header: IpProtocol::Udp,
                    payload_len: 8,
                    hop_limit: 64,
                    traffic_class: 0,
                    flow_label: 0,
                },
                data: &[0, 53, 0, 53, 0, 8, 0, 0],
            },
        ];
        let mut buf = [0u8; 128];
        let mut at = 0;
        for o in &opts {
            at += o.emit(&mut buf[at..]).unwrap();
        }
        assert_eq!(at, 8 + 16 + 56);
        let parsed: Vec<_> = NdpOptions::new(&buf[..at]).map(|o| o.unwrap()).collect();
        assert_eq!(parsed, opts);
        assert!(check_options(&buf[..at]).is_ok());
    }

    #[test]
    fn zero_length() {
        let b = [1u8, 0, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        assert_eq!(
            NdpOption::new_checked(&b[..]).unwrap_err(),
            Error::Malformed
        );
        let v: Vec<_> = NdpOptions::new(&b).collect();
        assert_eq!(v, [Err(Error::Malformed)]);
        // A zero-length option after a good one
        let mut b2 = source_lladdr_option(MAC).to_vec();
        b2.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
        let v: Vec<_> = NdpOptions::new(&b2).collect();
        assert_eq!(
            v,
            [
                Ok(NdpOptionRepr::SourceLinkLayerAddr(MAC)),
                Err(Error::Malformed)
            ]
        );
        assert_eq!(check_options(&b2).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn overrun() {
        let b = [3u8, 4, 64, 0xc0, 0, 0, 0, 0];
        assert_eq!(
            NdpOption::new_checked(&b[..]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(check_options(&b).unwrap_err(), Error::Truncated);
        for len in 0..2 {
            assert_eq!(
                NdpOption::new_checked(&b[..len]).unwrap_err(),
                Error::Truncated
            );
        }
    }

    #[test]
    fn wrong_length_for_type() {
        // prefix information with length 1
        let b = [3u8, 1, 64, 0xc0, 0, 0, 0, 0];
        assert_eq!(check_options(&b).unwrap_err(), Error::Malformed);
        // MTU with length 2
        let b = [5u8, 2, 0, 0, 0, 0, 5, 0xdc, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(check_options(&b).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn fuzz_no_panic() {
        let mut valid = source_lladdr_option(MAC).to_vec();
        valid.extend_from_slice(&[5, 1, 0, 0, 0, 0, 5, 0xdc]);
        crate::test_util::fuzz(11, 4000, &valid, |b| {
            for o in NdpOptions::new(b).flatten() {
                let mut out = [0u8; 256];
                let _ = o.emit(&mut out);
            }
            let _ = find_lladdr(b, false);
            if let Ok(o) = NdpOption::new_checked(&b[..]) {
                let _ = (o.data(), o.as_bytes(), NdpOptionRepr::parse(&o));
            }
        });
    }
}
