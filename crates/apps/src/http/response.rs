//! Parsing an HTTP/1.x response head, for a client (RFC 9112 4 and 6.3).

use crate::http::{is_field_value, is_token, line_end, parse_content_length, trim_ows};

/// How the body of a response ends (RFC 9112 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (1xx, 204, 304, or the answer to HEAD).
    Empty,
    Length(u64),
    Chunked,
    /// The body is everything until the server closes.
    UntilClose,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// (major, minor) of the HTTP version.
    pub version: (u8, u8),
    pub status: u16,
    pub reason: String,
    pub framing: Framing,
    /// The bytes the head took, with its empty line.
    pub head_len: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedResponse {
    Incomplete,
    Done(ResponseHead),
    Error(String),
}

/// Parses the response at the start of `buf`; `to_head` when the request
/// was HEAD (no body whatever the headers say).
pub fn parse_response(buf: &[u8], max_head: usize, to_head: bool) -> ParsedResponse {
    let err = |s: &str| ParsedResponse::Error(s.to_string());
    let Some((lf, len)) = line_end(buf, 0) else {
        if buf.len() > max_head {
            return err("response head too large");
        }
        if !buf.is_empty() && !b"HTTP/".starts_with(&buf[..buf.len().min(5)]) {
            return err("not an HTTP response");
        }
        return ParsedResponse::Incomplete;
    };
    let line = &buf[..len];
    // HTTP-version SP 3DIGIT SP [reason-phrase]; the SP before an empty
    // reason is sometimes missing.
    let (version, status) = match line {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor, b' ', d1, d2, d3, rest @ ..]
            if major.is_ascii_digit()
                && minor.is_ascii_digit()
                && [d1, d2, d3].iter().all(|d| d.is_ascii_digit())
                && (rest.is_empty() || rest[0] == b' ') =>
        {
            let status = [d1, d2, d3]
                .iter()
                .fold(0u16, |a, &&d| a * 10 + u16::from(d - b'0'));
            ((major - b'0', minor - b'0'), status)
        }
        _ => return err("malformed status line"),
    };
    if version.0 != 1 {
        return err("not HTTP/1.x");
    }
    if status < 100 {
        return err("malformed status code");
    }
    let reason = String::from_utf8_lossy(trim_ows(&line[12.min(line.len())..])).into_owned();
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut pos = lf + 1;
    loop {
        let Some((lf, len)) = line_end(buf, pos) else {
            if buf.len() > max_head {
                return err("response head too large");
            }
            return ParsedResponse::Incomplete;
        };
        let line = &buf[pos..pos + len];
        pos = lf + 1;
        if pos > max_head {
            return err("response head too large");
        }
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // obs-fold (RFC 9112 5.2): part of the previous value, which
            // is none of the framing fields we read.
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return err("header line without a colon");
        };
        let name = &line[..colon];
        let value = trim_ows(&line[colon + 1..]);
        if !is_token(name) || !is_field_value(value) {
            return err("malformed header field");
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let Some(n) = parse_content_length(value) else {
                return err("bad Content-Length");
            };
            if content_length.is_some_and(|c| c != n) {
                return err("conflicting Content-Length");
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            // Only the final coding matters: chunked must be last.
            let last = value.rsplit(|&b| b == b',').next().map(trim_ows);
            chunked = last.is_some_and(|c| c.eq_ignore_ascii_case(b"chunked"));
        }
    }
    let framing = if to_head || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Empty
    } else if transfer_encoding {
        if chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else if let Some(n) = content_length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    ParsedResponse::Done(ResponseHead {
        version,
        status,
        reason,
        framing,
        head_len: pos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(s: &str) -> ResponseHead {
        match parse_response(s.as_bytes(), 8192, false) {
            ParsedResponse::Done(h) => h,
            other => panic!("{s:?}: {other:?}"),
        }
    }

    #[test]
    fn framings() {
        let h = done("HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n");
        assert_eq!(
            (h.status, h.reason.as_str(), h.framing),
            (200, "OK", Framing::Length(600))
        );
        assert_eq!(h.head_len, 40);
        let h = done(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
        );
        assert_eq!(h.framing, Framing::Chunked);
        let h = done("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
        assert_eq!(h.framing, Framing::UntilClose);
        let h = done("HTTP/1.0 200 OK\r\nServer: x\r\n\r\n");
        assert_eq!((h.version, h.framing), ((1, 0), Framing::UntilClose));
        assert_eq!(
            done("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n").framing,
            Framing::Empty
        );
        assert_eq!(
            done("HTTP/1.1 304 Not Modified\r\n\r\n").framing,
            Framing::Empty
        );
        assert_eq!(
            done("HTTP/1.1 100 Continue\r\n\r\n").framing,
            Framing::Empty
        );
        let h = done("HTTP/1.1 404\r\nContent-Length: 0\n\n");
        assert_eq!(
            (h.status, h.reason.as_str(), h.framing),
            (404, "", Framing::Length(0))
        );
        let h = done("HTTP/1.1 200 OK\r\nX: a\r\n  folded\r\nContent-Length: 1\r\n\r\n");
        assert_eq!(h.framing, Framing::Length(1));
        match parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", 8192, true) {
            ParsedResponse::Done(h) => assert_eq!(h.framing, Framing::Empty),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn incomplete_and_errors() {
        for s in [
            "",
            "HTTP/1.1 200 OK",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
            "HTT",
        ] {
            assert_eq!(
                parse_response(s.as_bytes(), 8192, false),
                ParsedResponse::Incomplete,
                "{s:?}"
            );
        }
        for s in [
            "SSH-2.0-OpenSSH\r\n",
            "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/2.0 200 OK\r\n\r\n",
            "HTTP/1.1 099 X\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nBad name: x\r\n\r\n",
            "garbage",
        ] {
            assert!(
                matches!(
                    parse_response(s.as_bytes(), 8192, false),
                    ParsedResponse::Error(_)
                ),
                "{s:?}"
            );
        }
        let big = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(200));
        assert!(matches!(
            parse_response(big.as_bytes(), 100, false),
            ParsedResponse::Error(_)
        ));
        assert!(matches!(
            parse_response(&big.as_bytes()[..150], 100, false),
            ParsedResponse::Error(_)
        ));
    }

    #[test]
    fn split_at_every_byte() {
        let s = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nbody follows";
        let whole = match parse_response(s, 8192, false) {
            ParsedResponse::Done(h) => h,
            other => panic!("{other:?}"),
        };
        for i in 0..whole.head_len {
            assert_eq!(
                parse_response(&s[..i], 8192, false),
                ParsedResponse::Incomplete,
                "{i}"
            );
        }
        for i in whole.head_len..=s.len() {
            assert_eq!(
                parse_response(&s[..i], 8192, false),
                ParsedResponse::Done(whole.clone())
            );
        }
    }
}
