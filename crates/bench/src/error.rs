//! The one error type of a benchmark run.

use std::fmt;

/// Why a benchmark run stopped without a result.
///
/// Any of these aborts the whole run: a figure measured next to a failure is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchError {
    /// A consumer saw a different sum than the producers published: events were lost,
    /// duplicated or corrupted.
    WrongSum {
        /// Which implementation and consumer, e.g. `statepipe 1p3c consumer b`.
        who: String,
        /// The sum of every value the producers published.
        expected: u64,
        /// The sum the consumer computed.
        got: u64,
    },
    /// A consumer saw a different number of events than were published.
    WrongCount {
        /// Which implementation and consumer.
        who: String,
        /// Events published.
        expected: u64,
        /// Events seen.
        got: u64,
    },
    /// The implementation under test reported an error (a halted ring, a closed
    /// channel, a panicked thread).
    Failed {
        /// Which implementation.
        who: String,
        /// What it said.
        what: String,
    },
}

impl BenchError {
    /// A [`BenchError::Failed`] from anything printable.
    pub fn failed(who: impl Into<String>, what: impl fmt::Display) -> Self {
        BenchError::Failed {
            who: who.into(),
            what: what.to_string(),
        }
    }

    /// The error of `statepipe bench <bench> --case <filter>` when no case
    /// matches: it lists `cases`.
    pub fn no_case_matches(bench: &str, filter: Option<&str>, cases: &[String]) -> Self {
        BenchError::failed(
            format!("bench {bench}"),
            format!(
                "no case matches --case {}; the cases are: {}",
                filter.unwrap_or(""),
                cases.join(", ")
            ),
        )
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::WrongSum { who, expected, got } => {
                write!(
                    f,
                    "{who}: WRONG SUM: expected {expected}, got {got} (events lost or duplicated)"
                )
            }
            BenchError::WrongCount { who, expected, got } => {
                write!(
                    f,
                    "{who}: WRONG COUNT: expected {expected} events, got {got}"
                )
            }
            BenchError::Failed { who, what } => write!(f, "{who}: {what}"),
        }
    }
}

impl std::error::Error for BenchError {}
