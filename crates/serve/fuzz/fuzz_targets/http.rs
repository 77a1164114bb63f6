//! Bytes from a connection, as an I/O thread reads them: requests parsed
//! one after another from the buffer until one is incomplete or rejected,
//! and every `POST` or `PUT` body decoded as an item. Nothing may panic,
//! and every request consumes bytes (a connection's loop always moves on).
//!
//! From `crates/serve`:
//! `cargo fuzz run http -s none /tmp/fuzz-http -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;
use statepipe_serve::http::{parse, Parsed};
use statepipe_serve::store::decode_item;

fuzz_target!(|bytes: &[u8]| {
    // Any body, as `decode` receives it.
    let _ = decode_item(bytes);
    let mut buf = bytes;
    loop {
        let used = match parse(buf) {
            Parsed::Incomplete | Parsed::AwaitingBody { .. } | Parsed::Reject(_) => break,
            Parsed::Request { consumed, .. } | Parsed::Answer { consumed, .. } => consumed,
        };
        assert!(used > 0 && used <= buf.len(), "{used} of {}", buf.len());
        buf = &buf[used..];
    }
});
