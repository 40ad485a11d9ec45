//! `ustack pcap`: a live capture of a port's frames, both ways, from
//! running engines, with a filter:
//!
//! ```text
//! ustack pcap [-i IFACE] [-c COUNT] [-s SNAPLEN] [-t SECONDS] [-w FILE|-] [FILTER...]
//! ```
//!
//! IFACE is a port's number or interface name (default port 0), or a VLAN
//! interface (its port's frames of that VLAN).  FILTER is the language of
//! `runtime::control::filter` (`host`, `net`, `port`, `proto`, `tcp`,
//! `udp`, `icmp`, `icmp6`, `arp`, `ip`, `ip6`, `vlan`, with `and`, `or`,
//! `not` and parentheses).  `-w FILE` writes a pcap file (`-w -` to
//! standard output, for `| tshark -r -`); otherwise a line per frame.  It
//! ends after COUNT frames, after SECONDS, or at Ctrl-C, then says how
//! many frames the engines dropped because this reader was too slow (an
//! engine never waits for it).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use link::PcapWriter;
use runtime::control::client::{AskError, Connection, EngineSocket};
use runtime::control::filter::Filter;
use runtime::control::proto::{hex_decode, FrameRecord, Reply, Request};
use serde_json::json;

use super::{Common, Usage};

/// How long an engine may take to answer one request.
const TIMEOUT: Duration = Duration::from_secs(2);
/// How often the engines are read (well inside their reader timeout).
const READ_EVERY: Duration = Duration::from_millis(50);

/// What `ustack pcap` was asked.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    pub iface: String,
    pub count: Option<u64>,
    pub snaplen: u32,
    pub seconds: Option<f64>,
    pub write: Option<String>,
    pub filter: String,
}

pub(crate) fn parse_options(args: &[String]) -> Result<Options, Usage> {
    let mut o = Options {
        iface: "0".into(),
        count: None,
        snaplen: 0,
        seconds: None,
        write: None,
        filter: String::new(),
    };
    let mut filter = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| Usage(format!("{a} needs {what}")))
        };
        match a.as_str() {
            "-i" => o.iface = value("an interface or port number")?,
            "-c" => {
                let v = value("a frame count")?;
                o.count = Some(
                    v.parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| Usage(format!("-c {v}: not a frame count above 0")))?,
                );
            }
            "-s" => {
                let v = value("a snap length")?;
                o.snaplen = v
                    .parse()
                    .ok()
                    .filter(|&n: &u32| n <= 65535)
                    .ok_or_else(|| Usage(format!("-s {v}: not a snap length 0..65535")))?;
            }
            "-t" => {
                let v = value("seconds")?;
                o.seconds = Some(
                    v.parse()
                        .ok()
                        .filter(|&s: &f64| s > 0.0 && s.is_finite())
                        .ok_or_else(|| Usage(format!("-t {v}: not a number of seconds")))?,
                );
            }
            "-w" => o.write = Some(value("a file name (or - for standard output)")?),
            w if w.starts_with('-') && w.len() > 1 && filter.is_empty() => {
                return Err(Usage(format!("unknown option {w}")))
            }
            w => filter.push(w.to_string()),
        }
    }
    o.filter = filter.join(" ");
    Filter::parse(&o.filter).map_err(|e| Usage(format!("filter {:?}: {e}", o.filter)))?;
    Ok(o)
}

/// Set by Ctrl-C: the capture ends cleanly.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// One engine's capture.
struct Capture {
    label: String,
    conn: Connection,
    port: u32,
    id: u64,
    matched: u64,
    dropped: u64,
    /// Ended by the engine (or failed): not read again.
    ended: bool,
}

/// Where the frames go.
enum Output {
    Pcap(PcapWriter<Box<dyn Write>>),
    Lines { json: bool },
}

