//! Your own model on the evolve engine: a stochastic-volatility particle
//! filter, run by one binary that is both the master and its workers.
//!
//! `cargo run --release -p statepipe-cluster --example custom_model`
//!
//! The binary starts copies of itself as worker processes (they see
//! `STATEPIPE_CONNECT` in their environment and serve), filters simulated
//! returns on them, and checks the result against the same filter run in
//! this process: bit for bit, because every random number derives from
//! (seed, step, particle), not from where a particle ran.

use std::time::Duration;

use rand::{Rng as _, SeedableRng as _};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use statepipe_cluster::pf::{self, Bootstrap, PfConfig, SsModel};
use statepipe_cluster::{worker, Local, LocalCluster, Master, MasterConfig, Registry, Rng};
use statepipe_cluster::{Error, WorkerCommand};

/// Log-volatility x follows an AR(1); a return y is N(0, β² e^x).
#[derive(Clone, Serialize, Deserialize)]
struct StochVol {
    phi: f64,
    sigma: f64,
    beta: f64,
    returns: Vec<f64>,
}

impl StochVol {
    /// `n` returns simulated from the model itself.
    fn simulated(n: usize, seed: u64) -> Self {
        let mut m = StochVol {
            phi: 0.95,
            sigma: 0.25,
            beta: 0.7,
            returns: Vec::new(),
        };
        let mut rng = Rng::seed_from_u64(seed);
        let mut x = m.prior(&mut rng);
        for _ in 0..n {
            x = m.transition(&x, 0, &mut rng);
            let e: f64 = rng.sample(StandardNormal);
            m.returns.push(m.beta * (x / 2.0).exp() * e);
        }
        m
    }
}

impl SsModel for StochVol {
    const NAME: &'static str = "example-stochvol";
    type X = f64;

    fn steps(&self) -> usize {
        self.returns.len()
    }
    fn prior(&self, rng: &mut Rng) -> f64 {
        let sd = self.sigma / (1.0 - self.phi * self.phi).sqrt(); // the stationary law
        sd * rng.sample::<f64, _>(StandardNormal)
    }
    fn transition(&self, x: &f64, _t: usize, rng: &mut Rng) -> f64 {
        self.phi * x + self.sigma * rng.sample::<f64, _>(StandardNormal)
    }
    fn log_obs(&self, x: &f64, t: usize) -> f64 {
        let var = self.beta * self.beta * x.exp();
        let y = self.returns[t];
        -0.5 * ((2.0 * std::f64::consts::PI * var).ln() + y * y / var)
    }
    fn summary(&self, x: &f64) -> f64 {
        self.beta * (x / 2.0).exp() // the volatility
    }
}

fn main() -> Result<(), Error> {
    // Every process of this program knows the same models.
    let registry = Registry::new().with::<Bootstrap<StochVol>>();
    if worker::launched() {
        return worker::serve(registry); // started below, as a worker
    }

    let model = StochVol::simulated(100, 7);
    let cfg = PfConfig {
        particles: 4_000,
        islands: 8,
        seed: 3,
    };
    let cluster = LocalCluster::spawn(&WorkerCommand::current_exe()?, 2, &[])?;
    let workers = cluster.accept(Duration::from_secs(30))?;
    let master_cfg = MasterConfig {
        seed: cfg.seed,
        ..MasterConfig::default()
    };
    let mut master = Master::new(&Bootstrap(model.clone()), workers, master_cfg)?;
    let on_workers = pf::run(&mut master, &model, cfg, |_| {})?;
    println!("{}", master.stats().table());
    master.shutdown();

    let mut here = Local::new(Bootstrap(model.clone()), cfg.seed);
    let in_process = pf::run(&mut here, &model, cfg, |_| {})?;
    assert_eq!(
        on_workers, in_process,
        "the same bits wherever particles ran"
    );

    let last = on_workers
        .filtered_means
        .last()
        .copied()
        .unwrap_or(f64::NAN);
    println!(
        "log-likelihood {:.3} ± {:.3}; volatility at the end {last:.3}; \
         2 worker processes and this process agree bit for bit",
        on_workers.loglik, on_workers.loglik_se
    );
    Ok(())
}
