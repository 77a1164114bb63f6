//! The statistics of the Graph500 output block.

/// Order statistics, mean and standard deviation of a sample, and its
/// harmonic mean with the standard deviation the specification prints
/// for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// The smallest value.
    pub min: f64,
    /// The first quartile.
    pub first_quartile: f64,
    /// The median.
    pub median: f64,
    /// The third quartile.
    pub third_quartile: f64,
    /// The largest value.
    pub max: f64,
    /// The arithmetic mean.
    pub mean: f64,
    /// The sample standard deviation (`n - 1` in the denominator).
    pub stddev: f64,
    /// `n / sum(1 / x)`.
    pub harmonic_mean: f64,
    /// The standard deviation of the harmonic mean, by the delta method:
    /// `stddev(1 / x) * harmonic_mean^2 / sqrt(n - 1)`.
    pub harmonic_stddev: f64,
}

impl Stats {
    /// The statistics of `values` (all zero for an empty sample).
    pub fn of(values: &[f64]) -> Stats {
        let n = values.len();
        if n == 0 {
            return Stats {
                min: 0.0,
                first_quartile: 0.0,
                median: 0.0,
                third_quartile: 0.0,
                max: 0.0,
                mean: 0.0,
                stddev: 0.0,
                harmonic_mean: 0.0,
                harmonic_stddev: 0.0,
            };
        }
        let mut x = values.to_vec();
        x.sort_by(f64::total_cmp);
        let nf = n as f64;
        let mean = x.iter().sum::<f64>() / nf;
        let denom = (nf - 1.0).max(1.0);
        let stddev = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / denom).sqrt();
        let mean_inverse = x.iter().map(|v| 1.0 / v).sum::<f64>() / nf;
        let harmonic_mean = 1.0 / mean_inverse;
        let var_inverse = x
            .iter()
            .map(|v| (1.0 / v - mean_inverse).powi(2))
            .sum::<f64>()
            / denom;
        let harmonic_stddev = var_inverse.sqrt() * harmonic_mean * harmonic_mean / denom.sqrt();
        Stats {
            min: x[0],
            first_quartile: quantile(&x, 0.25),
            median: quantile(&x, 0.5),
            third_quartile: quantile(&x, 0.75),
            max: x[n - 1],
            mean,
            stddev,
            harmonic_mean,
            harmonic_stddev,
        }
    }

    /// `(name, value)` for min, the quartiles and max, named as the output
    /// block names them (`min_time`, `firstquartile_time`, ...).
    pub fn quantiles(&self, what: &str) -> [(String, f64); 5] {
        [
            (format!("min_{what}"), self.min),
            (format!("firstquartile_{what}"), self.first_quartile),
            (format!("median_{what}"), self.median),
            (format!("thirdquartile_{what}"), self.third_quartile),
            (format!("max_{what}"), self.max),
        ]
    }
}

/// The `q` quantile of sorted values, interpolating linearly between neighbours.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let s = Stats::of(&[4.0, 1.0, 2.0, 3.0, 5.0]);
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 3.0, 5.0, 3.0));
        assert_eq!((s.first_quartile, s.third_quartile), (2.0, 4.0));
        let h = Stats::of(&[1.0, 2.0, 4.0]);
        assert!((h.harmonic_mean - 3.0 / 1.75).abs() < 1e-12);
    }
}
