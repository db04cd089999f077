//! Progress bars per phase (indicatif, on stderr), with throughput; hidden when stderr is not a
//! terminal or when machine output (`--json`) is asked for.

use indicatif::{ProgressBar, ProgressStyle};

#[derive(Clone, Copy, Debug, Default)]
pub struct Bars {
    pub enabled: bool,
}

impl Bars {
    /// Bars shown only on a terminal.
    pub fn terminal(json: bool) -> Self {
        use std::io::IsTerminal;
        Bars {
            enabled: !json && std::io::stderr().is_terminal(),
        }
    }

    pub fn hidden() -> Self {
        Bars { enabled: false }
    }

    /// A bar for one phase (`sample`, `check`, `final`, `train`).
    pub fn bar(&self, phase: &str, len: usize) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::new(len as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>7} [{bar:30}] {pos}/{len} {per_sec} {elapsed} {msg}",
        ) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_prefix(phase.to_string());
        pb
    }

    /// A line for phase summaries (stderr, unless hidden for `--json`).
    pub fn say(&self, msg: &str) {
        if self.enabled {
            eprintln!("{msg}");
        }
    }
}
