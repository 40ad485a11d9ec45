//! Helpers shared by the tests of all modules.

use std::vec::Vec;

/// xorshift64* PRNG with a fixed seed: reproducible random buffers.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A buffer of random length `0..max_len` with random bytes.
    pub fn buffer(&mut self, max_len: usize) -> Vec<u8> {
        let len = (self.next_u64() % max_len as u64) as usize;
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

/// Call `f` on `count` random buffers; half of them start with `prefix`
/// (a valid header) so parsers get past their first checks.
pub fn fuzz(seed: u64, count: usize, prefix: &[u8], mut f: impl FnMut(&mut [u8])) {
    let mut rng = XorShift::new(seed);
    for i in 0..count {
        let mut buf = rng.buffer(160);
        if i % 2 == 0 {
            let n = prefix.len().min(buf.len());
            // keep some of the prefix, randomize the rest
            let keep = (rng.next_u64() as usize) % (n + 1);
            buf[..keep].copy_from_slice(&prefix[..keep]);
        }
        f(&mut buf);
    }
}
