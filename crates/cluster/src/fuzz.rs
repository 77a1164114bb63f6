//! Bytes from the network through every decoder: the fuzzer's and the
//! tests' entry point.

use crate::protocol::{self, msg};

/// Runs every decoder a master or worker may run on `bytes` read as a
/// stream of frames, and a worker core (without peers, so a `Give` never
/// connects anywhere) answering whatever decodes: for the fuzzer and the
/// tests, which check that nothing panics.
pub(crate) fn decode_all(bytes: &[u8], registry: &crate::Registry) {
    let mut core = crate::worker::WorkerCore::new(registry.clone());
    let mut pos = 0;
    while let Ok(Some((kind, payload, used))) = protocol::decode(&bytes[pos..], 1 << 16) {
        msg::decode_with_every_decoder(payload);
        let _ = core.handle(kind, payload, &mut Vec::new());
        pos += used;
    }
}
