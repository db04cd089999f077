//! Progress of a job's phases on stderr (see `prod_progress`: a bar on a terminal, a log line
//! every `PROD_PROGRESS_SECS` otherwise) and the job's phase summaries.

pub use prod_progress::{Display, Progress};

/// How a job reports: its phases' progress, and whether phase summaries are printed.
#[derive(Clone, Copy, Debug)]
pub struct Bars {
    pub display: Display,
    /// Phase summaries (`Bars::say`) on stderr.
    pub summaries: bool,
}

impl Bars {
    /// A bar on a terminal, log lines otherwise; summaries unless `json` (machine output).
    pub fn for_stderr(json: bool) -> Self {
        Bars {
            display: Display::for_stderr(json),
            summaries: !json,
        }
    }

    /// Nothing on stderr (tests, library callers).
    pub fn hidden() -> Self {
        Bars {
            display: Display::Off,
            summaries: false,
        }
    }

    /// Progress of one phase (`sample`, `check`, `final`, `train`) counting `unit`s; `total`
    /// when known in advance.
    pub fn bar(&self, phase: &str, unit: &str, total: Option<usize>) -> Progress {
        Progress::new(self.display, phase, unit, total.map(|t| t as u64))
    }

    /// A line for phase summaries (stderr, unless hidden for `--json`).
    pub fn say(&self, msg: &str) {
        if self.summaries {
            eprintln!("{msg}");
        }
    }
}
