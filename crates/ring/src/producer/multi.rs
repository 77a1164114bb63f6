//! Claiming and publishing for many producers.
//!
//! A blocking claim takes its range with one `fetch_add` and then waits for
//! the gate (LMAX's `next()`): no retry loop under contention. A claim that
//! may fail (`try_*`, timeouts) must never leave an unpublished hole, so it
//! takes the range with a compare-and-swap only once the space is there.

use super::{ClaimError, Until};
use crate::shared::{Shared, HALTED};
use crate::sync::Ordering;
use crate::wait::WaitStrategy;

#[inline(always)]
pub(super) fn claim<T, W: WaitStrategy>(
    shared: &Shared<T, W>,
    cached_gate: &mut u64,
    n: u64,
    until: Until,
) -> Result<u64, ClaimError> {
    match until {
        Until::Forever => claim_forever(shared, cached_gate, n),
        Until::Never | Until::Deadline(_) => claim_if_free(shared, cached_gate, n, until),
    }
}

#[inline(always)]
fn claim_forever<T, W: WaitStrategy>(
    shared: &Shared<T, W>,
    cached_gate: &mut u64,
    n: u64,
) -> Result<u64, ClaimError> {
    // Relaxed: the claim only reserves numbers; the data is published
    // through `available` (Release) and the space through the gate (Acquire).
    let start = shared.cursor.fetch_add(n, Ordering::Relaxed);
    let end = start + n;
    if end > *cached_gate + shared.capacity {
        *cached_gate = shared.gate();
        if end > *cached_gate + shared.capacity {
            let mut halted = false;
            shared.wait.wait_until(None, || {
                if shared.state() & HALTED != 0 {
                    halted = true;
                    return true;
                }
                *cached_gate = shared.gate();
                end <= *cached_gate + shared.capacity
            });
            if halted {
                // The claimed range stays a hole; consumers of a halted ring
                // stop without waiting for it.
                return Err(ClaimError::Halted);
            }
        }
    }
    Ok(start)
}

#[cold]
fn claim_if_free<T, W: WaitStrategy>(
    shared: &Shared<T, W>,
    cached_gate: &mut u64,
    n: u64,
    until: Until,
) -> Result<u64, ClaimError> {
    let deadline = match until {
        Until::Deadline(d) => Some(d),
        _ => None,
    };
    loop {
        // Relaxed: see `claim_forever`.
        let start = shared.cursor.load(Ordering::Relaxed);
        let end = start + n;
        if end > *cached_gate + shared.capacity {
            *cached_gate = shared.gate();
        }
        if end > *cached_gate + shared.capacity {
            if matches!(until, Until::Never) {
                return Err(ClaimError::Full);
            }
            let mut halted = false;
            let ready = shared.wait.wait_until(deadline, || {
                if shared.state() & HALTED != 0 {
                    halted = true;
                    return true;
                }
                *cached_gate = shared.gate();
                // Relaxed: a hint; the compare-and-swap below decides.
                shared.cursor.load(Ordering::Relaxed) + n <= *cached_gate + shared.capacity
            });
            if halted {
                return Err(ClaimError::Halted);
            }
            if !ready {
                return Err(ClaimError::Timeout);
            }
            continue;
        }
        // Relaxed on both paths: as in `claim_forever`, the claim publishes
        // nothing; the gate was read (Acquire) before the range was taken.
        if shared
            .cursor
            .compare_exchange_weak(start, end, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(start);
        }
    }
}

/// Marks `[start, start + n)` published.
#[inline(always)]
pub(super) fn commit<T, W: WaitStrategy>(shared: &Shared<T, W>, start: u64, n: u64) {
    for s in start..start + n {
        // Release: pairs with the Acquire load of `available` in
        // `Shared::published_from`; the slot write happens before it.
        shared.available[(s & shared.mask) as usize].store(s, Ordering::Release);
    }
}
