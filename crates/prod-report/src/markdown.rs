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
    let sep: Vec<&str> = (0..t.header.len())
        .map(|i| if i < t.text_columns { "---" } else { "---:" })
        .collect();
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

/// Per-theorem tables longer than this are left to the HTML report.
const MAX_THEOREM_ROWS: usize = 30;

/// One evaluation's measures, node breakdown, theorems and example trees, compactly.
fn details(out: &mut String, e: &crate::model::Evaluation) {
    let _ = writeln!(out, "#### {}\n", md_line(&e.name));
    for (k, v) in tables::measures(e) {
        let _ = writeln!(out, "- {}: {}", md_line(&k), md(&v));
    }
    out.push('\n');
    if let Some(t) = tables::node_outcomes(e) {
        table(out, &t);
    }
    if let Some(t) = tables::failures(e) {
        out.push_str("Most common failure messages:\n\n");
        table(out, &t);
    }
    if !e.theorems_detail.is_empty() {
        if e.theorems_detail.len() <= MAX_THEOREM_ROWS {
            table(out, &tables::theorems(e));
        } else {
            let proved = e
                .theorems_detail
                .iter()
                .filter(|t| t.proved_trees > 0)
                .count();
            let _ = writeln!(
                out,
                "{} theorems, {proved} proved (the per-theorem table is in the HTML report).\n",
                e.theorems_detail.len()
            );
        }
    }
    if !e.examples.is_empty() {
        out.push_str("Example proof trees (the HTML report shows every node):\n\n");
        for x in &e.examples {
            let status = match (x.proved, x.height) {
                (true, Some(h)) => format!("proved, height {h}"),
                (true, None) => "proved".to_string(),
                (false, _) => "not proved".to_string(),
            };
            let lemmas: usize = x.nodes.iter().map(|n| n.lemmas.len()).sum();
            let _ = writeln!(
                out,
                "- {}: {} (tree {}): {status}; nodes: {}, proposed lemmas: {lemmas}",
                md_line(&x.kind),
                md(&x.theorem),
                x.tree,
                x.nodes.len() + x.omitted_nodes
            );
        }
        out.push('\n');
        if let Some((x, p)) = e
            .examples
            .iter()
            .find_map(|x| x.assembled_proof.as_ref().map(|p| (x, p)))
        {
            let f = fence(p);
            let _ = write!(
                out,
                "Assembled proof of {} (tree {}):\n\n{f}coq\n{p}\n{f}\n\n",
                md(&x.theorem),
                x.tree
            );
        }
    }
}

/// What a comparison's table shows, in one paragraph.
pub(crate) fn comparison_text(c: &crate::compare::Comparison) -> String {
    let mut s = format!(
        "The same theorems, the same checker. Δ: {m}'s pass@k minus {b}'s, theorem by theorem, with a paired \
         95% CI (the paired bootstrap, theorems resampled jointly, ∪ Newcombe's score interval).",
        m = c.method,
        b = c.baseline
    );
    if c.baseline_single_attempt {
        s.push_str(&format!(
            " {} makes one deterministic attempt per theorem: k attempts are k copies of it, so its pass@k is its pass@1.",
            c.baseline
        ));
    }
    s
}

/// The summary as Markdown. Headings start at level 2 so that it can be pasted into a page.
pub fn render_markdown(r: &RunReport) -> String {
    let title = if r.title.trim().is_empty() {
        "ProD run report"
    } else {
        r.title.as_str()
    };
    let mut out = format!("## {}\n\n", md_line(title));
    for (k, v) in tables::meta(r) {
        let _ = writeln!(out, "- {}: {}", md_line(&k), md(&v));
    }
    if !tables::meta(r).is_empty() {
        out.push('\n');
    }
    let alarms = tables::canary_alarms(r);
    if !alarms.is_empty() {
        out.push_str("**SOUNDNESS ALARM**: the checker accepted a canary, a statement no proof may prove. The run stopped; no figure of this report can be trusted until the cause is found (the nodes are in `canary-alarm.jsonl`).\n\n");
        for a in &alarms {
            let _ = writeln!(out, "- {}", md_line(a));
        }
        out.push('\n');
    }
    let warnings = tables::warnings(r);
    if !warnings.is_empty() {
        out.push_str(
            "**Data warnings** (values in the run file that cannot be right as given):\n\n",
        );
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
            "pass@k: unbiased estimator from n samples per theorem; in parentheses the 95% confidence \
             interval (percentage points; the hull of the bootstrap over theorems and Wilson's score interval, so it stays open at 0 and n). Theorems whose samples were lost to infrastructure failures are left \
             out (\"judged\"), never counted as failures.\n\n",
        );
    }
    for c in &r.comparisons {
        let _ = writeln!(
            out,
            "### {} against {}\n",
            md_line(&c.method),
            md_line(&c.baseline)
        );
        out.push_str(&md_line(&comparison_text(c)));
        out.push_str("\n\n");
        table(&mut out, &tables::comparison(c));
        table(&mut out, &tables::comparison_counts(c));
        let t = tables::comparison_theorems(c);
        if !t.rows.is_empty() && t.rows.len() <= MAX_THEOREM_ROWS {
            out.push_str("Theorems proved by either:\n\n");
            table(&mut out, &t);
        }
    }
    if let Some(t) = tables::hammer_phases(r) {
        out.push_str("### hammer. steps per phase\n\n");
        table(&mut out, &t);
    }
    let with_depth: Vec<_> = r
        .evaluations
        .iter()
        .filter(|e| !e.depth_table.is_empty())
        .collect();
    if !with_depth.is_empty() {
        out.push_str("### Proved theorems by proof depth (Fig. 5)\n\n");
        for e in with_depth {
            let _ = writeln!(out, "#### {}\n", md_line(&e.name));
            table(&mut out, &tables::depth(e));
        }
    }
    let with_details: Vec<_> = r
        .evaluations
        .iter()
        .filter(|e| tables::has_details(e))
        .collect();
    if !with_details.is_empty() {
        out.push_str("### What the evaluation did\n\n");
        for e in with_details {
            details(&mut out, e);
        }
    }
    let sweeps = tables::temperature_sweeps(r);
    if !sweeps.is_empty() {
        out.push_str("### Temperature sweep\n\n");
        for g in &sweeps {
            let _ = writeln!(
                out,
                "#### {} ({}, n = {})\n",
                md_line(&g[0].name),
                md(&g[0].split),
                g[0].samples_per_theorem
            );
            table(&mut out, &tables::sweep(g));
        }
    }
    out.push_str("### RL rounds\n\n");
    if r.rounds.is_empty() {
        out.push_str("No RL rounds in this run.\n\n");
    } else {
        table(&mut out, &tables::rounds(r));
        if let Some(t) = tables::reinforced(r) {
            out.push_str("What each round reinforced (training examples by origin: with weight > 0 / all, and their summed weight Σw):\n\n");
            table(&mut out, &t);
        }
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
