//! `--dashboard ADDR` on the long-running commands: start the page's
//! listener over a source and print where it is.

use std::sync::Arc;

use statepipe_dashboard::{Dashboard, Options, Source};

/// Serves `source` at `addr` (token from `STATEPIPE_DASHBOARD_TOKEN`) and
/// prints the URL, and a warning when `addr` is not loopback, on stderr.
pub fn start(addr: &str, source: Arc<dyn Source>) -> anyhow::Result<Dashboard> {
    let board = Dashboard::start(addr, source, Options::from_env())?;
    eprintln!("{}", board.banner());
    Ok(board)
}
