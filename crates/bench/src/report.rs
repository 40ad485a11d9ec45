//! What `ustack-bench run` writes: the table on stdout, the JSON under
//! `bench/results/` and the chart beside it (`latest.svg`).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::specs::Spec;
use crate::stats::{Batch, Samples, SPREAD_LIMIT};

/// One row of the results: a workload through one way in.
pub struct Row {
    pub spec: &'static Spec,
    /// Every batch run (see `stats.rs`); the last is the one reported.
    pub batches: Vec<Batch>,
    /// A failure that stopped the workload before any run (its setup).
    pub setup_failure: Option<String>,
    /// Details worth printing under the table.
    pub notes: Vec<String>,
}

impl Row {
    pub fn new(spec: &'static Spec) -> Row {
        Row {
            spec,
            batches: Vec::new(),
            setup_failure: None,
            notes: Vec::new(),
        }
    }

    /// The batch reported (an empty one when none ran).
    pub fn last(&self) -> Batch {
        self.batches.last().cloned().unwrap_or_default()
    }

    /// A batch whose spread stayed above the limit (one with two
    /// figures to compare, at least).
    pub fn unstable(&self) -> bool {
        self.batches.last().is_some_and(|b| !b.stable())
    }
}

pub fn fmt_value(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

fn fmt_samples(s: &Samples) -> String {
    let failed = if s.failures.is_empty() {
        String::new()
    } else {
        format!(" [{} failed]", s.failures.len())
    };
    match (s.median(), s.min(), s.max()) {
        (Some(m), Some(lo), Some(hi)) if s.values.len() > 1 => format!(
            "{} ({}..{}){failed}",
            fmt_value(Some(m)),
            fmt_value(Some(lo)),
            fmt_value(Some(hi))
        ),
        (Some(m), _, _) => format!("{}{failed}", fmt_value(Some(m))),
        _ if !s.failures.is_empty() => format!("failed x{}", s.failures.len()),
        _ => "-".into(),
    }
}

fn fmt_ratio(b: &Batch) -> String {
    match (b.ratio(), b.ratio_min(), b.ratio_max()) {
        (Some(m), Some(lo), Some(hi)) if b.ratios.len() > 1 => {
            format!("{m:.2}x ({lo:.2}..{hi:.2})")
        }
        (Some(m), _, _) => format!("{m:.2}x"),
        _ => "-".into(),
    }
}

/// The table: one line per row, medians with min..max, the ratio's median
/// with its range, the pairs run, and the stability flag.
pub fn render_table(rows: &[Row]) -> String {
    const COLS: usize = 10;
    let head = [
        "workload", "way", "ustack", "linux", "unit", "ratio", "runs", "stable", "goal", "met",
    ];
    let mut cells: Vec<[String; COLS]> = vec![head.map(str::to_string)];
    for r in rows {
        let b = r.last();
        let met = r.spec.goal.met(b.ustack.median(), b.ratio());
        cells.push([
            r.spec.name.to_string(),
            r.spec.way.name().to_string(),
            r.setup_failure
                .as_ref()
                .map_or_else(|| fmt_samples(&b.ustack), |_| "setup failed".into()),
            fmt_samples(&b.linux),
            r.spec.unit.to_string(),
            fmt_ratio(&b),
            format!("{}", b.ustack.attempts().max(b.linux.attempts())),
            match (b.spread(), r.unstable()) {
                (None, _) => "-".into(),
                (Some(s), false) => format!("yes {:.0}%", 100.0 * s),
                (Some(s), true) => format!("UNSTABLE {:.0}%", 100.0 * s),
            },
            r.spec.goal.describe(),
            match met {
                Some(true) => "yes".into(),
                Some(false) => "NO".into(),
                None => "-".into(),
            },
        ]);
    }
    let mut widths = [0usize; COLS];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(j, (c, w))| {
                if matches!(j, 2 | 3 | 5 | 6) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(total));
        }
    }
    let _ = write!(
        out,
        "  (medians with min..max; ratio: the median of the per-pair ratios, with their range; \
         stable: the largest spread, (max - min) / median, within {:.0}% after at most the \
         batches allowed)",
        100.0 * SPREAD_LIMIT
    );
    out
}

pub fn json_num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => {
            if x.abs() >= 100.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.3}")
            }
        }
        _ => "null".into(),
    }
}

pub fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_list(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|&x| json_num(Some(x))).collect();
    format!("[{}]", items.join(", "))
}

fn json_strs<'a>(v: impl Iterator<Item = &'a String>) -> String {
    format!(
        "[{}]",
        v.map(|s| json_str(s)).collect::<Vec<_>>().join(", ")
    )
}

/// One batch's raw figures, for the JSON's record of earlier batches.
fn json_batch(b: &Batch) -> String {
    format!(
        "{{\"ustack_runs\": {}, \"linux_runs\": {}, \"pair_ratios\": {}, \"spread\": {}, \
         \"ustack_failures\": {}, \"linux_failures\": {}}}",
        json_list(&b.ustack.values),
        json_list(&b.linux.values),
        json_list(&b.ratios),
        json_num(b.spread()),
        json_strs(b.ustack.failures.iter()),
        json_strs(b.linux.failures.iter()),
    )
}

/// The run's header facts.
pub struct RunFacts {
    pub when: SystemTime,
    pub elapsed: Duration,
    pub runs: usize,
    pub max_batches: usize,
    pub warmup_ms: u64,
    pub window_ms: u64,
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
}

