//! Parsing an HTTP/1.x request head (RFC 9112 2 and 3, RFC 9110 5).
//!
//! The parser looks at the bytes received so far and says: not complete
//! yet, a request of `head_len` bytes, or an error with the status to
//! answer (the server then closes the connection).  It keeps no state, so
//! a request split anywhere parses the same once it is whole.

use crate::http::status::Status;
use crate::http::{has_token, is_field_value, is_token, line_end, parse_content_length, trim_ows};

/// Sizes a request may not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The request line and header fields together (431, or 414 for a
    /// request line alone this long).
    pub max_head: usize,
    /// The largest request body accepted (and thrown away): 413 beyond.
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 8 * 1024,
            max_body: 1 << 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    /// Another method; `standard` for those RFC 9110 9.3 and RFC 5789
    /// define (answered 405), otherwise 501.
    Other {
        name: String,
        standard: bool,
    },
}

const STANDARD_METHODS: [&str; 7] = [
    "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

impl Method {
    fn from_token(t: &[u8]) -> Method {
        match t {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            _ => {
                let name = String::from_utf8_lossy(t).into_owned();
                let standard = STANDARD_METHODS.contains(&name.as_str());
                Method::Other { name, standard }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The request target as sent (origin-form `/path?query`, or
    /// absolute-form `http://host/path`).
    pub target: String,
    pub version: Version,
    /// The connection stays open after the response (RFC 9112 9.3).
    pub keep_alive: bool,
    /// Body bytes that follow the head (to skip).
    pub content_length: u64,
    pub host: Option<String>,
}

impl Request {
    /// The path of the target, without query, for routing.
    pub fn path(&self) -> &str {
        let t = self.target.as_str();
        let t = match t.find("://") {
            // absolute-form: the path starts after the authority.
            Some(i)
                if t[..i].eq_ignore_ascii_case("http") || t[..i].eq_ignore_ascii_case("https") =>
            {
                let rest = &t[i + 3..];
                match rest.find('/') {
                    Some(j) => &rest[j..],
                    None => "/",
                }
            }
            _ => t,
        };
        match t.find(['?', '#']) {
            Some(q) => &t[..q],
            None => t,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// More bytes are needed.
    Incomplete,
    /// A whole head: the request, and how many bytes it took (leading
    /// empty lines included; the body, if any, follows).
    Done { request: Request, head_len: usize },
    /// Not a request we can answer; `why` is for logs and error bodies.
    Error { status: Status, why: &'static str },
}

fn error(status: Status, why: &'static str) -> Parse {
    Parse::Error { status, why }
}

/// Parses the request at the start of `buf`.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Parse {
    // RFC 9112 2.2: empty lines before the request line are ignored.
    let mut start = 0;
    loop {
        match &buf[start..] {
            [b'\r', b'\n', ..] => start += 2,
            [b'\n', ..] => start += 1,
            _ => break,
        }
        if start > limits.max_head {
            return error(Status::BadRequest, "empty lines only");
        }
    }
    let Some((lf, len)) = line_end(buf, start) else {
        if buf.len() - start > limits.max_head {
            return error(Status::UriTooLong, "request line too long");
        }
        return Parse::Incomplete;
    };
    if len > limits.max_head {
        return error(Status::UriTooLong, "request line too long");
    }
    let (method, target, version) = match request_line(&buf[start..start + len]) {
        Ok(parts) => parts,
        Err(e) => return e,
    };
    let mut host: Option<&[u8]> = None;
    let mut hosts = 0;
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = false;
    let (mut close, mut keep_alive) = (false, false);
    let mut pos = lf + 1;
    loop {
        let Some((lf, len)) = line_end(buf, pos) else {
            if buf.len() - start > limits.max_head {
                return error(Status::HeaderFieldsTooLarge, "header fields too large");
            }
            return Parse::Incomplete;
        };
        let line = &buf[pos..pos + len];
        pos = lf + 1;
        if pos - start > limits.max_head {
            return error(Status::HeaderFieldsTooLarge, "header fields too large");
        }
        if line.is_empty() {
            break;
        }
        if line[0] == b' ' || line[0] == b'\t' {
            // RFC 9112 5.2: obsolete line folding.
            return error(Status::BadRequest, "folded header line");
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return error(Status::BadRequest, "header line without a colon");
        };
        let name = &line[..colon];
        let value = trim_ows(&line[colon + 1..]);
        if !is_token(name) {
            // Includes whitespace before the colon (RFC 9112 5.1).
            return error(Status::BadRequest, "bad header field name");
        }
        if !is_field_value(value) {
            return error(Status::BadRequest, "bad header field value");
        }
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            host = Some(value);
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let Some(n) = parse_content_length(value) else {
                return error(Status::BadRequest, "bad Content-Length");
            };
            if content_length.is_some_and(|c| c != n) {
                return error(Status::BadRequest, "conflicting Content-Length");
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= has_token(value, "close");
            keep_alive |= has_token(value, "keep-alive");
        }
    }
    // RFC 9112 3.2: exactly one Host in HTTP/1.1.
    if hosts > 1 || (hosts == 0 && version == Version::Http11) {
        return error(Status::BadRequest, "missing or repeated Host");
    }
    if transfer_encoding {
        if content_length.is_some() {
            // RFC 9112 6.1: a likely smuggling attempt.
            return error(Status::BadRequest, "Transfer-Encoding with Content-Length");
        }
        return error(
            Status::NotImplemented,
            "request bodies with Transfer-Encoding",
        );
    }
    let content_length = content_length.unwrap_or(0);
    if content_length > limits.max_body {
        return error(Status::ContentTooLarge, "request body too large");
    }
    let keep_alive = match version {
        Version::Http11 => !close,
        Version::Http10 => keep_alive && !close,
    };
    Parse::Done {
        request: Request {
            method,
            target,
            version,
            keep_alive,
            content_length,
            host: host.map(|h| String::from_utf8_lossy(h).into_owned()),
        },
        head_len: pos,
    }
}

/// `method SP request-target SP HTTP-version` (RFC 9112 3).
fn request_line(line: &[u8]) -> Result<(Method, String, Version), Parse> {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(error(Status::BadRequest, "malformed request line"));
    };
    if !is_token(method) {
        return Err(error(Status::BadRequest, "bad method"));
    }
    if target.is_empty() || !target.iter().all(|&b| (0x21..=0x7e).contains(&b)) {
        return Err(error(Status::BadRequest, "bad request target"));
    }
    let version = match version {
        b"HTTP/1.1" => Version::Http11,
        b"HTTP/1.0" => Version::Http10,
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(error(Status::VersionNotSupported, "HTTP version"));
        }
        _ => return Err(error(Status::BadRequest, "bad HTTP version")),
    };
    // The target is visible ASCII, so UTF-8.
    let target = String::from_utf8_lossy(target).into_owned();
    Ok((Method::from_token(method), target, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Parse {
        parse_request(s.as_bytes(), &Limits::default())
    }

    fn done(s: &str) -> (Request, usize) {
        match parse(s) {
            Parse::Done { request, head_len } => (request, head_len),
            other => panic!("{s:?}: {other:?}"),
        }
    }

    fn status(s: &str) -> Status {
        match parse(s) {
            Parse::Error { status, .. } => status,
            other => panic!("{s:?}: expected an error, got {other:?}"),
        }
    }

    #[test]
    fn simple_get() {
        let s = "GET /bytes/10?x=1 HTTP/1.1\r\nHost: 10.99.0.2\r\nUser-Agent: t\r\n\r\n";
        let (r, n) = done(s);
        assert_eq!(n, s.len());
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.target, "/bytes/10?x=1");
        assert_eq!(r.path(), "/bytes/10");
        assert_eq!(r.version, Version::Http11);
        assert!(r.keep_alive);
        assert_eq!(r.content_length, 0);
        assert_eq!(r.host.as_deref(), Some("10.99.0.2"));
    }

    #[test]
    fn keep_alive_rules() {
        assert!(done("GET / HTTP/1.1\r\nHost: a\r\n\r\n").0.keep_alive);
        assert!(
            !done("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                .0
                .keep_alive
        );
        assert!(
            !done("GET / HTTP/1.1\r\nHost: a\r\nconnection: Keep-Alive, CLOSE\r\n\r\n")
                .0
                .keep_alive
        );
        assert!(!done("GET / HTTP/1.0\r\n\r\n").0.keep_alive);
        assert!(
            done("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                .0
                .keep_alive
        );
        assert!(
            !done("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n")
                .0
                .keep_alive
        );
    }

    #[test]
    fn lenient_where_the_rfc_allows() {
        // Leading empty lines, bare LF line ends, OWS around values.
        let s = "\r\n\nHEAD / HTTP/1.1\nHost:a\n X-Pad: 1\r\n\r\n";
        assert_eq!(status(s), Status::BadRequest, "folding is refused");
        let s = "\r\n\nHEAD / HTTP/1.1\nHost:a\nX-Pad: \t1 \t\n\n";
        let (r, n) = done(s);
        assert_eq!((r.method, n), (Method::Head, s.len()));
        let (r, _) = done("GET http://10.99.0.2:8080/x/y?q HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(r.path(), "/x/y");
        let (r, _) = done("GET http://10.99.0.2 HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(r.path(), "/");
    }

    #[test]
    fn methods() {
        let m = |s: &str| done(&format!("{s} / HTTP/1.1\r\nHost: a\r\n\r\n")).0.method;
        assert_eq!(m("GET"), Method::Get);
        assert_eq!(
            m("POST"),
            Method::Other {
                name: "POST".into(),
                standard: true
            }
        );
        assert_eq!(
            m("BREW"),
            Method::Other {
                name: "BREW".into(),
                standard: false
            }
        );
        assert_eq!(
            m("get"),
            Method::Other {
                name: "get".into(),
                standard: false
            },
            "methods are case-sensitive"
        );
    }

    #[test]
    fn body_length() {
        let (r, n) = done("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!((r.content_length, n), (5, 47));
        let (r, _) =
            done("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
        assert_eq!(r.content_length, 5);
    }

    #[test]
    fn malformed() {
        let bad = [
            "GET\r\n\r\n",
            "GET /\r\n\r\n",
            "GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / http/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1\r\nHost: a\r\n\r\n",
            "G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /\u{ff} HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\rHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        ];
        for s in bad {
            assert_eq!(status(s), Status::BadRequest, "{s:?}");
        }
        assert_eq!(
            status("GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
            Status::VersionNotSupported
        );
        assert_eq!(
            status("GET / HTTP/1.2\r\n\r\n"),
            Status::VersionNotSupported
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Status::NotImplemented
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n"),
            Status::ContentTooLarge
        );
        // Errors in the request line show before the head is complete.
        assert_eq!(status("GET / HTTX/1.1\r\n"), Status::BadRequest);
    }

    #[test]
    fn incomplete() {
        for s in [
            "",
            "\r",
            "\r\n",
            "GET",
            "GET / HTTP/1.1",
            "GET / HTTP/1.1\r",
            "GET / HTTP/1.1\r\nHost: a\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\n\r",
        ] {
            assert_eq!(parse(s), Parse::Incomplete, "{s:?}");
        }
    }

    #[test]
    fn size_limits() {
        let limits = Limits {
            max_head: 100,
            max_body: 10,
        };
        let p = |s: &str| parse_request(s.as_bytes(), &limits);
        let long_target = format!("GET /{} HTTP/1.1\r\n", "a".repeat(100));
        assert!(matches!(
            p(&long_target),
            Parse::Error {
                status: Status::UriTooLong,
                ..
            }
        ));
        assert!(matches!(p(&long_target[..90]), Parse::Incomplete));
        assert!(matches!(
            p(&long_target[..102]),
            Parse::Error {
                status: Status::UriTooLong,
                ..
            }
        ));
        let big_header = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(80));
        assert!(matches!(
            p(&big_header),
            Parse::Error {
                status: Status::HeaderFieldsTooLarge,
                ..
            }
        ));
        // Without the end of the head in sight.
        assert!(matches!(
            p(&big_header[..101]),
            Parse::Error {
                status: Status::HeaderFieldsTooLarge,
                ..
            }
        ));
        let exact = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "b".repeat(100 - 32)
        );
        assert_eq!(exact.len(), 100);
        assert!(matches!(p(&exact), Parse::Done { head_len: 100, .. }));
        assert!(matches!(
            p("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n"),
            Parse::Error {
                status: Status::ContentTooLarge,
                ..
            }
        ));
    }

    /// Feeds `chunks` one after another, the way a server reads: parses
    /// every complete request, skips its body, keeps the rest.
    fn feed(chunks: &[&[u8]]) -> Vec<Request> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        let mut skip = 0u64;
        for c in chunks {
            buf.extend_from_slice(c);
            loop {
                let k = (skip as usize).min(buf.len());
                buf.drain(..k);
                skip -= k as u64;
                if skip > 0 {
                    break;
                }
                match parse_request(&buf, &Limits::default()) {
                    Parse::Incomplete => break,
                    Parse::Done { request, head_len } => {
                        buf.drain(..head_len);
                        skip = request.content_length;
                        out.push(request);
                    }
                    Parse::Error { status, why } => panic!("{status:?} {why}"),
                }
            }
        }
        assert!(buf.is_empty() && skip == 0, "left over: {buf:?}");
        out
    }

    #[test]
    fn pipelined_split_at_every_byte() {
        let stream = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\
            HEAD /bytes/600 HTTP/1.1\r\nHost: a\r\n\r\n\
            POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 27\r\n\r\nGET /not-a-request HTTP/1.1\
            \r\nGET /x HTTP/1.0\nConnection: keep-alive\n\n\
            GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        let whole = feed(&[stream]);
        let targets: Vec<&str> = whole.iter().map(|r| r.target.as_str()).collect();
        assert_eq!(targets, ["/", "/bytes/600", "/form", "/x", "/last"]);
        assert_eq!(
            whole.iter().map(|r| r.keep_alive).collect::<Vec<_>>(),
            [true, true, true, true, false]
        );
        for i in 0..=stream.len() {
            assert_eq!(feed(&[&stream[..i], &stream[i..]]), whole, "split at {i}");
            for j in i..=stream.len() {
                assert_eq!(
                    feed(&[&stream[..i], &stream[i..j], &stream[j..]]),
                    whole,
                    "split at {i} and {j}"
                );
            }
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(feed(&bytes), whole, "one byte at a time");
    }
}
