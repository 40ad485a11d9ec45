//! Counters in Prometheus's text exposition format (version 0.0.4): one
//! family per counter name, a sample per engine (and per port for a
//! port's counters), labelled `proc`, `engine` and `port`.
//!
//! `port3_link_rx_frames` of engine 1 of process 0 becomes
//! `ustack_link_rx_frames_total{proc="0",engine="1",port="3"}`; gauges
//! (what exists now: sockets, connections, memory) keep their name
//! without `_total`.

use std::collections::HashMap;
use std::fmt::Write;

/// The counters that are gauges.
const GAUGES: &[&str] = &[
    "sockets_open",
    "tcp_connections",
    "tcp_memory_bytes",
    "tcp_memory_per_connection",
    "tcp_memory_accounted_bytes",
    "tcp_timer_entries",
    "tcp_timer_bytes",
];

/// One engine's counters and who it is.
pub struct EngineCounters<'a> {
    pub process: &'a str,
    pub engine: u32,
    pub counters: &'a [(String, u64)],
}

/// Splits `port3_link_rx_frames` into (`link_rx_frames`, Some(3)).
fn split_port(name: &str) -> (&str, Option<&str>) {
    if let Some(rest) = name.strip_prefix("port") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest.as_bytes().get(digits) == Some(&b'_') {
            return (&rest[digits + 1..], Some(&rest[..digits]));
        }
    }
    (name, None)
}

/// A metric name of only `[a-zA-Z0-9_]`, prefixed with `ustack_`.
fn metric_name(base: &str, gauge: bool) -> String {
    let mut s = String::with_capacity(base.len() + 14);
    s.push_str("ustack_");
    s.extend(base.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    if !gauge {
        s.push_str("_total");
    }
    s
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Renders every engine's counters.
pub fn render(engines: &[EngineCounters<'_>]) -> String {
    // Families in first-seen order, each with its samples.
    let mut order: Vec<(String, bool)> = Vec::new();
    let mut samples: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for e in engines {
        for (name, v) in e.counters {
            let (base, port) = split_port(name);
            let gauge = GAUGES.contains(&base);
            let metric = metric_name(base, gauge);
            let mut labels = format!("proc=\"{}\",engine=\"{}\"", escape(e.process), e.engine);
            if let Some(p) = port {
                let _ = write!(labels, ",port=\"{p}\"");
            }
            let list = samples.entry(metric.clone()).or_insert_with(|| {
                order.push((metric.clone(), gauge));
                Vec::new()
            });
            list.push((labels, *v));
        }
    }
    let mut out = String::new();
    for (metric, gauge) in order {
        let kind = if gauge { "gauge" } else { "counter" };
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        for (labels, v) in &samples[&metric] {
            let _ = writeln!(out, "{metric}{{{labels}}} {v}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_with_labels() {
        let c0 = vec![
            ("tcp_rx_segments".to_string(), 5),
            ("port0_link_rx_frames".to_string(), 7),
            ("port1_link_rx_frames".to_string(), 8),
            ("tcp_connections".to_string(), 2),
        ];
        let c1 = vec![("tcp_rx_segments".to_string(), 6)];
        let text = render(&[
            EngineCounters {
                process: "0",
                engine: 0,
                counters: &c0,
            },
            EngineCounters {
                process: "0",
                engine: 1,
                counters: &c1,
            },
        ]);
        assert_eq!(
            text,
            "# TYPE ustack_tcp_rx_segments_total counter\n\
             ustack_tcp_rx_segments_total{proc=\"0\",engine=\"0\"} 5\n\
             ustack_tcp_rx_segments_total{proc=\"0\",engine=\"1\"} 6\n\
             # TYPE ustack_link_rx_frames_total counter\n\
             ustack_link_rx_frames_total{proc=\"0\",engine=\"0\",port=\"0\"} 7\n\
             ustack_link_rx_frames_total{proc=\"0\",engine=\"0\",port=\"1\"} 8\n\
             # TYPE ustack_tcp_connections gauge\n\
             ustack_tcp_connections{proc=\"0\",engine=\"0\"} 2\n"
        );
    }

    #[test]
    fn odd_names_are_made_valid() {
        assert_eq!(split_port("portal_x"), ("portal_x", None));
        assert_eq!(
            split_port("port12_fault_rx_lost"),
            ("fault_rx_lost", Some("12"))
        );
        assert_eq!(metric_name("a.b-c", false), "ustack_a_b_c_total");
        assert_eq!(escape("a\"b\\"), "a\\\"b\\\\");
    }
}
