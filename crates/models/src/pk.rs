//! The heavy variant: a one-compartment pharmacokinetic model with
//! first-order absorption, integrated by RK4 with a tunable number of
//! substeps per hour (the cost of one evolve call).
//!
//! dG/dt = −ka·G, dC/dt = ka·G/V − ke·C; the rates drift slowly
//! (log random walk), and each hour a concentration is observed with
//! log-normal error. The observations are simulated from fixed true rates,
//! so the data are reproducible without a file.

use rand::Rng as _;
use rand::SeedableRng as _;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use statepipe_cluster::pf::{Bootstrap, PfOutput, SsModel};
use statepipe_cluster::{Batch, Offspring, Rng};

/// A patient's latent state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PkState {
    /// Absorption rate (1/h).
    pub ka: f64,
    /// Elimination rate (1/h).
    pub ke: f64,
    /// Amount in the gut (mg).
    pub g: f64,
    /// Concentration in plasma (mg/L).
    pub c: f64,
}

/// The model and its simulated observations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pk {
    /// Observed concentrations (mg/L), one per hour.
    pub y: Vec<f64>,
    /// RK4 substeps per hour: the cost knob.
    pub substeps: u32,
    /// The dose in the gut at hour 0 (mg).
    pub dose: f64,
    /// Volume of distribution (L).
    pub volume: f64,
    /// Standard deviation of the log-normal observation error.
    pub obs_sd: f64,
    /// Standard deviation of the hourly drift of log `ka` and log `ke`.
    pub drift_sd: f64,
}

impl Pk {
    /// `hours` hourly observations simulated with `seed`.
    pub fn simulated(hours: usize, substeps: u32, seed: u64) -> Self {
        let mut m = Pk {
            y: Vec::new(),
            substeps: substeps.max(1),
            dose: 100.0,
            volume: 10.0,
            obs_sd: 0.1,
            drift_sd: 0.02,
        };
        // The data's own generator (PCG64), apart from the filter's.
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let mut x = PkState {
            ka: 1.2,
            ke: 0.25,
            g: m.dose,
            c: 0.0,
        };
        for _ in 0..hours {
            x = m.integrate(x, 200);
            let e: f64 = rng.sample(StandardNormal);
            m.y.push(x.c.max(1e-9) * (m.obs_sd * e).exp());
        }
        m
    }

    fn integrate(&self, x: PkState, n: u32) -> PkState {
        let h = 1.0 / f64::from(n);
        let (ka, ke, v) = (x.ka, x.ke, self.volume);
        let f = |g: f64, c: f64| (-ka * g, ka * g / v - ke * c);
        let (mut g, mut c) = (x.g, x.c);
        for _ in 0..n {
            let (a1, b1) = f(g, c);
            let (a2, b2) = f(g + 0.5 * h * a1, c + 0.5 * h * b1);
            let (a3, b3) = f(g + 0.5 * h * a2, c + 0.5 * h * b2);
            let (a4, b4) = f(g + h * a3, c + h * b3);
            g += h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4);
            c += h / 6.0 * (b1 + 2.0 * b2 + 2.0 * b3 + b4);
        }
        PkState { g, c, ..x }
    }
}

impl SsModel for Pk {
    const NAME: &'static str = "pf-pk";
    type X = PkState;

    fn steps(&self) -> usize {
        self.y.len()
    }

    fn prior(&self, rng: &mut Rng) -> PkState {
        let ka = (0.5 * rng.sample::<f64, _>(StandardNormal)).exp();
        let ke = 0.2 * (0.5 * rng.sample::<f64, _>(StandardNormal)).exp();
        self.integrate(
            PkState {
                ka,
                ke,
                g: self.dose,
                c: 0.0,
            },
            self.substeps,
        )
    }

    fn transition(&self, x: &PkState, _t: usize, rng: &mut Rng) -> PkState {
        let ka = x.ka * (self.drift_sd * rng.sample::<f64, _>(StandardNormal)).exp();
        let ke = x.ke * (self.drift_sd * rng.sample::<f64, _>(StandardNormal)).exp();
        self.integrate(PkState { ka, ke, ..*x }, self.substeps)
    }

    fn log_obs(&self, x: &PkState, t: usize) -> f64 {
        let ly = self.y[t].ln();
        let d = (ly - x.c.max(1e-9).ln()) / self.obs_sd;
        -0.5 * (2.0 * std::f64::consts::PI).ln() - self.obs_sd.ln() - ly - 0.5 * d * d
    }

    fn summary(&self, x: &PkState) -> f64 {
        x.c
    }

    /// The same bits as the default, with each observation's logarithm
    /// and the density's constant taken once per parent and batch.
    fn evolve_batch(
        &self,
        batch: &Batch<'_, Bootstrap<Self>>,
        out: &mut Offspring<Bootstrap<Self>>,
    ) {
        let k = -0.5 * (2.0 * std::f64::consts::PI).ln() - self.obs_sd.ln();
        for (i, (s, input)) in batch.states().iter().zip(batch.inputs()).enumerate() {
            let t = input.t as usize;
            let ly = self.y[t].ln();
            let mut rng = batch.rng(i);
            for _ in 0..input.children {
                let x = match s {
                    None => self.prior(&mut rng),
                    Some(x) => self.transition(x, t - 1, &mut rng),
                };
                let d = (ly - x.c.max(1e-9).ln()) / self.obs_sd;
                let log_w = k - ly - 0.5 * d * d;
                out.push(
                    Some(x),
                    PfOutput {
                        log_w,
                        summary: x.c,
                    },
                );
            }
            out.end_parent();
        }
    }
}
