//! A packetdrill-style harness: a script injects segments from a fake peer
//! into one stack on a simulated clock and checks the segments the stack
//! emits.
//!
//! The stack under test is 10.99.1.2 (MAC 02:00:00:00:00:02, MTU 1500);
//! the peer is 10.99.1.1 (MAC 02:00:00:00:00:01), whose ARP entry is
//! resolved before the script starts.  The harness answers every ARP
//! request the stack makes, so other peer addresses work too.
//!
//! Sequence numbers are written as packetdrill writes them: the peer's own
//! numbers are absolute (the script picks the peer's ISN), the stack's are
//! relative to the ISN the stack chose for that connection, which the
//! harness learns from the stack's SYN or SYN-ACK.  So an injected segment
//! has `seq` absolute and `ack` relative; an expected one has `seq`
//! relative and `ack` absolute.  SACK blocks follow the numbers they
//! describe (injected: relative; expected: absolute).
//!
//! `expect` compares only the fields a pattern names, except the flags,
//! which must match exactly (PSH only when the pattern says `psh()` or
//! `no_psh()`).  Failures print the whole conversation.

#![allow(dead_code)] // a toolbox: not every script uses every tool

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::fmt::{self, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use stack::{
    Duration, IfaceId, Instant, InterfaceConfig, Ipv6Config, RxMeta, SocketError, SocketHandle,
    Stack, StackConfig, TcpInfo, TcpState, VecSink,
};
use wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use wire::icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr, Icmpv6TimeExceeded,
};
use wire::ip::IpProtocol;
use wire::ipv4::{Ipv4Packet, Ipv4Repr};
use wire::ipv6::{Ipv6Packet, Ipv6Repr};
use wire::tcp::{SeqNumber, TcpFlags, TcpPacket, TcpRepr};
use wire::ChecksumMode;

pub const STACK_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 2);
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
pub const STACK_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
pub const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
/// The port scripts listen on.
pub const STACK_PORT: u16 = 8080;
/// The peer's port (its source port for passive opens, the port the stack
/// connects to for active ones).
pub const PEER_PORT: u16 = 40000;
const IF0: IfaceId = IfaceId(0);

thread_local! {
    static IPV6: Cell<bool> = const { Cell::new(false) };
}

/// Runs `script` with its stack and peer speaking IPv6: the scripts name
/// hosts by IPv4 address, and each such address stands for the IPv6
/// address that ends in it (`fd99::a.b.c.d`).  Neighbor discovery takes
/// ARP's place.
pub fn over_ipv6(script: fn()) {
    IPV6.with(|c| c.set(true));
    script();
    IPV6.with(|c| c.set(false));
}

fn ipv6() -> bool {
    IPV6.with(Cell::get)
}

/// Whether the script runs over IPv6 (for the few numbers that differ).
pub fn over_v6() -> bool {
    ipv6()
}

/// The IPv6 address an IPv4 host address stands for.
/// A multicast or broadcast address stands for all nodes (ff02::1), IPv6's
/// broadcast.
pub fn v6_of(ip: Ipv4Addr) -> Ipv6Addr {
    if ip.is_unspecified() {
        return Ipv6Addr::UNSPECIFIED;
    }
    if ip.is_multicast() || ip.is_broadcast() || ip.octets()[3] == 255 {
        return Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    }
    Ipv6Addr::from((0xfd99_u128 << 112) | u128::from(u32::from(ip)))
}

/// The host an IPv6 address of a script stands for.
fn v4_of(ip: Ipv6Addr) -> Ipv4Addr {
    let o = ip.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

/// A host's address in the script's family.
pub fn ip_of(ip: Ipv4Addr) -> IpAddr {
    if ipv6() {
        IpAddr::V6(v6_of(ip))
    } else {
        IpAddr::V4(ip)
    }
}

/// A peer's MAC: the default peer's, or one made from its address.
fn peer_mac(ip: Ipv4Addr) -> [u8; 6] {
    if ip == PEER_IP {
        PEER_MAC
    } else {
        let o = ip.octets();
        [2, 0, 0, o[1], o[2], o[3]]
    }
}

/// Checks a condition, failing the script with the conversation:
/// `check!(s, s.recv(c, 10) == Ok(vec![]), "EOF")`.
macro_rules! check {
    ($s:expr, $cond:expr, $($msg:tt)+) => {{
        let ok = $cond;
        if !ok {
            $s.fail(&format!($($msg)+));
        }
    }};
}
pub(crate) use check;

/// A field of a pattern: not checked, a value, or must be absent.
#[derive(Debug, Clone, PartialEq)]
enum Opt<T> {
    Any,
    Is(T),
    Absent,
}

impl<T> Opt<T> {
    fn value(&self) -> Option<&T> {
        match self {
            Opt::Is(v) => Some(v),
            _ => None,
        }
    }
}

/// A segment pattern: what to inject, or what to expect.
#[derive(Debug, Clone)]
pub struct Seg {
    flags: TcpFlags,
    psh: Option<bool>,
    seq: Option<u32>,
    ack: Option<u32>,
    ack_any: bool,
    win: Option<u16>,
    mss: Opt<u16>,
    wscale: Opt<u8>,
    sack_perm: Opt<()>,
    tsval: Option<u32>,
    tsecr: Option<u32>,
    ts: Opt<()>,
    ts_echo: bool,
    sack: Opt<Vec<(u32, u32)>>,
    len: Option<usize>,
    payload: Option<Vec<u8>>,
    stack_port: Option<u16>,
    stack_ip: Option<Ipv4Addr>,
    raw_options: Option<Vec<u8>>,
    bad_checksum: bool,
    peer_port: Option<u16>,
    peer_ip: Option<Ipv4Addr>,
    /// URG and this urgent pointer.
    urg: Option<u16>,
    /// The IP header's ECN field (injected, or checked when expecting).
    ip_ecn: Option<u8>,
}

/// A new, empty pattern.
pub fn seg() -> Seg {
    Seg {
        flags: TcpFlags::empty(),
        psh: None,
        seq: None,
        ack: None,
        ack_any: false,
        win: None,
        mss: Opt::Any,
        wscale: Opt::Any,
        sack_perm: Opt::Any,
        tsval: None,
        tsecr: None,
        ts: Opt::Any,
        ts_echo: false,
        sack: Opt::Any,
        len: None,
        payload: None,
        stack_port: None,
        stack_ip: None,
        raw_options: None,
        bad_checksum: false,
        peer_port: None,
        peer_ip: None,
        urg: None,
        ip_ecn: None,
    }
}

impl Seg {
    /// URG set with this urgent pointer (checked when expecting).
    pub fn urg(mut self, pointer: u16) -> Self {
        self.flags |= TcpFlags::URG;
        self.urg = Some(pointer);
        self
    }
    /// ECE set (ECN-Echo, RFC 3168).
    pub fn ece(mut self) -> Self {
        self.flags |= TcpFlags::ECE;
        self
    }
    /// CWR set (Congestion Window Reduced).
    pub fn cwr(mut self) -> Self {
        self.flags |= TcpFlags::CWR;
        self
    }
    /// The IP header's ECN field: 0 Not-ECT, 2 ECT(0), 3 CE.
    pub fn ip_ecn(mut self, ecn: u8) -> Self {
        self.ip_ecn = Some(ecn);
        self
    }
    pub fn syn(mut self) -> Self {
        self.flags |= TcpFlags::SYN;
        self
    }
    pub fn fin(mut self) -> Self {
        self.flags |= TcpFlags::FIN;
        self
    }
    pub fn rst(mut self) -> Self {
        self.flags |= TcpFlags::RST;
        self
    }
    /// PSH set (checked when expecting).
    pub fn psh(mut self) -> Self {
        self.psh = Some(true);
        self
    }
    /// PSH clear (checked when expecting).
    pub fn no_psh(mut self) -> Self {
        self.psh = Some(false);
        self
    }
    pub fn seq(mut self, seq: u32) -> Self {
        self.seq = Some(seq);
        self
    }
    /// ACK set with this number.
    pub fn ack(mut self, ack: u32) -> Self {
        self.flags |= TcpFlags::ACK;
        self.ack = Some(ack);
        self
    }
    /// ACK set, any number (expect only).
    pub fn ack_any(mut self) -> Self {
        self.flags |= TcpFlags::ACK;
        self.ack_any = true;
        self
    }
    /// The window field as sent (unscaled).
    pub fn win(mut self, win: u16) -> Self {
        self.win = Some(win);
        self
    }
    pub fn mss(mut self, mss: u16) -> Self {
        self.mss = Opt::Is(mss);
        self
    }
    pub fn no_mss(mut self) -> Self {
        self.mss = Opt::Absent;
        self
    }
    pub fn wscale(mut self, shift: u8) -> Self {
        self.wscale = Opt::Is(shift);
        self
    }
    pub fn no_wscale(mut self) -> Self {
        self.wscale = Opt::Absent;
        self
    }
    pub fn sack_perm(mut self) -> Self {
        self.sack_perm = Opt::Is(());
        self
    }
    pub fn no_sack_perm(mut self) -> Self {
        self.sack_perm = Opt::Absent;
        self
    }
    /// Timestamps option (TSval, TSecr).
    pub fn ts(mut self, val: u32, ecr: u32) -> Self {
        self.ts = Opt::Is(());
        self.tsval = Some(val);
        self.tsecr = Some(ecr);
        self
    }
    /// Timestamps present, any TSval, this TSecr (expect).
    pub fn ts_ecr(mut self, ecr: u32) -> Self {
        self.ts = Opt::Is(());
        self.tsecr = Some(ecr);
        self
    }
    /// Timestamps present with any values (expect).
    pub fn ts_any(mut self) -> Self {
        self.ts = Opt::Is(());
        self
    }
    /// Timestamps with this TSval and, as TSecr, the last TSval the stack
    /// sent on the connection (inject).
    pub fn ts_echo(mut self, val: u32) -> Self {
        self.ts = Opt::Is(());
        self.tsval = Some(val);
        self.ts_echo = true;
        self
    }
    pub fn no_ts(mut self) -> Self {
        self.ts = Opt::Absent;
        self
    }
    /// SACK blocks, most important first.
    pub fn sack(mut self, blocks: &[(u32, u32)]) -> Self {
        self.sack = Opt::Is(blocks.to_vec());
        self
    }
    pub fn no_sack(mut self) -> Self {
        self.sack = Opt::Absent;
        self
    }
    /// Payload length (inject: bytes of a pattern that follows the sequence
    /// number, see [`pattern`]).
    pub fn len(mut self, len: usize) -> Self {
        self.len = Some(len);
        self
    }
    pub fn payload(mut self, data: &[u8]) -> Self {
        self.len = Some(data.len());
        self.payload = Some(data.to_vec());
        self
    }
    /// The stack's address: where an injected segment goes, and the
    /// source an expected one must have (default 10.99.1.2, checked on
    /// every expected segment: RFC 9293 MUST-45; 0.0.0.0: any).
    pub fn stack_ip(mut self, ip: Ipv4Addr) -> Self {
        self.stack_ip = Some(ip);
        self
    }
    /// These bytes as the options, in place of those the pattern names
    /// (inject; padded with zeros, end of list, to a multiple of 4).
    pub fn raw_options(mut self, bytes: &[u8]) -> Self {
        self.raw_options = Some(bytes.to_vec());
        self
    }
    /// A checksum that does not verify (inject).
    pub fn bad_checksum(mut self) -> Self {
        self.bad_checksum = true;
        self
    }
    /// The stack's port of the segment (default: the script's flow).
    pub fn stack_port(mut self, port: u16) -> Self {
        self.stack_port = Some(port);
        self
    }
    /// The peer's port of the segment (default: the script's flow).
    pub fn peer_port(mut self, port: u16) -> Self {
        self.peer_port = Some(port);
        self
    }
    /// The peer's address (default 10.99.1.1).
    pub fn peer_ip(mut self, ip: Ipv4Addr) -> Self {
        self.peer_ip = Some(ip);
        self
    }
}

/// The payload bytes the harness injects for `len` bytes at sequence `seq`:
/// byte `i` is the low byte of `seq + i`, so a reader can check what it got.
pub fn pattern(seq: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| seq.wrapping_add(i as u32) as u8).collect()
}

