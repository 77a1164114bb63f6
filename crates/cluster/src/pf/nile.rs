//! The local-level model of the Nile's annual flow at Aswan, 1871–1970
//! (Durbin & Koopman's variances): y_t = x_t + ε, ε ~ N(0, 15099);
//! x_{t+1} = x_t + η, η ~ N(0, 1469.1); x_1 ~ N(1000, 100000).

use rand::Rng as _;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::SsModel;
use crate::evolve::Rng;

/// The data shipped in the repository (`data/nile.csv`).
pub const NILE_CSV: &str = include_str!("../../../../data/nile.csv");

/// The model with its observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nile {
    pub years: Vec<u32>,
    pub y: Vec<f64>,
    pub var_eps: f64,
    pub var_eta: f64,
    pub m0: f64,
    pub p0: f64,
}

impl Nile {
    /// The model on `year,volume` CSV text (one header line).
    ///
    /// # Errors
    /// If a line is not two numbers.
    pub fn from_csv(text: &str) -> anyhow::Result<Self> {
        let (mut years, mut y) = (Vec::new(), Vec::new());
        for (i, line) in text.lines().enumerate().skip(1) {
            if line.trim().is_empty() {
                continue;
            }
            let bad = || anyhow::anyhow!("line {}: expected year,volume: {line:?}", i + 1);
            let (a, b) = line.split_once(',').ok_or_else(bad)?;
            years.push(a.trim().parse().map_err(|_| bad())?);
            y.push(b.trim().parse().map_err(|_| bad())?);
        }
        Ok(Nile {
            years,
            y,
            var_eps: 15099.0,
            var_eta: 1469.1,
            m0: 1000.0,
            p0: 100_000.0,
        })
    }

    /// The model on the bundled data.
    pub fn bundled() -> Self {
        Self::from_csv(NILE_CSV).expect("the bundled CSV parses")
    }

    /// The exact log-likelihood and filtered means (Kalman filter).
    pub fn exact(&self) -> (f64, Vec<f64>) {
        super::kalman::local_level(&self.y, self.var_eps, self.var_eta, self.m0, self.p0)
    }
}

impl SsModel for Nile {
    const NAME: &'static str = "pf-nile";
    type X = f64;

    fn steps(&self) -> usize {
        self.y.len()
    }

    fn prior(&self, rng: &mut Rng) -> f64 {
        self.m0 + self.p0.sqrt() * rng.sample::<f64, _>(StandardNormal)
    }

    fn transition(&self, x: &f64, _t: usize, rng: &mut Rng) -> f64 {
        x + self.var_eta.sqrt() * rng.sample::<f64, _>(StandardNormal)
    }

    fn log_obs(&self, x: &f64, t: usize) -> f64 {
        let d = self.y[t] - x;
        -0.5 * ((2.0 * std::f64::consts::PI * self.var_eps).ln() + d * d / self.var_eps)
    }

    fn summary(&self, x: &f64) -> f64 {
        *x
    }
}
