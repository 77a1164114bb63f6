//! Bytes from a checkpoint folder, as a restore reads them: a manifest, a
//! state file, a stage's state. Nothing may panic, and no decoder may
//! allocate more than its input's size.
//!
//! From `crates/pipeline`:
//! `cargo fuzz run checkpoint -s none /tmp/fuzz-checkpoint -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    statepipe_pipeline::fuzzing::checkpoint(bytes);
});
