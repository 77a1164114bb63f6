//! What every `statepipe bench` subcommand shares: the common options,
//! the host line printed first, and the table and files written last.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use statepipe_bench::host::{self, Host};
use statepipe_bench::report::{svg, table, Report};

/// Options every `statepipe bench` subcommand takes.
#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Short samples: the whole run in well under a minute (figures are noisier).
    #[arg(long)]
    pub quick: bool,
    /// Samples per contender and case (medians need at least 5).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = crate::arg_values::at_least_one::<u16>)]
    pub samples: u16,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write a bar chart of the ratios ours/peer as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Measures the host and prints it first, so the reader knows what kind of run follows.
pub fn measure_host(common: &CommonArgs) -> Host {
    if common.samples < 5 {
        eprintln!(
            "note: {} sample(s) per contender; medians are fragile below 5",
            common.samples
        );
    }
    let budget = if common.quick {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(300)
    };
    let host = host::measure(budget);
    println!("{}", host.describe());
    host
}

/// Prints the table and `notes` under it, and writes the files asked for.
pub fn finish(
    report: &Report,
    common: &CommonArgs,
    started: Instant,
    notes: &str,
) -> anyhow::Result<()> {
    println!();
    print!("{}", table::render(report));
    if !notes.is_empty() {
        println!();
        print!("{notes}");
    }
    println!("(run took {:.1} s)", started.elapsed().as_secs_f64());
    write_files(report, common)
}

/// Writes `report` to the `--json` and `--svg` files asked for.
pub fn write_files(report: &Report, common: &CommonArgs) -> anyhow::Result<()> {
    if let Some(path) = &common.json {
        write(path, &report.to_json())?;
    }
    if let Some(path) = &common.svg {
        write(path, &svg::render(report))?;
    }
    Ok(())
}

/// Writes `text` to `path`, saying so on stderr.
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
