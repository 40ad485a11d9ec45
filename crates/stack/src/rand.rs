//! Seeded randomness and keyed hashing.  The stack is given a seed; it never
//! asks the OS.  The engine seeds it from the OS at boot (a per-boot secret),
//! a simulation from its seed.

use core::hash::{BuildHasher, Hasher};

/// A small, fast generator (xorshift64*), good for jitter, ports and idents;
/// not for secrets (ISNs and cookies use [`SipHasher`] keyed by the secret).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed so that nearby seeds give unrelated streams,
        // and a zero seed does not give a zero state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng { state: z | 1 }
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A value in `0..bound` (`bound > 0`), with negligible bias.
    pub fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound.max(1) as u128) >> 64) as u64
    }
}

/// SipHash (Aumasson & Bernstein) with `C` compression and `D` finalization
/// rounds, keyed with the per-boot secret.  Sequence numbers, ports and
/// cookies, which act as MACs, use SipHash-2-4; SipHash-1-3 is kept for
/// tests and comparison (tables use [`TableHasher`]).
#[derive(Debug, Clone)]
pub struct SipHasher<const C: usize = 2, const D: usize = 4> {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
    tail: u64,
    ntail: usize,
    length: usize,
}

impl<const C: usize, const D: usize> SipHasher<C, D> {
    pub fn new(k0: u64, k1: u64) -> Self {
        SipHasher {
            v0: k0 ^ 0x736f_6d65_7073_6575,
            v1: k1 ^ 0x646f_7261_6e64_6f6d,
            v2: k0 ^ 0x6c79_6765_6e65_7261,
            v3: k1 ^ 0x7465_6462_7974_6573,
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }

    #[inline]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13);
        self.v1 ^= self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16);
        self.v3 ^= self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21);
        self.v3 ^= self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17);
        self.v1 ^= self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline]
    fn compress(&mut self, m: u64) {
        self.v3 ^= m;
        for _ in 0..C {
            self.round();
        }
        self.v0 ^= m;
    }
}

impl<const C: usize, const D: usize> SipHasher<C, D> {
    /// Appends `n` (1..=8) message bytes, the first in the low byte of `x`
    /// (the bytes above `n` are zero): the byte-at-a-time message
    /// schedule, a word at a time.
    #[inline]
    fn push(&mut self, x: u64, n: usize) {
        debug_assert!((1..=8).contains(&n) && self.ntail < 8);
        self.length += n;
        let fill = self.ntail;
        self.tail |= x << (8 * fill);
        if fill + n < 8 {
            self.ntail = fill + n;
            return;
        }
        let m = self.tail;
        self.compress(m);
        // Bytes of `x` that went into the word just compressed.
        let used = 8 - fill;
        self.ntail = n - used;
        self.tail = if used == 8 { 0 } else { x >> (8 * used) };
    }
}

impl<const C: usize, const D: usize> Hasher for SipHasher<C, D> {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.push(u64::from_le_bytes(w), chunk.len());
        }
    }

    // The integer writes feed the same bytes as `write(&x.to_ne_bytes())`
    // (the default), without going through a slice.
    fn write_u8(&mut self, x: u8) {
        self.push(u64::from(x), 1);
    }

    fn write_u16(&mut self, x: u16) {
        self.push(u64::from(u16::from_le_bytes(x.to_ne_bytes())), 2);
    }

    fn write_u32(&mut self, x: u32) {
        self.push(u64::from(u32::from_le_bytes(x.to_ne_bytes())), 4);
    }

    fn write_u64(&mut self, x: u64) {
        self.push(u64::from_le_bytes(x.to_ne_bytes()), 8);
    }

    fn write_usize(&mut self, x: usize) {
        match u64::try_from(x) {
            Ok(w) if usize::BITS == 64 => self.write_u64(w),
            _ => self.write(&x.to_ne_bytes()),
        }
    }

    fn finish(&self) -> u64 {
        let mut s = self.clone();
        let b = ((s.length as u64 & 0xff) << 56) | s.tail;
        s.compress(b);
        s.v2 ^= 0xff;
        for _ in 0..D {
            s.round();
        }
        s.v0 ^ s.v1 ^ s.v2 ^ s.v3
    }
}

