//! Consumers: handler threads the ring runs, and pollers the user drives.
//!
//! Every consumer owns one sequence (the count of events it is done with),
//! stores it once per batch with Release, and handles event `s` only once
//! `s` is published and every consumer it depends on is past `s`.

mod chase;
mod handler;
mod poller;

pub(crate) use handler::{spawn, Access, Exclusive, Shared as SharedAccess};
pub use handler::{EventHandler, EventHandlerMut};
pub use poller::{EventPoller, EventPollerMut};

/// The last sequence in `[from, end)` that a consumer with `partition`
/// handles, if any.
#[inline(always)]
pub(crate) fn last_handled(from: u64, end: u64, partition: Option<(u64, u64)>) -> Option<u64> {
    if end <= from {
        return None;
    }
    match partition {
        None => Some(end - 1),
        Some((i, n)) => {
            let last = end - 1;
            // The largest s <= last with s % n == i.
            let back = (last % n + n - i) % n;
            (last >= from + back).then(|| last - back)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::last_handled;

    #[test]
    fn last_handled_matches_a_scan() {
        for n in 1..5u64 {
            for i in 0..n {
                for from in 0..12u64 {
                    for end in 0..14u64 {
                        let scan = (from..end).rev().find(|s| s % n == i);
                        assert_eq!(last_handled(from, end, Some((i, n))), scan);
                    }
                }
            }
        }
        assert_eq!(last_handled(3, 7, None), Some(6));
        assert_eq!(last_handled(3, 3, None), None);
    }
}
