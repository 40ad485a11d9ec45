//! What the library does not handle, said once per name on stderr.

use std::collections::HashSet;
use std::sync::Mutex;

static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Prints `libustack_preload: {what}` the first time `what` comes up.
pub fn once(what: impl Into<String>) {
    let what = what.into();
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(what.clone()) {
        // One write for the whole line: stderr is unbuffered, and
        // `eprintln!` writes each piece of its format on its own, which
        // interleaves with the lines of processes sharing the stderr (the
        // children of a fork saying the same thing at once).
        let line = format!("libustack_preload[{}]: {what}\n", std::process::id());
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
}

/// A socket option's C name, for messages.
pub fn option_name(level: i32, name: i32) -> String {
    let known = match (level, name) {
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => "SO_REUSEADDR",
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => "SO_REUSEPORT",
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => "SO_KEEPALIVE",
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => "SO_SNDBUF",
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => "SO_RCVBUF",
        (libc::SOL_SOCKET, libc::SO_LINGER) => "SO_LINGER",
        (libc::SOL_SOCKET, libc::SO_PRIORITY) => "SO_PRIORITY",
        (libc::SOL_SOCKET, libc::SO_BINDTODEVICE) => "SO_BINDTODEVICE",
        (libc::SOL_SOCKET, libc::SO_TIMESTAMP) => "SO_TIMESTAMP",
        (libc::SOL_SOCKET, libc::SO_ATTACH_REUSEPORT_CBPF) => "SO_ATTACH_REUSEPORT_CBPF",
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER) => "IP_MTU_DISCOVER",
        (libc::IPPROTO_IP, libc::IP_RECVERR) => "IP_RECVERR",
        (libc::IPPROTO_IP, libc::IP_FREEBIND) => "IP_FREEBIND",
        (libc::IPPROTO_IP, libc::IP_TRANSPARENT) => "IP_TRANSPARENT",
        (libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT) => "IP_BIND_ADDRESS_NO_PORT",
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => "TCP_MAXSEG",
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => "TCP_FASTOPEN",
        (libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT) => "TCP_DEFER_ACCEPT",
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => "TCP_QUICKACK",
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => "TCP_CONGESTION",
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => "TCP_USER_TIMEOUT",
        (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => "TCP_NOTSENT_LOWAT",
        (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => "IPV6_V6ONLY",
        _ => "",
    };
    if known.is_empty() {
        format!("setsockopt(level {level}, option {name})")
    } else {
        format!("setsockopt({known})")
    }
}

/// A socket type's C name (`SOCK_RAW`), for messages; the number when it
/// has none.
pub fn socket_type_name(ty: i32) -> String {
    let known = match ty {
        libc::SOCK_STREAM => "SOCK_STREAM",
        libc::SOCK_DGRAM => "SOCK_DGRAM",
        libc::SOCK_RAW => "SOCK_RAW",
        libc::SOCK_RDM => "SOCK_RDM",
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET",
        libc::SOCK_DCCP => "SOCK_DCCP",
        _ => return format!("socket type {ty}"),
    };
    known.to_string()
}

/// An IP protocol's C name (`IPPROTO_ICMP`), for messages; the number
/// when it has none.
pub fn protocol_name(protocol: i32) -> String {
    let known = match protocol {
        0 => "protocol 0",
        libc::IPPROTO_ICMP => "IPPROTO_ICMP",
        libc::IPPROTO_IGMP => "IPPROTO_IGMP",
        libc::IPPROTO_TCP => "IPPROTO_TCP",
        libc::IPPROTO_UDP => "IPPROTO_UDP",
        libc::IPPROTO_IPV6 => "IPPROTO_IPV6",
        libc::IPPROTO_GRE => "IPPROTO_GRE",
        libc::IPPROTO_ESP => "IPPROTO_ESP",
        libc::IPPROTO_ICMPV6 => "IPPROTO_ICMPV6",
        libc::IPPROTO_SCTP => "IPPROTO_SCTP",
        libc::IPPROTO_UDPLITE => "IPPROTO_UDPLITE",
        libc::IPPROTO_MPTCP => "IPPROTO_MPTCP",
        libc::IPPROTO_RAW => "IPPROTO_RAW",
        _ => return format!("protocol {protocol}"),
    };
    known.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_types_and_protocols_are_named() {
        assert_eq!(socket_type_name(libc::SOCK_RAW), "SOCK_RAW");
        assert_eq!(socket_type_name(libc::SOCK_DGRAM), "SOCK_DGRAM");
        assert_eq!(socket_type_name(77), "socket type 77");
        assert_eq!(protocol_name(libc::IPPROTO_ICMP), "IPPROTO_ICMP");
        assert_eq!(protocol_name(libc::IPPROTO_RAW), "IPPROTO_RAW");
        assert_eq!(protocol_name(0), "protocol 0");
        assert_eq!(protocol_name(200), "protocol 200");
    }
}
