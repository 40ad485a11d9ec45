//! `ustack top`: a per-engine view refreshed every second (busy share of
//! the loop, packets and bytes per second each way, drops, connections);
//! `ustack traffic`: the raw rates of every engine summed, one line a
//! second, as F-Stack's ff_traffic.
//!
//! Both compute rates from two `stats` answers a second apart.  `-n COUNT`
//! stops after COUNT refreshes (default: until interrupted); `-d SECS`
//! sets the interval.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use runtime::control::client::{self, EngineSocket};
use runtime::control::proto::{Reply, Request};
use serde_json::json;

use super::{Common, Usage};

/// The figures of one engine at one moment.
#[derive(Debug, Clone, Default)]
struct Sample {
    at: Option<Instant>,
    idle_us: u64,
    rx_frames: u64,
    rx_bytes: u64,
    tx_frames: u64,
    tx_bytes: u64,
    drops: u64,
    connections: u64,
}

fn sample(counters: &[(String, u64)], at: Instant) -> Sample {
    let mut s = Sample {
        at: Some(at),
        ..Sample::default()
    };
    for (name, v) in counters {
        let n = name.as_str();
        match n {
            "engine_idle_us" => s.idle_us = *v,
            "tcp_connections" => s.connections = *v,
            _ => {}
        }
        if let Some(rest) = n.strip_prefix("port") {
            let tail = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            match tail {
                "_link_rx_frames" => s.rx_frames += v,
                "_link_rx_bytes" => s.rx_bytes += v,
                "_link_tx_frames" => s.tx_frames += v,
                "_link_tx_bytes" => s.tx_bytes += v,
                "_link_rx_dropped" | "_link_tx_dropped" => s.drops += v,
                _ => {}
            }
        } else if n.starts_with("rx_drop_") || n.starts_with("tx_drop_") {
            s.drops += v;
        }
    }
    s
}

/// Rates between two samples.
#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    busy_pct: f64,
    rx_pps: f64,
    rx_bps: f64,
    tx_pps: f64,
    tx_bps: f64,
    drops_ps: f64,
    connections: u64,
}

fn rates(old: &Sample, new: &Sample) -> Option<Rates> {
    let secs = new.at?.duration_since(old.at?).as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / secs;
    let idle = new.idle_us.saturating_sub(old.idle_us) as f64 / 1e6 / secs;
    Some(Rates {
        busy_pct: (100.0 * (1.0 - idle)).clamp(0.0, 100.0),
        rx_pps: d(old.rx_frames, new.rx_frames),
        rx_bps: d(old.rx_bytes, new.rx_bytes) * 8.0,
        tx_pps: d(old.tx_frames, new.tx_frames),
        tx_bps: d(old.tx_bytes, new.tx_bytes) * 8.0,
        drops_ps: d(old.drops, new.drops),
        connections: new.connections,
    })
}

struct Options {
    count: Option<u64>,
    interval: Duration,
}

fn options(args: &[String]) -> Result<Options, Usage> {
    let mut o = Options {
        count: None,
        interval: Duration::from_secs(1),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = |it: &mut std::slice::Iter<'_, String>| {
            it.next()
                .cloned()
                .ok_or_else(|| Usage(format!("{a} needs a value")))
        };
        match a.as_str() {
            "-n" => {
                let n = v(&mut it)?;
                o.count = Some(
                    n.parse()
                        .map_err(|_| Usage(format!("-n {n}: not a count")))?,
                );
            }
            "-d" => {
                let n = v(&mut it)?;
                let secs: f64 = n
                    .parse()
                    .map_err(|_| Usage(format!("-d {n}: not seconds")))?;
                if !(0.1..=3600.0).contains(&secs) {
                    return Err(Usage(format!("-d {n}: between 0.1 and 3600 seconds")));
                }
                o.interval = Duration::from_secs_f64(secs);
            }
            other => return Err(Usage(format!("unknown argument {other:?}"))),
        }
    }
    Ok(o)
}

/// Samples every engine (all at once), keyed by its socket path.
fn sample_all(sockets: &[EngineSocket]) -> HashMap<String, Sample> {
    super::ask_all(sockets, &Request::Stats)
        .into_iter()
        .filter_map(|a| match a.reply {
            Ok(Reply::Stats { counters }) => Some((
                a.socket.path.display().to_string(),
                sample(&counters, Instant::now()),
            )),
            _ => None,
        })
        .collect()
}

