//! The benchmark's models: evolves that sleep for their cost.

use std::time::Duration;

use rand::RngCore;
use serde::{Deserialize, Serialize};

use statepipe_cluster::{Evolve, Rng};

/// An evolve that sleeps for its cost: hundreds of such workers on two
/// cores load only the master, which is what the cluster bench measures.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sleep;

/// What one call of [`Sleep`] does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SleepInput {
    /// Microseconds to sleep.
    pub cost_us: u32,
    /// Children to produce.
    pub children: u32,
}

impl Default for SleepInput {
    fn default() -> Self {
        SleepInput {
            cost_us: 0,
            children: 1,
        }
    }
}

impl Evolve for Sleep {
    const NAME: &'static str = "sleep";
    type State = u64;
    type Input = SleepInput;
    type Output = u64;

    /// The sleep, plus a little for the call itself.
    fn expected_cost(&self, i: &SleepInput) -> f64 {
        f64::from(i.cost_us) + 10.0
    }

    fn evolve(&self, s: &u64, i: &SleepInput, rng: &mut Rng) -> Vec<(u64, u64)> {
        if i.cost_us > 0 {
            std::thread::sleep(Duration::from_micros(u64::from(i.cost_us)));
        }
        (0..i.children)
            .map(|_| {
                let c = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(rng.next_u64());
                (c, c >> 32)
            })
            .collect()
    }
}

/// [`Sleep`] with states of any size (the bytes of the initial states): for
/// measuring how moving large states costs on each steal route. A child is
/// its parent's bytes with the first eight replaced.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ballast;

impl Evolve for Ballast {
    const NAME: &'static str = "ballast";
    type State = Vec<u8>;
    type Input = SleepInput;
    type Output = u64;

    fn expected_cost(&self, i: &SleepInput) -> f64 {
        Sleep.expected_cost(i)
    }

    fn evolve(&self, s: &Vec<u8>, i: &SleepInput, rng: &mut Rng) -> Vec<(Vec<u8>, u64)> {
        Sleep
            .evolve(&0, i, rng)
            .into_iter()
            .map(|(c, o)| {
                let mut b = s.clone();
                let n = b.len().min(8);
                b[..n].copy_from_slice(&c.to_le_bytes()[..n]);
                (b, o)
            })
            .collect()
    }
}
