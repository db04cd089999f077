//! `prod report RUN.json --out DIR`: the HTML report (inline SVG plots) and the Markdown summary.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use crate::exit;

/// Write an HTML report (SVG plots) and a Markdown summary from a run file.
///
/// RUN.json is what `prod eval` / `prod rl` write (schema: `prod_report::RunReport`): the run's setup, its
/// evaluations (pass@k with 95% CIs, the per-depth table of paper Fig. 5, the novel-lemma share) and
/// its RL rounds (correct nodes, weights, losses, time per phase). Writes DIR/report.html (one self-contained
/// file: inline CSS and SVG, no scripts), DIR/summary.md (tables for docs/results.md) and each figure as
/// DIR/FIGURE.svg. Exit 2 when RUN.json is unreadable or malformed (the message names line and column).
///
/// Example: prod report runs/mini/run.json --out runs/mini/report
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The run file (`-` for standard input).
    pub run: PathBuf,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Machine-readable output: one JSON object naming the files written.
    #[arg(long)]
    pub json: bool,
}

fn read_run(path: &Path) -> anyhow::Result<prod_report::RunReport> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_string()
    } else {
        path.display().to_string()
    };
    let text = if stdin {
        std::io::read_to_string(std::io::stdin()).context("cannot read standard input")?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {name}"))?
    };
    // serde_json's message ends with "at line L column C".
    prod_report::parse(&text).with_context(|| format!("{name}: not a run report"))
}

pub fn run(args: ReportArgs) -> exit::Result {
    let report = read_run(&args.run).map_err(exit::Failure::BadInput)?;
    let files = prod_report::write_files(&report, &args.out).map_err(exit::other)?;
    let warnings = prod_report::warnings(&report);
    if args.json {
        return exit::println(serde_json::json!({
            "html": files[0], "markdown": files[1], "figures": &files[2..], "warnings": warnings,
        }));
    }
    let figures = files.len() - 2;
    let mut s = format!("wrote {} and {} ({figures} figures)", files[0], files[1]);
    for w in warnings {
        s.push_str(&format!("\nwarning: {w}"));
    }
    exit::println(s)
}