fn human(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Prints one refresh: the rates of each engine, and the refresh's number.
type Show = dyn Fn(&Common, &[(EngineSocket, Rates)], u64);

fn run(
    c: &Common,
    sockets: &[EngineSocket],
    args: &[String],
    show: &Show,
) -> Result<ExitCode, Usage> {
    let o = options(args)?;
    let mut old = sample_all(sockets);
    let mut shown = 0;
    let mut sockets = sockets.to_vec();
    while o.count.is_none_or(|n| shown < n) {
        std::thread::sleep(o.interval);
        // Engines that started since join; those that left go.
        if let Ok(now_found) = client::find_sockets(&c.run_dir, c.prefix.as_deref()) {
            sockets = now_found
                .into_iter()
                .filter(|s| c.proc_id.is_none() || s.proc_id() == c.proc_id)
                .collect();
        }
        let new = sample_all(&sockets);
        let rows: Vec<(EngineSocket, Rates)> = sockets
            .iter()
            .filter_map(|s| {
                let key = s.path.display().to_string();
                let r = rates(old.get(&key)?, new.get(&key)?)?;
                Some((s.clone(), r))
            })
            .collect();
        shown += 1;
        show(c, &rows, shown);
        old = new;
    }
    Ok(ExitCode::SUCCESS)
}

fn row_json(s: &EngineSocket, r: &Rates) -> serde_json::Value {
    json!({
        "prefix": s.prefix, "process": s.process, "engine": s.engine,
        "busy_pct": r.busy_pct, "rx_pps": r.rx_pps, "rx_bps": r.rx_bps,
        "tx_pps": r.tx_pps, "tx_bps": r.tx_bps, "drops_ps": r.drops_ps,
        "connections": r.connections,
    })
}

pub fn top(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    run(c, sockets, args, &|c, rows, _| {
        if c.json {
            let v: Vec<_> = rows.iter().map(|(s, r)| row_json(s, r)).collect();
            println!("{}", serde_json::Value::Array(v));
            return;
        }
        // Clear the screen and home the cursor, as top does.
        print!("\x1b[H\x1b[2J");
        println!(
            "{:<12} {:>6} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}",
            "engine", "busy%", "rx pkt/s", "rx bit/s", "tx pkt/s", "tx bit/s", "drops/s", "conns"
        );
        for (s, r) in rows {
            println!(
                "{:<12} {:>6.1} {:>10} {:>10} {:>10} {:>10} {:>9} {:>8}",
                format!("{}/{}", s.process, s.engine),
                r.busy_pct,
                human(r.rx_pps),
                human(r.rx_bps),
                human(r.tx_pps),
                human(r.tx_bps),
                human(r.drops_ps),
                r.connections
            );
        }
    })
}

pub fn traffic(c: &Common, sockets: &[EngineSocket], args: &[String]) -> Result<ExitCode, Usage> {
    run(c, sockets, args, &|c, rows, n| {
        let mut t = Rates::default();
        for (_, r) in rows {
            t.rx_pps += r.rx_pps;
            t.rx_bps += r.rx_bps;
            t.tx_pps += r.tx_pps;
            t.tx_bps += r.tx_bps;
            t.drops_ps += r.drops_ps;
        }
        if c.json {
            println!(
                "{}",
                json!({"rx_pps": t.rx_pps, "rx_bps": t.rx_bps, "tx_pps": t.tx_pps,
                       "tx_bps": t.tx_bps, "drops_ps": t.drops_ps})
            );
            return;
        }
        if n % 20 == 1 {
            println!(
                "{:>14} {:>14} {:>14} {:>14} {:>10}",
                "rx pkt/s", "rx bytes/s", "tx pkt/s", "tx bytes/s", "drops/s"
            );
        }
        println!(
            "{:>14.0} {:>14.0} {:>14.0} {:>14.0} {:>10.0}",
            t.rx_pps,
            t.rx_bps / 8.0,
            t.tx_pps,
            t.tx_bps / 8.0,
            t.drops_ps
        );
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn rates_from_two_samples_over_every_port() {
        let t0 = Instant::now();
        let old = sample(
            &counters(&[
                ("engine_idle_us", 0),
                ("port0_link_rx_frames", 100),
                ("port1_link_rx_frames", 50),
                ("port0_link_tx_bytes", 1000),
                ("rx_drop_tcp_bad_checksum", 1),
                ("tcp_connections", 3),
            ]),
            t0,
        );
        let new = sample(
            &counters(&[
                ("engine_idle_us", 1_500_000),
                ("port0_link_rx_frames", 2100),
                ("port1_link_rx_frames", 1050),
                ("port0_link_tx_bytes", 5000),
                ("rx_drop_tcp_bad_checksum", 5),
                ("port1_link_rx_dropped", 2),
                ("tcp_connections", 7),
            ]),
            t0 + Duration::from_secs(2),
        );
        let r = rates(&old, &new).unwrap();
        assert_eq!(r.rx_pps, 1500.0);
        assert_eq!(r.tx_bps, 16000.0);
        assert_eq!(r.drops_ps, 3.0);
        assert_eq!(r.busy_pct, 25.0);
        assert_eq!(r.connections, 7);
        assert!(rates(&new, &new).is_none(), "no time passed");
        assert_eq!(human(1_234_567.0), "1.23M");
        assert_eq!(human(999.0), "999");
    }
}
