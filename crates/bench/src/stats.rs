//! The statistics of `ustack-bench run`: every figure a median with its
//! min..max over runs that alternate ustack and the kernel, the ratio the
//! median of per-pair ratios, and the rule for a workload whose runs
//! disagree.
//!
//! A *batch* is `runs` pairs of runs, ustack then the kernel in each pair
//! (the memory workload runs the kernel's batch first, then ustack's, and
//! pairs them by index: see `run.rs`). A pair whose two runs both
//! succeeded gives a ratio. A batch's *spread* is the largest of
//! (max - min) / median over ustack's figures, the kernel's and the pair
//! ratios: a batch whose spread is above [`SPREAD_LIMIT`] is run again, a
//! fresh batch, up to `max_batches` in all. The figures reported are those
//! of the first batch within the limit or, failing that, of the last one,
//! which is then flagged `unstable`; the earlier batches stay in the JSON,
//! and every failed run is listed, never dropped.

/// The spread (max - min over the median) above which a batch is run
/// again, and a workload whose last batch still has it is `unstable`.
pub const SPREAD_LIMIT: f64 = 0.25;

/// The figures of one workload on one stack in one batch.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    pub values: Vec<f64>,
    /// What went wrong in each failed run, with its run number.
    pub failures: Vec<String>,
}

impl Samples {
    fn sorted(&self) -> Vec<f64> {
        let mut v = self.values.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    pub fn median(&self) -> Option<f64> {
        median(&self.values)
    }

    pub fn min(&self) -> Option<f64> {
        self.sorted().first().copied()
    }

    pub fn max(&self) -> Option<f64> {
        self.sorted().last().copied()
    }

    /// Runs made: the figures and the failures.
    pub fn attempts(&self) -> usize {
        self.values.len() + self.failures.len()
    }
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// (max - min) / median of `v`; `None` with fewer than two values or a
/// median of zero.
pub fn spread(v: &[f64]) -> Option<f64> {
    if v.len() < 2 {
        return None;
    }
    let m = median(v)?;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m > 0.0).then(|| (hi - lo) / m)
}

/// One batch of a workload: both stacks' figures and the pair ratios.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    pub ustack: Samples,
    pub linux: Samples,
    /// ustack over the kernel for each pair whose two runs succeeded (the
    /// kernel over ustack where lower figures are better), in run order.
    pub ratios: Vec<f64>,
}

impl Batch {
    /// Adds one pair's outcome: `higher_better` says which way the ratio
    /// goes. `run` is the pair's number from 1, for the failure notes.
    pub fn add_pair(
        &mut self,
        run: usize,
        ustack: Option<Result<f64, String>>,
        linux: Option<Result<f64, String>>,
        higher_better: bool,
    ) {
        let take = |s: &mut Samples, r: Option<Result<f64, String>>| match r {
            Some(Ok(v)) => {
                s.values.push(v);
                Some(v)
            }
            Some(Err(e)) => {
                s.failures.push(format!("run {run}: {e}"));
                None
            }
            None => None,
        };
        let u = take(&mut self.ustack, ustack);
        let l = take(&mut self.linux, linux);
        if let (Some(u), Some(l)) = (u, l) {
            if u > 0.0 && l > 0.0 {
                self.ratios.push(if higher_better { u / l } else { l / u });
            }
        }
    }

    /// The largest spread of ustack's figures, the kernel's and the pair
    /// ratios (`None` when none has two values).
    pub fn spread(&self) -> Option<f64> {
        [
            spread(&self.ustack.values),
            spread(&self.linux.values),
            spread(&self.ratios),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max)
    }

    /// Within [`SPREAD_LIMIT`] (a batch with nothing to compare is).
    pub fn stable(&self) -> bool {
        self.spread().is_none_or(|s| s <= SPREAD_LIMIT)
    }

    pub fn ratio(&self) -> Option<f64> {
        median(&self.ratios)
    }

    pub fn ratio_min(&self) -> Option<f64> {
        self.ratios.iter().copied().reduce(f64::min)
    }

