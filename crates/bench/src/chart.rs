//! `latest.svg`: one bar pair per workload, ustack beside the kernel, each
//! with its min..max whisker.
//!
//! Rows have different units, so every figure is drawn relative to the
//! kernel's median of its row (the kernel's bar is 1 with its own range),
//! on a logarithmic axis: 1x, 10x and 0.5x read alike wherever they are.
//! Where lower figures are better (memory) the row's label says so. Rows
//! without a kernel figure (instruction counts) are left out.

use std::fmt::Write as _;

use crate::report::Row;

const LEFT: f64 = 330.0;
const PLOT: f64 = 560.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const ROW_H: f64 = 34.0;
const BAR_H: f64 = 11.0;

/// The SVG for `rows`, titled `title`.
pub fn render_svg(rows: &[Row], title: &str) -> String {
    struct Drawn {
        label: String,
        /// (median, min, max) relative to the kernel's median.
        ustack: (f64, f64, f64),
        linux: (f64, f64, f64),
        ratio: String,
    }
    let mut drawn = Vec::new();
    for r in rows {
        let b = r.last();
        let (Some(lm), Some(um)) = (b.linux.median(), b.ustack.median()) else {
            continue;
        };
        if lm <= 0.0 || um <= 0.0 {
            continue;
        }
        let rel = |v: Option<f64>| v.unwrap_or(0.0) / lm;
        let flag = if r.unstable() { ", unstable" } else { "" };
        let better = if r.spec.higher_better {
            ""
        } else {
            ", lower is better"
        };
        drawn.push(Drawn {
            label: format!("{} ({}{better})", r.spec.name, r.spec.way.name()),
            ustack: (um / lm, rel(b.ustack.min()), rel(b.ustack.max())),
            linux: (1.0, rel(b.linux.min()), rel(b.linux.max())),
            ratio: match (b.ratio(), b.ratio_min(), b.ratio_max()) {
                (Some(m), Some(lo), Some(hi)) => format!("{m:.2}x ({lo:.2}..{hi:.2}){flag}"),
                _ => "-".into(),
            },
        });
    }
    // The axis: powers of ten around every figure drawn.
    let lo = drawn
        .iter()
        .flat_map(|d| [d.ustack.1, d.linux.1])
        .filter(|&v| v > 0.0)
        .fold(1.0f64, f64::min);
    let hi = drawn
        .iter()
        .flat_map(|d| [d.ustack.2, d.linux.2])
        .fold(1.0f64, f64::max);
    let (d0, d1) = (lo.log10().floor().min(-1.0), hi.log10().ceil().max(1.0));
    let x = |v: f64| LEFT + PLOT * (v.max(10f64.powf(d0)).log10() - d0) / (d1 - d0);
    let height = TOP + ROW_H * drawn.len() as f64 + 50.0;
    let width = LEFT + PLOT + RIGHT;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(
        s,
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" \
         font-size=\"14\">{}</text>",
        escape(title)
    );
    // Grid lines at each power of ten.
    let mut p = d0;
    while p <= d1 + 1e-9 {
        let gx = x(10f64.powf(p));
        let _ = writeln!(
            s,
            "<line x1=\"{gx:.1}\" y1=\"{TOP}\" x2=\"{gx:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{gx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}x</text>",
            height - 40.0,
            height - 26.0,
            fmt_power(p)
        );
        p += 1.0;
    }
    for (i, d) in drawn.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            y + BAR_H + 4.0,
            escape(&d.label)
        );
        for (k, (fig, color)) in [(d.ustack, "#2b6cb0"), (d.linux, "#a0a0a0")]
            .into_iter()
            .enumerate()
        {
            let by = y + 2.0 + k as f64 * (BAR_H + 2.0);
            let x0 = x(10f64.powf(d0));
            let _ = writeln!(
                s,
                "<rect x=\"{x0:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"{BAR_H}\" \
                 fill=\"{color}\"/>",
                (x(fig.0) - x0).max(1.0)
            );
            let wy = by + BAR_H / 2.0;
            let _ = writeln!(
                s,
                "<line x1=\"{:.1}\" y1=\"{wy:.1}\" x2=\"{:.1}\" y2=\"{wy:.1}\" stroke=\"black\"/>\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
                x(fig.1),
                x(fig.2),
                x(fig.1),
                wy - 3.0,
                x(fig.1),
                wy + 3.0,
                x(fig.2),
                wy - 3.0,
                x(fig.2),
                wy + 3.0
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LEFT + PLOT + 6.0,
            y + BAR_H + 4.0,
            escape(&d.ratio)
        );
    }
    let ly = height - 10.0;
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"#2b6cb0\"/>\
         <text x=\"{:.1}\" y=\"{ly:.1}\">ustack</text>\
         <rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"10\" fill=\"#a0a0a0\"/>\
         <text x=\"{:.1}\" y=\"{ly:.1}\">Linux (each row relative to the kernel's median; \
         whiskers: min..max; right: the median per-pair ratio and its range)</text>",
        ly - 9.0,
        LEFT + 16.0,
        LEFT + 70.0,
        ly - 9.0,
        LEFT + 86.0
    );
    s.push_str("</svg>\n");
    s
}

fn fmt_power(p: f64) -> String {
    let v = 10f64.powf(p);
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::SPECS;
    use crate::stats::Batch;

    #[test]
    fn a_bar_pair_per_row_with_a_kernel_figure() {
        let mut with = Row::new(&SPECS[0]);
        let mut b = Batch::default();
        b.add_pair(1, Some(Ok(10.0)), Some(Ok(1.0)), true);
        b.add_pair(2, Some(Ok(20.0)), Some(Ok(2.0)), true);
        with.batches.push(b);
        let mut without = Row::new(&SPECS[1]);
        let mut b = Batch::default();
        b.add_pair(1, Some(Ok(10.0)), None, true);
        without.batches.push(b);
        let svg = render_svg(&[with, without], "t <1>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains(SPECS[0].name));
        assert!(!svg.contains(SPECS[1].name), "no kernel figure, no bars");
        // Two bars (ustack and the kernel) plus the legend's two swatches.
        assert_eq!(svg.matches("fill=\"#2b6cb0\"").count(), 2);
        assert_eq!(svg.matches("fill=\"#a0a0a0\"").count(), 2);
        assert!(svg.contains("10.00x (10.00..10.00)"));
    }
}
