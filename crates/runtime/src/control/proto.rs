//! The control protocol: what the `ustack` command asks an engine and what
//! the engine answers, as typed Rust values.
//!
//! On the wire each request and each reply is one line of JSON (serde's
//! encoding of [`RequestFrame`] and [`ReplyFrame`]) ended by `\n`.  A frame
//! carries the protocol [`VERSION`]; an engine answers a frame of another
//! version with [`ErrorKind::Version`] and the version it speaks, so a
//! newer CLI can tell an old engine from a broken one.  Unknown fields are
//! refused rather than ignored: a request the engine does not understand
//! entirely must not be half done.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The version this build speaks.
pub const VERSION: u32 = 1;

/// The longest request line an engine reads (bytes, the `\n` included);
/// a longer one is refused and its client dropped.
pub const MAX_REQUEST: usize = 16 * 1024;

/// A request as sent: `{"v":1,"req":{"op":"stats"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFrame {
    pub v: u32,
    pub req: Request,
}

/// A reply as sent: `{"v":1,"ok":{...}}` or `{"v":1,"err":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyFrame {
    pub v: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<Reply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err: Option<ControlError>,
}

impl ReplyFrame {
    pub fn new(r: Result<Reply, ControlError>) -> Self {
        match r {
            Ok(reply) => ReplyFrame {
                v: VERSION,
                ok: Some(reply),
                err: None,
            },
            Err(e) => ReplyFrame {
                v: VERSION,
                ok: None,
                err: Some(e),
            },
        }
    }

    /// The reply or the error it carries (a frame with neither, or both,
    /// is malformed).
    pub fn into_result(self) -> Result<Reply, ControlError> {
        match (self.ok, self.err) {
            (Some(r), None) => Ok(r),
            (None, Some(e)) => Err(e),
            _ => Err(ControlError::new(
                ErrorKind::BadReply,
                "a reply must carry exactly one of ok and err",
            )),
        }
    }
}

/// Which routing table (FIB) a route request is about: 0 is the main
/// table; others exist once a route, a rule or an interface's `ipfw_pr`
/// names them (`ustack route -fib N`).
pub type Fib = u32;

/// What a client asks one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Who is answering (process, engine, ports).
    Identify,
    /// Every counter of the engine, per port too, by name.
    Stats,
    /// The interfaces with their addresses and counters.
    Interfaces,
    /// Makes VLAN interface `name`: VLAN `vid` on port `port`, with an
    /// IPv4 address (its subnet's route in the main FIB; a default route
    /// through `gateway` when there is none yet), as a `[vlanN]` section
    /// would at start.
    VlanCreate {
        name: String,
        port: String,
        vid: u16,
        addr: std::net::Ipv4Addr,
        prefix_len: u8,
        #[serde(default)]
        gateway: Option<std::net::Ipv4Addr>,
        /// By default the port's.
        #[serde(default)]
        mtu: Option<usize>,
        /// IPv6 on the interface: an address (checked by duplicate
        /// address detection before use) beside the link-local one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        addr6: Option<std::net::Ipv6Addr>,
        /// The prefix length of `addr6` (64 when left out).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix_len6: Option<u8>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gateway6: Option<std::net::Ipv6Addr>,
    },
    /// Changes one interface.
    InterfaceSet {
        iface: String,
        change: InterfaceChange,
    },
    /// The routes of table `fib`.
    Routes {
        #[serde(default)]
        fib: Fib,
    },
    /// Adds a route (an error if one to the prefix exists).
    RouteAdd {
        #[serde(default)]
        fib: Fib,
        route: RouteSpec,
    },
    /// Replaces the route to the prefix of `route` (an error if none).
    RouteChange {
        #[serde(default)]
        fib: Fib,
        route: RouteSpec,
    },
    /// Removes the route to `dest` (`10.0.0.0/8`, `fd00::/64`).
    RouteDelete {
        #[serde(default)]
        fib: Fib,
        dest: String,
    },
    /// The neighbour caches (ARP and NDP).
    Neighbors,
    /// Adds or replaces a neighbour entry.
    NeighborAdd {
        ip: IpAddr,
        mac: String,
        /// The interface; by default the one whose subnet holds `ip`.
        #[serde(default)]
        iface: Option<String>,
    },
    /// Removes a neighbour entry.
    NeighborDelete {
        ip: IpAddr,
        #[serde(default)]
        iface: Option<String>,
    },
    /// Removes every neighbour entry of a family.
    NeighborFlush { family: Family },
    /// Every socket: connections, listeners, UDP.
    Sockets,
    /// Sysctl values: one, or all with `name: null`.
    SysctlGet {
        #[serde(default)]
        name: Option<String>,
    },
    /// Sets a sysctl that can change while the engine runs.
    SysctlSet { name: String, value: String },
    /// The policy rules that pick a packet's FIB, in the order tried.
    Rules,
    /// Adds a policy rule.
    RuleAdd { rule: RuleSpec },
    /// Removes the policy rule equal to `rule`.
    RuleDelete { rule: RuleSpec },
    /// Starts a live capture of a port's frames (`ustack pcap`): `iface`
    /// is a port's number or interface name, or a VLAN interface (its
    /// port's frames of that VLAN); `filter` is
    /// [`Filter`](super::filter::Filter)'s language; `snaplen` 0 means
    /// whole frames.  One capture per port at a time.
    CaptureStart {
        iface: String,
        #[serde(default)]
        filter: String,
        #[serde(default)]
        snaplen: u32,
    },
    /// The frames captured since the last read (a bounded batch).  A
    /// capture not read for a few seconds ends.
    CaptureRead { port: u32, id: u64 },
    /// Ends a capture, with the frames it still held.
    CaptureStop { port: u32, id: u64 },
    /// The exception path's state (`ustack kni`).
    Kni,
    /// Sets `kni_action`: `default`, `alltokni` or `alltoff`.
    KniSetAction { action: String },
}