/// The JSON: per row the reported batch's medians, min and max of both
/// stacks, the ratio (median of the pair ratios) and its range, the runs
/// made, the stability flag and spread, every failure, and the earlier
/// batches' figures.
pub fn render_json(rows: &[Row], f: &RunFacts) -> String {
    let mut out = String::from("{\n");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let _ = writeln!(out, "  \"date\": {},", json_str(&when_utc(f.when)));
    let _ = writeln!(out, "  \"kernel\": {},", json_str(kernel.trim()));
    let _ = writeln!(
        out,
        "  \"cpus\": {},",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let _ = writeln!(
        out,
        "  \"runs\": {}, \"max_batches\": {}, \"spread_limit\": {}, \"warmup_ms\": {}, \
         \"window_ms\": {}, \"seconds\": {:.0}, \"load_before\": {}, \"load_after\": {},",
        f.runs,
        f.max_batches,
        SPREAD_LIMIT,
        f.warmup_ms,
        f.window_ms,
        f.elapsed.as_secs_f64(),
        json_num(f.load_before),
        json_num(f.load_after),
    );
    out.push_str("  \"workloads\": [\n");
    for (i, r) in rows.iter().enumerate() {
        let b = r.last();
        let met = r.spec.goal.met(b.ustack.median(), b.ratio());
        let earlier: Vec<String> = r.batches[..r.batches.len().saturating_sub(1)]
            .iter()
            .map(json_batch)
            .collect();
        let _ = write!(
            out,
            "    {{\"name\": {}, \"way\": {}, \"unit\": {}, \"higher_better\": {}, \
             \"ustack\": {}, \"ustack_min\": {}, \"ustack_max\": {}, \
             \"linux\": {}, \"linux_min\": {}, \"linux_max\": {}, \
             \"ratio\": {}, \"ratio_min\": {}, \"ratio_max\": {}, \
             \"runs\": {}, \"ustack_runs\": {}, \"linux_runs\": {}, \"pair_ratios\": {}, \
             \"spread\": {}, \"unstable\": {}, \"batches\": {}, \
             \"ustack_failures\": {}, \"linux_failures\": {}, \"setup_failure\": {}, \
             \"earlier_batches\": [{}], \"goal\": {}, \"met\": {}, \"notes\": {}}}",
            json_str(r.spec.name),
            json_str(r.spec.way.name()),
            json_str(r.spec.unit),
            r.spec.higher_better,
            json_num(b.ustack.median()),
            json_num(b.ustack.min()),
            json_num(b.ustack.max()),
            json_num(b.linux.median()),
            json_num(b.linux.min()),
            json_num(b.linux.max()),
            json_num(b.ratio()),
            json_num(b.ratio_min()),
            json_num(b.ratio_max()),
            b.ustack.attempts().max(b.linux.attempts()),
            json_list(&b.ustack.values),
            json_list(&b.linux.values),
            json_list(&b.ratios),
            json_num(b.spread()),
            r.unstable(),
            r.batches.len(),
            json_strs(b.ustack.failures.iter()),
            json_strs(b.linux.failures.iter()),
            r.setup_failure.as_deref().map_or("null".into(), json_str),
            earlier.join(", "),
            json_str(&r.spec.goal.describe()),
            met.map_or("null".into(), |m| m.to_string()),
            json_strs(r.notes.iter()),
        );
        out.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    out.push_str("  ]\n}\n");
    out
}

/// The one-minute load average.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC.
pub fn when_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::SPECS;

    #[test]
    fn dates() {
        assert_eq!(when_utc(UNIX_EPOCH), "1970-01-01T00:00:00");
        let t = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(when_utc(t), "2024-02-29T12:34:56");
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(json_num(None), "null");
        assert_eq!(json_num(Some(1234.4)), "1234");
    }

    /// One pair's outcome: ustack's run, the kernel's.
    type Pair<'a> = (Result<f64, &'a str>, Result<f64, &'a str>);

    fn row_with(spec: &'static Spec, pairs: &[Pair<'_>]) -> Row {
        let mut b = Batch::default();
        for (i, (u, l)) in pairs.iter().enumerate() {
            let own = |r: &Result<f64, &str>| Some(r.map_err(str::to_string));
            b.add_pair(i + 1, own(u), own(l), spec.higher_better);
        }
        let mut r = Row::new(spec);
        r.batches.push(b);
        r
    }

    #[test]
    fn the_json_carries_ranges_failures_and_the_flag() {
        let spec = &SPECS[0];
        let r = row_with(
            spec,
            &[
                (Ok(10.0), Ok(1.0)),
                (Ok(30.0), Err("boom")),
                (Ok(20.0), Ok(1.0)),
            ],
        );
        let facts = RunFacts {
            when: UNIX_EPOCH,
            elapsed: Duration::from_secs(1),
            runs: 3,
            max_batches: 1,
            warmup_ms: 0,
            window_ms: 0,
            load_before: None,
            load_after: None,
        };
        let j = render_json(&[r], &facts);
        for want in [
            "\"ustack\": 20.000, \"ustack_min\": 10.000, \"ustack_max\": 30.000",
            "\"ratio\": 15.000, \"ratio_min\": 10.000, \"ratio_max\": 20.000",
            "\"runs\": 3,",
            "\"linux_failures\": [\"run 2: boom\"]",
            "\"unstable\": true",
            "\"way\": \"core\"",
        ] {
            assert!(j.contains(want), "{want} not in {j}");
        }
        let t = render_table(&[row_with(spec, &[(Ok(10.0), Ok(1.0)), (Ok(10.5), Ok(1.0))])]);
        assert!(t.contains("yes 5%"), "{t}");
        assert!(t.contains("10.25x (10.00..10.50)"), "{t}");
    }
}
