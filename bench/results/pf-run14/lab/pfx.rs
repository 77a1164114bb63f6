use std::time::Instant;
use statepipe_cluster::pf::{self, Bootstrap, PfConfig};
use statepipe_cluster::Local;
use statepipe_models::Nile;
fn main() {
    let nile = Nile::bundled();
    let n: usize = std::env::args().nth(1).unwrap().parse().unwrap();
    let order: Vec<usize> = std::env::args().nth(2).unwrap().split(',').map(|s| s.parse().unwrap()).collect();
    for &t in &order {
        let mut e = Local::new(Bootstrap(nile.clone()), 1).with_threads(t);
        let cfg = PfConfig { particles: n, islands: 20, seed: 1 };
        if let Ok(ms) = std::env::var("SPIN_MS") {
            let ms: u64 = ms.parse().unwrap();
            let spin = || { let t = Instant::now(); while t.elapsed().as_millis() < ms as u128 { std::hint::spin_loop(); } };
            std::thread::scope(|s| { s.spawn(spin); spin(); });
        }
        let f0 = faults();
        let t0 = Instant::now();
        let mut ts = Vec::new();
        let r = if std::env::var_os("IN_POOL").is_some() {
            rayon::scope(|_| pf::run(&mut e, &nile, cfg, |_| ts.push(t0.elapsed().as_secs_f64())).unwrap())
        } else {
            pf::run(&mut e, &nile, cfg, |_| ts.push(t0.elapsed().as_secs_f64())).unwrap()
        };
        let d: Vec<f64> = ts.windows(2).map(|w| (w[1]-w[0])*1e3).collect();
        let q = |a: usize, b: usize| d[a..b].iter().sum::<f64>() / (b - a) as f64;
        println!("   first {:.3} ms, steps 1-10 {:.3}, 10-50 {:.3}, 50-99 {:.3}", ts[0]*1e3, q(0,10), q(10,50), q(50,99));
        let s = t0.elapsed().as_secs_f64();
        println!("{t}: {:.2} ns {} faults {}", s / (n * 100) as f64 * 1e9, r.loglik, faults() - f0);
    }
}

fn faults() -> i64 {
    let st = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = st.rsplit(')').next().unwrap().split_whitespace().collect();
    f[7].parse().unwrap()
}
