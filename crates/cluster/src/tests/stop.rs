//! A caller that stops the master mid-operation (`MasterConfig::stop`, a
//! Ctrl-C): the call returns `Interrupted` at once, though every worker is
//! still deep in an evolve, and so does every later call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::threads_with;
use crate::engine::Engine;
use crate::evolve::Evolve;
use crate::master::{MasterConfig, MasterImpl};
use crate::registry::Registry;
use crate::rng::Rng;
use crate::Error;

/// Sleeps for an hour on input 1; otherwise one child.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sleepy;

impl Evolve for Sleepy {
    const NAME: &'static str = "test-sleepy";
    type State = u64;
    type Input = u32;
    type Output = u64;

    fn evolve(&self, s: &u64, i: &u32, _: &mut Rng) -> Vec<(u64, u64)> {
        if *i == 1 {
            std::thread::sleep(Duration::from_secs(3600));
        }
        vec![(s + 1, *s)]
    }
}

#[test]
fn a_stopped_master_returns_interrupted_at_once_and_from_then_on() {
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let stop = Arc::new(AtomicBool::new(false));
        let cfg = MasterConfig {
            imp,
            seed: 3,
            stop: Some(stop.clone()),
            ..MasterConfig::default()
        };
        let mut m = threads_with(&Sleepy, 2, Registry::new().with::<Sleepy>(), cfg);
        let ids = m.reset_states((0..4).collect()).unwrap();
        // A step that runs fine first: the flag is read only when set.
        let got = m
            .evolve_many(ids.iter().map(|&id| (id, 0)).collect())
            .unwrap();
        let ids: Vec<_> = got.values().flatten().map(|c| c.0).collect();
        let setter = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Any delay works: before the step or during it, the
                // answer is the same.
                std::thread::sleep(Duration::from_millis(200));
                // Relaxed: the master polls it.
                stop.store(true, Ordering::Relaxed);
            })
        };
        // Every state's evolve would sleep for an hour.
        let r = m.evolve_many(ids.iter().map(|&id| (id, 1)).collect());
        assert!(matches!(r, Err(Error::Interrupted)), "{imp:?}: {r:?}");
        setter.join().unwrap();
        // The flag cleared, the master stays stopped: its workers are gone.
        stop.store(false, Ordering::Relaxed);
        let again = m.fetch_states(&ids);
        assert!(
            matches!(again, Err(Error::Interrupted)),
            "{imp:?}: {again:?}"
        );
        assert!(matches!(m.snapshot(), Err(Error::Interrupted)), "{imp:?}");
    }
}