/// Builds [`SipHasher`]s with one key: the `S` of every stack hash table.
#[derive(Debug, Clone, Copy)]
pub struct KeyedState {
    k0: u64,
    k1: u64,
}

impl KeyedState {
    pub fn new(k0: u64, k1: u64) -> Self {
        KeyedState { k0, k1 }
    }

    pub fn from_rng(rng: &mut Rng) -> Self {
        KeyedState::new(rng.next_u64(), rng.next_u64())
    }

    /// A keyed hash of two words with one multiplication, for a table
    /// whose key is two words (IPv4 connections): each word is masked with
    /// its own half of the secret before the 64x64->128 product, whose
    /// halves are folded, so every input bit reaches the middle and high
    /// bits and no value of the result can be aimed at without the key.
    #[inline(always)]
    pub fn hash_pair(&self, a: u64, b: u64) -> u64 {
        folded_multiply(a ^ self.k0, b ^ self.k1)
    }

    /// A keyed 64-bit hash of some bytes (ISNs, ephemeral port offsets,
    /// cookies), with the full SipHash-2-4.
    pub fn hash_bytes(&self, bytes: &[u8]) -> u64 {
        let mut h = SipHasher24::new(self.k0, self.k1);
        h.write(bytes);
        h.finish()
    }
}

impl BuildHasher for KeyedState {
    type Hasher = TableHasher;
    fn build_hasher(&self) -> TableHasher {
        TableHasher {
            acc: self.k0,
            key: self.k1 | 1,
        }
    }
}

/// The hash of the stack's tables (connections, listeners, neighbors):
/// keyed folded multiplication, a word at a time.
///
/// Why not SipHash: the connection table is searched once per received
/// segment and the neighbor table once per sent one, and SipHash-1-3 cost
/// about a hundred instructions a lookup, a sixth of a ping-pong's budget.
/// Why keyed multiplication is enough: like Linux's `inet_ehashfn` (jhash
/// under a boot-time secret), the 128-bit key is secret and a peer never
/// sees a hash value, so it cannot aim packets at one bucket; every
/// input word passes through a full 64x64->128 multiplication with the
/// key, so flipping any input bit changes the whole result.
#[derive(Debug, Clone)]
pub struct TableHasher {
    acc: u64,
    key: u64,
}

/// The product's two halves folded together: every bit of both inputs
/// reaches the middle bits of the result.
#[inline]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for TableHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        // The length goes into the last word, so that `[1]` and `[1, 0]`
        // differ.
        self.write_u64(u64::from_le_bytes(w) ^ (bytes.len() as u64).rotate_right(8));
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.acc = folded_multiply(self.acc ^ x, self.key);
    }

    #[inline]
    fn write_u128(&mut self, x: u128) {
        self.write_u64(x as u64);
        self.write_u64((x >> 64) as u64);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // hashbrown takes the bucket from the low bits and the tag from the
        // top seven: one more round spreads the last word to both ends.
        folded_multiply(self.acc, self.key.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15)
    }
}

/// SipHash-2-4: the paper's recommendation, for values that act as MACs.
pub type SipHasher24 = SipHasher<2, 4>;
/// SipHash-1-3: for hash tables.
pub type SipHasher13 = SipHasher<1, 3>;

