//! `http://` URLs whose host is an IPv4 address (nothing is resolved).

use core::net::{Ipv4Addr, SocketAddrV4};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub addr: SocketAddrV4,
    /// The Host header: the address, and the port unless it is 80.
    pub host: String,
    /// The request target: path and query (`/` when the URL has none).
    pub target: String,
}

/// Parses `http://A.B.C.D[:PORT][/PATH][?QUERY]` (a fragment is dropped).
pub fn parse_url(s: &str) -> Result<Url, String> {
    let bad = |why: &str| format!("bad URL {s:?}: {why}");
    let (scheme, rest) = s
        .split_once("://")
        .ok_or_else(|| bad("expected http://ADDRESS[:PORT]/PATH"))?;
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(bad("only http:// is supported"));
    }
    let rest = rest.split('#').next().unwrap_or("");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(end);
    if authority.contains('@') {
        return Err(bad("user information is not supported"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => {
            let port: u16 = Some(p)
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse().ok())
                .filter(|&p| p != 0)
                .ok_or_else(|| bad("bad port"))?;
            (h, port)
        }
        None => (authority, 80),
    };
    let ip: Ipv4Addr = host
        .parse()
        .map_err(|_| bad("the host must be an IPv4 address (ustack-get resolves no names)"))?;
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        return Err(bad("the host cannot be reached by TCP"));
    }
    let target = match target {
        "" => "/".to_string(),
        t if t.starts_with('?') => format!("/{t}"),
        t => t.to_string(),
    };
    if !target.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(bad(
            "spaces and non-ASCII characters must be percent-encoded",
        ));
    }
    Ok(Url {
        addr: SocketAddrV4::new(ip, port),
        host: if port == 80 {
            ip.to_string()
        } else {
            format!("{ip}:{port}")
        },
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_urls() {
        let u = parse_url("http://10.99.0.1/a/b?c=d#frag").unwrap();
        assert_eq!(u.addr, "10.99.0.1:80".parse().unwrap());
        assert_eq!(
            (u.host.as_str(), u.target.as_str()),
            ("10.99.0.1", "/a/b?c=d")
        );
        let u = parse_url("HTTP://10.99.0.1:8080").unwrap();
        assert_eq!(u.addr, "10.99.0.1:8080".parse().unwrap());
        assert_eq!(
            (u.host.as_str(), u.target.as_str()),
            ("10.99.0.1:8080", "/")
        );
        assert_eq!(parse_url("http://10.99.0.1?x").unwrap().target, "/?x");
    }

    #[test]
    fn bad_urls() {
        for s in [
            "10.99.0.1/",
            "https://10.99.0.1/",
            "http://example.com/",
            "http://10.99.0.1:0/",
            "http://10.99.0.1:99999/",
            "http://10.99.0.1:/",
            "http://10.99.0.1:+80/",
            "http://u@10.99.0.1/",
            "http://0.0.0.0/",
            "http://10.99.0.1/a b",
            "http:///x",
        ] {
            assert!(parse_url(s).is_err(), "{s}");
        }
    }
}
