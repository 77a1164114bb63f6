//! k-nucleotide, as the Computer Language Benchmarks Game defines it.
//!
//! The [k-nucleotide benchmark](https://benchmarksgame-team.pages.debian.net/benchmarksgame/description/knucleotide.html)
//! reads the output of the [`fasta`](crate::fasta) generator, takes the
//! sequence `>THREE`, prints the frequency (percent) of every 1-mer and
//! 2-mer, sorted by frequency descending then by k-mer, and the counts of
//! `GGT`, `GGTA`, `GGTATT`, `GGTATTTTAATT` and `GGTATTTTAATTTATAGT`.
//!
//! Here the sequence is packed two bits per base (`A=0, C=1, G=2, T=3`), so
//! a k-mer of up to 32 bases is one integer: the last `k` bases of a rolling
//! 36-bit code. The sequence is cut into one contiguous range of k-mer start
//! positions per worker; each worker, pinned to a CPU of its own, counts
//! every k-mer length needed, one pass over its range per length (so one
//! table at a time is hot in the cache) — into arrays
//! indexed by the code for short k-mers ([`DIRECT_MAX_K`]) and into
//! open-addressing tables whose slots are prefetched ahead ([`KmerTable`]) for long ones — and the per-worker
//! tables are summed at the end.
//!
//! ```
//! let fasta = statepipe_apps::fasta::generate(100);
//! let report = statepipe_apps::kmer::knucleotide(&fasta, 2).unwrap();
//! // 4 one-mers, 16 two-mers, 5 counts and two blank lines.
//! assert_eq!(report.lines().count(), 4 + 1 + 16 + 1 + 5);
//! ```

use std::fmt::Write as _;

/// k-mers of at most this many bases are counted in arrays indexed by
/// their code (`4^k` counters); longer ones in hash tables.
pub const DIRECT_MAX_K: usize = 8;

/// The k-mer lengths whose every k-mer is counted in a k-nucleotide report.
pub const REPORT_K: [usize; 7] = [1, 2, 3, 4, 6, 12, 18];

/// The k-mers whose counts a k-nucleotide report prints.
pub const REPORT_KMERS: [&str; 5] = [
    "GGT",
    "GGTA",
    "GGTATT",
    "GGTATTTTAATT",
    "GGTATTTTAATTTATAGT",
];

/// Why a k-nucleotide input was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KmerError {
    /// The input holds no bytes at all.
    #[error("the input is empty (expected FASTA with a `>THREE` sequence)")]
    Empty,
    /// No line starts with `>THREE`.
    #[error("the input has no `>THREE` sequence")]
    NoThree,
    /// A byte of the `>THREE` sequence is not a base.
    #[error(
        "byte {byte:?} at line {line}, column {column} of the input is not a base (A, C, G or T)"
    )]
    NotABase {
        /// The byte found, as a character.
        byte: char,
        /// Its line, from 1.
        line: usize,
        /// Its column, from 1.
        column: usize,
    },
    /// A k-mer length outside `1..=32`.
    #[error("k = {0} is outside 1..=32")]
    BadK(usize),
}

/// The 2-bit code of a base (case-insensitive), or `None`.
pub fn base_code(byte: u8) -> Option<u8> {
    match byte {
        b'A' | b'a' => Some(0),
        b'C' | b'c' => Some(1),
        b'G' | b'g' => Some(2),
        b'T' | b't' => Some(3),
        _ => None,
    }
}

/// The base of a 2-bit code.
fn code_base(code: u64) -> char {
    ['A', 'C', 'G', 'T'][(code & 3) as usize]
}

