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
use statepipe_cluster::evolve::{Evolve, Rng};
use statepipe_cluster::protocol::{self, msg};
use statepipe_cluster::registry::Registry;
use statepipe_cluster::Registry;

/// A model whose every call is cheap and bounded, whatever the input (the
/// built-in ones sleep or branch as long as their input says).
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
    let mut core = WorkerCore::new(Registry::new().with::<Echo>());
    let mut pos = 0;
    while let Ok(Some((kind, payload, used))) = protocol::decode(&bytes[pos..], 1 << 16) {
        msg::decode_with_every_decoder(payload);
        let _ = core.handle(kind, payload, &mut Vec::new());
        pos += used;
    }
});
