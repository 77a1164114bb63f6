//! The hash table that counts long k-mers.

use std::collections::HashMap;

/// How many k-mers ahead the counting loop prefetches a table slot.
pub(crate) const PREFETCH_AHEAD: usize = 16;

/// The longest k-mer a packed slot holds: its code takes `2k` bits of the
/// 64, and at least 16 bits are left for the count.
const PACKED_MAX_K: usize = 24;

/// A hash table from k-mer code to count: open addressing, linear probing,
/// at most three quarters full, a folded 64×64→128-bit multiply as the hash.
///
/// For k ≤ 24 a slot is one `u64`: the code in the low `2k` bits, the count
/// in the bits above (0 marks an empty slot), so eight slots share a cache
/// line and the benchmark's 18-mers (about 140,000 distinct) fit in
/// 262,144 slots, 2 MiB. A count that would overflow its bits moves to a
/// side map. Longer k-mers go to a `std` `HashMap`.
///
/// The counting loop knows every k-mer long before it counts it, so it
/// prefetches the slot of the k-mer `PREFETCH_AHEAD` (16) positions on:
/// with the table larger than the core's cache, the misses then overlap
/// instead of stalling one by one. A general-purpose table (`hashbrown`)
/// hides where a key's slot is, so it cannot be prefetched.
#[derive(Debug, Clone)]
pub struct KmerTable {
    slots: Vec<u64>,
    /// `2k`: the bits of the code.
    key_bits: u32,
    len: usize,
    /// Counts above what a slot holds (and every k-mer when k > 24).
    spill: HashMap<u64, u64>,
}

impl KmerTable {
    /// An empty table for k-mers of length `k` (1..=32).
    pub(crate) fn new(k: usize) -> Self {
        let packed = k <= PACKED_MAX_K;
        KmerTable {
            slots: if packed { vec![0; 1 << 12] } else { Vec::new() },
            key_bits: 2 * k as u32,
            len: 0,
            spill: HashMap::new(),
        }
    }

    fn packed(&self) -> bool {
        !self.slots.is_empty()
    }

    fn key_mask(&self) -> u64 {
        (1u64 << self.key_bits) - 1
    }

    #[inline]
    fn slot_of(&self, code: u64) -> usize {
        let p = u128::from(code ^ 0x243f_6a88_85a3_08d3) * 0x9e37_79b9_7f4a_7c15;
        ((p as u64) ^ ((p >> 64) as u64)) as usize & (self.slots.len() - 1)
    }

