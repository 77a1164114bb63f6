//! The single producer's claim when its cached gate says full (the claim
//! itself is a local counter in `mod.rs`, no atomic read-modify-write).

use super::claim::{ClaimError, Until};
use super::kind::ProducerKind;
use crate::shared::{Shared, HALTED};
use crate::wait::WaitStrategy;

/// The slow path of a claim of `[next, end)`: the cached gate says full;
/// read the consumers again and, if still full, wait by the strategy.
#[inline]
pub(super) fn wait_for_space<T, W: WaitStrategy, K: ProducerKind>(
    shared: &Shared<T, W, K>,
    end: u64,
    cached_gate: &mut u64,
    until: Until,
) -> Result<(), ClaimError> {
    *cached_gate = shared.gate();
    if end <= *cached_gate + shared.capacity {
        return Ok(());
    }
    let deadline = match until {
        Until::Never => return Err(ClaimError::Full),
        Until::Deadline(d) => Some(d),
        Until::Forever => None,
    };
    let mut halted = false;
    let ready = shared.wait.wait_until(deadline, || {
        if shared.state() & HALTED != 0 {
            halted = true;
            return true;
        }
        *cached_gate = shared.gate();
        end <= *cached_gate + shared.capacity
    });
    if halted {
        Err(ClaimError::Halted)
    } else if ready {
        Ok(())
    } else {
        Err(ClaimError::Timeout)
    }
}