    pub fn ratio_max(&self) -> Option<f64> {
        self.ratios.iter().copied().reduce(f64::max)
    }
}

/// Runs batches of `runs` pairs with `pair` (run number from 1 to the
/// outcome of ustack's run and the kernel's) until one is within
/// [`SPREAD_LIMIT`] or `max_batches` have run; returns them all, the one
/// to report last.
pub fn batches(
    runs: usize,
    max_batches: usize,
    higher_better: bool,
    mut pair: impl FnMut(usize) -> (Option<Result<f64, String>>, Option<Result<f64, String>>),
) -> Vec<Batch> {
    let mut out = Vec::new();
    loop {
        let mut b = Batch::default();
        for r in 1..=runs {
            let (u, l) = pair(r);
            b.add_pair(r, u, l, higher_better);
        }
        let stable = b.stable();
        out.push(b);
        if stable || out.len() >= max_batches.max(1) {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ranges() {
        let s = Samples {
            values: vec![3.0, 1.0, 2.0],
            failures: vec!["run 4: gone".into()],
        };
        assert_eq!(
            (s.median(), s.min(), s.max(), s.attempts()),
            (Some(2.0), Some(1.0), Some(3.0), 4)
        );
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(spread(&[1.0]), None);
        assert_eq!(spread(&[90.0, 100.0, 110.0]), Some(0.2));
    }

    #[test]
    fn the_ratio_is_the_median_of_pair_ratios() {
        let mut b = Batch::default();
        // Pairs 10/1, 30/2, 20/4: ratios 10, 15, 5; the ratio of the
        // medians would be 20/2 = 10 as well, but the range is the pairs'.
        b.add_pair(1, Some(Ok(10.0)), Some(Ok(1.0)), true);
        b.add_pair(2, Some(Ok(30.0)), Some(Ok(2.0)), true);
        b.add_pair(3, Some(Ok(20.0)), Some(Ok(4.0)), true);
        assert_eq!(b.ratios, vec![10.0, 15.0, 5.0]);
        assert_eq!(
            (b.ratio(), b.ratio_min(), b.ratio_max()),
            (Some(10.0), Some(5.0), Some(15.0))
        );
        // Lower is better: the kernel's figure over ustack's.
        let mut m = Batch::default();
        m.add_pair(1, Some(Ok(1000.0)), Some(Ok(4000.0)), false);
        assert_eq!(m.ratio(), Some(4.0));
    }

    #[test]
    fn a_failed_run_is_kept_and_its_pair_gives_no_ratio() {
        let mut b = Batch::default();
        b.add_pair(1, Some(Ok(5.0)), Some(Err("timeout".into())), true);
        b.add_pair(2, Some(Ok(6.0)), Some(Ok(2.0)), true);
        assert_eq!(b.linux.failures, vec!["run 1: timeout".to_string()]);
        assert_eq!(b.ustack.values, vec![5.0, 6.0]);
        assert_eq!(b.ratios, vec![3.0]);
        assert_eq!(b.linux.attempts(), 2);
    }

    #[test]
    fn a_wide_batch_is_run_again_up_to_the_limit() {
        // Spread 100% in every batch: three batches, the last reported and
        // unstable.
        let mut calls = 0;
        let got = batches(2, 3, true, |r| {
            calls += 1;
            let u = if r == 1 { 10.0 } else { 20.0 };
            (Some(Ok(u)), Some(Ok(1.0)))
        });
        assert_eq!((got.len(), calls), (3, 6));
        assert!(!got.last().unwrap().stable());
        // A batch within the limit ends it at once.
        let got = batches(3, 3, true, |_| (Some(Ok(10.0)), Some(Ok(1.0))));
        assert_eq!(got.len(), 1);
        assert!(got[0].stable());
        // The second batch settles: two batches.
        let mut n = 0;
        let got = batches(2, 5, true, |_| {
            n += 1;
            let u = if n == 1 { 5.0 } else { 10.0 };
            (Some(Ok(u)), Some(Ok(1.0)))
        });
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].ratio(), Some(10.0));
    }
}
