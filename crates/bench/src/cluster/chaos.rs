//! Chaos schedules: workers lost in clusters of neighbours at one moment,
//! drawn so that every state keeps a copy in buddy mode (the schedules the
//! bench expects to end with the bits of a fault-free run).

use std::time::Duration;

use rand::{Rng as _, SeedableRng as _};
use statepipe_cluster::config::DEFAULT_REPLICAS;

use super::{Kill, Rng, Sig};

/// How many schedules [`chaos`] draws before it gives up on leaving a copy
/// (then the last one drawn, which the bench reports as it ends).
const DRAWS: usize = 1000;

/// A chaos schedule (drawn from `seed`): `count` distinct workers of `w`
/// lost in clusters of one or two workers adjacent in start order at one
/// moment (a host; with buddies, often a worker and one of its buddies),
/// at random steps and moments, every 4th cluster in the last step (the end
/// of the run); with `stops`, every other cluster is SIGSTOPped rather than
/// SIGKILLed. Schedules that lose more than [`DEFAULT_REPLICAS`] workers
/// side by side (two clusters next to each other) are drawn again: they
/// can lose a worker with all its buddies in one round of replication,
/// which buddy mode documents as unrecoverable.
pub(super) fn chaos(
    w: usize,
    count: usize,
    steps: usize,
    step_time: Duration,
    seed: u64,
    stops: bool,
) -> Vec<Kill> {
    let mut rng = Rng::seed_from_u64(seed ^ 0xC4A0_5EED);
    let mut out = draw(&mut rng, w, count, steps, step_time, stops);
    for _ in 1..DRAWS {
        if leaves_a_copy(w, &out, DEFAULT_REPLICAS) {
            break;
        }
        out = draw(&mut rng, w, count, steps, step_time, stops);
    }
    out
}

fn draw(
    rng: &mut Rng,
    w: usize,
    count: usize,
    steps: usize,
    step_time: Duration,
    stops: bool,
) -> Vec<Kill> {
    let count = count.min(w.saturating_sub(1));
    let mut taken = vec![false; w];
    let mut out = Vec::new();
    let mut cluster = 0usize;
    while out.len() < count {
        let size = rng.random_range(1..=2usize).min(count - out.len());
        let first = rng.random_range(0..w);
        let step = if cluster % 4 == 3 {
            steps.saturating_sub(1)
        } else {
            rng.random_range(0..steps.max(1))
        };
        let at = step_time.mul_f64(rng.random::<f64>());
        let stop = stops && cluster % 2 == 1;
        for j in 0..size {
            let k = (first + j) % w;
            if !taken[k] {
                taken[k] = true;
                out.push((k, step, at, if stop { Sig::Stop } else { Sig::Kill }));
            }
        }
        cluster += 1;
    }
    out
}

/// Whether no `r + 1` workers adjacent in start order (round the ring) are
/// lost, at any steps: then the worker after each run of lost workers is
/// never lost, and it is among the next `r` live workers of every worker of
/// the run whenever buddies are chosen, so every state keeps a copy. Losses
/// in different steps are not safer: a round of replication that a loss
/// interrupts is void, so the losses of two steps can fall in one round.
fn leaves_a_copy(w: usize, kills: &[Kill], r: usize) -> bool {
    let mut lost = vec![false; w];
    for k in kills {
        lost[k.0] = true;
    }
    if lost.iter().all(|&l| l) {
        return false;
    }
    // Walk the ring from a worker never lost, counting each run of losses.
    let start = lost.iter().position(|&l| !l).unwrap_or(0);
    let mut run = 0;
    for i in 1..=w {
        if lost[(start + i) % w] {
            run += 1;
            if run > r {
                return false;
            }
        } else {
            run = 0;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_drawn_schedule_leaves_a_copy() {
        let step = Duration::from_millis(300);
        for seed in 0..300 {
            for (w, count) in [(200, 20), (20, 4), (12, 3)] {
                let k = chaos(w, count, 10, step, seed, seed % 2 == 0);
                assert_eq!(k.len(), count, "seed {seed}");
                let mut who: Vec<usize> = k.iter().map(|x| x.0).collect();
                who.sort_unstable();
                who.dedup();
                assert_eq!(who.len(), count, "distinct workers, seed {seed}");
                assert!(leaves_a_copy(w, &k, DEFAULT_REPLICAS), "seed {seed}: {k:?}");
            }
        }
    }

    #[test]
    fn three_neighbours_leave_no_copy_at_any_steps() {
        let t = Duration::ZERO;
        let k = |w, s| (w, s, t, Sig::Kill);
        // 16 with its buddies 17 and 18, in one step or in two.
        assert!(!leaves_a_copy(200, &[k(16, 9), k(17, 9), k(18, 9)], 2));
        assert!(!leaves_a_copy(200, &[k(16, 9), k(17, 9), k(18, 8)], 2));
        // Two neighbours, or runs of two with a worker between.
        assert!(leaves_a_copy(200, &[k(16, 9), k(17, 9)], 2));
        assert!(leaves_a_copy(
            200,
            &[k(16, 9), k(17, 9), k(19, 9), k(20, 9)],
            2
        ));
        // Round the ring.
        assert!(!leaves_a_copy(10, &[k(9, 0), k(0, 0), k(1, 0)], 2));
        assert!(!leaves_a_copy(3, &[k(0, 0), k(1, 0), k(2, 0)], 5));
    }
}
