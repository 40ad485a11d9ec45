//! Parsers of single values. Each returns the typed value, or the reason the
//! text is not one, worded to follow the quoted value in a message:
//! `[port0] addr: "10.99.1.300" is not an IPv4 address`.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::types::CoreSet;

pub(crate) type Reason = String;

/// `0` or `1` (F-Stack's switches).
pub(crate) fn flag(v: &str) -> Result<bool, Reason> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err("must be 0 or 1".into()),
    }
}

/// A decimal integer in `min..=max`.
pub(crate) fn int(v: &str, min: u64, max: u64) -> Result<u64, Reason> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("is not an integer".into());
    }
    match v.parse::<i128>() {
        Ok(n) if n >= i128::from(min) && n <= i128::from(max) => Ok(n as u64),
        _ => Err(format!("is out of range ({min}..={max})")),
    }
}

/// [`int`] narrowed to `u32`.
pub(crate) fn int_u32(v: &str, min: u32, max: u32) -> Result<u32, Reason> {
    int(v, min.into(), max.into()).map(|n| n as u32)
}

/// A hexadecimal number, with or without `0x`.
pub(crate) fn hex_u64(v: &str) -> Result<u64, Reason> {
    let h = strip_0x(v);
    if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("is not a hexadecimal number".into());
    }
    u64::from_str_radix(h, 16).map_err(|_| "is larger than 64 bits".into())
}

fn strip_0x(v: &str) -> &str {
    v.strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .unwrap_or(v)
}

/// The most CPUs a mask may name (DPDK's largest `RTE_MAX_LCORE`).
pub(crate) const MAX_CORES: u32 = 1024;

/// A hexadecimal CPU mask such as `f00` or `0x3`: bit N selects CPU N.
pub(crate) fn core_mask(v: &str) -> Result<CoreSet, Reason> {
    let h = strip_0x(v);
    if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("is not a hexadecimal CPU mask".into());
    }
    let mut cores = Vec::new();
    for (i, c) in h.bytes().rev().enumerate() {
        let nibble = (c as char).to_digit(16).unwrap_or(0);
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                let core = (i as u64) * 4 + bit;
                if core >= u64::from(MAX_CORES) {
                    return Err(format!(
                        "selects CPU {core}, above the maximum {}",
                        MAX_CORES - 1
                    ));
                }
                cores.push(core as u32);
            }
        }
    }
    if cores.is_empty() {
        return Err("selects no CPU".into());
    }
    cores.sort_unstable();
    Ok(CoreSet::from_sorted(cores))
}

/// F-Stack's list of numbers and ranges, `0-3,5`: sorted, each number once,
/// each at most `max`.
pub(crate) fn num_list(v: &str, max: u32) -> Result<Vec<u32>, Reason> {
    let mut out = Vec::new();
    if v.trim().is_empty() {
        return Err("is an empty list".into());
    }
    for item in v.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err("has an empty item (two commas, or a comma at an end)".into());
        }
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (item, item),
        };
        let num = |s: &str| -> Result<u32, Reason> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "has an item {item:?} that is not a number or a range"
                ));
            }
            match s.parse::<u64>() {
                Ok(n) if n <= u64::from(max) => Ok(n as u32),
                _ => Err(format!("has {s} above the maximum {max}")),
            }
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            return Err(format!("has a range {item:?} that goes backwards"));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    if let Some(w) = out.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("lists {} twice", w[0]));
    }
    Ok(out)
}

/// [`num_list`] of 16-bit numbers (ports).
pub(crate) fn num_list_u16(v: &str, min: u16) -> Result<Vec<u16>, Reason> {
    let list = num_list(v, u16::MAX.into())?;
    if let Some(&bad) = list.iter().find(|&&n| n < u32::from(min)) {
        return Err(format!("has {bad} below the minimum {min}"));
    }
    Ok(list.into_iter().map(|n| n as u16).collect())
}

/// A dotted-quad IPv4 address.
pub(crate) fn ipv4(v: &str) -> Result<Ipv4Addr, Reason> {
    v.parse().map_err(|_| "is not an IPv4 address".into())
}