/// The `>THREE` sequence of a FASTA text, one 2-bit code per base.
///
/// The sequence runs from the line after the first line starting with
/// `>THREE` to the next line starting with `>` or the end. Line ends
/// (`\n`, `\r\n`) are skipped; bases are accepted in either case.
///
/// # Errors
///
/// [`KmerError::Empty`], [`KmerError::NoThree`], or
/// [`KmerError::NotABase`] naming the first offending byte.
pub fn three_codes(input: &[u8]) -> Result<Vec<u8>, KmerError> {
    if input.is_empty() {
        return Err(KmerError::Empty);
    }
    let mut line_no = 0;
    let mut lines = input.split(|&b| b == b'\n');
    loop {
        line_no += 1;
        match lines.next() {
            None => return Err(KmerError::NoThree),
            Some(line) if line.starts_with(b">THREE") => break,
            Some(_) => {}
        }
    }
    let mut codes = Vec::with_capacity(input.len() / 2);
    for line in lines {
        line_no += 1;
        if line.first() == Some(&b'>') {
            break;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let start = codes.len();
        codes.extend(line.iter().map(|&b| base_code(b).unwrap_or(u8::MAX)));
        if let Some(bad) = codes[start..].iter().position(|&c| c == u8::MAX) {
            return Err(KmerError::NotABase {
                byte: char::from(line[bad]),
                line: line_no,
                column: bad + 1,
            });
        }
    }
    Ok(codes)
}

/// The 2-bit code of a k-mer written in letters.
///
/// # Errors
///
/// [`KmerError::BadK`] for a length outside `1..=32`;
/// [`KmerError::NotABase`] for a letter that is not a base.
pub fn encode(kmer: &str) -> Result<u64, KmerError> {
    if kmer.is_empty() || kmer.len() > 32 {
        return Err(KmerError::BadK(kmer.len()));
    }
    kmer.bytes().enumerate().try_fold(0u64, |code, (i, b)| {
        let c = base_code(b).ok_or(KmerError::NotABase {
            byte: char::from(b),
            line: 1,
            column: i + 1,
        })?;
        Ok((code << 2) | u64::from(c))
    })
}

/// The letters of a k-mer's 2-bit code.
pub fn decode(code: u64, k: usize) -> String {
    (0..k).rev().map(|i| code_base(code >> (2 * i))).collect()
}

/// Counts of every k-mer of one length.
#[derive(Debug, Clone)]
pub enum Table {
    /// `4^k` counters indexed by the code.
    Direct(Vec<u64>),
    /// A hash table from code to count.
    Hashed(KmerTable),
}

impl Table {
    fn new(k: usize) -> Table {
        if k <= DIRECT_MAX_K {
            Table::Direct(vec![0; 1 << (2 * k)])
        } else {
            Table::Hashed(KmerTable::new())
        }
    }

    /// The count of one code.
    pub fn get(&self, code: u64) -> u64 {
        match self {
            Table::Direct(v) => v.get(code as usize).copied().unwrap_or(0),
            Table::Hashed(m) => m.get(code),
        }
    }

    /// Every `(code, count)` with a count above zero.
    pub fn entries(&self) -> Vec<(u64, u64)> {
        match self {
            Table::Direct(v) => v
                .iter()
                .enumerate()
                .filter(|&(_, &n)| n > 0)
                .map(|(c, &n)| (c as u64, n))
                .collect(),
            Table::Hashed(m) => m.iter().collect(),
        }
    }

    fn merge(&mut self, other: Table) {
        match (self, other) {
            (Table::Direct(a), Table::Direct(b)) => {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
            }
            (Table::Hashed(a), Table::Hashed(b)) => {
                for (c, n) in b.iter() {
                    a.add(c, n);
                }
            }
            _ => unreachable!("tables of one k are of one kind"),
        }
    }
}

/// How many k-mers ahead the counting loop prefetches a table slot.
const PREFETCH_AHEAD: usize = 16;

/// A hash table from k-mer code to count: open addressing, linear probing,
/// at most half full, a folded 64×64→128-bit multiply as the hash.
///
/// The counting loop knows every k-mer long before it counts it, so it
/// prefetches the slot of the k-mer `PREFETCH_AHEAD` (16) positions on: with
/// the table larger than the core's cache (the benchmark's 12- and 18-mers
/// fill about 140,000 slots), the misses then overlap instead of stalling
/// one by one. A general-purpose table (`hashbrown`) hides where a key's
/// slot is, so it cannot be prefetched.
#[derive(Debug, Clone)]
pub struct KmerTable {
    /// `(code, count)`; a count of 0 marks an empty slot.
    slots: Vec<(u64, u64)>,
    len: usize,
}

impl KmerTable {
    fn new() -> Self {
        KmerTable {
            slots: vec![(0, 0); 1 << 12],
            len: 0,
        }
    }

    #[inline]
    fn slot_of(&self, code: u64) -> usize {
        let p = u128::from(code ^ 0x243f_6a88_85a3_08d3) * 0x9e37_79b9_7f4a_7c15;
        ((p as u64) ^ ((p >> 64) as u64)) as usize & (self.slots.len() - 1)
    }

    #[inline]
    fn prefetch(&self, code: u64) {
        let slot: *const (u64, u64) = &self.slots[self.slot_of(code)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint: it never faults and changes no memory
        // (and `slot` points into `self.slots` anyway).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(slot.cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    #[inline]
    fn add(&mut self, code: u64, n: u64) {
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot_of(code);
        loop {
            let slot = &mut self.slots[i];
            if slot.1 == 0 {
                *slot = (code, n);
                self.len += 1;
                return;
            }
            if slot.0 == code {
                slot.1 += n;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let bigger = vec![(0, 0); 2 * self.slots.len()];
        let old = std::mem::replace(&mut self.slots, bigger);
        self.len = 0;
        for (code, n) in old.into_iter().filter(|s| s.1 > 0) {
            self.add(code, n);
        }
    }

    fn get(&self, code: u64) -> u64 {
        let mask = self.slots.len() - 1;
        let mut i = self.slot_of(code);
        loop {
            let (c, n) = self.slots[i];
            if n == 0 || c == code {
                return n;
            }
            i = (i + 1) & mask;
        }
    }

    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().copied().filter(|s| s.1 > 0)
    }
}

/// Counts of every k-mer, for several lengths `k`.
#[derive(Debug, Clone)]
pub struct Counts {
    ks: Vec<usize>,
    tables: Vec<Table>,
    len: usize,
}

impl Counts {
    /// The table of length `k`, if it was counted.
    pub fn table(&self, k: usize) -> Option<&Table> {
        self.ks
            .iter()
            .position(|&x| x == k)
            .map(|i| &self.tables[i])
    }

    /// The count of one k-mer written in letters (0 when its length was not counted).
    ///
    /// # Errors
    ///
    /// As [`encode`].
    pub fn count(&self, kmer: &str) -> Result<u64, KmerError> {
        let code = encode(kmer)?;
        Ok(self.table(kmer.len()).map_or(0, |t| t.get(code)))
    }

    /// How many k-mers of length `k` the sequence holds (`len - k + 1`).
    pub fn total(&self, k: usize) -> u64 {
        (self.len + 1).saturating_sub(k) as u64
    }
}

/// Counts every k-mer of each length in `ks` in a sequence of 2-bit codes,
/// on `workers` threads pinned to the CPUs this process may use.
///
/// # Errors
///
/// [`KmerError::BadK`] for a length outside `1..=32`.
pub fn count(codes: &[u8], ks: &[usize], workers: usize) -> Result<Counts, KmerError> {
    if let Some(&k) = ks.iter().find(|&&k| k == 0 || k > 32) {
        return Err(KmerError::BadK(k));
    }
    let workers = workers.clamp(1, codes.len().max(1));
    let cpus = statepipe_sys::cpus::usable_cpus();
    let chunk = codes.len().div_ceil(workers);
    let mut parts: Vec<Vec<Table>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let cpu = cpus.ids.get(w % cpus.ids.len().max(1)).copied();
                s.spawn(move || {
                    if let Some(cpu) = cpu.filter(|_| workers <= cpus.count) {
                        statepipe_sys::pin::pin_current_thread(cpu);
                    }
                    let start = (w * chunk).min(codes.len());
                    let end = ((w + 1) * chunk).min(codes.len());
                    count_range(codes, start, end, ks)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a k-mer counting worker panicked"))
            .collect()
    });
    let mut tables = parts.remove(0);
    for part in parts {
        for (t, p) in tables.iter_mut().zip(part) {
            t.merge(p);
        }
    }
    Ok(Counts {
        ks: ks.to_vec(),
        tables,
        len: codes.len(),
    })
}

/// Counts the k-mers that start in `start..end` (they may end past `end`).
fn count_range(codes: &[u8], start: usize, end: usize, ks: &[usize]) -> Vec<Table> {
    // One pass per k, so that only one table is hot in the cache at a time.
    ks.iter()
        .map(|&k| {
            let mut table = Table::new(k);
            // Start positions start..last; the k-mer at p ends at p + k - 1.
            let last = (codes.len() + 1).saturating_sub(k).min(end);
            if start >= last {
                return table;
            }
            let mask = if k == 32 {
                u64::MAX
            } else {
                (1 << (2 * k)) - 1
            };
            let mut code = codes[start..start + k - 1]
                .iter()
                .fold(0u64, |c, &b| (c << 2) | u64::from(b));
            let window = &codes[start + k - 1..last + k - 1];
            match &mut table {
                Table::Direct(v) => {
                    for &b in window {
                        code = ((code << 2) | u64::from(b)) & mask;
                        v[code as usize] += 1;
                    }
                }
                Table::Hashed(m) => {
                    // `ahead` runs PREFETCH_AHEAD k-mers before `code`.
                    let lead = PREFETCH_AHEAD.min(window.len());
                    let mut ahead = code;
                    for &b in &window[..lead] {
                        ahead = ((ahead << 2) | u64::from(b)) & mask;
                        m.prefetch(ahead);
                    }
                    for (j, &b) in window.iter().enumerate() {
                        if let Some(&next) = window.get(j + lead) {
                            ahead = ((ahead << 2) | u64::from(next)) & mask;
                            m.prefetch(ahead);
                        }
                        code = ((code << 2) | u64::from(b)) & mask;
                        m.add(code, 1);
                    }
                }
            }
            table
        })
        .collect()
}

/// The k-nucleotide report of a FASTA text, on `workers` threads.
///
/// # Errors
///
/// As [`three_codes`].
pub fn knucleotide(input: &[u8], workers: usize) -> Result<String, KmerError> {
    let codes = three_codes(input)?;
    let counts = count(&codes, &REPORT_K, workers)?;
    Ok(report(&counts))
}

/// Prints a k-nucleotide report from counts that include [`REPORT_K`].
pub fn report(counts: &Counts) -> String {
    let mut out = String::new();
    for k in [1, 2] {
        let total = counts.total(k).max(1) as f64;
        let mut entries = counts.table(k).map(Table::entries).unwrap_or_default();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then(decode(a.0, k).cmp(&decode(b.0, k))));
        for (code, n) in entries {
            let _ = writeln!(out, "{} {:.3}", decode(code, k), 100.0 * n as f64 / total);
        }
        out.push('\n');
    }
    for kmer in REPORT_KMERS {
        let n = counts.count(kmer).expect("the report's k-mers are valid");
        let _ = writeln!(out, "{n}\t{kmer}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        for s in ["A", "GGT", "TTTT", "GGTATTTTAATTTATAGT"] {
            assert_eq!(decode(encode(s).unwrap(), s.len()), s);
        }
        assert_eq!(encode(""), Err(KmerError::BadK(0)));
    }

    #[test]
    fn counts_do_not_depend_on_workers() {
        let codes: Vec<u8> = (0..10_000u32)
            .map(|i| ((i * 7 + i / 13) % 4) as u8)
            .collect();
        let one = count(&codes, &REPORT_K, 1).unwrap();
        for w in 2..5 {
            let many = count(&codes, &REPORT_K, w).unwrap();
            for k in REPORT_K {
                let mut a = one.table(k).unwrap().entries();
                let mut b = many.table(k).unwrap().entries();
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b, "k={k} workers={w}");
            }
        }
    }

    #[test]
    fn short_sequences_count_what_fits() {
        let codes = three_codes(b">THREE\nacg\nT\n").unwrap();
        let c = count(&codes, &[1, 4, 5], 3).unwrap();
        assert_eq!(c.count("ACGT").unwrap(), 1);
        assert_eq!(c.count("A").unwrap(), 1);
        assert_eq!(c.total(5), 0);
        assert!(c.table(5).unwrap().entries().is_empty());
    }

    #[test]
    fn bad_inputs_are_named() {
        assert_eq!(three_codes(b""), Err(KmerError::Empty));
        assert_eq!(three_codes(b">ONE\nACGT\n"), Err(KmerError::NoThree));
        assert_eq!(
            three_codes(b">ONE\nNN\n>THREE x\nAC\nAXG\n"),
            Err(KmerError::NotABase {
                byte: 'X',
                line: 5,
                column: 2
            })
        );
    }
}
