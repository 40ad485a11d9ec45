//! Receive-side scaling as NICs do it: the Toeplitz hash of Microsoft's RSS
//! specification over a flow's addresses and ports, whose low bits index
//! an indirection table (RETA) of queues.  An engine per queue that
//! computes the same function knows which engine the NIC gives each flow
//! to, so it steers nothing in software and opens connections from source
//! ports whose replies the NIC brings back to it.
//!
//! The hash is linear over GF(2): each set bit of the input XORs in the
//! 32-bit window of the key that starts at that bit.  Tables of the
//! contribution of every byte value at every input position make it one
//! lookup per input byte.
//!
//! With a key whose bits repeat every 16 ([`SYMMETRIC_KEY`]), the windows
//! at bits `i` and `i + 16k` are equal.  The source and destination
//! addresses sit a multiple of 16 bits apart in the input, and so do the
//! ports, so swapping them leaves the hash unchanged: both directions of a
//! flow reach one queue.

use core::fmt;
use core::net::IpAddr;

/// The length of an RSS key: 40 bytes covers an IPv6 flow (36 bytes of
/// input) and the 4 bytes of the last window.
pub const KEY_LEN: usize = 40;

/// The most input bytes hashed (IPv6 addresses and ports).
const MAX_INPUT: usize = 36;

/// A symmetric key (the pattern 0x6d5a repeated): the two directions of a
/// flow hash alike.
pub const SYMMETRIC_KEY: [u8; KEY_LEN] = {
    let mut k = [0u8; KEY_LEN];
    let mut i = 0;
    while i < KEY_LEN {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// The most entries of an indirection table (DPDK's largest RETA is 512;
/// some NICs have 2048).
pub const MAX_RETA: usize = 4096;

/// Why an RSS configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RssError {
    /// The key is not [`KEY_LEN`] bytes.
    KeyLength(usize),
    /// The table's length is not a power of two in `1..=MAX_RETA`.
    RetaLength(usize),
    /// A table entry names a queue at or past the number of queues.
    RetaQueue {
        entry: usize,
        queue: u16,
        queues: u16,
    },
    /// No queues.
    NoQueues,
}

impl fmt::Display for RssError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RssError::KeyLength(n) => write!(f, "an RSS key is {KEY_LEN} bytes, not {n}"),
            RssError::RetaLength(n) => write!(
                f,
                "an indirection table has a power of two entries up to {MAX_RETA}, not {n}"
            ),
            RssError::RetaQueue {
                entry,
                queue,
                queues,
            } => write!(
                f,
                "indirection table entry {entry} names queue {queue} of {queues}"
            ),
            RssError::NoQueues => f.write_str("RSS over no queues"),
        }
    }
}

/// The Toeplitz hash under one key.
#[derive(Clone)]
pub struct Toeplitz {
    key: [u8; KEY_LEN],
    /// `tables[i][b]`: what byte value `b` at input position `i` XORs in.
    tables: Vec<[u32; 256]>,
}

impl fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Toeplitz")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Toeplitz {
    pub fn new(key: &[u8]) -> Result<Toeplitz, RssError> {
        let key: [u8; KEY_LEN] = key.try_into().map_err(|_| RssError::KeyLength(key.len()))?;
        // The 32-bit window of the key starting at bit `bit`.
        let window = |bit: usize| -> u32 {
            let at = bit / 8;
            let mut wide = 0u64;
            for i in 0..5 {
                wide = (wide << 8) | u64::from(key.get(at + i).copied().unwrap_or(0));
            }
            (wide >> (8 - bit % 8)) as u32
        };
        let mut tables = Vec::with_capacity(MAX_INPUT);
        for pos in 0..MAX_INPUT {
            let bits: [u32; 8] = core::array::from_fn(|j| window(pos * 8 + j));
            let mut t = [0u32; 256];
            for (b, slot) in t.iter_mut().enumerate() {
                // Bit 7 (the most significant) is the first input bit.
                *slot = (0..8)
                    .filter(|j| b & (0x80 >> j) != 0)
                    .fold(0, |acc, j| acc ^ bits[j]);
            }
            tables.push(t);
        }
        Ok(Toeplitz { key, tables })
    }

    pub fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// The hash of `input` (bytes past the 36th are not hashed: no RSS
    /// input is longer).
    pub fn hash(&self, input: &[u8]) -> u32 {
        input
            .iter()
            .zip(&self.tables)
            .fold(0, |acc, (&b, t)| acc ^ t[usize::from(b)])
    }

    /// The hash of addresses alone (IPv4 fragments, other protocols).
    pub fn addresses(&self, src: IpAddr, dst: IpAddr) -> u32 {
        let mut input = [0u8; MAX_INPUT];
        let n = put_addresses(&mut input, src, dst);
        self.hash(&input[..n])
    }

    /// The hash of a TCP or UDP flow as a NIC computes it for a packet
    /// from `src:sport` to `dst:dport`.
    pub fn flow(&self, src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> u32 {
        let mut input = [0u8; MAX_INPUT];
        let n = put_addresses(&mut input, src, dst);
        input[n..n + 2].copy_from_slice(&sport.to_be_bytes());
        input[n + 2..n + 4].copy_from_slice(&dport.to_be_bytes());
        self.hash(&input[..n + 4])
    }
}

