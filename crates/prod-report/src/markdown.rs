//! The Markdown summary (for docs/results.md): the report's tables, no plots. Every cell is
//! escaped, so hostile names cannot inject links, HTML or table breaks.

use std::fmt::Write as _;

use crate::model::RunReport;
use crate::outline::{outline, Block};
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

/// The report in Markdown: the title, then the [`outline`]'s blocks (no figures).
pub fn render_markdown(r: &RunReport) -> String {
    let title = if r.title.trim().is_empty() {
        "ProD run report"
    } else {
        r.title.as_str()
    };
    let mut out = format!("## {}\n\n", md_line(title));
    for b in outline(r, &[]) {
        block(&mut out, &b);
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// One block of the outline in Markdown.
fn block(out: &mut String, b: &Block<'_>) {
    match b {
        Block::Meta(meta) if !meta.is_empty() => {
            for (k, v) in meta {
                let _ = writeln!(out, "- {}: {}", md_line(k), md(v));
            }
            out.push('\n');
        }
        Block::Alarm(alarms) if !alarms.is_empty() => {
            out.push_str("**SOUNDNESS ALARM**: the checker accepted a canary, a statement no proof may prove. The run stopped; no figure of this report can be trusted until the cause is found (the nodes are in `canary-alarm.jsonl`).\n\n");
            list(out, alarms);
        }
        Block::Warnings(w) if !w.is_empty() => {
            out.push_str(
                "**Data warnings** (values in the run file that cannot be right as given):\n\n",
            );
            list(out, w);
        }
        Block::Meta(_) | Block::Alarm(_) | Block::Warnings(_) => {}
        Block::Section {
            heading,
            md_heading,
            ..
        } => {
            let h = md_heading.map_or_else(|| md_line(heading), md_line);
            let _ = writeln!(out, "### {h}\n");
        }
        Block::Versus {
            method, baseline, ..
        } => {
            let _ = writeln!(
                out,
                "### {} against {}\n",
                md_line(method),
                md_line(baseline)
            );
        }
        Block::Sub(h) => {
            let _ = writeln!(out, "#### {}\n", md_line(h));
        }
        Block::SweepSub {
            name,
            split,
            samples,
        } => {
            let _ = writeln!(
                out,
                "#### {} ({}, n = {samples})\n",
                md_line(name),
                md(split)
            );
        }
        Block::Para(p) => {
            out.push_str(&md_line(p));
            out.push_str("\n\n");
        }
        Block::Note { md, .. } => out.push_str(md),
        Block::Table(t) => table(out, t),
        Block::EitherProved(t) => {
            if t.rows.len() <= MAX_THEOREM_ROWS {
                out.push_str("Theorems proved by either:\n\n");
                table(out, t);
            }
        }
        Block::Figure(_) => {}
        Block::Details(e) => details(out, e),
        Block::Notes(notes) => list(out, notes),
        Block::Config(json) => {
            let f = fence(json);
            let _ = write!(out, "{f}json\n{json}\n{f}\n");
        }
    }
}

/// A bulleted list of escaped items, then a blank line.
fn list(out: &mut String, items: &[String]) {
    for i in items {
        let _ = writeln!(out, "- {}", md_line(i));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    #[test]
    fn fence_outruns_backticks() {
        assert_eq!(super::fence("a"), "```");
        assert_eq!(super::fence("a ```` b"), "`````");
    }
}
