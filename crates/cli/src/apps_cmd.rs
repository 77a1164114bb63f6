//! `statepipe fasta`, `statepipe knucleotide`, `statepipe graph500`: classic
//! workloads from `statepipe-apps`.

use std::io::{Read as _, Write as _};

use anyhow::Context as _;
use clap::Args;
use statepipe_apps::{fasta, kmer};

/// Options of `statepipe fasta`.
#[derive(Args, Debug)]
pub struct FastaArgs {
    /// The size: sequences of 2N, 3N and 5N bases.
    pub n: usize,
}

/// Options of `statepipe knucleotide`.
#[derive(Args, Debug)]
pub struct KnucleotideArgs {
    /// Workers (default: one per CPU this process may use).
    #[arg(long)]
    pub workers: Option<usize>,
}

/// Writes the fasta output for N to stdout.
pub fn run_fasta(args: &FastaArgs) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match fasta::write(args.n, &mut lock) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// Reads FASTA on stdin and prints the k-nucleotide report; bad input
/// exits with code 2 and says why on stderr.
pub fn run_knucleotide(args: &KnucleotideArgs) -> anyhow::Result<()> {
    let mut input = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut input)
        .context("reading stdin")?;
    let workers = args.workers.unwrap_or_else(statepipe_apps::default_workers);
    match kmer::knucleotide(&input, workers) {
        Ok(report) => {
            std::io::stdout()
                .lock()
                .write_all(report.as_bytes())
                .context("writing to stdout")?;
            Ok(())
        }
        Err(e) => {
            eprintln!("statepipe knucleotide: bad input: {e}");
            std::process::exit(2);
        }
    }
}