/// Writes the addresses as the RSS input has them (source, destination; an
/// IPv4 address beside an IPv6 one is written as IPv4-mapped); returns the
/// bytes written.
fn put_addresses(out: &mut [u8; MAX_INPUT], src: IpAddr, dst: IpAddr) -> usize {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out[..4].copy_from_slice(&s.octets());
            out[4..8].copy_from_slice(&d.octets());
            8
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                IpAddr::V6(v) => v.octets(),
            };
            out[..16].copy_from_slice(&v6(s));
            out[16..32].copy_from_slice(&v6(d));
            32
        }
    }
}

/// A NIC's RSS: a key and an indirection table over `queues` queues.
#[derive(Debug, Clone)]
pub struct RssSteering {
    toeplitz: Toeplitz,
    reta: Vec<u16>,
    queues: u16,
}

impl RssSteering {
    pub fn new(key: &[u8], reta: Vec<u16>, queues: u16) -> Result<RssSteering, RssError> {
        if queues == 0 {
            return Err(RssError::NoQueues);
        }
        if !reta.len().is_power_of_two() || reta.len() > MAX_RETA {
            return Err(RssError::RetaLength(reta.len()));
        }
        if let Some((entry, &queue)) = reta.iter().enumerate().find(|(_, &q)| q >= queues) {
            return Err(RssError::RetaQueue {
                entry,
                queue,
                queues,
            });
        }
        Ok(RssSteering {
            toeplitz: Toeplitz::new(key)?,
            reta,
            queues,
        })
    }

    /// The table most NICs start with: entry `i` is queue `i % queues`.
    pub fn round_robin(key: &[u8], reta_len: usize, queues: u16) -> Result<RssSteering, RssError> {
        let n = queues.max(1);
        let reta = (0..reta_len).map(|i| (i % usize::from(n)) as u16).collect();
        RssSteering::new(key, reta, queues)
    }

    pub fn key(&self) -> &[u8; KEY_LEN] {
        self.toeplitz.key()
    }

    pub fn reta(&self) -> &[u16] {
        &self.reta
    }

    pub fn queues(&self) -> u16 {
        self.queues
    }

    pub fn toeplitz(&self) -> &Toeplitz {
        &self.toeplitz
    }

    /// The queue of a hash: its low bits index the table.
    pub fn queue_of_hash(&self, hash: u32) -> u16 {
        self.reta[hash as usize & (self.reta.len() - 1)]
    }