/// A policy rule as asked for: packets from `from` (a prefix), from the
/// addresses of `iface`, or of sockets whose SO_MARK is `mark` (exactly
/// one of the three) use FIB `fib`; rules are tried by ascending
/// `priority` (ipfw's rule number).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub priority: u32,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub iface: Option<String>,
    /// Left out of the JSON when absent, so that an engine of the
    /// release before marks still reads the other rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
    pub fib: Fib,
}

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Inet,
    Inet6,
}

/// A change to an interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "set", rename_all = "snake_case", deny_unknown_fields)]
pub enum InterfaceChange {
    /// Adds an address (an IPv4 alias answered like a VIP, or an IPv6
    /// address with its prefix length).
    AddAddr {
        addr: IpAddr,
        #[serde(default)]
        prefix_len: Option<u8>,
    },
    /// Removes an address (not the IPv4 primary).
    RemoveAddr { addr: IpAddr },
    /// The largest IP packet the interface sends.
    Mtu { mtu: usize },
    /// Administratively up or down.
    Up { up: bool },
    /// Destroys a VLAN interface.
    Destroy,
}

/// A route as asked for: the prefix, the next hop (none: on the link), the
/// interface (by default the one that reaches the gateway).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    pub dest: String,
    #[serde(default)]
    pub gateway: Option<IpAddr>,
    #[serde(default)]
    pub iface: Option<String>,
}

/// What an engine answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Identity(Identity),
    Stats {
        counters: Vec<(String, u64)>,
    },
    Interfaces {
        interfaces: Vec<InterfaceInfo>,
    },
    Routes {
        fib: Fib,
        routes: Vec<RouteInfo>,
    },
    Neighbors {
        neighbors: Vec<NeighborInfo>,
    },
    Sockets {
        sockets: Vec<SocketInfo>,
    },
    Sysctls {
        sysctls: Vec<SysctlInfo>,
    },
    Rules {
        rules: Vec<RuleSpec>,
        /// How many FIBs exist (numbered from 0).
        fibs: u32,
    },
    Kni(KniInfo),
    /// A capture began on port `port`.
    CaptureStarted {
        port: u32,
        id: u64,
        /// The filter in force (a VLAN interface's adds its VLAN).
        filter: String,
    },
    /// Frames of a capture, and its counts so far.
    Captured {
        frames: Vec<FrameRecord>,
        /// Frames that passed the filter.
        matched: u64,
        /// Frames that passed the filter and found the queue full (the
        /// reader was too slow).
        dropped: u64,
        /// Frames still waiting for a read.
        queued: u64,
    },
    /// A change was made; what it did.
    Done {
        message: String,
    },
}

/// The exception path of an engine, as F-Stack's knictl shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KniInfo {
    /// `[kni] enable=1` (the rest is empty when not).
    pub enabled: bool,
    /// `reject` (the listed ports to ustack, the rest to the kernel) or
    /// `accept` (the listed ports to the kernel, the rest to ustack).
    pub method: String,
    /// `default` (by the method), `alltokni` or `alltoff`.
    pub action: String,
    /// The TCP and UDP ports the method names (`80,443,8000-8010`).
    pub tcp_ports: String,
    pub udp_ports: String,
    /// The ports whose TAP this engine holds (frames for the kernel reach
    /// it through the engine that does).
    pub tap_ports: Vec<u32>,
    /// `kni_to_kernel`, `kni_from_kernel`, `kni_drop` ...
    pub counters: Vec<(String, u64)>,
}