/// A hash map keyed with the per-boot secret.
pub type KeyedMap<K, V> = std::collections::HashMap<K, V, KeyedState>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn siphash13_matches_std() {
        // std's DefaultHasher is SipHash-1-3 with a zero key.
        let mut rng = Rng::new(9);
        for len in 0..64 {
            let msg: Vec<u8> = (0..len).map(|_| rng.next_u32() as u8).collect();
            let mut ours = SipHasher13::new(0, 0);
            ours.write(&msg);
            let mut theirs = std::collections::hash_map::DefaultHasher::new();
            theirs.write(&msg);
            assert_eq!(ours.finish(), theirs.finish(), "length {len}");
        }
    }

    /// Keys that differ in one bit land in unrelated buckets, whichever
    /// bit it is, and different secrets order the same keys differently.
    #[test]
    fn table_hasher_spreads_every_input_bit() {
        let state = KeyedState::new(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210);
        let base = (0x0a63_0001u64 << 32) | 0x0a63_0002;
        let h0 = state.hash_one(base);
        for bit in 0..64 {
            let h = state.hash_one(base ^ (1 << bit));
            let changed = (h ^ h0).count_ones();
            assert!(
                (12..=52).contains(&changed),
                "bit {bit}: {changed} bits changed"
            );
            // The bucket index (low bits) and hashbrown's tag (top 7 bits).
            assert_ne!(h & 0xffff, h0 & 0xffff, "bit {bit}: same low bits");
        }
        let other = KeyedState::new(1, 2);
        let mut rng = Rng::new(5);
        let keys: Vec<u64> = (0..64).map(|_| rng.next_u64()).collect();
        let order = |s: &KeyedState| {
            let mut v: Vec<(u64, u64)> = keys.iter().map(|&k| (s.hash_one(k) & 1023, k)).collect();
            v.sort();
            v.into_iter().map(|(_, k)| k).collect::<Vec<_>>()
        };
        assert_ne!(order(&state), order(&other));
    }

    /// Byte strings of different lengths (trailing zeros) hash apart.
    #[test]
    fn table_hasher_counts_length() {
        let state = KeyedState::new(7, 9);
        let hash = |b: &[u8]| {
            let mut h = state.build_hasher();
            h.write(b);
            h.finish()
        };
        assert_ne!(hash(&[1]), hash(&[1, 0]));
        assert_ne!(hash(&[]), hash(&[0]));
        assert_ne!(hash(&[0; 8]), hash(&[0; 9]));
    }

    #[test]
    fn siphash_reference_vector() {
        // The SipHash paper's test vector: key 00..0f, message 00..0e.
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let k0 = u64::from_le_bytes(key[..8].try_into().unwrap());
        let k1 = u64::from_le_bytes(key[8..].try_into().unwrap());
        let msg: [u8; 15] = core::array::from_fn(|i| i as u8);
        let mut h = SipHasher24::new(k0, k1);
        h.write(&msg);
        assert_eq!(h.finish(), 0xa129_ca61_49be_45e5);
    }

    /// The byte-at-a-time SipHash-2-4 message schedule, for comparison.
    fn reference(k0: u64, k1: u64, msg: &[u8]) -> u64 {
        let mut h = SipHasher24::new(k0, k1);
        for &b in msg {
            h.length += 1;
            h.tail |= (b as u64) << (8 * h.ntail);
            h.ntail += 1;
            if h.ntail == 8 {
                let m = h.tail;
                h.compress(m);
                h.tail = 0;
                h.ntail = 0;
            }
        }
        h.finish()
    }

    #[test]
    fn word_writes_match_byte_writes() {
        let mut rng = Rng::new(42);
        for _ in 0..2000 {
            let (k0, k1) = (rng.next_u64(), rng.next_u64());
            let mut h = SipHasher24::new(k0, k1);
            let mut msg = Vec::new();
            for _ in 0..rng.below(8) {
                let x = rng.next_u64();
                match rng.below(6) {
                    0 => {
                        h.write_u8(x as u8);
                        msg.extend_from_slice(&(x as u8).to_ne_bytes());
                    }
                    1 => {
                        h.write_u16(x as u16);
                        msg.extend_from_slice(&(x as u16).to_ne_bytes());
                    }
                    2 => {
                        h.write_u32(x as u32);
                        msg.extend_from_slice(&(x as u32).to_ne_bytes());
                    }
                    3 => {
                        h.write_u64(x);
                        msg.extend_from_slice(&x.to_ne_bytes());
                    }
                    4 => {
                        h.write_usize(x as usize);
                        msg.extend_from_slice(&(x as usize).to_ne_bytes());
                    }
                    _ => {
                        let bytes: Vec<u8> =
                            (0..rng.below(20)).map(|_| rng.next_u64() as u8).collect();
                        h.write(&bytes);
                        msg.extend_from_slice(&bytes);
                    }
                }
            }
            assert_eq!(h.finish(), reference(k0, k1, &msg), "message {msg:?}");
        }
    }

    #[test]
    fn rng_is_deterministic_and_bounded() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