    /// The queue of a TCP or UDP packet from `src:sport` to `dst:dport`.
    pub fn queue_of_flow(&self, src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> u16 {
        self.queue_of_hash(self.toeplitz.flow(src, sport, dst, dport))
    }

    /// The queue of a packet hashed by its addresses alone.
    pub fn queue_of_addresses(&self, src: IpAddr, dst: IpAddr) -> u16 {
        self.queue_of_hash(self.toeplitz.addresses(src, dst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    /// The key of Microsoft's RSS verification suite.
    const MS_KEY: [u8; KEY_LEN] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f,
        0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
        0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ];

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    /// A bit at a time, as the specification states it.
    fn reference(key: &[u8], input: &[u8]) -> u32 {
        let mut result = 0u32;
        for bit in 0..input.len() * 8 {
            if input[bit / 8] & (0x80 >> (bit % 8)) != 0 {
                let mut w = 0u32;
                for k in 0..32 {
                    let kb = bit + k;
                    let set = key.get(kb / 8).is_some_and(|b| b & (0x80 >> (kb % 8)) != 0);
                    w = (w << 1) | u32::from(set);
                }
                result ^= w;
            }
        }
        result
    }

    #[test]
    fn matches_the_verification_suite() {
        let t = Toeplitz::new(&MS_KEY).unwrap();
        // (source, source port, destination, destination port, IPv4 hash,
        // IPv4 with TCP hash).
        for (src, sport, dst, dport, ip, tcp) in [
            (
                v4(66, 9, 149, 187),
                2794,
                v4(161, 142, 100, 80),
                1766,
                0x323e_8fc2u32,
                0x51cc_c178u32,
            ),
            (
                v4(199, 92, 111, 2),
                14230,
                v4(65, 69, 140, 83),
                4739,
                0xd718_262a,
                0xc626_b0ea,
            ),
        ] {
            assert_eq!(t.addresses(src, dst), ip);
            assert_eq!(t.flow(src, sport, dst, dport), tcp);
        }
    }

    /// IPv6 input is the 16-byte source and destination addresses, then
    /// the ports (the suite's IPv6 and IPv6-with-TCP columns).
    #[test]
    fn matches_the_verification_suite_over_ipv6() {
        let t = Toeplitz::new(&MS_KEY).unwrap();
        let v6 = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
        for (src, sport, dst, dport, ip, tcp) in [
            (
                v6("3ffe:2501:200:1fff::7"),
                2794,
                v6("3ffe:2501:200:3::1"),
                1766,
                0x2cc1_8cd5u32,
                0x4020_7d3du32,
            ),
            (
                v6("3ffe:501:8::260:97ff:fe40:efab"),
                14230,
                v6("ff02::1"),
                4739,
                0x0f0c_461c,
                0xdde5_1bbf,
            ),
            (
                v6("3ffe:1900:4545:3:200:f8ff:fe21:67cf"),
                44251,
                v6("fe80::200:f8ff:fe21:67cf"),
                38024,
                0x4b61_e985,
                0x02d1_feef,
            ),
        ] {
            assert_eq!(t.addresses(src, dst), ip, "{src} -> {dst}");
            assert_eq!(t.flow(src, sport, dst, dport), tcp, "{src} -> {dst}");
        }
    }

    #[test]
    fn tables_agree_with_the_bitwise_definition() {
        let mut rng = crate::rand::Rng::new(7);
        for key in [MS_KEY, SYMMETRIC_KEY] {
            let t = Toeplitz::new(&key).unwrap();
            for len in [8usize, 12, 32, 36] {
                let input: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
                assert_eq!(t.hash(&input), reference(&key, &input));
            }
        }
    }

    #[test]
    fn the_symmetric_key_hashes_both_directions_alike() {
        let t = Toeplitz::new(&SYMMETRIC_KEY).unwrap();
        let a6 = IpAddr::V6(Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 2));
        let b6 = IpAddr::V6(Ipv6Addr::new(0xfd99, 0, 0, 1, 0, 0, 7, 1));
        for (a, pa, b, pb) in [
            (v4(10, 99, 0, 2), 80u16, v4(10, 99, 0, 1), 40_000u16),
            (v4(192, 0, 2, 77), 65535, v4(10, 99, 3, 250), 1),
            (a6, 443, b6, 51_000),
        ] {
            assert_eq!(t.flow(a, pa, b, pb), t.flow(b, pb, a, pa));
            assert_eq!(t.addresses(a, b), t.addresses(b, a));
        }
        // The verification suite's key is not symmetric.
        let ms = Toeplitz::new(&MS_KEY).unwrap();
        let (a, b) = (v4(66, 9, 149, 187), v4(161, 142, 100, 80));
        assert_ne!(ms.flow(a, 2794, b, 1766), ms.flow(b, 1766, a, 2794));
    }

    #[test]
    fn tables_are_checked() {
        assert_eq!(
            RssSteering::new(&SYMMETRIC_KEY[..39], vec![0; 128], 1).unwrap_err(),
            RssError::KeyLength(39)
        );
        assert_eq!(
            RssSteering::new(&SYMMETRIC_KEY, vec![0; 100], 1).unwrap_err(),
            RssError::RetaLength(100)
        );
        let e = RssSteering::new(&SYMMETRIC_KEY, vec![0, 1, 2, 3], 3).unwrap_err();
        assert_eq!(
            e,
            RssError::RetaQueue {
                entry: 3,
                queue: 3,
                queues: 3
            }
        );
        assert!(e.to_string().contains("entry 3"));
        let r = RssSteering::round_robin(&SYMMETRIC_KEY, 128, 4).unwrap();
        assert_eq!(&r.reta()[..6], &[0, 1, 2, 3, 0, 1]);
        let h = r.toeplitz().flow(v4(10, 99, 0, 1), 1, v4(10, 99, 0, 2), 2);
        assert_eq!(r.queue_of_hash(h), (h & 127) as u16 % 4);
    }
}