/// A captured frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameRecord {
    /// Microseconds after the Unix epoch.
    pub ts_us: u64,
    /// Its length on the wire.
    pub len: u32,
    /// Sent by the engine (else received).
    pub outgoing: bool,
    /// Its first snap-length bytes, in hex.
    pub data: String,
}

/// Lower-case hex of `bytes`.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The bytes of hex `s`; `None` when it is not hex of whole bytes.
pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// Who answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    pub pid: u32,
    /// The process's number among those sharing a configuration
    /// (F-Stack's `--proc-id`).
    pub proc_id: u32,
    /// The engine's number in its process.
    pub engine: u32,
    pub ports: u32,
    /// Microseconds since the engine started.
    pub uptime_us: u64,
}

/// One interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceInfo {
    pub index: u32,
    pub name: String,
    /// `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    pub mtu: usize,
    pub up: bool,
    /// `UP`, `BROADCAST`, `RUNNING`, `MULTICAST`, `TXCSUM` ...
    pub flags: Vec<String>,
    /// IPv4: the primary first.
    pub inet: Vec<AddrInfo>,
    pub broadcast: String,
    /// IPv4 addresses beyond the primary (VIPs and aliases).
    pub vips: Vec<String>,
    /// IPv6, the link-local first.
    pub inet6: Vec<AddrInfo>,
    pub gateway: Option<String>,
    pub gateway6: Option<String>,
    /// The port's link counters (`rx_frames`, `tx_bytes` ...).
    pub counters: Vec<(String, u64)>,
    /// A VLAN interface's VLAN id and port.
    #[serde(default)]
    pub vlan: Option<VlanOf>,
}

/// What a VLAN interface rides on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VlanOf {
    pub vid: u16,
    pub port: String,
}

/// An address with its prefix length and, for IPv6, its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddrInfo {
    pub addr: IpAddr,
    pub prefix_len: u8,
    /// `preferred`, `tentative`, `duplicate` (IPv6); empty for IPv4.
    #[serde(default)]
    pub state: String,
}

/// One route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteInfo {
    pub dest: String,
    pub gateway: Option<IpAddr>,
    pub iface: String,
    /// `U` up, `G` gateway, `H` host, `S` static (FreeBSD's letters).
    pub flags: String,
}

/// One neighbour entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighborInfo {
    pub ip: IpAddr,
    pub mac: Option<String>,
    pub iface: String,
    /// `reachable`, `stale`, `delay`, `probe`, `incomplete`, `permanent`.
    pub state: String,
    /// Milliseconds until it expires, when it does.
    pub expires_ms: Option<u64>,
}

/// One socket, as `ss -tanoi` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SocketInfo {
    /// `tcp`, `tcp6`, `udp`, `udp6`.
    pub proto: String,
    /// `LISTEN`, `ESTABLISHED` ... (TCP); empty for UDP.
    pub state: String,
    pub local: String,
    pub remote: Option<String>,
    /// Bytes received and not read (for a listener: connections waiting
    /// to be accepted).
    pub recv_q: u64,
    /// Bytes not yet acknowledged or not yet sent (for a listener: its
    /// backlog).
    pub send_q: u64,
    /// The next timer: `on`/`keepalive`/`persist`/`delack`/`timewait`
    /// and milliseconds to go.
    pub timer: Option<(String, u64)>,
    /// TCP details: rto, rtt, cwnd, mss ... in `ss -i`'s words.
    pub info: Option<TcpDetails>,
    /// Closed by the application, finishing on its own.
    #[serde(default)]
    pub orphan: bool,
}

/// A connection's TCP figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcpDetails {
    pub rto_ms: u64,
    pub rtt_us: u64,
    pub rttvar_us: u64,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub retrans: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
}

/// One sysctl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SysctlInfo {
    pub name: String,
    pub value: String,
    /// Can be set while the engine runs; otherwise only from the
    /// configuration.
    pub live: bool,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ControlError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ControlError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ControlError {}

/// The kinds of [`ControlError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Not a request of this protocol (bad JSON, unknown op or field).
    BadRequest,
    /// Another protocol version; the message says which this engine speaks.
    Version,
    /// A value that cannot be right (an address, a prefix, an MTU).
    Invalid,
    NotFound,
    Exists,
    /// Only the configuration sets it (a sysctl read at start).
    ConfigOnly,
    /// Not something this engine can do.
    Unsupported,
    /// A reply that is not of this protocol (said by the client).
    BadReply,
}

