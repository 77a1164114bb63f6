//! The particle filter on the Nile model: the same bits on worker threads
//! as in one process, and close to the exact Kalman answer.

use statepipe_cluster::pf::{self, Bootstrap, PfConfig};
use statepipe_cluster::{Local, Master, MasterConfig, Registry};
use statepipe_models::Nile;

#[test]
fn nile_filter_is_the_same_on_threads_and_locally_and_close_to_kalman() {
    let nile = Nile::bundled();
    let (exact, kalman_means) = nile.exact();
    let cfg = PfConfig {
        particles: 1000,
        islands: 10,
        seed: 9,
    };
    let model = Bootstrap(nile.clone());
    let local = pf::run(&mut Local::new(model.clone(), 9), &nile, cfg, |_| {}).unwrap();
    let registry = Registry::new().with::<Bootstrap<Nile>>();
    let cfg_m = MasterConfig {
        seed: 9,
        ..Default::default()
    };
    let mut m = Master::on_threads(&model, 2, registry, cfg_m).unwrap();
    let dist = pf::run(&mut m, &nile, cfg, |_| {}).unwrap();
    assert_eq!(dist, local);
    let z = (dist.loglik - exact) / dist.loglik_se;
    assert!(
        z.abs() < 3.0,
        "loglik {} ± {} vs exact {exact}",
        dist.loglik,
        dist.loglik_se
    );
    for (p, k) in dist.filtered_means.iter().zip(&kalman_means) {
        assert!((p - k).abs() < 25.0, "filtered mean {p} vs Kalman {k}");
    }
}
