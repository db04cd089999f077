//! ProD run reports: a self-contained HTML file with hand-written SVG plots (pass@k curves, the
//! Fig. 5 depth bars, per-round curves, temperature sweeps), what each evaluation's trees did (a
//! per-theorem table, nodes by verdict kind with the common failure messages, example trees node
//! by node with the assembled proof) and a Markdown summary for docs/results.md. Pure: no I/O;
//! the same input gives the same bytes.
//!
//! The input is [`RunReport`] (RUN.json), written by the run (`prod eval`, `prod rl`).

pub mod compare;
pub mod figures;
mod html;
mod markdown;
pub mod model;
mod outline;
pub mod summary;
pub mod svg;
pub mod tables;
pub mod text;

pub use compare::{
    compare, pass_at_k_difference, Comparison, ComparisonRow, PassAtKDifference, TheoremPair,
};
pub use figures::{figures, Figure};
pub use html::render_html;
pub use markdown::render_markdown;
pub use model::{
    CanaryAlarm, CanaryCheck, DatasetInfo, DepthCell, Evaluation, ExampleNode, ExampleTally,
    ExampleTree, FailureCount, HammerLeaves, HammerUse, ModelInfo, NodeOutcomes, PassAtK,
    Reinforced, RoundMetrics, RunReport, TheoremDetail,
};
pub use tables::warnings;

/// The CoqHammer-alone baseline's name in reports (its evaluation has no policy measures).
pub const HAMMER_BASELINE: &str = "CoqHammer alone";

/// Read a RUN.json. The error names the line and column (serde_json's position).
pub fn parse(json: &str) -> Result<RunReport, serde_json::Error> {
    serde_json::from_str(json)
}

/// Write `report` into `dir` (created if missing): `report.html`, `summary.md` and each figure
/// as `FIGURE.svg`. Returns the paths written, in that order; the error names the file.
pub fn write_files(report: &RunReport, dir: &std::path::Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    let mut put = |name: &str, text: &str| -> Result<(), String> {
        // Written beside itself and renamed into place: a reader never sees half a file.
        let path = dir.join(name);
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        files.push(path.display().to_string());
        Ok(())
    };
    put("report.html", &render_html(report))?;
    put("summary.md", &render_markdown(report))?;
    for f in figures(report) {
        // Figure ids are fixed ASCII names chosen by the report, never taken from the run file.
        put(&format!("{}.svg", f.id), &f.svg)?;
    }
    Ok(files)
}
