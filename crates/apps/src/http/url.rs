//! `http://` URLs whose host is an IP address: IPv4, or IPv6 in brackets
//! (RFC 3986 3.2.2; nothing is resolved).

use core::net::{IpAddr, Ipv6Addr, SocketAddr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub addr: SocketAddr,
    /// The Host header: the address, and the port unless it is 80.
    pub host: String,
    /// The request target: path and query (`/` when the URL has none).
    pub target: String,
}

/// Parses `http://A.B.C.D[:PORT][/PATH][?QUERY]` or
/// `http://[IPV6][:PORT]/...` (a fragment is dropped; a zone id such as
/// `%25eth0` is not taken: link-local addresses need one).
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
    // An IPv6 host is in brackets; the port, if any, follows them.
    let (host, port_part) = match authority.strip_prefix('[') {
        Some(rest) => {
            let (h, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address needs its closing bracket"))?;
            match after {
                "" => (h, None),
                a => (h, Some(a.strip_prefix(':').ok_or_else(|| bad("bad port"))?)),
            }
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let (host, port) = match port_part {
        Some(p) => {
            let port: u16 = Some(p)
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse().ok())
                .filter(|&p| p != 0)
                .ok_or_else(|| bad("bad port"))?;
            (host, port)
        }
        None => (host, 80),
    };
    let bracketed = authority.starts_with('[');
    let ip: IpAddr = if bracketed {
        IpAddr::V6(
            host.parse::<Ipv6Addr>()
                .map_err(|_| bad("bad IPv6 address"))?,
        )
    } else {
        IpAddr::V4(host.parse().map_err(|_| {
            bad("the host must be an IP address, IPv6 in brackets (ustack-get resolves no names)")
        })?)
    };
    let unreachable = match ip {
        IpAddr::V4(v4) => v4.is_broadcast(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    };
    if ip.is_unspecified() || ip.is_multicast() || unreachable {
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
    // The Host header names the host as the URL does (RFC 9110 7.2).
    let host = if bracketed {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    // The stack reaches an IPv4-mapped address as the IPv4 one.
    let to = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    };
    Ok(Url {
        addr: SocketAddr::new(to, port),
        host: if port == 80 {
            host
        } else {
            format!("{host}:{port}")
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
    fn ipv6_urls() {
        let u = parse_url("http://[fd99::1]:8080/path?q").unwrap();
        assert_eq!(u.addr, "[fd99::1]:8080".parse().unwrap());
        assert_eq!(
            (u.host.as_str(), u.target.as_str()),
            ("[fd99::1]:8080", "/path?q")
        );
        let u = parse_url("http://[FD99:0::1]").unwrap();
        assert_eq!(u.addr, "[fd99::1]:80".parse().unwrap());
        assert_eq!((u.host.as_str(), u.target.as_str()), ("[fd99::1]", "/"));
        let u = parse_url("http://[::ffff:10.99.0.1]/").unwrap();
        assert_eq!(u.addr, "10.99.0.1:80".parse().unwrap());
        assert_eq!(u.host, "[::ffff:10.99.0.1]");
        for s in [
            "http://fd99::1/",
            "http://[fd99::1/",
            "http://[fd99::1]x/",
            "http://[fd99::1]:/",
            "http://[fd99::1]:0/",
            "http://[10.99.0.1]/",
            "http://[::]/",
            "http://[ff02::1]/",
            "http://[fe80::1]/",
            "http://[fe80::1%25eth0]/",
        ] {
            assert!(parse_url(s).is_err(), "{s}");
        }
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
