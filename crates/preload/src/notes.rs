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