/// A segment the stack emitted, with the stack's numbers made relative.
#[derive(Debug, Clone)]
pub struct Got {
    pub at: Instant,
    /// The source address (RFC 9293 MUST-44, 45).
    pub stack_ip: Ipv4Addr,
    pub stack_port: u16,
    pub peer_port: u16,
    pub peer_ip: Ipv4Addr,
    pub flags: TcpFlags,
    /// Relative to the flow's ISN.
    pub seq: u32,
    /// The stack's raw sequence number.
    pub raw_seq: u32,
    pub ack: Option<u32>,
    pub win: u16,
    pub mss: Option<u16>,
    pub wscale: Option<u8>,
    pub sack_perm: bool,
    pub ts: Option<(u32, u32)>,
    pub sack: Vec<(u32, u32)>,
    /// The urgent pointer field (with URG).
    pub urg: u16,
    /// The IP header's ECN field.
    pub ip_ecn: u8,
    pub payload: Vec<u8>,
}

/// One entry of the conversation.
enum Event {
    Sent(Instant, String),
    Emitted(Instant, String),
    Note(Instant, String),
}

type FlowKey = (u16, Ipv4Addr, u16);

/// The stack under test, its clock, the frames it emitted and not yet
/// checked, and the conversation so far.
pub struct Script {
    pub stack: Stack,
    pub now: Instant,
    sink: VecSink,
    pending: VecDeque<(Instant, Vec<u8>)>,
    log: Vec<Event>,
    /// The stack's ISN per (stack port, peer ip, peer port).
    isn: HashMap<FlowKey, u32>,
    /// The last TSval the stack sent per flow.
    last_tsval: HashMap<FlowKey, u32>,
    /// The default flow: (stack port, peer port).
    pub flow: (u16, u16),
    /// The frame `expect` took last, for quoting in ICMP errors.
    last_expected: Vec<u8>,
    /// ARP requests and neighbor solicitations the peer answered.
    pub resolutions: usize,
}

fn flags_str(f: TcpFlags) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (TcpFlags::SYN, 'S'),
        (TcpFlags::FIN, 'F'),
        (TcpFlags::RST, 'R'),
        (TcpFlags::PSH, 'P'),
        (TcpFlags::URG, 'U'),
        (TcpFlags::ECE, 'E'),
        (TcpFlags::CWR, 'W'),
        (TcpFlags::ACK, '.'),
    ] {
        if f.contains(bit) {
            s.push(c);
        }
    }
    s
}

/// tcpdump-like one-line summary, numbers as the script writes them.
fn summary(
    flags: TcpFlags,
    seq: u32,
    ack: Option<u32>,
    win: u16,
    opts: &str,
    len: usize,
    ports: String,
) -> String {
    let mut s = format!(
        "{:<3} {seq}:{}({len})",
        flags_str(flags),
        seq.wrapping_add(len as u32)
    );
    if let Some(a) = ack {
        let _ = write!(s, " ack {a}");
    }
    let _ = write!(s, " win {win}");
    if !opts.is_empty() {
        let _ = write!(s, " <{opts}>");
    }
    let _ = write!(s, "  [{ports}]");
    s
}

fn options_str(
    mss: Option<u16>,
    sack_perm: bool,
    ts: Option<(u32, u32)>,
    wscale: Option<u8>,
    sack: &[(u32, u32)],
) -> String {
    let mut parts = Vec::new();
    if let Some(m) = mss {
        parts.push(format!("mss {m}"));
    }
    if sack_perm {
        parts.push("sackOK".to_string());
    }
    if let Some((v, e)) = ts {
        parts.push(format!("TS val {v} ecr {e}"));
    }
    if let Some(w) = wscale {
        parts.push(format!("wscale {w}"));
    }
    if !sack.is_empty() {
        let blocks: Vec<String> = sack.iter().map(|(l, r)| format!("{l}:{r}")).collect();
        parts.push(format!("sack {}", blocks.join(" ")));
    }
    parts.join(",")
}

