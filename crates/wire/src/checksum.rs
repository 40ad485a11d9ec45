//! Internet checksum (RFC 1071) helpers and incremental update (RFC 1624).
//!
//! All functions here are total: they never panic, for any input.
//!
//! Sums are returned *not inverted*: `data` returns the folded one's-complement
//! sum of the bytes. The value written into a header checksum field is
//! `!combine(&[...])`, and a header verifies when
//! `combine(&[...including the checksum field...]) == 0xffff`.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ip::IpProtocol;

/// Fold a 64-bit one's-complement accumulator into 16 bits.
#[inline]
const fn fold(mut acc: u64) -> u16 {
    // 2^16 ≡ 1 (mod 2^16 - 1), so adding the halves preserves the sum.
    // Two 32-bit folds leave at most 0xffff_ffff (the first at most
    // 0x1_ffff_fffe); two 16-bit folds then leave at most 0xffff (the first
    // at most 0x1_fffe).
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// One's-complement add with end-around carry on 64 bits.
#[inline]
const fn add64(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    s + carry as u64
}

/// One's-complement sum of `bytes` taken as big-endian 16-bit words, folded
/// to 16 bits and not inverted. An odd trailing byte is padded with zero.
#[inline]
pub fn data(bytes: &[u8]) -> u16 {
    // An IPv4 header without options, summed on every packet both ways:
    // two words and a half, no loop.
    if let Some(h) = bytes.first_chunk::<20>() {
        if bytes.len() == 20 {
            return header20(h);
        }
    }
    data_any(bytes)
}

fn data_any(bytes: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    // 32 bytes per step in four independent 64-bit lanes. Since
    // 2^64 ≡ 1 (mod 2^16 - 1), summing big-endian u64 words with end-around
    // carry gives the same folded result as summing 16-bit words.
    let mut big = bytes.chunks_exact(32);
    let (mut a, mut b, mut c, mut d) = (0u64, 0u64, 0u64, 0u64);
    for chunk in &mut big {
        let mut w = [0u8; 8];
        w.copy_from_slice(&chunk[0..8]);
        a = add64(a, u64::from_be_bytes(w));
        w.copy_from_slice(&chunk[8..16]);
        b = add64(b, u64::from_be_bytes(w));
        w.copy_from_slice(&chunk[16..24]);
        c = add64(c, u64::from_be_bytes(w));
        w.copy_from_slice(&chunk[24..32]);
        d = add64(d, u64::from_be_bytes(w));
    }
    acc = add64(acc, a);
    acc = add64(acc, b);
    acc = add64(acc, c);
    acc = add64(acc, d);
    let mut words = big.remainder().chunks_exact(8);
    for chunk in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        acc = add64(acc, u64::from_be_bytes(w));
    }
    let mut pairs = words.remainder().chunks_exact(2);
    for pair in &mut pairs {
        acc = add64(acc, u64::from(u16::from_be_bytes([pair[0], pair[1]])));
    }
    if let [last] = pairs.remainder() {
        acc = add64(acc, u64::from(*last) << 8);
    }
    fold(acc)
}

/// [`data`] of exactly 20 bytes.
#[inline(always)]
fn header20(h: &[u8; 20]) -> u16 {
    let (a, rest) = h.split_at(8);
    let (b, c) = rest.split_at(8);
    let word = |w: &[u8]| -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        u64::from_be_bytes(x)
    };
    let mut tail = [0u8; 4];
    tail.copy_from_slice(c);
    let acc = add64(word(a), word(b));
    fold(add64(acc, u64::from(u32::from_be_bytes(tail))))
}

/// One's-complement sum of several partial sums (not inverted).
#[inline(always)]
pub fn combine(sums: &[u16]) -> u16 {
    if sums.len() <= 0x1_0001 {
        // At most 65537 words sum below 2^32, and two folds bring such a
        // sum to 16 bits: the first leaves at most 0x1fffe, the second at
        // most 0xffff.  (The callers pass a few words, every packet.)
        let mut acc: u32 = 0;
        for &s in sums {
            acc += u32::from(s);
        }
        let acc = (acc & 0xffff) + (acc >> 16);
        return ((acc & 0xffff) + (acc >> 16)) as u16;
    }
    let mut acc: u64 = 0;
    for &s in sums {
        acc += u64::from(s);
    }
    fold(acc)
}

/// Sum of the IPv4 pseudo header (RFC 793 / RFC 768): source, destination,
/// zero, protocol, and the upper-layer length.
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, proto: IpProtocol, length: u32) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let mut acc: u64 = 0;
    acc += u64::from(u16::from_be_bytes([s[0], s[1]]));
    acc += u64::from(u16::from_be_bytes([s[2], s[3]]));
    acc += u64::from(u16::from_be_bytes([d[0], d[1]]));
    acc += u64::from(u16::from_be_bytes([d[2], d[3]]));
    acc += u64::from(u8::from(proto));
    acc += u64::from(length >> 16) + u64::from(length & 0xffff);
    fold(acc)
}

/// Sum of the IPv6 pseudo header (RFC 8200 section 8.1): source,
/// destination, 32-bit upper-layer length, zeros, next header.
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, proto: IpProtocol, length: u32) -> u16 {
    let mut acc: u64 = 0;
    for w in src.segments() {
        acc += u64::from(w);
    }
    for w in dst.segments() {
        acc += u64::from(w);
    }
    acc += u64::from(u8::from(proto));
    acc += u64::from(length >> 16) + u64::from(length & 0xffff);
    fold(acc)
}