    /// Hints the CPU to fetch the slot of `code` (a no-op where unsupported).
    #[inline]
    pub(crate) fn prefetch(&self, code: u64) {
        if !self.packed() {
            return;
        }
        let slot: *const u64 = &self.slots[self.slot_of(code)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint: it never faults and changes no memory
        // (and `slot` points into `self.slots` anyway).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(slot.cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// Adds one to the count of `code`.
    #[inline]
    pub(crate) fn add_one(&mut self, code: u64) {
        if !self.packed() {
            *self.spill.entry(code).or_insert(0) += 1;
            return;
        }
        let one = 1u64 << self.key_bits;
        let mask = self.slots.len() - 1;
        let mut i = self.slot_of(code);
        loop {
            let s = self.slots[i];
            if s == 0 {
                self.slots[i] = code | one;
                self.len += 1;
                if 4 * self.len > 3 * self.slots.len() {
                    self.grow();
                }
                return;
            }
            if s & self.key_mask() == code {
                let next = s.wrapping_add(one);
                if next > self.key_mask() {
                    self.slots[i] = next;
                } else {
                    // The count field wrapped: keep 1 in the slot, the rest aside.
                    self.slots[i] = code | one;
                    *self.spill.entry(code).or_insert(0) += s >> self.key_bits;
                }
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `n` to the count of `code`.
    pub(crate) fn add(&mut self, code: u64, n: u64) {
        if n == 0 {
            return;
        }
        if !self.packed() {
            *self.spill.entry(code).or_insert(0) += n;
            return;
        }
        // Put 1 through the slot and the rest aside when it would not fit.
        let limit = u64::MAX >> self.key_bits;
        let (in_slot, aside) = if n <= limit { (n, 0) } else { (1, n - 1) };
        let mask = self.slots.len() - 1;
        let mut i = self.slot_of(code);
        loop {
            let s = self.slots[i];
            if s == 0 {
                self.slots[i] = code | (in_slot << self.key_bits);
                self.len += 1;
                if 4 * self.len > 3 * self.slots.len() {
                    self.grow();
                }
                break;
            }
            if s & self.key_mask() == code {
                let count = s >> self.key_bits;
                if count + in_slot <= limit {
                    self.slots[i] = code | ((count + in_slot) << self.key_bits);
                } else {
                    self.slots[i] = code | (1 << self.key_bits);
                    *self.spill.entry(code).or_insert(0) += count + in_slot - 1;
                }
                break;
            }
            i = (i + 1) & mask;
        }
        if aside > 0 {
            *self.spill.entry(code).or_insert(0) += aside;
        }
    }

    fn grow(&mut self) {
        let bigger = vec![0; 2 * self.slots.len()];
        let old = std::mem::replace(&mut self.slots, bigger);
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|&s| s != 0) {
            let mut i = self.slot_of(s & self.key_mask());
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// The count of `code`.
    pub(crate) fn get(&self, code: u64) -> u64 {
        let aside = self.spill.get(&code).copied().unwrap_or(0);
        if !self.packed() {
            return aside;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot_of(code);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return aside;
            }
            if s & self.key_mask() == code {
                return (s >> self.key_bits) + aside;
            }
            i = (i + 1) & mask;
        }
    }

    /// Every `(code, count)`, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let packed = self.slots.iter().filter(|&&s| s != 0).map(|&s| {
            let code = s & self.key_mask();
            (
                code,
                (s >> self.key_bits) + self.spill.get(&code).copied().unwrap_or(0),
            )
        });
        // Spilled codes without a slot: only when the table is not packed.
        let unpacked = self
            .spill
            .iter()
            .filter(|_| !self.packed())
            .map(|(&c, &n)| (c, n));
        packed.chain(unpacked)
    }

    /// Adds every count of `other` (a table of the same k).
    pub(crate) fn merge(&mut self, other: &KmerTable) {
        for s in other.slots.iter().filter(|&&s| s != 0) {
            self.add(s & other.key_mask(), s >> other.key_bits);
        }
        for (&code, &n) in &other.spill {
            self.add(code, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_survive_growth_and_overflow() {
        // k = 24 leaves 16 bits of count: 70,000 adds overflow a slot.
        let mut t = KmerTable::new(24);
        for _ in 0..70_000 {
            t.add_one(5);
        }
        for code in 0..10_000u64 {
            t.add_one(code << 20);
        }
        t.add(7, 1 << 20);
        t.add(7, 3);
        assert_eq!(t.get(5), 70_000);
        assert_eq!(t.get(7), (1 << 20) + 3);
        assert_eq!(t.get(1 << 20), 1);
        assert_eq!(t.get(6), 0);
        let mut other = KmerTable::new(24);
        other.add(5, 65_535);
        other.add_one(5);
        other.merge(&t);
        assert_eq!(other.get(5), 70_000 + 65_536);
        let total: u64 = other.iter().map(|(_, n)| n).sum();
        assert_eq!(total, 70_000 + 65_536 + 10_000 + (1 << 20) + 3);
        let mut wide = KmerTable::new(30);
        wide.add_one(1 << 59);
        wide.add(1 << 59, 2);
        assert_eq!(wide.get(1 << 59), 3);
        assert_eq!(wide.iter().collect::<Vec<_>>(), [(1 << 59, 3)]);
    }
}