/// The urgent pointer in a summary's options.
fn urgent_str(pointer: u16, opts: &str) -> String {
    if opts.is_empty() {
        format!("urg {pointer}")
    } else {
        format!("urg {pointer},{opts}")
    }
}

impl fmt::Display for Got {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut opts = options_str(self.mss, self.sack_perm, self.ts, self.wscale, &self.sack);
        if self.flags.urg() {
            opts = urgent_str(self.urg, &opts);
        }
        if self.ip_ecn != 0 {
            opts = if opts.is_empty() {
                format!("ip-ecn {}", self.ip_ecn)
            } else {
                format!("ip-ecn {},{opts}", self.ip_ecn)
            };
        }
        let ports = format!(
            "{}:{} > {}:{}",
            self.stack_ip, self.stack_port, self.peer_ip, self.peer_port
        );
        f.write_str(&summary(
            self.flags,
            self.seq,
            self.ack,
            self.win,
            &opts,
            self.payload.len(),
            ports,
        ))
    }
}

impl Default for Script {
    fn default() -> Self {
        Script::new()
    }
}

impl Script {
    /// A stack with the default configuration.
    pub fn new() -> Script {
        Script::with_config(|_| {})
    }

    /// A stack whose configuration `tune` adjusts.
    pub fn with_config(tune: impl FnOnce(&mut StackConfig)) -> Script {
        Script::with_mtu(1500, tune)
    }

    /// A stack on an interface of `mtu` whose configuration `tune` adjusts.
    pub fn with_mtu(mtu: usize, tune: impl FnOnce(&mut StackConfig)) -> Script {
        Script::build(mtu, None, tune)
    }

    /// A stack whose interface has `vip` as a second address (a VIP, as
    /// F-Stack's `vip_addr`; over IPv6 its `vip_addr6`).
    pub fn with_vip(vip: Ipv4Addr) -> Script {
        Script::build(1500, Some(vip), |_| {})
    }

    fn build(mtu: usize, vip: Option<Ipv4Addr>, tune: impl FnOnce(&mut StackConfig)) -> Script {
        let mut cfg = StackConfig {
            seed: 7,
            ..StackConfig::default()
        };
        // Over IPv6, addresses in use at once and no router solicitation:
        // the scripts see only their own segments.
        cfg.ip6_dad_count = 0;
        cfg.ip6_accept_rtadv = false;
        tune(&mut cfg);
        let mut stack = Stack::new(cfg);
        stack
            .add_interface(&InterfaceConfig {
                name: "p0".into(),
                mac: STACK_MAC,
                // Over IPv6, 20 bytes more: the IPv6 header is 20 bytes
                // longer than IPv4's, so the MSS, and every segment size
                // the scripts name, stays the same.
                mtu: if ipv6() { mtu + 20 } else { mtu },
                addr: STACK_IP,
                prefix_len: 24,
                broadcast: None,
                gateway: None,
                extra_addrs: vip.into_iter().collect(),
            })
            .expect("interface");
        let mut s = Script {
            stack,
            now: Instant::ZERO,
            sink: VecSink::default(),
            pending: VecDeque::new(),
            log: Vec::new(),
            isn: HashMap::new(),
            last_tsval: HashMap::new(),
            flow: (STACK_PORT, PEER_PORT),
            last_expected: Vec::new(),
            resolutions: 0,
        };
        if ipv6() {
            s.stack
                .enable_ipv6(
                    s.now,
                    IF0,
                    &Ipv6Config {
                        addrs: std::iter::once(STACK_IP)
                            .chain(vip)
                            .map(|a| (v6_of(a), 64))
                            .collect(),
                        gateway: None,
                    },
                )
                .expect("IPv6");
            // The peer asks for our address: the stack learns the peer's
            // MAC (RFC 4861 7.2.3) and answers; not part of any script.
            let ns = s.ndp_frame(
                PEER_IP,
                Icmpv6Repr::NeighborSolicit {
                    target_addr: v6_of(STACK_IP),
                    options: &wire::ndp::source_lladdr_option(EthernetAddress(PEER_MAC)),
                },
            );
            s.stack
                .receive(s.now, IF0, &ns, RxMeta::default(), &mut s.sink);
        } else {
            // The peer asks for our address: the stack learns the peer's
            // MAC (RFC 826) and answers; not part of any script.
            let arp = s.arp_frame(ArpOperation::Request, PEER_IP, PEER_MAC, STACK_IP, [0; 6]);
            s.stack
                .receive(s.now, IF0, &arp, RxMeta::default(), &mut s.sink);
        }
        s.sink.frames.clear();
        s
    }

    /// An NDP message from host `from` to the stack (hop limit 255).
    fn ndp_frame(&self, from: Ipv4Addr, msg: Icmpv6Repr<'_>) -> Vec<u8> {
        self.ndp_frame_hop(from, 255, msg)
    }

