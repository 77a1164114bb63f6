//! Reducing samples to the figures a report prints.

/// Median, minimum and maximum of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The middle sample; the mean of the two middle ones for an even count.
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// How many samples.
    pub samples: usize,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none.
    ///
    /// NaN samples sort last (they can only come from a bug in a workload, and a
    /// report must still print).
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_bench::stats::Summary;
    /// let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
    /// assert_eq!((s.median, s.min, s.max, s.samples), (2.5, 1.0, 10.0, 4));
    /// ```
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            samples: n,
        })
    }
}

/// The median of `values` (0.0 for none).
pub fn median(values: &[f64]) -> f64 {
    Summary::of(values).map_or(0.0, |s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count_takes_the_middle() {
        let s = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.samples), (3.0, 1.0, 5.0, 3));
    }

    #[test]
    fn empty_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(median(&[]), 0.0);
    }
}
