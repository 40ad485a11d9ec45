//! The capture filter of `ustack pcap`: a small language of tcpdump's
//! words, parsed here (no libpcap), matched against whole frames.
//!
//! ```text
//! expr    := term (("or" | "||") term)*
//! term    := factor (("and" | "&&")? factor)*     adjacent factors are and-ed
//! factor  := ("not" | "!") factor | "(" expr ")" | primitive
//! primitive :=
//!     [src|dst] host ADDR          IPv4/IPv6 source or destination (ARP's too)
//!     [src|dst] net PREFIX         10.0.0.0/8, fd00::/64
//!     [src|dst] port N             TCP or UDP
//!     proto N|tcp|udp|icmp|icmp6   the IP protocol (IPv6: after extension headers)
//!     tcp | udp | icmp | icmp6 | arp | ip | ip6
//!     vlan [ID]                    802.1Q-tagged (with that VLAN id)
//! ```
//!
//! Unlike tcpdump, every primitive looks past VLAN tags: `vlan 10 and
//! port 80` and `port 80` both see a tagged frame's TCP port.  A frame
//! too short for what a primitive asks simply does not match it.

use std::fmt;
use std::net::IpAddr;

/// Which end of a packet a primitive looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Src,
    Dst,
    Either,
}

/// A parsed filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Matches every frame (the empty filter).
    Any,
    Host(Dir, IpAddr),
    Net(Dir, IpAddr, u8),
    Port(Dir, u16),
    /// The IP protocol (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6).
    Proto(u8),
    Arp,
    Ip,
    Ip6,
    Vlan(Option<u16>),
    Not(Box<Filter>),
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
}

/// Why a filter does not parse: what, and at which word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for FilterError {}