    /// An ICMPv6 message from host `from` to the stack.
    fn ndp_frame_hop(&self, from: Ipv4Addr, hop_limit: u8, msg: Icmpv6Repr<'_>) -> Vec<u8> {
        let (src, dst) = (v6_of(from), v6_of(STACK_IP));
        let len = msg.buffer_len();
        let mut buf = vec![0u8; 14 + 40 + len];
        EthernetRepr {
            src_addr: EthernetAddress(peer_mac(from)),
            dst_addr: EthernetAddress(STACK_MAC),
            ethertype: EtherType::Ipv6,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Icmpv6,
            payload_len: len,
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut buf[14..54]));
        msg.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[54..]), &src, &dst);
        buf
    }

    fn arp_frame(
        &self,
        op: ArpOperation,
        spa: Ipv4Addr,
        sha: [u8; 6],
        tpa: Ipv4Addr,
        tha: [u8; 6],
    ) -> Vec<u8> {
        let repr = ArpRepr::EthernetIpv4 {
            operation: op,
            source_hardware_addr: EthernetAddress(sha),
            source_protocol_addr: spa,
            target_hardware_addr: EthernetAddress(tha),
            target_protocol_addr: tpa,
        };
        let mut buf = vec![0u8; 14 + repr.buffer_len()];
        EthernetRepr {
            src_addr: EthernetAddress(sha),
            dst_addr: EthernetAddress(STACK_MAC),
            ethertype: EtherType::Arp,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        repr.emit(&mut ArpPacket::new_unchecked(&mut buf[14..]));
        buf
    }

    /// Milliseconds since the script began, for the log.
    fn t(at: Instant) -> String {
        format!("{:>9.3}", at.total_micros() as f64 / 1e6)
    }

    /// Adds a note to the conversation (socket calls, state checks).
    pub fn note(&mut self, text: impl Into<String>) {
        self.log.push(Event::Note(self.now, text.into()));
    }

    /// The conversation so far, one line per event.
    pub fn conversation(&self) -> String {
        let mut out = String::new();
        for e in &self.log {
            let _ = match e {
                Event::Sent(t, s) => writeln!(out, "{} < {s}", Script::t(*t)),
                Event::Emitted(t, s) => writeln!(out, "{} > {s}", Script::t(*t)),
                Event::Note(t, s) => writeln!(out, "{}   ({s})", Script::t(*t)),
            };
        }
        out
    }

    /// Fails the script with the conversation and `msg`.
    #[track_caller]
    pub fn fail(&self, msg: &str) -> ! {
        let mut pending = String::new();
        for (at, f) in &self.pending {
            let line = match self.decode(*at, f) {
                Ok(g) => g.to_string(),
                Err(e) => e,
            };
            let _ = writeln!(pending, "{} > {line}", Script::t(*at));
        }
        panic!(
            "\n--- conversation (< injected, > emitted; stack's seq relative to its ISN) ---\n{}\
             --- emitted, not yet expected ---\n{}--- failure at {} ---\n{msg}\n",
            self.conversation(),
            if pending.is_empty() {
                "(none)\n".to_string()
            } else {
                pending
            },
            Script::t(self.now).trim()
        );
    }

    fn key(&self, p: &Seg) -> FlowKey {
        (
            p.stack_port.unwrap_or(self.flow.0),
            p.peer_ip.unwrap_or(PEER_IP),
            p.peer_port.unwrap_or(self.flow.1),
        )
    }

    /// The stack's ISN on the default flow (0 if not seen yet).
    pub fn isn(&self) -> u32 {
        self.isn_of(self.flow.0, PEER_IP, self.flow.1)
    }

    /// The stack's ISN on a flow (0 if not seen yet).
    pub fn isn_of(&self, stack_port: u16, peer_ip: Ipv4Addr, peer_port: u16) -> u32 {
        self.isn
            .get(&(stack_port, peer_ip, peer_port))
            .copied()
            .unwrap_or(0)
    }

    /// The last TSval the stack sent on the default flow.
    pub fn last_tsval(&self) -> u32 {
        self.last_tsval
            .get(&(self.flow.0, PEER_IP, self.flow.1))
            .copied()
            .unwrap_or(0)
    }

    /// Moves frames from the sink into the pending queue, logging them;
    /// answers ARP requests (any address is the peer's).
    fn collect(&mut self) {
        loop {
            let frames = std::mem::take(&mut self.sink.frames);
            if frames.is_empty() {
                return;
            }
            for (_, f) in frames {
                if let Some(target) = neighbor_solicit_target(&f) {
                    // Resolution or a reachability probe: the peer answers.
                    let target = v4_of(target);
                    self.note(format!("NDP who-has {}: answered", v6_of(target)));
                    self.resolutions += 1;
                    let na = self.ndp_frame(
                        target,
                        Icmpv6Repr::NeighborAdvert {
                            router: false,
                            solicited: true,
                            override_: true,
                            target_addr: v6_of(target),
                            options: &wire::ndp::target_lladdr_option(EthernetAddress(peer_mac(
                                target,
                            ))),
                        },
                    );
                    self.stack
                        .receive(self.now, IF0, &na, RxMeta::default(), &mut self.sink);
                    continue;
                }
                if let Some(target) = arp_request_target(&f) {
                    self.note(format!("ARP who-has {target}: answered"));
                    self.resolutions += 1;
                    let mac = if target == PEER_IP {
                        PEER_MAC
                    } else {
                        let o = target.octets();
                        [2, 0, 0, o[1], o[2], o[3]]
                    };
                    let reply =
                        self.arp_frame(ArpOperation::Reply, target, mac, STACK_IP, STACK_MAC);
                    self.stack
                        .receive(self.now, IF0, &reply, RxMeta::default(), &mut self.sink);
                    continue;
                }
                let line = match self.decode(self.now, &f) {
                    Ok(g) => {
                        if g.flags.syn() {
                            self.isn
                                .insert((g.stack_port, g.peer_ip, g.peer_port), g.raw_seq);
                        }
                        let g = self.decode(self.now, &f).unwrap_or(g);
                        if let Some((v, _)) = g.ts {
                            self.last_tsval
                                .insert((g.stack_port, g.peer_ip, g.peer_port), v);
                        }
                        g.to_string()
                    }
                    Err(e) => e,
                };
                self.log.push(Event::Emitted(self.now, line));
                self.pending.push_back((self.now, f));
            }
        }
    }

    /// Parses an emitted frame into a `Got` (or says what it is).
    fn decode(&self, at: Instant, f: &[u8]) -> Result<Got, String> {
        let eth = EthernetFrame::new_checked(f).map_err(|e| format!("bad Ethernet: {e:?}"))?;
        let (src, dst, peer, segment, ip_ecn) = match eth.ethertype() {
            EtherType::Ipv4 if !ipv6() => {
                let ip = Ipv4Packet::new_checked(eth.payload())
                    .map_err(|e| format!("bad IPv4: {e:?}"))?;
                let ipr =
                    Ipv4Repr::parse(&ip, ChecksumMode::Full).map_err(|e| format!("IPv4 {e:?}"))?;
                if ipr.next_header != IpProtocol::Tcp {
                    return Err(format!(
                        "IPv4 {:?} {} > {}",
                        ipr.next_header, ipr.src_addr, ipr.dst_addr
                    ));
                }
                let (hl, tl) = (usize::from(ip.header_len()), usize::from(ip.total_len()));
                (
                    IpAddr::V4(ipr.src_addr),
                    IpAddr::V4(ipr.dst_addr),
                    ipr.dst_addr,
                    &eth.payload()[hl..tl],
                    ipr.dscp_ecn & 3,
                )
            }
            EtherType::Ipv6 if ipv6() => {
                let ip = Ipv6Packet::new_checked(eth.payload())
                    .map_err(|e| format!("bad IPv6: {e:?}"))?;
                if ip.next_header() != IpProtocol::Tcp {
                    return Err(format!(
                        "IPv6 {:?} {} > {}",
                        ip.next_header(),
                        ip.src_addr(),
                        ip.dst_addr()
                    ));
                }
                let (s, d) = (ip.src_addr(), ip.dst_addr());
                let payload = &eth.payload()[40..40 + usize::from(ip.payload_len())];
                let ecn = (eth.payload()[1] >> 4) & 3;
                (IpAddr::V6(s), IpAddr::V6(d), v4_of(d), payload, ecn)
            }
            other => return Err(format!("a frame of another family ({other})")),
        };
        let src_host = match src {
            IpAddr::V4(a) => a,
            IpAddr::V6(a) => v4_of(a),
        };
        let tcp = TcpPacket::new_checked(segment).map_err(|e| format!("bad TCP: {e:?}"))?;
        let r = TcpRepr::parse(&tcp, &src, &dst, ChecksumMode::Full)
            .map_err(|e| format!("TCP {e:?}"))?;
        let isn = self
            .isn
            .get(&(r.src_port, peer, r.dst_port))
            .copied()
            .unwrap_or(0);
        Ok(Got {
            at,
            stack_ip: src_host,
            stack_port: r.src_port,
            peer_port: r.dst_port,
            peer_ip: peer,
            flags: r.flags,
            seq: r.seq_number.to_u32().wrapping_sub(isn),
            raw_seq: r.seq_number.to_u32(),
            ack: r.ack_number.map(|a| a.to_u32()),
            win: r.window_len,
            mss: r.max_seg_size,
            wscale: r.window_scale,
            sack_perm: r.sack_permitted,
            ts: r.timestamp,
            sack: r.sack_ranges.iter().flatten().copied().collect(),
            urg: r.urgent_pointer,
            ip_ecn,
            payload: r.payload.to_vec(),
        })
    }

    /// Sends a segment from the peer to the stack.
    #[track_caller]
    pub fn inject(&mut self, p: Seg) {
        let key = self.key(&p);
        let (stack_port, peer_ip, peer_port) = key;
        let isn = self.isn.get(&key).copied().unwrap_or(0);
        let Some(seq) = p.seq else {
            self.fail("an injected segment needs seq()");
        };
        let payload = p.payload.clone().unwrap_or_else(|| {
            // A SYN's data starts after the SYN.
            let first = seq.wrapping_add(u32::from(p.flags.syn()));
            pattern(first, p.len.unwrap_or(0))
        });
        let mut r = TcpRepr::new(peer_port, stack_port, p.flags, SeqNumber::new(seq));
        if p.psh == Some(true) {
            r.flags |= TcpFlags::PSH;
        }
        r.ack_number = p.ack.map(|a| SeqNumber::new(a.wrapping_add(isn)));
        r.window_len = p.win.unwrap_or(65535);
        r.urgent_pointer = p.urg.unwrap_or(0);
        r.max_seg_size = p.mss.value().copied();
        r.window_scale = p.wscale.value().copied();
        r.sack_permitted = p.sack_perm.value().is_some();
        if p.ts.value().is_some() {
            let ecr = if p.ts_echo {
                self.last_tsval.get(&key).copied().unwrap_or(0)
            } else {
                p.tsecr.unwrap_or(0)
            };
            r.timestamp = Some((p.tsval.unwrap_or(0), ecr));
        }
        if let Some(blocks) = p.sack.value() {
            for (slot, &(l, rr)) in r.sack_ranges.iter_mut().zip(blocks) {
                *slot = Some((l.wrapping_add(isn), rr.wrapping_add(isn)));
            }
        }
        r.payload = &payload;
        let mut opts = options_str(
            r.max_seg_size,
            r.sack_permitted,
            r.timestamp,
            r.window_scale,
            p.sack.value().map_or(&[][..], |v| &v[..]),
        );
        if let Some(up) = p.urg {
            opts = urgent_str(up, &opts);
        }
        if let Some(ecn) = p.ip_ecn.filter(|&e| e != 0) {
            self.note(format!("(that segment: IP ECN field {ecn})"));
        }
        let line = summary(
            r.flags,
            seq,
            p.ack,
            r.window_len,
            &opts,
            payload.len(),
            format!("{peer_ip}:{peer_port} > {STACK_IP}:{stack_port}"),
        );
        self.log.push(Event::Sent(self.now, line));

        let to = p.stack_ip.unwrap_or(STACK_IP);
        let (src, dst) = (ip_of(peer_ip), ip_of(to));
        let tcp = tcp_segment(&r, p.raw_options.as_deref(), &src, &dst, p.bad_checksum);
        if p.raw_options.is_some() || p.bad_checksum || to != STACK_IP {
            self.note(format!(
                "(that segment: to {to}, options {:?}{})",
                p.raw_options,
                if p.bad_checksum { ", bad checksum" } else { "" }
            ));
        }
        let tcp_len = tcp.len();
        let mac = peer_mac(peer_ip);
        let ip_len = if ipv6() { 40 } else { 20 };
        let mut buf = vec![0u8; 14 + ip_len + tcp_len];
        EthernetRepr {
            src_addr: EthernetAddress(mac),
            dst_addr: EthernetAddress(STACK_MAC),
            ethertype: if ipv6() {
                EtherType::Ipv6
            } else {
                EtherType::Ipv4
            },
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        if let (IpAddr::V6(s6), IpAddr::V6(d6)) = (src, dst) {
            Ipv6Repr {
                src_addr: s6,
                dst_addr: d6,
                next_header: IpProtocol::Tcp,
                payload_len: tcp_len,
                hop_limit: 64,
                traffic_class: p.ip_ecn.unwrap_or(0),
                flow_label: 0,
            }
            .emit(&mut Ipv6Packet::new_unchecked(&mut buf[14..54]));
        } else {
            Ipv4Repr {
                src_addr: peer_ip,
                dst_addr: to,
                next_header: IpProtocol::Tcp,
                payload_len: tcp_len,
                hop_limit: 64,
                dscp_ecn: p.ip_ecn.unwrap_or(0),
                ident: 0,
                dont_frag: true,
            }
            .emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..34]));
        }
        buf[14 + ip_len..].copy_from_slice(&tcp);
        self.stack
            .receive(self.now, IF0, &buf, RxMeta::default(), &mut self.sink);
        self.collect();
    }

    /// Checks the next emitted segment against `p` and returns it.
    #[track_caller]
    pub fn expect(&mut self, p: Seg) -> Got {
        self.collect();
        let Some((at, frame)) = self.pending.pop_front() else {
            self.fail(&format!(
                "expected {}\nbut the stack sent nothing",
                self.pattern_str(&p)
            ));
        };
        let got = match self.decode(at, &frame) {
            Ok(g) => g,
            Err(e) => self.fail(&format!(
                "expected {}\nbut the stack sent: {e}",
                self.pattern_str(&p)
            )),
        };
        if let Err(why) = self.matches(&p, &got) {
            self.fail(&format!(
                "expected {}\n     got {got}\n    ({why})",
                self.pattern_str(&p)
            ));
        }
        self.last_expected = frame;
        got
    }

    /// A router between the hosts (at `router`) answers the segment
    /// `expect` took last with an ICMPv6 packet too big for `mtu` (RFC
    /// 4443 3.2), quoting as much of it as fits in 1280 bytes.
    pub fn inject_packet_too_big(&mut self, router: Ipv4Addr, mtu: u32) {
        let last = std::mem::take(&mut self.last_expected);
        let quote = &last[14.min(last.len())..];
        let quote = &quote[..quote.len().min(1280 - 48)];
        let Ok((header, data)) = Ipv6Repr::parse_quoted(quote) else {
            self.fail("packet too big: the last expected frame is not IPv6");
        };
        let f = self.ndp_frame_hop(router, 64, Icmpv6Repr::PktTooBig { mtu, header, data });
        self.note(format!(
            "{} > {}: packet too big, mtu {mtu}",
            v6_of(router),
            v6_of(STACK_IP)
        ));
        self.stack
            .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sink);
        self.collect();
    }

    /// A router at `router` (or the peer itself) answers the segment
    /// `expect` took last with destination unreachable of ICMPv4 `code`
    /// (RFC 792), quoting its IP header and the first 8 bytes of TCP, the
    /// least a router quotes.  Over IPv6 the ICMPv6 error that means the
    /// same (RFC 4443): 0 no route, 1 address unreachable, 3 port
    /// unreachable, and 2 (protocol) a parameter problem, unrecognized
    /// next header.
    pub fn inject_unreachable(&mut self, router: Ipv4Addr, code: u8) {
        self.note(format!("{router} > {STACK_IP}: unreachable, code {code}"));
        if ipv6() {
            let reason = match code {
                0 => Icmpv6DstUnreachable::NoRoute,
                3 => Icmpv6DstUnreachable::PortUnreachable,
                2 => {
                    return self.inject_icmpv6_error(router, |header, data| {
                        Icmpv6Repr::ParamProblem {
                            reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
                            pointer: 6,
                            header,
                            data,
                        }
                    })
                }
                _ => Icmpv6DstUnreachable::AddrUnreachable,
            };
            return self.inject_icmpv6_error(router, |header, data| Icmpv6Repr::DstUnreachable {
                reason,
                header,
                data,
            });
        }
        self.inject_icmpv4_error(router, 3, code, 0);
    }

    /// A router answers the segment `expect` took last with fragmentation
    /// needed and a next-hop MTU of `mtu` (RFC 1191); over IPv6, packet
    /// too big for `mtu` + 20 (the scripts' sizes stay the same).
    pub fn inject_frag_needed(&mut self, router: Ipv4Addr, mtu: u16) {
        if ipv6() {
            return self.inject_packet_too_big(router, u32::from(mtu) + 20);
        }
        self.note(format!(
            "{router} > {STACK_IP}: fragmentation needed, mtu {mtu}"
        ));
        self.inject_icmpv4_error(router, 3, 4, mtu);
    }

    /// Source quench (ICMPv4 type 4) about the segment `expect` took last;
    /// IPv6 has none, so over IPv6 nothing is sent.
    pub fn inject_source_quench(&mut self, router: Ipv4Addr) {
        if ipv6() {
            self.note("(no source quench in ICMPv6)");
            return;
        }
        self.note(format!("{router} > {STACK_IP}: source quench"));
        self.inject_icmpv4_error(router, 4, 0, 0);
    }

    /// Time exceeded in transit about the segment `expect` took last.
    pub fn inject_time_exceeded(&mut self, router: Ipv4Addr) {
        self.note(format!("{router} > {STACK_IP}: time exceeded"));
        if ipv6() {
            return self.inject_icmpv6_error(router, |header, data| Icmpv6Repr::TimeExceeded {
                reason: Icmpv6TimeExceeded::HopLimitExceeded,
                header,
                data,
            });
        }
        self.inject_icmpv4_error(router, 11, 0, 0);
    }

    /// An ICMPv4 error of `ty`/`code` (with `mtu` in the next-hop MTU
    /// field) quoting the last expected frame's header and 8 bytes.
    fn inject_icmpv4_error(&mut self, router: Ipv4Addr, ty: u8, code: u8, mtu: u16) {
        let last = self.last_expected.clone();
        let ip = last.get(14..).unwrap_or(&[]);
        let hl = ip.first().map_or(20, |b| usize::from(b & 0xf) * 4);
        let quote = &ip[..ip.len().min(hl + 8)];
        let mut icmp = vec![ty, code, 0, 0, 0, 0];
        icmp.extend_from_slice(&mtu.to_be_bytes());
        icmp.extend_from_slice(quote);
        let sum = !wire::checksum::data(&icmp);
        icmp[2..4].copy_from_slice(&sum.to_be_bytes());
        let mut buf = vec![0u8; 14 + 20 + icmp.len()];
        EthernetRepr {
            src_addr: EthernetAddress(peer_mac(router)),
            dst_addr: EthernetAddress(STACK_MAC),
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        Ipv4Repr {
            src_addr: router,
            dst_addr: STACK_IP,
            next_header: IpProtocol::Icmp,
            payload_len: icmp.len(),
            hop_limit: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: false,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..34]));
        buf[34..].copy_from_slice(&icmp);
        self.stack
            .receive(self.now, IF0, &buf, RxMeta::default(), &mut self.sink);
        self.collect();
    }

    /// An ICMPv6 error `make` builds from the last expected packet's
    /// header and the bytes after it.
    fn inject_icmpv6_error(
        &mut self,
        router: Ipv4Addr,
        make: impl for<'a> FnOnce(Ipv6Repr, &'a [u8]) -> Icmpv6Repr<'a>,
    ) {
        let last = self.last_expected.clone();
        let quote = &last[14.min(last.len())..];
        let quote = &quote[..quote.len().min(1280 - 48)];
        let Ok((header, data)) = Ipv6Repr::parse_quoted(quote) else {
            self.fail("ICMPv6 error: the last expected frame is not IPv6");
        };
        let f = self.ndp_frame_hop(router, 64, make(header, data));
        self.stack
            .receive(self.now, IF0, &f, RxMeta::default(), &mut self.sink);
        self.collect();
    }

    /// Runs the clock for `ms` and checks that the next segment is emitted
    /// exactly then (and nothing before it).
    #[track_caller]
    pub fn expect_after(&mut self, ms: u64, p: Seg) -> Got {
        self.expect_within(ms, ms, p)
    }

    /// Runs the clock until a segment is emitted, at most `hi_ms`; checks
    /// that it came no earlier than `lo_ms` and matches `p`.
    #[track_caller]
    pub fn expect_within(&mut self, lo_ms: u64, hi_ms: u64, p: Seg) -> Got {
        self.collect();
        if !self.pending.is_empty() {
            self.fail(&format!(
                "expected {} after {lo_ms} ms, but a segment is already pending",
                self.pattern_str(&p)
            ));
        }
        let start = self.now;
        let end = start + Duration::from_millis(hi_ms);
        self.run_until(end, true);
        let Some(&(at, _)) = self.pending.front() else {
            self.fail(&format!(
                "expected {} within {lo_ms}..={hi_ms} ms, but nothing was sent by {}",
                self.pattern_str(&p),
                Script::t(end).trim()
            ));
        };
        let waited = at.saturating_since(start);
        if waited < Duration::from_millis(lo_ms) {
            self.fail(&format!(
                "expected {} after {lo_ms} ms, but a segment came after {} ms",
                self.pattern_str(&p),
                waited.as_secs_f64() * 1e3
            ));
        }
        self.expect(p)
    }

    /// Takes every segment emitted and not yet expected.
    pub fn drain(&mut self) -> Vec<Got> {
        self.collect();
        let frames: Vec<_> = self.pending.drain(..).collect();
        frames
            .into_iter()
            .filter_map(|(at, f)| self.decode(at, &f).ok())
            .collect()
    }

    /// Checks that nothing was emitted and not yet expected.
    #[track_caller]
    pub fn expect_none(&mut self) {
        self.collect();
        if !self.pending.is_empty() {
            self.fail("expected no segment");
        }
    }

    /// Runs the clock for `ms` and checks nothing is emitted meanwhile.
    #[track_caller]
    pub fn expect_silence(&mut self, ms: u64) {
        self.expect_none();
        self.advance(ms);
        if !self.pending.is_empty() {
            self.fail(&format!("expected no segment for {ms} ms"));
        }
    }

    /// Moves the clock `ms` forward, running the stack's timers at each of
    /// its deadlines on the way.
    pub fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_millis(ms);
        self.run_until(end, false);
    }

    /// Runs timers up to `end`; with `stop_on_emit`, stops at the first
    /// time a segment is emitted.
    fn run_until(&mut self, end: Instant, stop_on_emit: bool) {
        self.stack.poll(self.now, &mut self.sink);
        self.collect();
        if stop_on_emit && !self.pending.is_empty() {
            return;
        }
        loop {
            let next = match self.stack.next_deadline() {
                Some(d) if d > self.now => d.min(end),
                Some(_) => (self.now + Duration::from_millis(1)).min(end),
                None => end,
            };
            if next <= self.now && self.now >= end {
                // Run the deadlines due now once more, then stop.
                self.stack.poll(self.now, &mut self.sink);
                self.collect();
                return;
            }
            self.now = next.max(self.now);
            self.stack.poll(self.now, &mut self.sink);
            self.collect();
            if (stop_on_emit && !self.pending.is_empty()) || self.now >= end {
                return;
            }
        }
    }

    fn pattern_str(&self, p: &Seg) -> String {
        let mut s = flags_str(p.flags);
        if p.psh == Some(true) {
            s.push_str(" (PSH)");
        } else if p.psh == Some(false) {
            s.push_str(" (no PSH)");
        }
        if let Some(v) = p.seq {
            let _ = write!(s, " seq {v}");
        }
        if let Some(v) = p.ack {
            let _ = write!(s, " ack {v}");
        } else if p.ack_any {
            s.push_str(" ack *");
        }
        if let Some(v) = p.win {
            let _ = write!(s, " win {v}");
        }
        if let Some(v) = p.len {
            let _ = write!(s, " len {v}");
        }
        if let Some(v) = p.urg {
            let _ = write!(s, " urg {v}");
        }
        if let Some(v) = p.ip_ecn {
            let _ = write!(s, " ip-ecn {v}");
        }
        let mut o = Vec::new();
        match &p.mss {
            Opt::Is(v) => o.push(format!("mss {v}")),
            Opt::Absent => o.push("no mss".into()),
            Opt::Any => {}
        }
        match &p.sack_perm {
            Opt::Is(_) => o.push("sackOK".into()),
            Opt::Absent => o.push("no sackOK".into()),
            Opt::Any => {}
        }
        match &p.ts {
            Opt::Is(_) => o.push(format!(
                "TS val {} ecr {}",
                p.tsval.map_or("*".into(), |v| v.to_string()),
                p.tsecr.map_or("*".into(), |v| v.to_string())
            )),
            Opt::Absent => o.push("no TS".into()),
            Opt::Any => {}
        }
        match &p.wscale {
            Opt::Is(v) => o.push(format!("wscale {v}")),
            Opt::Absent => o.push("no wscale".into()),
            Opt::Any => {}
        }
        match &p.sack {
            Opt::Is(b) => o.push(format!(
                "sack {}",
                b.iter()
                    .map(|(l, r)| format!("{l}:{r}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
            Opt::Absent => o.push("no sack".into()),
            Opt::Any => {}
        }
        if !o.is_empty() {
            let _ = write!(s, " <{}>", o.join(","));
        }
        s
    }

    fn matches(&self, p: &Seg, g: &Got) -> Result<(), String> {
        let (stack_port, peer_ip, peer_port) = self.key(p);
        if (g.stack_port, g.peer_ip, g.peer_port) != (stack_port, peer_ip, peer_port) {
            return Err(format!(
                "flow {}:{} > {}:{}, expected {}:{} > {}:{}",
                STACK_IP,
                g.stack_port,
                g.peer_ip,
                g.peer_port,
                STACK_IP,
                stack_port,
                peer_ip,
                peer_port
            ));
        }
        let want_src = p.stack_ip.unwrap_or(STACK_IP);
        if g.stack_ip != want_src && !want_src.is_unspecified() {
            return Err(format!("source {}, expected {want_src}", g.stack_ip));
        }
        let mut flags = g.flags;
        let mut want = p.flags;
        match p.psh {
            Some(true) => want |= TcpFlags::PSH,
            Some(false) => {}
            None => flags.remove(TcpFlags::PSH),
        }
        if flags != want {
            return Err(format!(
                "flags {} instead of {}",
                flags_str(g.flags),
                flags_str(want)
            ));
        }
        if let Some(v) = p.seq {
            if g.seq != v {
                return Err(format!("seq {} instead of {v}", g.seq));
            }
        }
        if let Some(v) = p.urg {
            if g.urg != v {
                return Err(format!("urgent pointer {} instead of {v}", g.urg));
            }
        }
        if let Some(v) = p.ip_ecn {
            if g.ip_ecn != v {
                return Err(format!("IP ECN field {} instead of {v}", g.ip_ecn));
            }
        }
        if let Some(v) = p.ack {
            if g.ack != Some(v) {
                return Err(format!("ack {:?} instead of {v}", g.ack));
            }
        }
        if let Some(v) = p.win {
            if g.win != v {
                return Err(format!("win {} instead of {v}", g.win));
            }
        }
        if let Some(v) = p.len {
            if g.payload.len() != v {
                return Err(format!("len {} instead of {v}", g.payload.len()));
            }
        }
        if let Some(v) = &p.payload {
            if &g.payload != v {
                return Err("payload bytes differ".into());
            }
        }
        check_opt("mss", &p.mss, g.mss)?;
        check_opt("wscale", &p.wscale, g.wscale)?;
        check_opt("sackOK", &p.sack_perm, g.sack_perm.then_some(()))?;
        match (&p.ts, g.ts) {
            (Opt::Any, _) => {}
            (Opt::Absent, Some(_)) => return Err("TS present".into()),
            (Opt::Absent, None) => {}
            (Opt::Is(_), None) => return Err("TS missing".into()),
            (Opt::Is(_), Some((val, ecr))) => {
                if p.tsval.is_some_and(|v| v != val) {
                    return Err(format!("TS val {val}, expected {:?}", p.tsval));
                }
                if p.tsecr.is_some_and(|v| v != ecr) {
                    return Err(format!("TS ecr {ecr}, expected {:?}", p.tsecr));
                }
            }
        }
        let sack = (!g.sack.is_empty()).then(|| g.sack.clone());
        check_opt("sack", &p.sack, sack)?;
        Ok(())
    }

    // ---- socket calls, each logged ----

    /// Listens on 10.99.1.2:`port`.
    #[track_caller]
    pub fn listen(&mut self, port: u16, backlog: usize) -> SocketHandle {
        self.listen_on(STACK_IP, port, backlog)
    }

    /// Listens on `ip`:`port` (0.0.0.0: every address).
    #[track_caller]
    pub fn listen_on(&mut self, ip: Ipv4Addr, port: u16, backlog: usize) -> SocketHandle {
        self.note(format!("listen({ip}:{port}, backlog {backlog})"));
        self.flow.0 = port;
        match self
            .stack
            .tcp_listen(SocketAddr::new(ip_of(ip), port), backlog)
        {
            Ok(h) => h,
            Err(e) => self.fail(&format!("listen: {e}")),
        }
    }

    /// Connects from `local_ip` (port chosen by the stack) to the peer;
    /// the new flow becomes the default.
    #[track_caller]
    pub fn connect_bound(&mut self, local_ip: Ipv4Addr) -> SocketHandle {
        let local = SocketAddr::new(ip_of(local_ip), 0);
        self.connect_with(Some(local), PEER_IP, PEER_PORT)
    }

    /// Accepts a connection; makes its flow the default one.
    #[track_caller]
    pub fn accept(&mut self, l: SocketHandle) -> SocketHandle {
        match self.try_accept(l) {
            Ok(h) => h,
            Err(e) => self.fail(&format!("accept: {e}")),
        }
    }

    pub fn try_accept(&mut self, l: SocketHandle) -> Result<SocketHandle, SocketError> {
        let r = self.stack.tcp_accept(l);
        self.note(format!("accept() = {:?}", r.map(|(_, a)| a)));
        let (h, _) = r?;
        Ok(h)
    }

    /// Connects to `peer_ip:peer_port`; the new flow becomes the default.
    #[track_caller]
    pub fn connect_to(&mut self, peer_ip: Ipv4Addr, peer_port: u16) -> SocketHandle {
        self.connect_from(None, peer_ip, peer_port)
    }

    /// Connects from `local_port` (or an ephemeral port) to
    /// `peer_ip:peer_port`; the new flow becomes the default.
    #[track_caller]
    pub fn connect_from(
        &mut self,
        local_port: Option<u16>,
        peer_ip: Ipv4Addr,
        peer_port: u16,
    ) -> SocketHandle {
        let local = local_port.map(|p| SocketAddr::new(ip_of(STACK_IP), p));
        self.connect_with(local, peer_ip, peer_port)
    }

    /// Connects from `local` (or an address and port the stack picks) to
    /// `peer_ip:peer_port`; the new flow becomes the default.
    #[track_caller]
    fn connect_with(
        &mut self,
        local: Option<SocketAddr>,
        peer_ip: Ipv4Addr,
        peer_port: u16,
    ) -> SocketHandle {
        let r = self.stack.tcp_connect(
            self.now,
            SocketAddr::new(ip_of(peer_ip), peer_port),
            local,
            &mut self.sink,
        );
        let h = match r {
            Ok(h) => h,
            Err(e) => self.fail(&format!("connect: {e}")),
        };
        let local = self.stack.tcp_local_addr(h).expect("local addr");
        self.note(format!("connect({peer_ip}:{peer_port}) from {local}"));
        self.flow = (local.port(), peer_port);
        self.collect();
        h
    }

    /// connect() to `ip`:`port`, its result as is (no segment expected).
    pub fn try_connect_to(&mut self, ip: Ipv4Addr, port: u16) -> Result<SocketHandle, SocketError> {
        let r = self.stack.tcp_connect(
            self.now,
            SocketAddr::new(ip_of(ip), port),
            None,
            &mut self.sink,
        );
        self.note(format!("connect({ip}:{port}) = {r:?}"));
        self.collect();
        r
    }

    /// Connects to the peer (10.99.1.1:40000).
    #[track_caller]
    pub fn connect(&mut self) -> SocketHandle {
        self.connect_to(PEER_IP, PEER_PORT)
    }

    /// Queues data; returns how much was taken.
    #[track_caller]
    pub fn send(&mut self, h: SocketHandle, data: &[u8]) -> usize {
        let r = self.stack.tcp_send(self.now, h, data, &mut self.sink);
        self.note(format!("send({} bytes) = {r:?}", data.len()));
        self.collect();
        match r {
            Ok(n) => n,
            Err(e) => self.fail(&format!("send: {e}")),
        }
    }

    /// Queues `n` bytes of zeros.
    #[track_caller]
    pub fn send_n(&mut self, h: SocketHandle, n: usize) -> usize {
        self.send(h, &vec![0u8; n])
    }

    /// Queues data as urgent (`send(MSG_OOB)`); returns how much was taken.
    #[track_caller]
    pub fn send_urgent(&mut self, h: SocketHandle, data: &[u8]) -> usize {
        let r = self
            .stack
            .tcp_send_urgent(self.now, h, data, &mut self.sink);
        self.note(format!("send({} bytes, MSG_OOB) = {r:?}", data.len()));
        self.collect();
        match r {
            Ok(n) => n,
            Err(e) => self.fail(&format!("send(MSG_OOB): {e}")),
        }
    }

    /// `recv(MSG_OOB)`: the urgent octet.
    pub fn recv_urgent(&mut self, h: SocketHandle) -> Result<stack::OobRead, SocketError> {
        let r = self.stack.tcp_recv_urgent(h, false);
        self.note(format!("recv(MSG_OOB) = {r:?}"));
        r
    }

    /// SIOCATMARK.
    pub fn at_mark(&mut self, h: SocketHandle) -> bool {
        let r = self.stack.tcp_at_mark(h);
        self.note(format!("SIOCATMARK = {r:?}"));
        r == Ok(true)
    }

    /// Reads up to `max` bytes.
    pub fn recv(&mut self, h: SocketHandle, max: usize) -> Result<Vec<u8>, SocketError> {
        let mut buf = vec![0u8; max];
        let r = self.stack.tcp_recv(self.now, h, &mut buf, &mut self.sink);
        self.note(format!("recv({max}) = {:?}", r));
        self.collect();
        r.map(|n| {
            buf.truncate(n);
            buf
        })
    }

    /// [`recv`](Self::recv) in place (`tcp_recv_zero_copy`): takes at most
    /// `max` of the bytes the first run holds; returns them.
    pub fn recv_in_place(&mut self, h: SocketHandle, max: usize) -> Result<Vec<u8>, SocketError> {
        let mut got = Vec::new();
        let r = self.stack.tcp_recv_zero_copy(
            self.now,
            h,
            |run| {
                let n = run.len().min(max);
                got.extend_from_slice(&run[..n]);
                n
            },
            &mut self.sink,
        );
        self.note(format!("recv_in_place({max}) = {:?}", r));
        self.collect();
        r.map(|_| got)
    }

    #[track_caller]
    pub fn close(&mut self, h: SocketHandle) {
        let r = self.stack.tcp_close(self.now, h, &mut self.sink);
        self.note(format!("close() = {r:?}"));
        self.collect();
        if let Err(e) = r {
            self.fail(&format!("close: {e}"));
        }
    }

    #[track_caller]
    pub fn shutdown(&mut self, h: SocketHandle, how: stack::Shutdown) {
        let r = self.stack.tcp_shutdown(self.now, h, how, &mut self.sink);
        self.note(format!("shutdown({how:?}) = {r:?}"));
        self.collect();
        if let Err(e) = r {
            self.fail(&format!("shutdown: {e}"));
        }
    }

    pub fn set_nodelay(&mut self, h: SocketHandle, on: bool) {
        self.note(format!("TCP_NODELAY {on}"));
        self.stack
            .tcp_set_nodelay(self.now, h, on, &mut self.sink)
            .expect("nodelay");
        self.collect();
    }

    pub fn set_keepalive(&mut self, h: SocketHandle, on: bool) {
        self.note(format!("SO_KEEPALIVE {on}"));
        self.stack
            .tcp_set_keepalive(self.now, h, on)
            .expect("keepalive");
    }

    /// TCP_USER_TIMEOUT of `ms` milliseconds.
    pub fn set_user_timeout(&mut self, h: SocketHandle, ms: u64) {
        self.note(format!("TCP_USER_TIMEOUT {ms}"));
        self.stack
            .tcp_set_user_timeout(h, Some(Duration::from_millis(ms)))
            .expect("user timeout");
    }

    /// TCP_SYNCNT.
    pub fn set_syn_retries(&mut self, h: SocketHandle, n: u32) {
        self.note(format!("TCP_SYNCNT {n}"));
        self.stack
            .tcp_set_syn_retries(h, Some(n))
            .expect("syn retries");
    }

    pub fn set_linger_zero(&mut self, h: SocketHandle) {
        self.note("SO_LINGER {on, 0}");
        self.stack.tcp_set_linger_zero(h, true).expect("linger");
    }

    /// The state of a socket (`Closed` once it is freed).
    pub fn state(&self, h: SocketHandle) -> TcpState {
        self.stack.tcp_state(h).unwrap_or(TcpState::Closed)
    }

    /// Checks the state of a socket.
    #[track_caller]
    pub fn expect_state(&mut self, h: SocketHandle, want: TcpState) {
        let got = self.state(h);
        self.note(format!("state {got}"));
        if got != want {
            self.fail(&format!("state {got}, expected {want}"));
        }
    }

    pub fn info(&self, h: SocketHandle) -> TcpInfo {
        self.stack.tcp_info(h).expect("tcp_info")
    }

    pub fn take_error(&mut self, h: SocketHandle) -> Option<SocketError> {
        let e = self.stack.tcp_take_error(h).unwrap_or(None);
        self.note(format!("SO_ERROR = {e:?}"));
        e
    }

    /// The connection gave up: closed, with ETIMEDOUT to report.
    #[track_caller]
    pub fn expect_timed_out(&mut self, h: SocketHandle) {
        self.expect_state(h, TcpState::Closed);
        let e = self.take_error(h);
        if e != Some(SocketError::TimedOut) {
            self.fail(&format!("SO_ERROR {e:?}, expected ETIMEDOUT"));
        }
    }

    /// A connect whose last SYN went out: nothing more for `ms` and still
    /// SYN-SENT, then, 1 ms later, given up with ETIMEDOUT and nothing sent.
    #[track_caller]
    pub fn expect_syn_given_up(&mut self, h: SocketHandle, ms: u64) {
        self.expect_silence(ms);
        self.expect_state(h, TcpState::SynSent);
        self.advance(1);
        self.expect_none();
        self.expect_timed_out(h);
    }

    // ---- common openings ----

    /// Passive open on :8080 from the peer with ISN 0, MSS 1460 and no other
    /// options; returns (listener, accepted connection).  The stack's ISN
    /// is learnt; relative numbers start at 1 on both sides.
    #[track_caller]
    pub fn passive_open(&mut self) -> (SocketHandle, SocketHandle) {
        let l = self.listen(STACK_PORT, 16);
        self.inject(seg().syn().seq(0).win(65535).mss(1460));
        self.expect(seg().syn().ack(1).seq(0));
        self.inject(seg().ack(1).seq(1).win(65535));
        self.expect_none();
        let c = self.accept(l);
        (l, c)
    }

    /// Active open to the peer, which answers with ISN 0, MSS 1460 and no
    /// other options; returns the connection.
    #[track_caller]
    pub fn active_open(&mut self) -> SocketHandle {
        let c = self.connect();
        self.expect(seg().syn().seq(0));
        self.inject(seg().syn().ack(1).seq(0).win(65535).mss(1460));
        self.expect(seg().ack(1).seq(1));
        c
    }
}

fn check_opt<T: PartialEq + fmt::Debug>(
    name: &str,
    want: &Opt<T>,
    got: Option<T>,
) -> Result<(), String> {
    match (want, got) {
        (Opt::Any, _) | (Opt::Absent, None) => Ok(()),
        (Opt::Absent, Some(v)) => Err(format!("{name} {v:?} present")),
        (Opt::Is(_), None) => Err(format!("{name} missing")),
        (Opt::Is(w), Some(v)) if *w == v => Ok(()),
        (Opt::Is(w), Some(v)) => Err(format!("{name} {v:?} instead of {w:?}")),
    }
}

/// The address an ARP request from the stack asks for.
fn arp_request_target(f: &[u8]) -> Option<Ipv4Addr> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::Arp {
        return None;
    }
    let arp = ArpPacket::new_checked(eth.payload()).ok()?;
    match ArpRepr::parse(&arp).ok()? {
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            target_protocol_addr,
            ..
        } => Some(target_protocol_addr),
        _ => None,
    }
}

/// The target of a neighbor solicitation the stack sent (resolution or a
/// reachability probe).
fn neighbor_solicit_target(f: &[u8]) -> Option<Ipv6Addr> {
    let eth = EthernetFrame::new_checked(f).ok()?;
    if eth.ethertype() != EtherType::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    if ip.next_header() != IpProtocol::Icmpv6 {
        return None;
    }
    let icmp = Icmpv6Packet::new_checked(ip.payload()).ok()?;
    match Icmpv6Repr::parse(&icmp, &ip.src_addr(), &ip.dst_addr(), ChecksumMode::Full).ok()? {
        Icmpv6Repr::NeighborSolicit { target_addr, .. } => Some(target_addr),
        _ => None,
    }
}

/// The bytes of segment `r` from `src` to `dst`: with `raw` as its
/// options instead of `r`'s when given (padded with zeros to a multiple of
/// 4), and its checksum spoilt when `bad_checksum`.
fn tcp_segment(
    r: &TcpRepr<'_>,
    raw: Option<&[u8]>,
    src: &IpAddr,
    dst: &IpAddr,
    bad_checksum: bool,
) -> Vec<u8> {
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(
        &mut TcpPacket::new_unchecked(&mut out[..]),
        src,
        dst,
        ChecksumMode::Full,
    );
    if let Some(raw) = raw {
        let old_header = usize::from(TcpPacket::new_unchecked(&out[..]).header_len());
        let mut opts = raw.to_vec();
        opts.resize(raw.len().div_ceil(4) * 4, 0);
        let mut seg = out[..20].to_vec();
        seg.extend_from_slice(&opts);
        seg.extend_from_slice(&out[old_header..]);
        let mut pkt = TcpPacket::new_unchecked(&mut seg[..]);
        pkt.set_header_len((20 + opts.len()) as u8);
        pkt.fill_checksum(src, dst);
        out = seg;
    }
    if bad_checksum {
        out[16] ^= 0x5a;
    }
    out
}
