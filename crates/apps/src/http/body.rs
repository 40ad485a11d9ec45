//! What the server sends: the 600-byte index page (the size of the page in
//! nginx's benchmarks), and `/bytes/N`, a pattern anyone can check without
//! the server.
//!
//! The pattern is made of 16-byte records: the record at offset `o` (a
//! multiple of 16) is `o` in decimal, zero-padded to 15 digits, and a
//! newline.  `/bytes/N` is the first N bytes of it; in Python,
//! `b"".join(b"%015d\n" % o for o in range(0, N + 15, 16))[:N]`.  Every
//! record names its own place, so a byte lost, repeated or misplaced
//! anywhere shows.

/// The size of the index page.
pub const INDEX_LEN: usize = 600;

const INDEX_START: &str = "<!DOCTYPE html>
<html>
<head>
<title>Welcome to ustack!</title>
<style>
body { width: 35em; margin: 0 auto; font-family: sans-serif; }
</style>
</head>
<body>
<h1>Welcome to ustack!</h1>
<p>This page crossed a userspace TCP/IP stack written in Rust.</p>
<p><a href=\"/bytes/1048576\">/bytes/N</a> sends N bytes of a pattern
that names the offset of every 16-byte record.</p>
<!-- ";
const INDEX_END: &str = " -->
</body>
</html>
";

/// The index page, exactly [`INDEX_LEN`] bytes of HTML.
pub fn index_page() -> Vec<u8> {
    let pad = INDEX_LEN - INDEX_START.len() - INDEX_END.len();
    let mut page = Vec::with_capacity(INDEX_LEN);
    page.extend_from_slice(INDEX_START.as_bytes());
    page.extend(std::iter::repeat_n(b'.', pad));
    page.extend_from_slice(INDEX_END.as_bytes());
    page
}

/// The record at `offset` (a multiple of 16).
fn record(offset: u64) -> [u8; 16] {
    let mut r = [b'0'; 16];
    r[15] = b'\n';
    let mut v = offset;
    let mut i = 15;
    while v > 0 && i > 0 {
        i -= 1;
        r[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    r
}

/// Fills `out` with the pattern from `offset` on.
pub fn fill_pattern(offset: u64, out: &mut [u8]) {
    let mut pos = 0;
    let mut off = offset;
    while pos < out.len() {
        let within = (off % 16) as usize;
        let rec = record(off - within as u64);
        let n = (16 - within).min(out.len() - pos);
        out[pos..pos + n].copy_from_slice(&rec[within..within + n]);
        pos += n;
        off += n as u64;
    }
}

/// Where `data`, found at `offset` of a pattern body, first differs from
/// the pattern.
pub fn check_pattern(offset: u64, data: &[u8]) -> Option<u64> {
    let mut expect = [0u8; 4096];
    let mut done = 0;
    while done < data.len() {
        let n = (data.len() - done).min(expect.len());
        fill_pattern(offset + done as u64, &mut expect[..n]);
        if let Some(i) = (0..n).find(|&i| data[done + i] != expect[i]) {
            return Some(offset + (done + i) as u64);
        }
        done += n;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_600_bytes_of_html() {
        let p = index_page();
        assert_eq!(p.len(), 600);
        assert!(p.starts_with(b"<!DOCTYPE html>") && p.ends_with(b"</html>\n"));
    }

    #[test]
    fn pattern_records() {
        let mut b = [0u8; 40];
        fill_pattern(0, &mut b);
        assert_eq!(&b, b"000000000000000\n000000000000016\n00000000");
        let mut c = [0u8; 10];
        fill_pattern(13, &mut c);
        assert_eq!(&c, b"00\n0000000");
        fill_pattern(1 << 30, &mut b[..16]);
        assert_eq!(&b[..16], b"000001073741824\n");
    }

    #[test]
    fn pattern_is_the_same_however_it_is_cut() {
        let mut whole = vec![0u8; 5000];
        fill_pattern(0, &mut whole);
        for cut in [1, 7, 15, 16, 17, 1000, 4999] {
            let mut pieces = vec![0u8; 5000];
            let (a, b) = pieces.split_at_mut(cut);
            fill_pattern(0, a);
            fill_pattern(cut as u64, b);
            assert_eq!(pieces, whole, "cut at {cut}");
        }
        assert_eq!(check_pattern(0, &whole), None);
        assert_eq!(check_pattern(100, &whole[100..]), None);
        whole[4321] ^= 1;
        assert_eq!(check_pattern(0, &whole), Some(4321));
    }
}