/// Splits a filter into words and parentheses.
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for ch in s.chars() {
        if ch.is_whitespace() || ch == '(' || ch == ')' {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if !ch.is_whitespace() {
                out.push(ch.to_string());
            }
        } else {
            word.push(ch);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

struct Parser {
    words: Vec<String>,
    at: usize,
}

const PRIMITIVES: &str =
    "host, net, port, proto, tcp, udp, icmp, icmp6, arp, ip, ip6, vlan, not, src, dst or (";

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.words.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> Option<String> {
        let w = self.words.get(self.at).cloned();
        self.at += 1;
        w
    }

    fn fail<T>(&self, message: String) -> Result<T, FilterError> {
        Err(FilterError { message })
    }

    /// The word after `what`, or an error saying `what` needs `needs`.
    fn value(&mut self, what: &str, needs: &str) -> Result<String, FilterError> {
        match self.next() {
            Some(w) if w != "(" && w != ")" => Ok(w),
            _ => self.fail(format!("`{what}` needs {needs}")),
        }
    }

    fn expr(&mut self) -> Result<Filter, FilterError> {
        let mut left = self.term()?;
        while matches!(self.peek(), Some("or" | "||")) {
            self.at += 1;
            let right = self.term()?;
            left = Filter::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn term(&mut self) -> Result<Filter, FilterError> {
        let mut left = self.factor()?;
        loop {
            match self.peek() {
                Some("and" | "&&") => self.at += 1,
                // Adjacent factors: `tcp port 80`.
                Some(w) if w != "or" && w != "||" && w != ")" => {}
                _ => return Ok(left),
            }
            let right = self.factor()?;
            left = Filter::And(Box::new(left), Box::new(right));
        }
    }

    fn factor(&mut self) -> Result<Filter, FilterError> {
        match self.peek() {
            Some("not" | "!") => {
                self.at += 1;
                Ok(Filter::Not(Box::new(self.factor()?)))
            }
            Some("(") => {
                self.at += 1;
                let inner = self.expr()?;
                match self.next().as_deref() {
                    Some(")") => Ok(inner),
                    Some(w) => self.fail(format!("expected `)`, found `{w}`")),
                    None => self.fail("a `(` is never closed".into()),
                }
            }
            _ => self.primitive(),
        }
    }

    fn primitive(&mut self) -> Result<Filter, FilterError> {
        let Some(word) = self.next() else {
            return self.fail(format!("the filter ends where {PRIMITIVES} was expected"));
        };
        let (dir, word) = match word.as_str() {
            "src" | "dst" => {
                let dir = if word == "src" { Dir::Src } else { Dir::Dst };
                match self.next() {
                    Some(w) if matches!(w.as_str(), "host" | "net" | "port") => (dir, w),
                    Some(w) => {
                        return self
                            .fail(format!("`{word}` goes before host, net or port, not `{w}`"))
                    }
                    None => return self.fail(format!("`{word}` needs host, net or port after it")),
                }
            }
            _ => (Dir::Either, word),
        };
        Ok(match word.as_str() {
            "host" => {
                let v = self.value("host", "an address")?;
                let a: IpAddr = v
                    .parse()
                    .or_else(|_| self.fail(format!("host `{v}` is not an IPv4 or IPv6 address")))?;
                Filter::Host(dir, a)
            }
            "net" => {
                let v = self.value("net", "a prefix (10.0.0.0/8)")?;
                let (a, len) =
                    parse_prefix(&v).or_else(|why| self.fail(format!("net `{v}`: {why}")))?;
                Filter::Net(dir, a, len)
            }
            "port" => {
                let v = self.value("port", "a number")?;
                let p: u16 = v
                    .parse()
                    .or_else(|_| self.fail(format!("port `{v}` is not a number 0..65535")))?;
                Filter::Port(dir, p)
            }
            "proto" => {
                let v = self.value("proto", "a protocol (tcp, udp, icmp, icmp6 or 0..255)")?;
                Filter::Proto(match v.as_str() {
                    "tcp" => 6,
                    "udp" => 17,
                    "icmp" => 1,
                    "icmp6" => 58,
                    n => n.parse().or_else(|_| {
                        self.fail(format!(
                            "proto `{n}` is not tcp, udp, icmp, icmp6 or a number 0..255"
                        ))
                    })?,
                })
            }
            "tcp" => Filter::Proto(6),
            "udp" => Filter::Proto(17),
            "icmp" => Filter::Proto(1),
            "icmp6" => Filter::Proto(58),
            "arp" => Filter::Arp,
            "ip" => Filter::Ip,
            "ip6" => Filter::Ip6,
            "vlan" => match self.peek().and_then(|w| w.parse::<u16>().ok()) {
                Some(id) => {
                    self.at += 1;
                    if id > 4095 {
                        return self.fail(format!("vlan {id} is not a VLAN id 0..4095"));
                    }
                    Filter::Vlan(Some(id))
                }
                None => Filter::Vlan(None),
            },
            ")" => return self.fail("a `)` with no `(` before it".into()),
            "and" | "&&" | "or" | "||" => {
                return self.fail(format!("`{word}` needs something to its left"))
            }
            w => return self.fail(format!("unknown word `{w}`: expected {PRIMITIVES}")),
        })
    }
}

/// `ADDR/LEN`, or an address alone (all of it).
fn parse_prefix(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (s, None),
    };
    let a: IpAddr = a.parse().map_err(|_| format!("`{a}` is not an address"))?;
    let max = if a.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or_else(|| format!("`{l}` is not a prefix length 0..{max}"))?,
        None => max,
    };
    Ok((a, len))
}

impl Filter {
    /// Parses a filter; the empty string is [`Filter::Any`].
    pub fn parse(s: &str) -> Result<Filter, FilterError> {
        let mut p = Parser {
            words: tokens(s),
            at: 0,
        };
        if p.words.is_empty() {
            return Ok(Filter::Any);
        }
        let f = p.expr()?;
        match p.peek() {
            None => Ok(f),
            Some(")") => p.fail("a `)` with no `(` before it".into()),
            Some(w) => p.fail(format!("unexpected `{w}`")),
        }
    }

    /// Whether `frame` (an Ethernet frame, tags and all) matches.
    pub fn matches(&self, frame: &[u8]) -> bool {
        self.eval(&Headers::of(frame))
    }

    fn eval(&self, h: &Headers) -> bool {
        match self {
            Filter::Any => true,
            Filter::Host(d, a) => h.addrs(*d, |x| x == *a),
            Filter::Net(d, a, len) => h.addrs(*d, |x| in_prefix(x, *a, *len)),
            Filter::Port(d, p) => h.ports.is_some_and(|(s, t)| match d {
                Dir::Src => s == *p,
                Dir::Dst => t == *p,
                Dir::Either => s == *p || t == *p,
            }),
            Filter::Proto(p) => h.proto == Some(*p),
            Filter::Arp => h.ethertype == Some(ETH_ARP),
            Filter::Ip => h.ethertype == Some(ETH_IPV4),
            Filter::Ip6 => h.ethertype == Some(ETH_IPV6),
            Filter::Vlan(id) => match (h.vlan, id) {
                (Some(v), Some(want)) => v == *want,
                (Some(_), None) => true,
                (None, _) => false,
            },
            Filter::Not(f) => !f.eval(h),
            Filter::And(a, b) => a.eval(h) && b.eval(h),
            Filter::Or(a, b) => a.eval(h) || b.eval(h),
        }
    }
}

fn in_prefix(x: IpAddr, net: IpAddr, len: u8) -> bool {
    match (x, net) {
        (IpAddr::V4(x), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(x) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(x), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(x) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

const ETH_IPV4: u16 = 0x0800;
const ETH_ARP: u16 = 0x0806;
const ETH_IPV6: u16 = 0x86dd;

/// What a filter looks at in a frame, read once.
#[derive(Debug, Default)]
struct Headers {
    /// The outermost 802.1Q tag's VLAN id.
    vlan: Option<u16>,
    /// The ethertype after the tags.
    ethertype: Option<u16>,
    /// IP source and destination (ARP's sender and target).
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    /// The IP protocol (IPv6: after the extension headers).
    proto: Option<u8>,
    /// TCP or UDP ports (not in a fragment after the first).
    ports: Option<(u16, u16)>,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

fn addr4(b: &[u8], at: usize) -> Option<IpAddr> {
    let a: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(IpAddr::from(a))
}

fn addr6(b: &[u8], at: usize) -> Option<IpAddr> {
    let a: [u8; 16] = b.get(at..at + 16)?.try_into().ok()?;
    Some(IpAddr::from(a))
}

impl Headers {
    fn of(frame: &[u8]) -> Headers {
        let mut h = Headers::default();
        let mut at = 12;
        let mut ethertype = be16(frame, at);
        // Tags (802.1Q, 802.1ad), at most two.
        for _ in 0..2 {
            if !matches!(ethertype, Some(0x8100 | 0x88a8)) {
                break;
            }
            if h.vlan.is_none() {
                h.vlan = be16(frame, at + 2).map(|tci| tci & 0x0fff);
            }
            at += 4;
            ethertype = be16(frame, at);
        }
        h.ethertype = ethertype;
        let l3 = frame.get(at + 2..).unwrap_or_default();
        match ethertype {
            Some(ETH_IPV4) => h.ipv4(l3),
            Some(ETH_IPV6) => h.ipv6(l3),
            // Ethernet/IPv4 ARP only: sender at 14, target at 24.
            Some(ETH_ARP) if be16(l3, 2) == Some(ETH_IPV4) && l3.get(4..6) == Some(&[6, 4]) => {
                h.src = addr4(l3, 14);
                h.dst = addr4(l3, 24);
            }
            _ => {}
        }
        h
    }

    fn ipv4(&mut self, p: &[u8]) {
        let Some(&vihl) = p.first() else { return };
        let ihl = usize::from(vihl & 0x0f) * 4;
        if vihl >> 4 != 4 || ihl < 20 || p.len() < ihl {
            return;
        }
        self.src = addr4(p, 12);
        self.dst = addr4(p, 16);
        self.proto = p.get(9).copied();
        let later_fragment = be16(p, 6).is_some_and(|f| f & 0x1fff != 0);
        if !later_fragment {
            self.transport(&p[ihl..]);
        }
    }

    fn ipv6(&mut self, p: &[u8]) {
        if p.first().is_none_or(|v| v >> 4 != 6) || p.len() < 40 {
            return;
        }
        self.src = addr6(p, 8);
        self.dst = addr6(p, 24);
        let mut next = p[6];
        let mut at = 40;
        // Hop-by-hop, routing, destination options, fragment: at most a few.
        for _ in 0..8 {
            match next {
                0 | 43 | 60 => {
                    let (Some(&n), Some(&len)) = (p.get(at), p.get(at + 1)) else {
                        return;
                    };
                    next = n;
                    at += (usize::from(len) + 1) * 8;
                }
                44 => {
                    let (Some(&n), Some(off)) = (p.get(at), be16(p, at + 2)) else {
                        return;
                    };
                    next = n;
                    at += 8;
                    if off & 0xfff8 != 0 {
                        self.proto = Some(next);
                        return;
                    }
                }
                _ => break,
            }
        }
        self.proto = Some(next);
        if let Some(rest) = p.get(at..) {
            self.transport(rest);
        }
    }

    fn transport(&mut self, l4: &[u8]) {
        if matches!(self.proto, Some(6 | 17)) {
            if let (Some(s), Some(d)) = (be16(l4, 0), be16(l4, 2)) {
                self.ports = Some((s, d));
            }
        }
    }

    fn addrs(&self, d: Dir, f: impl Fn(IpAddr) -> bool) -> bool {
        let src = self.src.is_some_and(&f);
        let dst = self.dst.is_some_and(&f);
        match d {
            Dir::Src => src,
            Dir::Dst => dst,
            Dir::Either => src || dst,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame: optional tag, IPv4 TCP/UDP from `src:sp` to
    /// `dst:dp`.
    fn ipv4_frame(
        vlan: Option<u16>,
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        sp: u16,
        dp: u16,
    ) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, proto, 0, 0];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        ip.extend_from_slice(&sp.to_be_bytes());
        ip.extend_from_slice(&dp.to_be_bytes());
        ip.extend_from_slice(&[0; 16]);
        f.extend_from_slice(&ip);
        f
    }

    fn ipv6_udp_frame_with_hop_by_hop(sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x86, 0xdd];
        let src: std::net::Ipv6Addr = "fd99::1".parse().unwrap();
        let dst: std::net::Ipv6Addr = "fd99::2".parse().unwrap();
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 16, 0, 64]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&dst.octets());
        // Hop-by-hop: next UDP, 8 bytes.
        f.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        f.extend_from_slice(&sp.to_be_bytes());
        f.extend_from_slice(&dp.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    fn arp_frame(sender: [u8; 4], target: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&sender);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&target);
        f
    }

    fn m(filter: &str, frame: &[u8]) -> bool {
        Filter::parse(filter)
            .unwrap_or_else(|e| panic!("{filter}: {e}"))
            .matches(frame)
    }

    #[test]
    fn primitives_match_what_they_name() {
        let tcp = ipv4_frame(None, 6, [10, 99, 70, 1], [10, 99, 70, 2], 40000, 80);
        let tagged_udp = ipv4_frame(Some(20), 17, [10, 99, 71, 1], [10, 99, 75, 20], 5353, 7);
        assert!(m("", &tcp));
        assert!(m("tcp", &tcp) && !m("udp", &tcp) && m("ip", &tcp) && !m("ip6", &tcp));
        assert!(m("host 10.99.70.2", &tcp) && !m("host 10.99.70.3", &tcp));
        assert!(m("src host 10.99.70.1", &tcp) && !m("dst host 10.99.70.1", &tcp));
        assert!(m("net 10.99.70.0/24", &tcp) && !m("net 10.99.71.0/24", &tcp));
        assert!(m("dst net 10.99.70.0/30", &tcp) && !m("dst net 10.99.70.0/31", &tcp));
        assert!(m("port 80", &tcp) && m("dst port 80", &tcp) && !m("src port 80", &tcp));
        assert!(m("proto 6", &tcp) && m("proto tcp", &tcp));
        assert!(!m("vlan", &tcp) && m("vlan", &tagged_udp));
        assert!(m("vlan 20", &tagged_udp) && !m("vlan 10", &tagged_udp));
        // Past the tag.
        assert!(m("udp port 7 and host 10.99.75.20", &tagged_udp));
        assert!(!m("arp", &tcp));
        let arp = arp_frame([10, 99, 70, 1], [10, 99, 70, 2]);
        assert!(m("arp", &arp) && m("src host 10.99.70.1", &arp) && m("dst host 10.99.70.2", &arp));
        assert!(!m("port 80", &arp) && !m("tcp", &arp));
        let v6 = ipv6_udp_frame_with_hop_by_hop(53, 5000);
        assert!(m("ip6 and udp and src port 53", &v6));
        assert!(m("host fd99::2 and net fd99::/64", &v6) && !m("net fd98::/16", &v6));
        assert!(!m("host 10.99.70.1", &v6));
    }

    #[test]
    fn and_or_not_and_parentheses() {
        let tcp = ipv4_frame(None, 6, [10, 99, 70, 1], [10, 99, 70, 2], 40000, 80);
        assert!(m("tcp and port 80", &tcp) && m("tcp && port 80", &tcp) && m("tcp port 80", &tcp));
        assert!(!m("tcp and port 81", &tcp));
        assert!(m("udp or port 80", &tcp) && m("udp || tcp", &tcp));
        assert!(!m("not tcp", &tcp) && m("! udp", &tcp));
        // `and` binds tighter than `or`; `not` tighter than both.
        assert!(m("udp and port 1 or tcp", &tcp));
        assert!(!m("udp and (port 1 or tcp)", &tcp));
        assert!(m("not udp and not arp", &tcp));
        assert!(m("not (udp or arp)", &tcp));
        assert!(!m("not (tcp or arp)", &tcp));
    }

    #[test]
    fn short_or_odd_frames_match_nothing_and_do_not_panic() {
        let tcp = ipv4_frame(Some(5), 6, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        for n in 0..tcp.len() {
            let f = Filter::parse("host 10.0.0.1 or port 2 or vlan 5 or proto 6").unwrap();
            let _ = f.matches(&tcp[..n]);
        }
        // Cut before the ports: the address matches, the port does not.
        assert!(m("host 10.0.0.1", &tcp[..18 + 20]));
        assert!(!m("port 2", &tcp[..18 + 20]));
        // A later fragment has no ports.
        let mut frag = ipv4_frame(None, 17, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        frag[14 + 6] = 0x00;
        frag[14 + 7] = 0x10;
        assert!(m("udp", &frag) && !m("port 2", &frag));
    }

    #[test]
    fn bad_filters_say_what_is_wrong() {
        for (bad, says) in [
            ("host", "`host` needs an address"),
            ("host 10.0.0", "not an IPv4 or IPv6 address"),
            ("net 10.0.0.0/33", "not a prefix length 0..32"),
            ("port 70000", "not a number 0..65535"),
            ("port http", "not a number"),
            ("proto sctp", "is not tcp, udp, icmp, icmp6"),
            ("tcp and", "the filter ends"),
            ("or tcp", "needs something to its left"),
            ("(tcp or udp", "never closed"),
            ("tcp)", "with no `(`"),
            ("src tcp", "goes before host, net or port"),
            ("dst", "needs host, net or port"),
            ("vlan 5000", "not a VLAN id"),
            ("tcp portt 80", "unknown word `portt`"),
            ("host (", "`host` needs an address"),
        ] {
            let e = Filter::parse(bad).unwrap_err();
            assert!(e.message.contains(says), "{bad}: {e}");
        }
    }
}