/// Encodes a request frame as its line (with the `\n`).
pub fn encode_request(req: &Request) -> String {
    let frame = RequestFrame {
        v: VERSION,
        req: req.clone(),
    };
    let mut s = serde_json::to_string(&frame).unwrap_or_default();
    s.push('\n');
    s
}

/// Decodes one request line (without its `\n`): the request, or the error
/// to answer.
pub fn decode_request(line: &[u8]) -> Result<Request, ControlError> {
    // The version first, so a frame of another version gets the right
    // error even when its request would not parse here.
    #[derive(Deserialize)]
    struct VersionOnly {
        v: u32,
    }
    let version: VersionOnly = serde_json::from_slice(line).map_err(|e| {
        ControlError::new(
            ErrorKind::BadRequest,
            format!("not a request of protocol version {VERSION}: {e}"),
        )
    })?;
    if version.v != VERSION {
        return Err(ControlError::new(
            ErrorKind::Version,
            format!(
                "protocol version {} is not spoken here; this engine speaks version {VERSION}",
                version.v
            ),
        ));
    }
    serde_json::from_slice::<RequestFrame>(line)
        .map(|f| f.req)
        .map_err(|e| ControlError::new(ErrorKind::BadRequest, format!("bad request: {e}")))
}

/// Encodes a reply as its line (with the `\n`).
pub fn encode_reply(r: Result<Reply, ControlError>) -> Vec<u8> {
    let mut v = serde_json::to_vec(&ReplyFrame::new(r)).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Decodes one reply line.
pub fn decode_reply(line: &[u8]) -> Result<Reply, ControlError> {
    let frame: ReplyFrame = serde_json::from_slice(line)
        .map_err(|e| ControlError::new(ErrorKind::BadReply, format!("not a control reply: {e}")))?;
    if frame.v != VERSION {
        return Err(ControlError::new(
            ErrorKind::Version,
            format!(
                "the engine speaks protocol version {}, this ustack version {VERSION}",
                frame.v
            ),
        ));
    }
    frame.into_result()
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    let m = mac;
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Parses `aa:bb:cc:dd:ee:ff` (or with `-`).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in &mut out {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(req: Request) {
        let line = encode_request(&req);
        assert!(line.ends_with('\n'));
        assert_eq!(decode_request(line.trim_end().as_bytes()), Ok(req));
    }

    #[test]
    fn every_request_round_trips() {
        for req in [
            Request::Identify,
            Request::Stats,
            Request::Interfaces,
            Request::InterfaceSet {
                iface: "port0".into(),
                change: InterfaceChange::AddAddr {
                    addr: "fd99::5".parse().unwrap(),
                    prefix_len: Some(64),
                },
            },
            Request::InterfaceSet {
                iface: "port0".into(),
                change: InterfaceChange::Mtu { mtu: 1400 },
            },
            Request::Routes { fib: 0 },
            Request::RouteAdd {
                fib: 2,
                route: RouteSpec {
                    dest: "10.0.0.0/8".into(),
                    gateway: Some("10.99.1.1".parse().unwrap()),
                    iface: None,
                },
            },
            Request::RouteDelete {
                fib: 0,
                dest: "fd00::/64".into(),
            },
            Request::Neighbors,
            Request::NeighborAdd {
                ip: "10.99.1.9".parse().unwrap(),
                mac: "02:00:00:00:00:09".into(),
                iface: Some("port0".into()),
            },
            Request::NeighborFlush {
                family: Family::Inet6,
            },
            Request::Sockets,
            Request::SysctlGet { name: None },
            Request::SysctlSet {
                name: "net.inet.ip.ttl".into(),
                value: "32".into(),
            },
            Request::Rules,
            Request::VlanCreate {
                name: "ustack0.40".into(),
                port: "ustack0".into(),
                vid: 40,
                addr: "10.99.78.2".parse().unwrap(),
                prefix_len: 24,
                gateway: None,
                mtu: Some(1400),
                addr6: Some("fd99:78::2".parse().unwrap()),
                prefix_len6: Some(64),
                gateway6: None,
            },
            Request::InterfaceSet {
                iface: "ustack0.40".into(),
                change: InterfaceChange::Destroy,
            },
            Request::CaptureStart {
                iface: "ustack0.10".into(),
                filter: "tcp port 80".into(),
                snaplen: 128,
            },
            Request::CaptureRead { port: 0, id: 7 },
            Request::CaptureStop { port: 0, id: 7 },
            Request::Kni,
            Request::KniSetAction {
                action: "alltokni".into(),
            },
            Request::RuleAdd {
                rule: RuleSpec {
                    priority: 100,
                    from: Some("10.99.70.0/24".into()),
                    iface: None,
                    mark: None,
                    fib: 1,
                },
            },
            Request::RuleDelete {
                rule: RuleSpec {
                    priority: 100,
                    from: None,
                    iface: Some("vlan10".into()),
                    mark: None,
                    fib: 1,
                },
            },
            Request::RuleAdd {
                rule: RuleSpec {
                    priority: 10,
                    from: None,
                    iface: None,
                    mark: Some(7),
                    fib: 2,
                },
            },
        ] {
            round_trip(req);
        }
    }

    #[test]
    fn the_fib_defaults_to_the_main_table() {
        assert_eq!(
            decode_request(br#"{"v":1,"req":{"op":"routes"}}"#),
            Ok(Request::Routes { fib: 0 })
        );
    }

    #[test]
    fn replies_round_trip() {
        let replies = [
            Ok(Reply::Stats {
                counters: vec![("rx_frames".into(), 7)],
            }),
            Ok(Reply::Done {
                message: "route added".into(),
            }),
            Err(ControlError::new(
                ErrorKind::NotFound,
                "no route to 1.0.0.0/8",
            )),
        ];
        for r in replies {
            let line = encode_reply(r.clone());
            assert_eq!(line.last(), Some(&b'\n'));
            assert_eq!(decode_reply(&line[..line.len() - 1]), r);
        }
    }

    #[test]
    fn malformed_requests_are_refused_with_their_reason() {
        let kind = |line: &[u8]| decode_request(line).map_err(|e| e.kind);
        assert_eq!(kind(b"garbage"), Err(ErrorKind::BadRequest));
        assert_eq!(kind(b""), Err(ErrorKind::BadRequest));
        assert_eq!(kind(b"{\"v\":1}"), Err(ErrorKind::BadRequest));
        assert_eq!(
            kind(br#"{"v":1,"req":{"op":"reboot"}}"#),
            Err(ErrorKind::BadRequest)
        );
        // An unknown field is refused, not ignored.
        assert_eq!(
            kind(br#"{"v":1,"req":{"op":"routes","fib":0,"table":3}}"#),
            Err(ErrorKind::BadRequest)
        );
        assert_eq!(
            kind(br#"{"v":1,"req":{"op":"stats"},"extra":1}"#),
            Err(ErrorKind::BadRequest)
        );
        assert_eq!(
            kind(br#"{"v":1,"req":{"op":"route_add","route":{"dest":"x","gateway":"not-an-ip"}}}"#),
            Err(ErrorKind::BadRequest)
        );
        assert_eq!(kind(&[0xff, 0xfe, b'{']), Err(ErrorKind::BadRequest));
    }

    #[test]
    fn another_version_is_told_which_one_is_spoken() {
        let e = decode_request(br#"{"v":2,"req":{"op":"teleport"}}"#).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Version);
        assert!(e.message.contains("speaks version 1"), "{}", e.message);
    }

    #[test]
    fn a_reply_with_both_or_neither_is_malformed() {
        assert_eq!(
            decode_reply(br#"{"v":1}"#).map_err(|e| e.kind),
            Err(ErrorKind::BadReply)
        );
        assert_eq!(
            decode_reply(b"{\"v\":1,\"ok\":{\"kind\":\"done\",\"message\":\"\"},\"err\":{\"kind\":\"invalid\",\"message\":\"\"}}")
                .map_err(|e| e.kind),
            Err(ErrorKind::BadReply)
        );
    }

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_decode(&hex_encode(&bytes)), Some(bytes));
        assert_eq!(hex_encode(&[0x0a, 0xff]), "0aff");
        assert_eq!(hex_decode("0AfF"), Some(vec![0x0a, 0xff]));
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("zz"), None);
        assert_eq!(hex_decode(""), Some(vec![]));
    }

    #[test]
    fn macs() {
        assert_eq!(
            parse_mac("02:00:0a:ff:00:01"),
            Some([2, 0, 0x0a, 0xff, 0, 1])
        );
        assert_eq!(
            parse_mac("02-00-0a-ff-00-01"),
            Some([2, 0, 0x0a, 0xff, 0, 1])
        );
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:zz"), None);
        assert_eq!(format_mac([2, 0, 0x0a, 0xff, 0, 1]), "02:00:0a:ff:00:01");
    }
}
