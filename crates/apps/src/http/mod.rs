//! HTTP/1.1 (RFC 9110, RFC 9112) on ustack: a small server and a client.

pub mod body;
pub mod chunked;
pub mod client;
pub mod date;
pub mod parse;
pub mod response;
pub mod server;
pub mod status;
pub mod url;

/// `tchar` of RFC 9110 5.6.2: the characters of a token.
pub fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whether `s` is a non-empty token.
pub fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// Optional whitespace (RFC 9110 5.6.3) trimmed from both ends.
pub fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// A field value may hold visible characters, spaces, tabs and obs-text
/// (RFC 9110 5.5); no other control characters.
pub fn is_field_value(s: &[u8]) -> bool {
    s.iter().all(|&b| b == b'\t' || b >= 0x20 && b != 0x7f)
}

/// Parses a decimal Content-Length (RFC 9110 8.6): digits only.  A list of
/// identical values ("42, 42") counts as one.
pub fn parse_content_length(v: &[u8]) -> Option<u64> {
    let mut value = None;
    for part in v.split(|&b| b == b',') {
        let part = trim_ows(part);
        if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n: u64 = std::str::from_utf8(part).ok()?.parse().ok()?;
        match value {
            Some(v) if v != n => return None,
            _ => value = Some(n),
        }
    }
    value
}

/// Whether a comma-separated header value lists `token` (case-insensitive).
pub fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|&b| b == b',')
        .any(|t| trim_ows(t).eq_ignore_ascii_case(token.as_bytes()))
}

/// Where the line starting at `from` ends: (index of its LF, length of
/// the line without CR LF or LF).
pub fn line_end(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let lf = from + buf[from..].iter().position(|&b| b == b'\n')?;
    let len = if lf > from && buf[lf - 1] == b'\r' {
        lf - from - 1
    } else {
        lf - from
    };
    Some((lf, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length() {
        assert_eq!(parse_content_length(b"0"), Some(0));
        assert_eq!(parse_content_length(b"600"), Some(600));
        assert_eq!(parse_content_length(b"42, 42"), Some(42));
        assert_eq!(parse_content_length(b"42, 43"), None);
        assert_eq!(parse_content_length(b"-1"), None);
        assert_eq!(parse_content_length(b"+1"), None);
        assert_eq!(parse_content_length(b"1 2"), None);
        assert_eq!(parse_content_length(b""), None);
        assert_eq!(parse_content_length(b"0x10"), None);
        assert_eq!(parse_content_length(b"99999999999999999999"), None);
    }

    #[test]
    fn tokens_and_ows() {
        assert!(is_token(b"GET"));
        assert!(!is_token(b"G T"));
        assert!(!is_token(b""));
        assert_eq!(trim_ows(b" \t x y \t"), b"x y");
        assert!(has_token(b"keep-alive, Close", "close"));
        assert!(!has_token(b"closed", "close"));
    }
}
