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

/// The elements of `v` as atomics, for workers that write disjoint ones
/// through a shared reference.
pub(crate) fn as_atomic(v: &mut [u32]) -> &[std::sync::atomic::AtomicU32] {
    // SAFETY: `AtomicU32` has the size, alignment and bit validity of `u32`
    // (its documentation guarantees it), and the exclusive borrow of `v`
    // lasts as long as the returned shared one, so nothing reads or writes
    // these elements other than through the atomics meanwhile.
    unsafe { &*(v as *mut [u32] as *const [std::sync::atomic::AtomicU32]) }
}

/// Gives back to the system the whole pages of `v`'s spare capacity (the
/// slots past its length), which an earlier longer length had touched:
/// they no longer count towards the process's memory. The capacity stays.
pub(crate) fn release_spare<T: Copy>(v: &mut Vec<T>) {
    let spare = v.spare_capacity_mut();
    release(spare.as_mut_ptr().cast(), std::mem::size_of_val(spare));
}

#[cfg(target_os = "linux")]
fn release(start: *mut u8, bytes: usize) {
    let offset = start.align_offset(PAGE);
    let Some(len) = bytes.checked_sub(offset).map(|l| l / PAGE * PAGE) else {
        return;
    };
    if len == 0 {
        return;
    }
    let Some(addr) = std::ptr::NonNull::new(start.wrapping_add(offset)) else {
        return;
    };
    // SAFETY: `addr..addr + len` lies within the spare capacity of a live
    // vector of ours (rounded inwards to whole pages), which holds no
    // initialised element: MADV_DONTNEED only makes those pages read as
    // zeros when next touched. A refusal is harmless.
    let _ = unsafe {
        nix::sys::mman::madvise(addr.cast(), len, nix::sys::mman::MmapAdvise::MADV_DONTNEED)
    };
}

#[cfg(not(target_os = "linux"))]
fn release(_start: *mut u8, _bytes: usize) {}

const PAGE: usize = 4096;

#[cfg(target_os = "linux")]
fn advise_huge(start: *const u8, bytes: usize) {
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

    #[test]
    fn released_spare_capacity_keeps_the_elements() {
        let mut v = super::huge_filled(4 << 20, 3u32);
        v.truncate(1 << 20);
        super::release_spare(&mut v);
        assert_eq!(v.len(), 1 << 20);
        assert!(v.iter().all(|&x| x == 3));
        v.resize(2 << 20, 9);
        assert!(v[1 << 20..].iter().all(|&x| x == 9));
    }

    #[test]
    fn atomic_views_write_through() {
        let mut v = vec![0u32; 8];
        let a = super::as_atomic(&mut v);
        a[3].store(7, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(v[3], 7);
    }
}