/// A contiguous IPv4 netmask; returns it with its prefix length.
pub(crate) fn netmask(v: &str) -> Result<(Ipv4Addr, u8), Reason> {
    let m = ipv4(v)?;
    let bits = u32::from(m);
    let len = bits.leading_ones();
    if bits.checked_shl(len).unwrap_or(0) != 0 {
        return Err("is not a contiguous netmask".into());
    }
    Ok((m, len as u8))
}

/// The netmask of a prefix length.
pub(crate) fn mask_of(prefix_len: u8) -> Ipv4Addr {
    Ipv4Addr::from(
        u32::MAX
            .checked_shl(32 - u32::from(prefix_len))
            .unwrap_or(0),
    )
}

/// An IPv4 address with an optional `/prefix` (ustack's shorthand for
/// `addr` plus `netmask`).
pub(crate) fn ipv4_cidr(v: &str) -> Result<(Ipv4Addr, Option<u8>), Reason> {
    match v.split_once('/') {
        None => Ok((ipv4(v)?, None)),
        Some((a, p)) => {
            let a = ipv4(a.trim())?;
            let p = int(p.trim(), 0, 32).map_err(|_| "has a /prefix outside 0..=32".to_string())?;
            Ok((a, Some(p as u8)))
        }
    }
}

/// An IPv6 address.
pub(crate) fn ipv6(v: &str) -> Result<Ipv6Addr, Reason> {
    v.parse().map_err(|_| "is not an IPv6 address".into())
}

/// An IPv6 address with an optional `/prefix`.
pub(crate) fn ipv6_cidr(v: &str) -> Result<(Ipv6Addr, Option<u8>), Reason> {
    match v.split_once('/') {
        None => Ok((ipv6(v)?, None)),
        Some((a, p)) => {
            let a = ipv6(a.trim())?;
            let p =
                int(p.trim(), 1, 128).map_err(|_| "has a /prefix outside 1..=128".to_string())?;
            Ok((a, Some(p as u8)))
        }
    }
}

/// Items of a `;`-separated list, trimmed; empty items (a trailing `;`)
/// are skipped.
pub(crate) fn semicolon_items(v: &str) -> impl Iterator<Item = &str> {
    v.split(';').map(str::trim).filter(|s| !s.is_empty())
}

/// An Ethernet address `aa:bb:cc:dd:ee:ff` (also `-` separated) of a unicast
/// interface.
pub(crate) fn mac(v: &str) -> Result<[u8; 6], Reason> {
    let bad = || Reason::from("is not a MAC address (aa:bb:cc:dd:ee:ff)");
    let sep = if v.contains('-') { '-' } else { ':' };
    let mut out = [0u8; 6];
    let mut n = 0;
    for part in v.split(sep) {
        if n == 6 || part.len() != 2 {
            return Err(bad());
        }
        out[n] = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        n += 1;
    }
    if n != 6 {
        return Err(bad());
    }
    if out[0] & 1 != 0 {
        return Err("is a multicast MAC address, not an interface's".into());
    }
    if out == [0; 6] {
        return Err("is the all-zero MAC address".into());
    }
    Ok(out)
}

