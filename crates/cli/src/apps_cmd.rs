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

/// Options of `statepipe graph500`.
#[derive(Args, Debug)]
pub struct Graph500Args {
    /// log2 of the number of vertices.
    #[arg(long)]
    pub scale: u32,
    /// Edge tuples per vertex.
    #[arg(long, default_value_t = 16)]
    pub edgefactor: u32,
    /// Searches, from distinct sampled roots of non-zero degree.
    #[arg(long, default_value_t = 64)]
    pub roots: usize,
    /// The seed of the generator and of the root sample.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Workers (default: one per CPU this process may use).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Where the edge list is kept for kernel 1 and the validations: in an
    /// unlinked temporary file (8 bytes a tuple of disk, read back through
    /// the page cache), regenerated from the seed in every pass (no room
    /// taken; a generation's time per pass), or in memory (8 bytes a tuple
    /// of the process's memory, as the reference code keeps it).
    #[arg(long, value_enum, default_value_t = EdgeStorage::File)]
    pub edges: EdgeStorage,
    /// The folder of the edge list's temporary file (default: TMPDIR, else /tmp).
    #[arg(long)]
    pub edge_dir: Option<std::path::PathBuf>,
}

/// Where `statepipe graph500` keeps the edge list.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeStorage {
    /// An unlinked temporary file.
    File,
    /// Made again in every pass.
    Regenerate,
    /// In memory.
    Memory,
}

/// Runs Graph500 and prints the specification's output block; progress on stderr.
pub fn run_graph500(args: &Graph500Args) -> anyhow::Result<()> {
    use statepipe_apps::graph500::{self, Progress};
    let config = graph500::Config {
        scale: args.scale,
        edgefactor: args.edgefactor,
        roots: args.roots,
        seed: args.seed,
        workers: args.workers.unwrap_or_else(statepipe_apps::default_workers),
        storage: match args.edges {
            EdgeStorage::File => {
                graph500::Storage::File(args.edge_dir.clone().unwrap_or_else(std::env::temp_dir))
            }
            EdgeStorage::Regenerate => graph500::Storage::Regenerate,
            EdgeStorage::Memory => graph500::Storage::Memory,
        },
    };
    let kept = match &config.storage {
        graph500::Storage::File(dir) if config.storage.file_in_memory() => format!(
            "in a temporary file in {}, a tmpfs: its {:.1} GB are memory (give a folder on \
             a disk with --edge-dir, or --edges regenerate)",
            dir.display(),
            (8u64 * (u64::from(config.edgefactor) << config.scale)) as f64 / 1e9
        ),
        graph500::Storage::File(dir) => format!("in a temporary file in {}", dir.display()),
        graph500::Storage::Regenerate => "regenerated in every pass".into(),
        graph500::Storage::Memory => "in memory".into(),
    };
    eprintln!(
        "graph500: scale {}, edgefactor {}, {} workers ({}), the edge list {kept}",
        config.scale,
        config.edgefactor,
        config.workers,
        statepipe_sys::cpus::usable_cpus()
    );
    let report = graph500::run(&config, &mut |p| match p {
        Progress::Generated { seconds } => eprintln!("generated the edge list in {seconds:.3} s"),
        Progress::Built { seconds } => eprintln!("kernel 1 (CSR) in {seconds:.3} s"),
        Progress::Searched(s) => eprintln!(
            "bfs from {:>10}: {:.4} s, {} edges, {:.3} GTEPS, {} levels bottom-up",
            s.root,
            s.seconds,
            s.nedge,
            s.teps() / 1e9,
            s.bottom_up_levels
        ),
    })?;
    print!("{report}");
    let tuples = (u64::from(config.edgefactor) << config.scale) as f64;
    let gb =
        |b: Option<u64>| b.map_or("unmeasured".into(), |b| format!("{:.3} GB", b as f64 / 1e9));
    let m = &report.memory;
    eprintln!(
        "peak RSS by phase: generation {}, kernel 1 {}, searches {}, validations {}",
        gb(m.generation),
        gb(m.construction),
        gb(m.search),
        gb(m.validation)
    );
    if let Some(peak) = m.peak() {
        eprintln!(
            "peak RSS {:.3} GB: {:.1} bytes per generated edge",
            peak as f64 / 1e9,
            peak as f64 / tuples
        );
    }
    Ok(())
}
