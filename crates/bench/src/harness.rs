//! The sampling loop shared by every `statepipe bench` subcommand.
//!
//! A benchmark is a list of [`Group`]s. A group is a set of [`Contender`]s (ours and the
//! peers, or ours under several configurations) that produce the same [`Metric`]s and
//! are therefore compared with each other. [`run`] measures group after group; inside a
//! group it takes sample 1 of every contender, then sample 2 of every contender, and so
//! on (round-robin, starting one contender later each round), so that a change in the
//! host's state during a group hits every contender alike instead of one of them.
//! Each sample builds its system afresh (a new ring, new threads).

use std::fmt;
use std::time::Instant;

pub use crate::metric::Metric;
use crate::report::ResultRow;
use crate::stats::Summary;
use crate::BenchError;

/// Takes one sample: builds the system, runs it, checks it, returns one value per metric
/// of its group.
pub type SampleFn<'a> = Box<dyn FnMut() -> Result<Vec<f64>, BenchError> + 'a>;

/// One implementation in one configuration.
pub struct Contender<'a> {
    /// The implementation, e.g. `statepipe`, `disruptor`, `rtrb` (`impl` in the report).
    pub imp: String,
    /// How it was configured, e.g. `wait=adaptive`.
    pub config: String,
    sample: SampleFn<'a>,
}

impl<'a> Contender<'a> {
    /// A contender whose samples are taken by `sample`.
    pub fn new(
        imp: impl Into<String>,
        config: impl Into<String>,
        sample: impl FnMut() -> Result<Vec<f64>, BenchError> + 'a,
    ) -> Self {
        Contender {
            imp: imp.into(),
            config: config.into(),
            sample: Box::new(sample),
        }
    }

    /// The same contender with its sampling function wrapped by `wrap`
    /// (to measure something around each sample).
    pub(crate) fn map_sample(mut self, wrap: impl FnOnce(SampleFn<'a>) -> SampleFn<'a>) -> Self {
        let sample = std::mem::replace(&mut self.sample, Box::new(|| Ok(Vec::new())));
        self.sample = wrap(sample);
        self
    }
}

impl fmt::Debug for Contender<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Contender")
            .field("imp", &self.imp)
            .field("config", &self.config)
            .finish()
    }
}

/// Contenders compared with each other on the same metrics.
///
/// By convention ours comes first (impl `statepipe`, default configuration): the report
/// computes every ratio against the first `statepipe` row of a case.
#[derive(Debug)]
pub struct Group<'a> {
    /// A label for progress lines, e.g. `1p1c/single`.
    pub name: String,
    /// What each sample returns, in order.
    pub metrics: Vec<Metric>,
    /// Who is measured.
    pub contenders: Vec<Contender<'a>>,
}

/// Progress after each sample, for the caller to print.
#[derive(Debug)]
pub struct SampleDone<'r> {
    /// Samples taken so far in the whole run, this one included.
    pub done: usize,
    /// Samples the whole run will take.
    pub total: usize,
    /// The group's name.
    pub group: &'r str,
    /// The contender's implementation.
    pub imp: &'r str,
    /// The contender's configuration.
    pub config: &'r str,
    /// This sample's number, from 1.
    pub sample: usize,
    /// Samples per contender.
    pub samples: usize,
    /// What it measured, one value per metric.
    pub values: &'r [f64],
    /// The group's metrics.
    pub metrics: &'r [Metric],
    /// Wall time the sample took, setup and checks included, in seconds.
    pub seconds: f64,
}

impl fmt::Display for SampleDone<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.total.to_string().len();
        write!(
            f,
            "[{:>width$}/{}] {} {} {} #{}/{}:",
            self.done, self.total, self.group, self.imp, self.config, self.sample, self.samples
        )?;
        for (value, metric) in self.values.iter().zip(self.metrics) {
            let label = if self.metrics.len() > 1 {
                metric.case.as_str()
            } else {
                ""
            };
            write!(
                f,
                " {label}{}{value:.1} {}",
                if label.is_empty() { "" } else { "=" },
                metric.unit
            )?;
        }
        write!(f, " ({:.2} s)", self.seconds)
    }
}

/// Runs every group `samples` times per contender (interleaved, see the module docs)
/// and returns one row per metric and contender, in group, metric, contender order.
///
/// # Errors
///
/// The first error of any sample (a wrong sum, a failed implementation), or a contender
/// returning the wrong number of values.
pub fn run(
    groups: Vec<Group<'_>>,
    samples: usize,
    progress: &mut dyn FnMut(&SampleDone<'_>),
) -> Result<Vec<ResultRow>, BenchError> {
    let samples = samples.max(1);
    let total: usize = groups.iter().map(|g| g.contenders.len() * samples).sum();
    let mut done = 0;
    let mut rows = Vec::new();
    for mut group in groups {
        let n = group.contenders.len();
        // values[contender][metric] = samples taken so far.
        let mut values = vec![vec![Vec::with_capacity(samples); group.metrics.len()]; n];
        for round in 0..samples {
            for k in 0..n {
                let index = (round + k) % n;
                let contender = &mut group.contenders[index];
                let started = Instant::now();
                let got = (contender.sample)()?;
                if got.len() != group.metrics.len() {
                    return Err(BenchError::failed(
                        format!("{} {}", group.name, contender.imp),
                        format!(
                            "returned {} values for {} metrics",
                            got.len(),
                            group.metrics.len()
                        ),
                    ));
                }
                for (metric, value) in got.iter().enumerate() {
                    values[index][metric].push(*value);
                }
                done += 1;
                progress(&SampleDone {
                    done,
                    total,
                    group: &group.name,
                    imp: &contender.imp,
                    config: &contender.config,
                    sample: round + 1,
                    samples,
                    values: &got,
                    metrics: &group.metrics,
                    seconds: started.elapsed().as_secs_f64(),
                });
            }
        }
        for (m, metric) in group.metrics.iter().enumerate() {
            for (c, contender) in group.contenders.iter().enumerate() {
                let summary =
                    Summary::of(&values[c][m]).expect("at least one sample per contender");
                rows.push(ResultRow::new(
                    metric,
                    &contender.imp,
                    &contender.config,
                    summary,
                ));
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaves_and_summarises() {
        let order = std::cell::RefCell::new(Vec::new());
        let contender = |name: &'static str, value: f64| {
            let order = &order;
            Contender::new(name, "c", move || {
                order.borrow_mut().push(name);
                Ok(vec![value])
            })
        };
        let groups = vec![Group {
            name: "g".into(),
            metrics: vec![Metric::throughput("g")],
            contenders: vec![contender("a", 1.0), contender("b", 2.0)],
        }];
        let mut seen = 0;
        let rows = run(groups, 3, &mut |p| {
            seen += 1;
            assert_eq!(p.total, 6);
        })
        .unwrap();
        assert_eq!(seen, 6);
        assert_eq!(*order.borrow(), ["a", "b", "b", "a", "a", "b"]);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].imp.as_str(), rows[0].median, rows[0].samples),
            ("a", 1.0, 3)
        );
        assert_eq!((rows[1].imp.as_str(), rows[1].median), ("b", 2.0));
    }

    #[test]
    fn wrong_arity_is_an_error() {
        let groups = vec![Group {
            name: "g".into(),
            metrics: vec![Metric::throughput("g")],
            contenders: vec![Contender::new("a", "", || Ok(vec![]))],
        }];
        assert!(run(groups, 1, &mut |_| {}).is_err());
    }
}