/// A probability in `0..=1`.
pub(crate) fn probability(v: &str) -> Result<f64, Reason> {
    let p: f64 = v.parse().map_err(|_| Reason::from("is not a number"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err("is out of range (0..=1)".into());
    }
    Ok(p)
}

/// A byte count with an optional binary suffix: `K` (KiB), `M` (MiB), `G`
/// (GiB). `None` suffix means the bare number. Returns (number, multiplier).
pub(crate) fn size_with_suffix(v: &str) -> Result<(u64, Option<u64>), Reason> {
    let bad = || Reason::from("is not a number with an optional K, M or G suffix");
    let (digits, mult) = match v.as_bytes().last() {
        Some(b'k' | b'K') => (&v[..v.len() - 1], Some(1u64 << 10)),
        Some(b'm' | b'M') => (&v[..v.len() - 1], Some(1u64 << 20)),
        Some(b'g' | b'G') => (&v[..v.len() - 1], Some(1u64 << 30)),
        _ => (v, None),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    Ok((n, mult))
}

/// A byte count: a number of bytes, or a number with a `K`/`M`/`G` suffix,
/// in `min..=max` bytes.
pub(crate) fn bytes(v: &str, min: u64, max: u64) -> Result<u64, Reason> {
    let (n, mult) = size_with_suffix(v)?;
    match n.checked_mul(mult.unwrap_or(1)) {
        Some(b) if (min..=max).contains(&b) => Ok(b),
        _ => Err(format!("is out of range ({min}..={max} bytes)")),
    }
}

/// The longest interface name Linux takes (IFNAMSIZ - 1).
pub(crate) const IFNAME_MAX: usize = 15;

/// A network interface name as Linux accepts it.
pub(crate) fn ifname(v: &str) -> Result<String, Reason> {
    if v.is_empty() {
        return Err("is an empty interface name".into());
    }
    if v.len() > IFNAME_MAX {
        return Err(format!("is longer than {IFNAME_MAX} bytes (IFNAMSIZ)"));
    }
    if v == "." || v == ".." {
        return Err("is not an interface name".into());
    }
    if let Some(c) = v
        .chars()
        .find(|c| c.is_whitespace() || *c == '/' || *c == ':')
    {
        return Err(format!("contains {c:?}, which interface names may not"));
    }
    Ok(v.to_string())
}

/// A string that must not be empty.
pub(crate) fn non_empty(v: &str) -> Result<String, Reason> {
    if v.is_empty() {
        return Err("is empty".into());
    }
    Ok(v.to_string())
}

/// The edit distance of two short strings, counting a swap of two
/// neighbouring characters as one edit (for "did you mean").
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate closest to `word` (ignoring case), if it is close enough to
/// be a typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let word = word.to_lowercase();
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&word, &c.to_lowercase()), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_ints() {
        assert_eq!(flag("1"), Ok(true));
        assert_eq!(flag("0"), Ok(false));
        assert_eq!(flag("yes").unwrap_err(), "must be 0 or 1");
        assert_eq!(int("42", 1, 100), Ok(42));
        assert_eq!(int("0", 1, 100).unwrap_err(), "is out of range (1..=100)");
        assert_eq!(int("-1", 0, 100).unwrap_err(), "is out of range (0..=100)");
        assert_eq!(int("1e3", 0, 100).unwrap_err(), "is not an integer");
        assert_eq!(int("", 0, 100).unwrap_err(), "is not an integer");
        assert_eq!(
            int("99999999999999999999999999", 0, 100).unwrap_err(),
            "is out of range (0..=100)"
        );
        assert_eq!(hex_u64("0x7f0000000000"), Ok(0x7f00_0000_0000));
        assert!(hex_u64("0xg").is_err());
    }

    #[test]
    fn core_masks() {
        assert_eq!(core_mask("f00").unwrap().as_slice(), &[8, 9, 10, 11]);
        assert_eq!(core_mask("0x3").unwrap().as_slice(), &[0, 1]);
        assert_eq!(core_mask("0X1").unwrap().as_slice(), &[0]);
        assert_eq!(core_mask("0").unwrap_err(), "selects no CPU");
        assert_eq!(
            core_mask("0x").unwrap_err(),
            "is not a hexadecimal CPU mask"
        );
        assert_eq!(
            core_mask("fg").unwrap_err(),
            "is not a hexadecimal CPU mask"
        );
        let wide = format!("1{}", "0".repeat(31));
        assert_eq!(core_mask(&wide).unwrap().as_slice(), &[124]);
        let too_wide = format!("1{}", "0".repeat(256));
        assert!(core_mask(&too_wide)
            .unwrap_err()
            .contains("above the maximum 1023"));
    }

    #[test]
    fn lists() {
        assert_eq!(num_list("0-3,5", 100), Ok(vec![0, 1, 2, 3, 5]));
        assert_eq!(num_list(" 7 , 1 - 2 ", 100), Ok(vec![1, 2, 7]));
        assert_eq!(num_list("3", 100), Ok(vec![3]));
        assert_eq!(
            num_list("3-1", 100).unwrap_err(),
            "has a range \"3-1\" that goes backwards"
        );
        assert_eq!(
            num_list("1,,2", 100).unwrap_err(),
            "has an empty item (two commas, or a comma at an end)"
        );
        assert_eq!(
            num_list("1,x", 100).unwrap_err(),
            "has an item \"x\" that is not a number or a range"
        );
        assert_eq!(num_list("1-3,2", 100).unwrap_err(), "lists 2 twice");
        assert_eq!(
            num_list("200", 100).unwrap_err(),
            "has 200 above the maximum 100"
        );
        assert_eq!(num_list("", 100).unwrap_err(), "is an empty list");
        assert_eq!(
            num_list_u16("0,80", 1).unwrap_err(),
            "has 0 below the minimum 1"
        );
    }

    #[test]
    fn addresses() {
        assert_eq!(ipv4("10.0.0.1"), Ok(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(ipv4("10.0.0.256").is_err());
        assert!(ipv4("010.0.0.1").is_err());
        assert_eq!(
            netmask("255.255.255.0"),
            Ok((Ipv4Addr::new(255, 255, 255, 0), 24))
        );
        assert_eq!(netmask("0.0.0.0"), Ok((Ipv4Addr::UNSPECIFIED, 0)));
        assert_eq!(netmask("255.255.255.255"), Ok((Ipv4Addr::BROADCAST, 32)));
        assert_eq!(
            netmask("255.255.225.0").unwrap_err(),
            "is not a contiguous netmask"
        );
        assert_eq!(
            netmask("0.255.255.255").unwrap_err(),
            "is not a contiguous netmask"
        );
        assert_eq!(mask_of(24), Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(mask_of(0), Ipv4Addr::UNSPECIFIED);
        assert_eq!(mask_of(32), Ipv4Addr::BROADCAST);
        assert_eq!(
            ipv4_cidr("10.0.0.2/24"),
            Ok((Ipv4Addr::new(10, 0, 0, 2), Some(24)))
        );
        assert!(ipv4_cidr("10.0.0.2/33").is_err());
        assert_eq!(ipv6_cidr("fd00::1/48").unwrap().1, Some(48));
        assert_eq!(ipv6_cidr("fd00::1").unwrap().1, None);
        assert!(ipv6_cidr("fd00::1/0").is_err());
        assert!(ipv6("fd00::g").is_err());
    }

    #[test]
    fn macs() {
        assert_eq!(mac("02:00:00:aa:bb:CC"), Ok([2, 0, 0, 0xaa, 0xbb, 0xcc]));
        assert_eq!(mac("02-00-00-aa-bb-cc"), Ok([2, 0, 0, 0xaa, 0xbb, 0xcc]));
        assert!(mac("02:00:00:aa:bb").is_err());
        assert!(mac("02:00:00:aa:bb:cc:dd").is_err());
        assert!(mac("02:00:00:aa:bb:c").is_err());
        assert!(mac("01:00:5e:00:00:01").unwrap_err().contains("multicast"));
        assert!(mac("00:00:00:00:00:00").unwrap_err().contains("all-zero"));
    }

    #[test]
    fn sizes_and_probabilities() {
        assert_eq!(bytes("16M", 0, u64::MAX), Ok(16 << 20));
        assert_eq!(bytes("4k", 0, u64::MAX), Ok(4096));
        assert_eq!(bytes("100", 0, u64::MAX), Ok(100));
        assert!(bytes("16MB", 0, u64::MAX).is_err());
        assert!(bytes("1G", 0, 1000).unwrap_err().contains("out of range"));
        assert!(bytes("99999999999999999G", 0, u64::MAX).is_err());
        assert_eq!(probability("0.25"), Ok(0.25));
        assert_eq!(probability("1.5").unwrap_err(), "is out of range (0..=1)");
        assert_eq!(probability("NaN").unwrap_err(), "is out of range (0..=1)");
        assert_eq!(probability("x").unwrap_err(), "is not a number");
    }

    #[test]
    fn interface_names() {
        assert_eq!(ifname("tap0"), Ok("tap0".to_string()));
        assert!(ifname("").is_err());
        assert!(ifname("a-very-long-interface")
            .unwrap_err()
            .contains("IFNAMSIZ"));
        assert!(ifname("a/b").is_err());
        assert!(ifname("a b").is_err());
    }

    #[test]
    fn suggestions() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("dpkd", "dpdk"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            suggest("lcore_msak", ["lcore_mask", "channel"]),
            Some("lcore_mask")
        );
        assert_eq!(suggest("zzz", ["lcore_mask", "channel"]), None);
    }
}
