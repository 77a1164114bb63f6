use std::time::Instant;
use statepipe_cluster::pf::{self, Bootstrap, PfConfig};
use statepipe_cluster::Local;
use statepipe_models::Nile;
fn main() {
    let n: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let t: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    for steps in [1usize, 2, 3, 5, 100] {
        let mut nile = Nile::bundled();
        nile.y.truncate(steps);
        let mut best = f64::MAX;
        for _ in 0..7 {
            let mut e = Local::new(Bootstrap(nile.clone()), 1).with_threads(t);
            let cfg = PfConfig { particles: n, islands: 20, seed: 1 };
            let t0 = Instant::now();
            pf::run(&mut e, &nile, cfg, |_| {}).unwrap();
            best = best.min(t0.elapsed().as_secs_f64());
        }
        println!("threads {t} steps {steps}: best {:.3} ms", best * 1e3);
    }
}
