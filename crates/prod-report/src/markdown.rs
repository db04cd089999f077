//! The Markdown summary (for docs/results.md): the report's tables, no plots. Every cell is
//! escaped, so hostile names cannot inject links, HTML or table breaks.

use std::fmt::Write as _;

use crate::model::RunReport;
use crate::tables::{self, Table};
use crate::text::{md, md_line};

fn table(out: &mut String, t: &Table) {
    let row = |cells: &[String]| {
        let cells: Vec<String> = cells.iter().map(|c| md(c)).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    out.push_str(&row(&t.header));
    let sep: Vec<&str> = (0..t.header.len()).map(|i| if i < t.text_columns { "---" } else { "---:" }).collect();
    let _ = writeln!(out, "| {} |", sep.join(" | "));
    for r in &t.rows {
        // Rows shorter than the header would break the table: pad them.
        let mut cells = r.clone();
        cells.resize(t.header.len(), String::new());
        out.push_str(&row(&cells));
    }
    out.push('\n');
}

/// A fence longer than any run of backticks in `s`, so that `s` cannot close it.
fn fence(s: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for ch in s.chars() {
        run = if ch == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The summary as Markdown. Headings start at level 2 so that it can be pasted into a page.
pub fn render_markdown(r: &RunReport) -> String {
    let title = if r.title.trim().is_empty() { "ProD run report" } else { r.title.as_str() };
    let mut out = format!("## {}\n\n", md_line(title));
    for (k, v) in tables::meta(r) {
        let _ = writeln!(out, "- {}: {}", md_line(&k), md(&v));
    }
    if !tables::meta(r).is_empty() {
        out.push('\n');
    }
    let warnings = tables::warnings(r);
    if !warnings.is_empty() {
        out.push_str("**Data warnings** (values in the run file that cannot be right as given):\n\n");
        for w in &warnings {
            let _ = writeln!(out, "- {}", md_line(w));
        }
        out.push('\n');
    }
    out.push_str("### Evaluations\n\n");
    if r.evaluations.is_empty() {
        out.push_str("No evaluations in this run.\n\n");
    } else {
        table(&mut out, &tables::evaluations(r));
        out.push_str(
            "pass@k: unbiased estimator from n samples per theorem; in parentheses the bootstrap 95% confidence \
             interval (percentage points). Theorems whose samples were lost to infrastructure failures are left \
             out (\"judged\"), never counted as failures.\n\n",
        );
    }
    let with_depth: Vec<_> = r.evaluations.iter().filter(|e| !e.depth_table.is_empty()).collect();
    if !with_depth.is_empty() {
        out.push_str("### Proved theorems by proof depth (Fig. 5)\n\n");
        for e in with_depth {
            let _ = writeln!(out, "#### {}\n", md_line(&e.name));
            table(&mut out, &tables::depth(e));
        }
    }
    let sweeps = tables::temperature_sweeps(r);
    if !sweeps.is_empty() {
        out.push_str("### Temperature sweep\n\n");
        for g in &sweeps {
            let _ =
                writeln!(out, "#### {} ({}, n = {})\n", md_line(&g[0].name), md(&g[0].split), g[0].samples_per_theorem);
            table(&mut out, &tables::sweep(g));
        }
    }
    out.push_str("### RL rounds\n\n");
    if r.rounds.is_empty() {
        out.push_str("No RL rounds in this run.\n\n");
    } else {
        table(&mut out, &tables::rounds(r));
    }
    if !r.notes.is_empty() {
        out.push_str("### Notes\n\n");
        for n in &r.notes {
            let _ = writeln!(out, "- {}", md_line(n));
        }
        out.push('\n');
    }
    if !r.config.is_null() {
        let json = serde_json::to_string_pretty(&r.config).unwrap_or_default();
        let f = fence(&json);
        let _ = write!(out, "### Configuration\n\n{f}json\n{json}\n{f}\n");
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn fence_outruns_backticks() {
        assert_eq!(super::fence("a"), "```");
        assert_eq!(super::fence("a ```` b"), "`````");
    }
}