pub fn main(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    let o = parse_options(args)?;
    let mut out = match o.write.as_deref() {
        None => Output::Lines { json: c.json },
        Some(path) => {
            let w: Box<dyn Write> = if path == "-" {
                Box::new(BufWriter::new(io::stdout()))
            } else {
                match File::create(path) {
                    Ok(f) => Box::new(BufWriter::new(f)),
                    Err(e) => {
                        eprintln!("ustack pcap: cannot create {path}: {e}");
                        return Ok(ExitCode::FAILURE);
                    }
                }
            };
            match PcapWriter::new(w, o.snaplen) {
                Ok(w) => Output::Pcap(w),
                Err(e) => {
                    eprintln!("ustack pcap: cannot write the pcap header: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
    };
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }

    let mut captures = Vec::new();
    let mut ok = true;
    for s in sockets {
        let label = format!("{}/{}", s.process, s.engine);
        let started = Connection::open(&s.path, TIMEOUT)
            .map_err(AskError::Io)
            .and_then(|mut conn| {
                let r = conn.ask(&Request::CaptureStart {
                    iface: o.iface.clone(),
                    filter: o.filter.clone(),
                    snaplen: o.snaplen,
                })?;
                Ok((conn, r))
            });
        match started {
            Ok((conn, Reply::CaptureStarted { port, id, filter })) => {
                if !c.json && o.write.as_deref() != Some("-") {
                    eprintln!(
                        "ustack pcap: engine {label}: capturing port {port}{}",
                        if filter.is_empty() {
                            String::new()
                        } else {
                            format!(" ({filter})")
                        }
                    );
                }
                captures.push(Capture {
                    label,
                    conn,
                    port,
                    id,
                    matched: 0,
                    dropped: 0,
                    ended: false,
                });
            }
            Ok((_, other)) => {
                eprintln!("ustack pcap: engine {label}: unexpected answer {other:?}");
                ok = false;
            }
            Err(e) => {
                eprintln!("ustack pcap: engine {label}: {e}");
                ok = false;
            }
        }
    }
    if !ok {
        stop_all(&mut captures);
        return Ok(ExitCode::FAILURE);
    }

    let started = Instant::now();
    let mut written = 0u64;
    let mut write_error = None;
    loop {
        let done = INTERRUPTED.load(Ordering::Relaxed)
            || o.count.is_some_and(|n| written >= n)
            || o.seconds
                .is_some_and(|s| started.elapsed().as_secs_f64() >= s)
            || captures.iter().all(|c| c.ended)
            || write_error.is_some();
        let mut batch = Vec::new();
        for cap in captures.iter_mut().filter(|c| !c.ended) {
            let req = if done {
                Request::CaptureStop {
                    port: cap.port,
                    id: cap.id,
                }
            } else {
                Request::CaptureRead {
                    port: cap.port,
                    id: cap.id,
                }
            };
            match cap.conn.ask(&req) {
                Ok(Reply::Captured {
                    frames,
                    matched,
                    dropped,
                    ..
                }) => {
                    cap.matched = matched;
                    cap.dropped = dropped;
                    batch.extend(frames.into_iter().map(|f| (cap.label.clone(), f)));
                    cap.ended |= done;
                }
                Ok(other) => {
                    eprintln!(
                        "ustack pcap: engine {}: unexpected answer {other:?}",
                        cap.label
                    );
                    cap.ended = true;
                    ok = false;
                }
                Err(e) => {
                    eprintln!("ustack pcap: engine {}: the capture ended: {e}", cap.label);
                    cap.ended = true;
                    ok = false;
                }
            }
        }
        batch.sort_by_key(|(_, f)| f.ts_us);
        for (label, f) in batch {
            if o.count.is_some_and(|n| written >= n) {
                break;
            }
            if let Err(e) = emit(&mut out, &label, &f) {
                write_error.get_or_insert(e);
                break;
            }
            written += 1;
        }
        if let Err(e) = flush(&mut out) {
            write_error.get_or_insert(e);
        }
        if done {
            break;
        }
        std::thread::sleep(READ_EVERY);
    }
    stop_all(&mut captures);
    if let Some(e) = write_error {
        // A reader that went away (`| head`) is an end, not a failure.
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("ustack pcap: writing the capture: {e}");
            ok = false;
        }
    }
    let matched: u64 = captures.iter().map(|c| c.matched).sum();
    let dropped: u64 = captures.iter().map(|c| c.dropped).sum();
    if c.json {
        let summary = json!({
            "written": written,
            "matched": matched,
            "dropped": dropped,
            "engines": captures.iter().map(|c| json!({
                "engine": c.label, "port": c.port, "matched": c.matched, "dropped": c.dropped,
            })).collect::<Vec<_>>(),
        });
        if o.write.as_deref() == Some("-") {
            eprintln!("{summary}");
        } else {
            println!("{summary}");
        }
    } else {
        eprintln!(
            "ustack pcap: {written} frame(s) written; the engines matched {matched} and dropped \
             {dropped}{}",
            if dropped > 0 {
                " (this reader was too slow for them)"
            } else {
                ""
            }
        );
    }
    Ok(super::exit(ok))
}

/// Ends every capture still running (best effort: an engine ends an
/// unread capture by itself anyway).
fn stop_all(captures: &mut [Capture]) {
    for cap in captures.iter_mut().filter(|c| !c.ended) {
        let _ = cap.conn.ask(&Request::CaptureStop {
            port: cap.port,
            id: cap.id,
        });
        cap.ended = true;
    }
}

fn emit(out: &mut Output, label: &str, f: &FrameRecord) -> io::Result<()> {
    let data = hex_decode(&f.data)
        .ok_or_else(|| io::Error::other("an engine sent a frame that is not hex"))?;
    let ts = Duration::from_micros(f.ts_us);
    match out {
        Output::Pcap(w) => w.write_cut_frame(ts, f.len as usize, &data),
        Output::Lines { json } => {
            let stdout = &mut io::stdout().lock();
            if *json {
                let line = json!({
                    "engine": label,
                    "ts_us": f.ts_us,
                    "len": f.len,
                    "outgoing": f.outgoing,
                    "summary": describe(&data),
                });
                writeln!(stdout, "{line}")
            } else {
                let secs = f.ts_us / 1_000_000;
                writeln!(
                    stdout,
                    "{:02}:{:02}:{:02}.{:06} {label} {} {} bytes: {}",
                    secs / 3600 % 24,
                    secs / 60 % 60,
                    secs % 60,
                    f.ts_us % 1_000_000,
                    if f.outgoing { "out" } else { "in " },
                    f.len,
                    describe(&data)
                )
            }
        }
    }
}

fn flush(out: &mut Output) -> io::Result<()> {
    match out {
        Output::Pcap(w) => w.flush(),
        Output::Lines { .. } => io::stdout().flush(),
    }
}

/// A short description of a frame: `vlan 10 IPv4 10.0.0.1:80 > 10.0.0.2:4000 tcp`.
pub(crate) fn describe(frame: &[u8]) -> String {
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    let mut out = String::new();
    let mut at = 12;
    let mut ethertype = be16(at);
    while matches!(ethertype, Some(0x8100 | 0x88a8)) {
        if let Some(tci) = be16(at + 2) {
            out.push_str(&format!("vlan {} ", tci & 0x0fff));
        }
        at += 4;
        ethertype = be16(at);
    }
    let l3 = at + 2;
    let ports = |l4: usize| match (be16(l4), be16(l4 + 2)) {
        (Some(s), Some(d)) => (format!(":{s}"), format!(":{d}")),
        _ => (String::new(), String::new()),
    };
    let proto_name = |p: u8| match p {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        1 => "icmp".to_string(),
        58 => "icmp6".to_string(),
        n => format!("proto {n}"),
    };
    match ethertype {
        Some(0x0800) => {
            let (Some(b), Some(ihl)) = (frame.get(l3..l3 + 20), frame.get(l3)) else {
                return out + "IPv4 (cut short)";
            };
            let src = Ipv4Addr::new(b[12], b[13], b[14], b[15]);
            let dst = Ipv4Addr::new(b[16], b[17], b[18], b[19]);
            let (sp, dp) = if matches!(b[9], 6 | 17) {
                ports(l3 + usize::from(ihl & 15) * 4)
            } else {
                Default::default()
            };
            out + &format!("IPv4 {src}{sp} > {dst}{dp} {}", proto_name(b[9]))
        }
        Some(0x86dd) => {
            let Some(b) = frame.get(l3..l3 + 40) else {
                return out + "IPv6 (cut short)";
            };
            let addr = |o: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            };
            let (sp, dp) = if matches!(b[6], 6 | 17) {
                ports(l3 + 40)
            } else {
                Default::default()
            };
            out + &format!(
                "IPv6 {}{sp} > {}{dp} {}",
                addr(8),
                addr(24),
                proto_name(b[6])
            )
        }
        Some(0x0806) => match frame.get(l3..l3 + 28) {
            Some(b) => {
                let op = if b[7] == 1 { "who-has" } else { "reply" };
                let sender = Ipv4Addr::new(b[14], b[15], b[16], b[17]);
                let target = Ipv4Addr::new(b[24], b[25], b[26], b[27]);
                out + &format!("ARP {op} {target} tell {sender}")
            }
            None => out + "ARP (cut short)",
        },
        Some(t) => out + &format!("ethertype 0x{t:04x}"),
        None => out + "(runt)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_and_filter() {
        let o = parse_options(&args(
            "-i ustack0.10 -c 5 -s 96 -t 2.5 -w /tmp/x.pcap tcp port 80",
        ))
        .unwrap();
        assert_eq!(
            o,
            Options {
                iface: "ustack0.10".into(),
                count: Some(5),
                snaplen: 96,
                seconds: Some(2.5),
                write: Some("/tmp/x.pcap".into()),
                filter: "tcp port 80".into(),
            }
        );
        let o = parse_options(&args("not arp")).unwrap();
        assert_eq!((o.iface.as_str(), o.filter.as_str()), ("0", "not arp"));
    }

    #[test]
    fn bad_options_say_what_is_wrong() {
        for (bad, says) in [
            ("-c 0", "not a frame count"),
            ("-c", "-c needs a frame count"),
            ("-s 70000", "not a snap length"),
            ("-t -1", "not a number of seconds"),
            ("-x", "unknown option -x"),
            ("tcp port", "`port` needs a number"),
            ("host 1.2.3", "not an IPv4 or IPv6 address"),
        ] {
            match parse_options(&args(bad)) {
                Err(Usage(m)) => assert!(m.contains(says), "{bad}: {m}"),
                Ok(o) => panic!("{bad} accepted: {o:?}"),
            }
        }
    }

    #[test]
    fn frames_described() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0, 0, 10, 0x08, 0]);
        f.extend_from_slice(&[
            0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&[0, 80, 0x9c, 0x40]);
        assert_eq!(
            describe(&f),
            "vlan 10 IPv4 10.0.0.1:80 > 10.0.0.2:40000 tcp"
        );
        assert_eq!(describe(&f[..20]), "vlan 10 IPv4 (cut short)");
        assert_eq!(describe(&[1, 2]), "(runt)");
    }
}
