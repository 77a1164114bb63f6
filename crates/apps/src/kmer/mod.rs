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
//! its range one pass per length (so one table at a time is hot in the
//! cache): for short k-mers ([`DIRECT_MAX_K`]) one pass for the longest
//! into an array indexed by the code, the shorter ones summed from it; for
//! each long k-mer length one pass into an open-addressing table of 8-byte
//! slots prefetched ahead ([`KmerTable`]). The per-worker tables are summed
//! at the end.
//!
//! ```
//! let fasta = statepipe_apps::fasta::generate(100);
//! let report = statepipe_apps::kmer::knucleotide(&fasta, 2).unwrap();
//! // 4 one-mers, 16 two-mers, 5 counts and two blank lines.
//! assert_eq!(report.lines().count(), 4 + 1 + 16 + 1 + 5);
//! ```

use std::fmt::Write as _;

mod table;

pub use table::KmerTable;
use table::PREFETCH_AHEAD;

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
pub const fn base_code(byte: u8) -> Option<u8> {
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
    let header = if input.starts_with(b">THREE") {
        0
    } else {
        memchr::memmem::find(input, b"\n>THREE").ok_or(KmerError::NoThree)? + 1
    };
    let mut line_no = 1 + memchr::memchr_iter(b'\n', &input[..header]).count();
    let Some(first) = memchr::memchr(b'\n', &input[header..]) else {
        return Ok(Vec::new());
    };
    let mut rest = &input[header + first + 1..];
    let mut codes = Vec::with_capacity(rest.len());
    while !rest.is_empty() && rest[0] != b'>' {
        line_no += 1;
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let at = codes.len();
        let mut bad = 0;
        codes.extend(line.iter().map(|&b| {
            let c = CODE[usize::from(b)];
            bad |= c;
            c
        }));
        if bad > 3 {
            let column = codes[at..].iter().position(|&c| c > 3).unwrap_or(0);
            return Err(KmerError::NotABase {
                byte: char::from(line[column]),
                line: line_no,
                column: column + 1,
            });
        }
    }
    Ok(codes)
}

/// [`base_code`] as a table, with `0xFF` for a byte that is not a base.
const CODE: [u8; 256] = {
    let mut t = [0xFF; 256];
    let mut b = 0;
    while b < 256 {
        if let Some(c) = base_code(b as u8) {
            t[b] = c;
        }
        b += 1;
    }
    t
};

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
            Table::Hashed(KmerTable::new(k))
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
            (Table::Hashed(a), Table::Hashed(b)) => a.merge(&b),
            _ => unreachable!("tables of one k are of one kind"),
        }
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

/// The start positions, within `start..end`, of the k-mers of a sequence
/// of `len` bases.
fn starts(len: usize, k: usize, start: usize, end: usize) -> std::ops::Range<usize> {
    start..(len + 1).saturating_sub(k).min(end).max(start)
}

/// The code of the k-mer of `codes` that starts at `p`.
fn code_at(codes: &[u8], p: usize, k: usize) -> u64 {
    codes[p..p + k]
        .iter()
        .fold(0u64, |c, &b| (c << 2) | u64::from(b))
}

/// Counts the k-mers that start in `start..end` (they may end past `end`).
///
/// Short k-mers ([`DIRECT_MAX_K`]): only the longest asked for is counted,
/// in one pass into `4^k` counters; a shorter k-mer's count is the sum over
/// the longer ones it begins, plus the few k-mers that start too near the
/// end to begin a longer one. Long k-mers: one pass per length into a
/// [`KmerTable`], so only one table is hot in the cache at a time.
fn count_range(codes: &[u8], start: usize, end: usize, ks: &[usize]) -> Vec<Table> {
    let mut tables: Vec<Table> = ks.iter().map(|&k| Table::new(k)).collect();
    if let Some(long) = ks.iter().copied().filter(|&k| k <= DIRECT_MAX_K).max() {
        let counted = starts(codes.len(), long, start, end);
        let direct = count_direct(codes, counted.clone(), long);
        for (table, &k) in tables.iter_mut().zip(ks) {
            let Table::Direct(v) = table else { continue };
            let shift = 2 * (long - k);
            for (code, &n) in direct.iter().enumerate() {
                v[code >> shift] += n;
            }
            for p in starts(codes.len(), k, counted.end, end) {
                v[code_at(codes, p, k) as usize] += 1;
            }
        }
    }
    for (table, &k) in tables.iter_mut().zip(ks) {
        if let Table::Hashed(m) = table {
            count_hashed(codes, starts(codes.len(), k, start, end), k, m);
        }
    }
    tables
}

/// Counts the k-mers starting at `positions` into `4^k` counters.
fn count_direct(codes: &[u8], positions: std::ops::Range<usize>, k: usize) -> Vec<u64> {
    let mut total = vec![0u64; 1 << (2 * k)];
    // `u32` counters (half the cache), emptied into `total` before they can wrap.
    let mut counts = vec![0u32; 1 << (2 * k)];
    let mask = (1u64 << (2 * k)) - 1;
    let mut from = positions.start;
    while from < positions.end {
        let to = positions.end.min(from + u32::MAX as usize);
        let mut code = code_at(codes, from, k - 1);
        for &b in &codes[from + k - 1..to + k - 1] {
            code = ((code << 2) | u64::from(b)) & mask;
            counts[code as usize] += 1;
        }
        for (t, c) in total.iter_mut().zip(counts.iter_mut()) {
            *t += u64::from(std::mem::take(c));
        }
        from = to;
    }
    total
}

/// Counts the k-mers starting at `positions` into `table`.
fn count_hashed(codes: &[u8], positions: std::ops::Range<usize>, k: usize, table: &mut KmerTable) {
    if positions.is_empty() {
        return;
    }
    let mask = if k == 32 {
        u64::MAX
    } else {
        (1 << (2 * k)) - 1
    };
    let mut code = code_at(codes, positions.start, k - 1);
    let window = &codes[positions.start + k - 1..positions.end + k - 1];
    // `ahead` runs PREFETCH_AHEAD k-mers before `code`.
    let lead = PREFETCH_AHEAD.min(window.len());
    let mut ahead = code;
    for &b in &window[..lead] {
        ahead = ((ahead << 2) | u64::from(b)) & mask;
        table.prefetch(ahead);
    }
    for (j, &b) in window.iter().enumerate() {
        if let Some(&next) = window.get(j + lead) {
            ahead = ((ahead << 2) | u64::from(next)) & mask;
            table.prefetch(ahead);
        }
        code = ((code << 2) | u64::from(b)) & mask;
        table.add_one(code);
    }
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