/// Pseudo header sum for either family. Mixed families (a caller bug) are
/// summed as IPv4-mapped IPv6 addresses rather than panicking.
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, proto: IpProtocol, length: u32) -> u16 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => pseudo_header_v4(s, d, proto, length),
        (IpAddr::V6(s), IpAddr::V6(d)) => pseudo_header_v6(s, d, proto, length),
        (s, d) => pseudo_header_v6(&to_v6(s), &to_v6(d), proto, length),
    }
}

fn to_v6(a: &IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => *a,
    }
}

/// Incremental checksum update (RFC 1624, equation 3):
/// `HC' = ~(~HC + ~m + m')`.
///
/// `old_csum` is the value of the checksum field as stored in the header,
/// `old_word`/`new_word` the 16-bit field that changed. Returns the new value
/// of the checksum field.
pub fn update(old_csum: u16, old_word: u16, new_word: u16) -> u16 {
    !combine(&[!old_csum, !old_word, new_word])
}

/// Incremental update for a 32-bit field (e.g. an IPv4 address in a NAT),
/// applied as two 16-bit updates.
pub fn update_u32(old_csum: u16, old: u32, new: u32) -> u16 {
    let c = update(old_csum, (old >> 16) as u16, (new >> 16) as u16);
    update(c, old as u16, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Reference: plain 16-bit word loop.
    fn slow(bytes: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        let mut i = 0;
        while i + 1 < bytes.len() {
            acc += u32::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
            i += 2;
        }
        if i < bytes.len() {
            acc += u32::from(bytes[i]) << 8;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn fold_reaches_16_bits_from_any_sum() {
        let reference = |mut acc: u64| {
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let edges = [
            0,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0xffff_ffff,
            0x1_0000_0000,
            0x1_ffff_fffe,
            0xffff_ffff_0000_ffff,
            0xffff_fffe_ffff_ffff,
            u64::MAX,
        ];
        for acc in edges.into_iter().chain((0..10_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })) {
            assert_eq!(fold(acc), reference(acc), "{acc:#x}");
        }
    }

    #[test]
    fn combine_folds_every_length() {
        let reference = |sums: &[u16]| {
            let mut acc: u64 = sums.iter().map(|&s| u64::from(s)).sum();
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        };
        let mut x: u32 = 0x9e37_79b9;
        let mut words = Vec::new();
        for len in 0..64 {
            words.clear();
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                words.push(x as u16);
            }
            assert_eq!(combine(&words), reference(&words), "len {len}");
        }
        // The largest sums on either side of the 32-bit path's limit.
        for len in [0x1_0000, 0x1_0001, 0x1_0002] {
            let all_ones: Vec<u16> = core::iter::repeat_n(0xffff, len).collect();
            assert_eq!(combine(&all_ones), reference(&all_ones), "len {len}");
            let mut mixed: Vec<u16> = core::iter::repeat_n(0xfffe, len).collect();
            mixed[0] = 1;
            assert_eq!(combine(&mixed), reference(&mixed), "len {len}");
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        assert_eq!(
            data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn fast_matches_slow() {
        let mut x: u32 = 0x1234_5678;
        let mut buf = Vec::new();
        for len in 0..300 {
            buf.clear();
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                buf.push(x as u8);
            }
            assert_eq!(data(&buf), slow(&buf), "len {len}");
        }
        assert_eq!(data(&[0xff; 1000]), slow(&[0xff; 1000]));
        // The 20-byte header path, with carries in every word.
        for _ in 0..5000 {
            let h: [u8; 20] = core::array::from_fn(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x as u8) | 0xc0
            });
            assert_eq!(data(&h), slow(&h));
        }
        assert_eq!(data(&[0xff; 20]), slow(&[0xff; 20]));
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
    }

    #[test]
    fn rfc1624_update() {
        // Header with checksum filled; change one word, compare with a full recompute.
        let mut hdr = [
            0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let c = !data(&hdr);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
        // decrement TTL
        let old = u16::from_be_bytes([hdr[8], hdr[9]]);
        hdr[8] -= 1;
        let new = u16::from_be_bytes([hdr[8], hdr[9]]);
        let inc = update(c, old, new);
        hdr[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, !data(&hdr));
        // 32-bit update of the source address.
        hdr[10..12].copy_from_slice(&inc.to_be_bytes());
        let old = u32::from_be_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
        let new = 0x0a00_0001u32;
        hdr[12..16].copy_from_slice(&new.to_be_bytes());
        let inc = update_u32(inc, old, new);
        hdr[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, !data(&hdr));
    }

    #[test]
    fn pseudo_headers() {
        let s = Ipv4Addr::new(10, 0, 0, 1);
        let d = Ipv4Addr::new(10, 0, 0, 2);
        let mut ph = Vec::new();
        ph.extend_from_slice(&s.octets());
        ph.extend_from_slice(&d.octets());
        ph.extend_from_slice(&[0, 6, 0, 40]);
        assert_eq!(pseudo_header_v4(&s, &d, IpProtocol::Tcp, 40), data(&ph));

        let s6: Ipv6Addr = "fe80::1".parse().unwrap();
        let d6: Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
        let mut ph = Vec::new();
        ph.extend_from_slice(&s6.octets());
        ph.extend_from_slice(&d6.octets());
        ph.extend_from_slice(&70000u32.to_be_bytes());
        ph.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(
            pseudo_header_v6(&s6, &d6, IpProtocol::Icmpv6, 70000),
            data(&ph)
        );
    }
}
