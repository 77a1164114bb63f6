//! Bytes from the network, as the master and a worker see them: the frame
//! decoder, every payload decoder, and a worker core (without peers, so a
//! `Give` never connects anywhere) answering whatever decodes. Nothing may
//! panic, and no decoder may allocate more than its input's size.
//!
//! From `crates/cluster`, seeded from the kept corpus (new inputs go to the
//! first directory, outside the repository):
//! `cargo fuzz run frames -s none /tmp/fuzz-frames tests/corpus -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};
use statepipe_cluster::{Evolve, Registry, Rng};

/// A model whose every call is cheap and bounded, whatever the input.
#[derive(Serialize, Deserialize)]
struct Echo;

impl Evolve for Echo {
    const NAME: &'static str = "sleep";
    type State = Vec<u8>;
    type Input = u8;
    type Output = u8;

    fn evolve(&self, s: &Vec<u8>, i: &u8, _: &mut Rng) -> Vec<(Vec<u8>, u8)> {
        (0..i % 4).map(|k| (s.clone(), k)).collect()
    }
}

fuzz_target!(|bytes: &[u8]| {
    statepipe_cluster::fuzzing::frames(bytes, &Registry::new().with::<Echo>());
});
