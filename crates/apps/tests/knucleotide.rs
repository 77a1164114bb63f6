//! k-nucleotide and fasta against the Benchmarks Game's outputs and an
//! independent sequential implementation.

use std::collections::HashMap;
use std::fmt::Write as _;

use statepipe_apps::{fasta, kmer};

/// The Benchmarks Game's expected k-nucleotide output for `fasta 25000`
/// (its `knucleotide-output.txt`).
const EXPECTED_25000: &str = "A 30.279
T 30.113
G 19.835
C 19.773

AA 9.161
AT 9.138
TA 9.108
TT 9.060
CA 6.014
GA 5.996
AG 5.993
AC 5.988
TG 5.987
GT 5.967
TC 5.958
CT 5.948
GG 3.944
GC 3.928
CG 3.910
CC 3.899

1474\tGGT
459\tGGTA
49\tGGTATT
1\tGGTATTTTAATT
1\tGGTATTTTAATTTATAGT
";

/// k-nucleotide written the plain way: the `>THREE` text upper-cased, a
/// `std` `HashMap` over byte windows per k.
fn oracle(fasta: &[u8]) -> String {
    let text = std::str::from_utf8(fasta).unwrap();
    let seq: String = text
        .split('>')
        .find(|s| s.starts_with("THREE"))
        .unwrap()
        .lines()
        .skip(1)
        .collect::<String>()
        .to_uppercase();
    let seq = seq.as_bytes();
    let counts = |k: usize| {
        let mut m: HashMap<&[u8], u64> = HashMap::new();
        for w in seq.windows(k) {
            *m.entry(w).or_insert(0) += 1;
        }
        m
    };
    let mut out = String::new();
    for k in [1, 2] {
        let m = counts(k);
        let total = (seq.len() - k + 1) as f64;
        let mut v: Vec<_> = m.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        for (w, n) in v {
            let w = std::str::from_utf8(w).unwrap();
            writeln!(out, "{w} {:.3}", 100.0 * n as f64 / total).unwrap();
        }
        out.push('\n');
    }
    for s in kmer::REPORT_KMERS {
        let n = counts(s.len()).get(s.as_bytes()).copied().unwrap_or(0);
        writeln!(out, "{n}\t{s}").unwrap();
    }
    out
}

#[test]
fn fasta_25000_gives_the_expected_output_on_any_number_of_workers() {
    let input = fasta::generate(25_000);
    assert_eq!(oracle(&input), EXPECTED_25000);
    for workers in [1, 3] {
        assert_eq!(kmer::knucleotide(&input, workers).unwrap(), EXPECTED_25000);
    }
}

#[test]
fn agrees_with_the_oracle_on_other_sizes() {
    for n in [1, 7, 1000] {
        let input = fasta::generate(n);
        assert_eq!(
            kmer::knucleotide(&input, 2).unwrap(),
            oracle(&input),
            "n={n}"
        );
    }
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[test]
fn fasta_output_is_pinned() {
    let out = fasta::generate(1000);
    let text = std::str::from_utf8(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], ">ONE Homo sapiens alu");
    assert_eq!(
        lines[1],
        "GGCCGGGCGCGGTGGCTCACGCCTGTAATCCCAGCACTTTGGGAGGCCGAGGCGGGCGGA"
    );
    let two = lines
        .iter()
        .position(|l| *l == ">TWO IUB ambiguity codes")
        .unwrap();
    assert_eq!(
        lines[two + 1],
        "cttBtatcatatgctaKggNcataaaSatgtaaaDcDRtBggDtctttataattcBgtcg"
    );
    assert!(lines.contains(&">THREE Homo sapiens frequency"));
    // Bases, one newline per line of at most 60, and the three headers.
    assert_eq!(
        out.len(),
        (2000 + 34) + (3000 + 50) + (5000 + 84) + 22 + 25 + 30
    );
    // Pinned from this generator, whose `fasta 25000` reproduces the published
    // k-nucleotide output above.
    assert_eq!(fnv1a(&out), 7_738_755_656_952_142_986);
}
