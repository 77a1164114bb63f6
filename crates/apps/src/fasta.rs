//! The fasta generator of the Computer Language Benchmarks Game.
//!
//! Writes the three DNA sequences of the
//! [fasta benchmark](https://benchmarksgame-team.pages.debian.net/benchmarksgame/description/fasta.html)
//! byte for byte as its programs do: `>ONE Homo sapiens alu` (the ALU
//! repeat, copied cyclically, `2n` bases), `>TWO IUB ambiguity codes`
//! (`3n` bases drawn from the IUB table) and `>THREE Homo sapiens
//! frequency` (`5n` bases drawn from the Homo sapiens table), 60 bases to a
//! line. The random draws use the benchmark's linear congruential generator
//! (`IM = 139968`, `IA = 3877`, `IC = 29573`, seed 42), one draw per base,
//! its state carried from the second sequence into the third.
//!
//! ```
//! let mut out = Vec::new();
//! statepipe_apps::fasta::write(1, &mut out).unwrap();
//! assert!(out.starts_with(b">ONE Homo sapiens alu\nGG\n>TWO IUB ambiguity codes\n"));
//! ```

use std::io::{self, Write};

/// The generator's modulus.
pub const IM: u32 = 139_968;
/// The generator's multiplier.
pub const IA: u32 = 3_877;
/// The generator's increment.
pub const IC: u32 = 29_573;
/// The generator's seed.
pub const SEED: u32 = 42;

/// Bases per output line.
pub const LINE: usize = 60;

/// The ALU repeat the first sequence copies.
pub const ALU: &[u8] = b"GGCCGGGCGCGGTGGCTCACGCCTGTAATCCCAGCACTTTGG\
GAGGCCGAGGCGGGCGGATCACCTGAGGTCAGGAGTTCGAGA\
CCAGCCTGGCCAACATGGTGAAACCCCGTCTCTACTAAAAAT\
ACAAAAATTAGCCGGGCGTGGTGGCGCGCGCCTGTAATCCCA\
GCTACTCGGGAGGCTGAGGCAGGAGAATCGCTTGAACCCGGG\
AGGCGGAGGTTGCAGTGAGCCGAGATCGCGCCACTGCACTCC\
AGCCTGGGCGACAGAGCGAGACTCCGTCTCAAAAA";

/// The IUB ambiguity codes and their probabilities.
pub const IUB: [(u8, f64); 15] = [
    (b'a', 0.27),
    (b'c', 0.12),
    (b'g', 0.12),
    (b't', 0.27),
    (b'B', 0.02),
    (b'D', 0.02),
    (b'H', 0.02),
    (b'K', 0.02),
    (b'M', 0.02),
    (b'N', 0.02),
    (b'R', 0.02),
    (b'S', 0.02),
    (b'V', 0.02),
    (b'W', 0.02),
    (b'Y', 0.02),
];

/// The Homo sapiens base frequencies.
pub const HOMO_SAPIENS: [(u8, f64); 4] = [
    (b'a', 0.302_954_942_668_0),
    (b'c', 0.197_988_300_492_1),
    (b'g', 0.197_547_306_639_1),
    (b't', 0.301_509_450_200_8),
];

/// The benchmark's linear congruential generator.
#[derive(Debug, Clone)]
pub struct Lcg {
    last: u32,
}

impl Default for Lcg {
    fn default() -> Self {
        Lcg { last: SEED }
    }
}

impl Lcg {
    /// The next draw, in `[0, 1)`.
    pub fn next_unit(&mut self) -> f64 {
        self.last = (self.last * IA + IC) % IM;
        f64::from(self.last) / f64::from(IM)
    }
}

/// Writes the whole fasta output for `n` to `out`.
///
/// # Errors
///
/// Any error of `out`.
pub fn write(n: usize, out: &mut impl Write) -> io::Result<()> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    repeat(&mut out, b">ONE Homo sapiens alu\n", ALU, 2 * n)?;
    let mut lcg = Lcg::default();
    random(
        &mut out,
        b">TWO IUB ambiguity codes\n",
        &IUB,
        3 * n,
        &mut lcg,
    )?;
    random(
        &mut out,
        b">THREE Homo sapiens frequency\n",
        &HOMO_SAPIENS,
        5 * n,
        &mut lcg,
    )?;
    out.flush()
}

/// The whole fasta output for `n`, in memory.
pub fn generate(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 * n + 11 * n / LINE + 128);
    write(n, &mut out).expect("writing to a Vec does not fail");
    out
}

fn repeat(out: &mut impl Write, header: &[u8], alu: &[u8], n: usize) -> io::Result<()> {
    out.write_all(header)?;
    // The repeat doubled, so every line is one contiguous slice.
    let doubled: Vec<u8> = alu.iter().chain(alu).copied().collect();
    let (mut at, mut left) = (0, n);
    while left > 0 {
        let len = left.min(LINE);
        out.write_all(&doubled[at..at + len])?;
        out.write_all(b"\n")?;
        at = (at + len) % alu.len();
        left -= len;
    }
    Ok(())
}

fn random(
    out: &mut impl Write,
    header: &[u8],
    table: &[(u8, f64)],
    n: usize,
    lcg: &mut Lcg,
) -> io::Result<()> {
    out.write_all(header)?;
    let mut cumulative = Vec::with_capacity(table.len());
    let mut sum = 0.0;
    for &(base, p) in table {
        sum += p;
        cumulative.push((base, sum));
    }
    let last = table[table.len() - 1].0;
    let mut line = [0u8; LINE + 1];
    let mut left = n;
    while left > 0 {
        let len = left.min(LINE);
        for slot in &mut line[..len] {
            let r = lcg.next_unit();
            *slot = cumulative
                .iter()
                .find(|&&(_, c)| r < c)
                .map_or(last, |&(b, _)| b);
        }
        line[len] = b'\n';
        out.write_all(&line[..=len])?;
        left -= len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_double_precision_draw_the_same_bases() {
        // The benchmark's C programs use `float`; every draw is k / IM, so
        // checking all IM of them shows the choice of precision is moot.
        for table in [&IUB[..], &HOMO_SAPIENS[..]] {
            let (mut c64, mut c32) = (0.0f64, 0.0f32);
            let cum: Vec<(f64, f32)> = table
                .iter()
                .map(|&(_, p)| {
                    c64 += p;
                    c32 += p as f32;
                    (c64, c32)
                })
                .collect();
            for k in 0..IM {
                let (r64, r32) = (f64::from(k) / f64::from(IM), k as f32 / IM as f32);
                let i64 = cum.iter().position(|c| r64 < c.0);
                let i32 = cum.iter().position(|c| r32 < c.1);
                assert_eq!(i64, i32, "draw {k}");
            }
        }
    }

    #[test]
    fn lines_are_sixty_bases_and_lengths_match() {
        let text = generate(100);
        let text = std::str::from_utf8(&text).unwrap();
        let mut lens = [0usize; 3];
        let mut section = usize::MAX;
        for line in text.lines() {
            if line.starts_with('>') {
                section = section.wrapping_add(1);
                continue;
            }
            assert!(line.len() <= LINE);
            lens[section] += line.len();
        }
        assert_eq!(lens, [200, 300, 500]);
    }
}
