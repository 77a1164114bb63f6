//! `statepipe worker --health ADDR` and `statepipe member --health ADDR`:
//! `GET /health` for a readiness probe (Kubernetes' `httpGet`). 200 while
//! the process is admitted and not leaving (a worker joined and set up, so
//! the master may give it states; a member accepted by its coordinator, so
//! it may be given parts), 503 before that, once it asked to leave
//! (SIGTERM) and after it stopped serving.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Serves `GET /health` on `addr` from a thread of its own, ready while
/// `ready` is set and `leave` is not; anything else gets 404, a request
/// that does not parse 400.
pub fn serve(addr: &str, ready: Arc<AtomicBool>, leave: Arc<AtomicBool>) -> anyhow::Result<()> {
    crate::one_route::serve("--health", addr, "/health", "text/plain", move || {
        // Relaxed: flags set by the worker or member and its SIGTERM
        // handler; a probe a moment late is no matter.
        if ready.load(Ordering::Relaxed) && !leave.load(Ordering::Relaxed) {
            ("200 OK", "ready\n".into())
        } else {
            ("503 Service Unavailable", "not ready\n".into())
        }
    })
}
