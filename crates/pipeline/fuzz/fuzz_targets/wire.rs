//! Bytes from the network, as a distributed pipeline's coordinator and
//! members read them: the frame reader, the control messages, batches of
//! items of several types, credits and barriers. Nothing may panic, and no
//! decoder may allocate more than its input's size.
//!
//! From `crates/pipeline`:
//! `cargo fuzz run wire -s none /tmp/fuzz-wire -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    statepipe_pipeline::fuzzing::frames(bytes);
});
