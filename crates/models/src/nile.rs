//! The local-level model of the Nile's annual flow at Aswan, 1871–1970
//! (Durbin & Koopman's variances): y_t = x_t + ε, ε ~ N(0, 15099);
//! x_{t+1} = x_t + η, η ~ N(0, 1469.1); x_1 ~ N(1000, 100000).

use serde::{Deserialize, Serialize};

use statepipe_cluster::pf::{Bootstrap, PfOutput, SsModel};
use statepipe_cluster::{vectorised, Batch, ChildNormals, Offspring, Rng};

/// The data shipped in the repository (`data/nile.csv`).
pub const NILE_CSV: &str = include_str!("../../../data/nile.csv");

/// The model with its observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nile {
    /// The year of each observation.
    pub years: Vec<u32>,
    /// The observed annual flow (10^8 m^3).
    pub y: Vec<f64>,
    /// Variance of the observation noise ε.
    pub var_eps: f64,
    /// Variance of the level's step η.
    pub var_eta: f64,
    /// Mean of the prior of the first level.
    pub m0: f64,
    /// Variance of the prior of the first level.
    pub p0: f64,
}

/// A line of the CSV that is not `year,volume`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: expected year,volume: {text:?}")]
pub struct CsvError {
    /// The line's number, from 1.
    pub line: usize,
    /// The line.
    pub text: String,
}

impl Nile {
    /// The model on `year,volume` CSV text (one header line).
    ///
    /// # Errors
    /// If a line is not two numbers.
    pub fn from_csv(text: &str) -> Result<Self, CsvError> {
        let (mut years, mut y) = (Vec::new(), Vec::new());
        for (i, line) in text.lines().enumerate().skip(1) {
            if line.trim().is_empty() {
                continue;
            }
            let bad = || CsvError {
                line: i + 1,
                text: line.to_string(),
            };
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
        crate::kalman::local_level(&self.y, self.var_eps, self.var_eta, self.m0, self.p0)
    }
}

impl SsModel for Nile {
    const NAME: &'static str = "pf-nile";
    type X = f64;

    fn steps(&self) -> usize {
        self.y.len()
    }

    fn prior(&self, rng: &mut Rng) -> f64 {
        self.m0 + self.p0.sqrt() * rng.normal()
    }

    fn transition(&self, x: &f64, _t: usize, rng: &mut Rng) -> f64 {
        x + self.var_eta.sqrt() * rng.normal()
    }

    fn log_obs(&self, x: &f64, t: usize) -> f64 {
        let d = self.y[t] - x;
        -0.5 * ((2.0 * std::f64::consts::PI * self.var_eps).ln() + d * d * (1.0 / self.var_eps))
    }

    fn summary(&self, x: &f64) -> f64 {
        *x
    }

    /// The same bits as the default, in passes over the batch's children
    /// that vectorise (compiled for the widest vector unit, see
    /// [`vectorised`]): every child's normal draw at once
    /// ([`Batch::child_normals`]), then the levels, then the states and
    /// outputs; the square roots, the density's constant and the inverse
    /// of its variance are taken once.
    fn evolve_batch(
        &self,
        batch: &Batch<'_, Bootstrap<Self>>,
        out: &mut Offspring<Bootstrap<Self>>,
    ) {
        let k = Consts {
            sd0: self.p0.sqrt(),
            sd: self.var_eta.sqrt(),
            c: (2.0 * std::f64::consts::PI * self.var_eps).ln(),
            inv: 1.0 / self.var_eps,
        };
        let children: usize = batch.inputs().iter().map(|i| i.children as usize).sum();
        out.reserve(batch.len(), children);
        let mut draws = out.take_draws();
        // In parts of a thousand parents: the draws stay in cache.
        let n = batch.len();
        for lo in (0..n).step_by(1024) {
            let part = batch.slice(lo..n.min(lo + 1024));
            self.evolve_part(&part, out, &mut draws, k);
        }
        out.keep_draws(draws);
    }
}

/// What [`Nile::evolve_part`] takes once per batch: the square roots of the
/// prior's and the step's variances, the observation density's constant
/// ln(2π·var_eps) and 1 / var_eps.
#[derive(Debug, Clone, Copy)]
struct Consts {
    sd0: f64,
    sd: f64,
    c: f64,
    inv: f64,
}

impl Nile {
    /// [`SsModel::evolve_batch`] of a part of a batch.
    fn evolve_part(
        &self,
        batch: &Batch<'_, Bootstrap<Self>>,
        out: &mut Offspring<Bootstrap<Self>>,
        draws: &mut ChildNormals,
        k: Consts,
    ) {
        let (states, inputs) = (batch.states(), batch.inputs());
        batch.child_normals(inputs.iter().map(|i| i.children), draws);
        let Consts { sd0, sd, c, inv } = k;
        let m0 = self.m0;
        // Each child's level, in place of its draw.
        let (parents, x) = draws.parents_and_normals_mut();
        vectorised(move || {
            for (x, &p) in x.iter_mut().zip(parents) {
                let (base, scale) = match states[p as usize] {
                    None => (m0, sd0),
                    Some(s) => (s, sd),
                };
                *x = base + scale * *x;
            }
        });
        let weigh = move |x: f64, y: f64| {
            let d = y - x;
            PfOutput {
                log_w: -0.5 * (c + d * d * inv),
                summary: x,
            }
        };
        let counts = inputs.iter().map(|i| i.children);
        let states = draws.normals().iter().map(|&x| Some(x));
        match inputs.first().map(|i| i.t) {
            // The filter's batches: one observation for all.
            Some(t) if inputs.iter().all(|i| i.t == t) => {
                let y = self.y[t as usize];
                let outputs = draws.normals().iter().map(move |&x| weigh(x, y));
                out.extend_parents(counts, states, outputs);
            }
            _ => {
                let children = draws.parents().iter().zip(draws.normals());
                let outputs =
                    children.map(|(&p, &x)| weigh(x, self.y[inputs[p as usize].t as usize]));
                out.extend_parents(counts, states, outputs);
            }
        }
    }
}
