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

/// Each model's batch step gives the bits of the per-particle step
/// (`Evolve::evolve` with the parent's `call_rng`), prior and transition.
#[test]
fn batch_steps_give_the_per_particle_bits() {
    use statepipe_cluster::pf::{PfInput, SsModel};
    use statepipe_cluster::{call_rng, Batch, Evolve, Offspring, StateId};

    fn check<M: SsModel + Clone>(m: &M, x: impl Fn(usize) -> M::X)
    where
        M::X: PartialEq + std::fmt::Debug,
    {
        let model = Bootstrap(m.clone());
        let ids: Vec<StateId> = (0..37).map(|i| StateId(i * 7919 + 3)).collect();
        let mut cases = Vec::new();
        for t in [0u32, 1, 5] {
            let states: Vec<Option<M::X>> = (0..ids.len()).map(|i| (t > 0).then(|| x(i))).collect();
            let inputs: Vec<PfInput> = (0..ids.len())
                .map(|i| PfInput {
                    t,
                    children: (i % 4) as u32,
                })
                .collect();
            cases.push((u64::from(t) + 1, states, inputs));
        }
        // Several observations in one batch, and parents of up to 6 children.
        let states: Vec<Option<M::X>> = (0..ids.len()).map(|i| Some(x(i))).collect();
        let inputs: Vec<PfInput> = (0..ids.len())
            .map(|i| PfInput {
                t: 1 + (i % 3) as u32,
                children: (i % 7) as u32,
            })
            .collect();
        cases.push((9, states, inputs));
        for (step, states, inputs) in cases {
            let batch = Batch::new(4, step, &ids, &states, &inputs);
            let mut out = Offspring::new();
            model.evolve_batch(&batch, &mut out);
            let mut want = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                let mut rng = call_rng(4, step, *id);
                want.extend(model.evolve(&states[i], &inputs[i], &mut rng));
            }
            let got: Vec<_> = out
                .states()
                .iter()
                .cloned()
                .zip(out.outputs().iter().copied())
                .collect();
            assert_eq!(got, want, "step {step}");
            let counts: Vec<u32> = inputs.iter().map(|i| i.children).collect();
            assert_eq!(out.counts(), &counts[..]);
        }
    }
    let nile = Nile::bundled();
    check(&nile, |i| 900.0 + i as f64);
    let pk = statepipe_models::Pk::simulated(8, 50, 3);
    check(&pk, |i| statepipe_models::PkState {
        ka: 1.0 + 0.01 * i as f64,
        ke: 0.2,
        g: 50.0,
        c: 1.0 + 0.1 * i as f64,
    });
}
