//! Large arrays on huge pages.
//!
//! The graph's arrays are read and written at random: with 4 KiB pages
//! nearly every access also misses the TLB, and under a hypervisor (nested
//! paging) each of those misses costs several memory reads of its own.
//! Where transparent huge pages are enabled only on request
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`), asking for
//! them before the memory is first touched gives 2 MiB pages.

/// An empty vector with room for `capacity` elements, its memory advised
/// to use huge pages (a hint: nothing fails where they are unavailable).
pub(crate) fn huge_vec<T>(capacity: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(capacity);
    advise_huge(v.as_ptr().cast(), capacity * std::mem::size_of::<T>());
    v
}

/// `len` copies of `value`, on huge pages where available.
pub(crate) fn huge_filled<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v = huge_vec(len);
    v.resize(len, value);
    v
}

#[cfg(target_os = "linux")]
fn advise_huge(start: *const u8, bytes: usize) {
    const PAGE: usize = 4096;
    const HUGE: usize = 2 << 20;
    if bytes < HUGE {
        return;
    }
    let offset = start.align_offset(PAGE);
    let Some(len) = bytes.checked_sub(offset).map(|l| l / PAGE * PAGE) else {
        return;
    };
    let Some(addr) = std::ptr::NonNull::new(start.wrapping_add(offset).cast_mut()) else {
        return;
    };
    // SAFETY: `addr..addr + len` lies within one live allocation of ours
    // (rounded inwards to whole pages), and MADV_HUGEPAGE changes how
    // pages are backed, never their contents. A refusal is harmless.
    let _ = unsafe {
        nix::sys::mman::madvise(addr.cast(), len, nix::sys::mman::MmapAdvise::MADV_HUGEPAGE)
    };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_start: *const u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn huge_vectors_hold_what_they_are_given() {
        let v = super::huge_filled(3 << 20, 7u32);
        assert_eq!(v.len(), 3 << 20);
        assert!(v.iter().all(|&x| x == 7));
        let mut w: Vec<u64> = super::huge_vec(10);
        w.extend(0..10);
        assert_eq!(w.iter().sum::<u64>(), 45);
    }
}
