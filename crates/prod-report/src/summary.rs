//! A run's results for a terminal and a log: the text a command prints when it ends, and its
//! one-line `--json` summary (the HTML and Markdown reports are `html` and `markdown`).

use crate::{Comparison, Evaluation, NodeOutcomes, PassAtK, RunReport};

/// A run's `--json` summary line: each evaluation's size, pass@k with CIs and node counts,
/// and the comparisons.
pub fn summary_json(report: &RunReport, run_json: &std::path::Path) -> serde_json::Value {
    let evals: Vec<serde_json::Value> = report
        .evaluations
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": e.name, "theorems": e.theorems, "samples": e.samples_per_theorem,
                "pass_at_k": e.pass_at_k.iter().map(|p| serde_json::json!({"k": p.k, "estimate": p.estimate, "ci": [p.ci_low, p.ci_high]})).collect::<Vec<_>>(),
                "checked_nodes": e.checked_nodes, "infra_nodes": e.infra_nodes, "novel_lemma_share": e.novel_lemma_share,
                "use_invoke_share_root": e.use_invoke_share_root, "proposals": e.proposals,
                "sampled_trees_height_ge1": e.sampled_trees_height_ge1,
                "lemmas_closed_by_hammer": e.lemmas_closed_by_hammer,
                "hammer": e.hammer,
                "node_outcomes": e.node_outcomes.as_ref().map(|o| serde_json::json!({
                    "nodes": o.nodes, "proved": o.proved, "failed": o.failed, "rejected": o.rejected,
                    "truncated": o.truncated, "timed_out": o.timed_out, "infra": o.infra,
                    "globally_correct": o.globally_correct,
                })),
            })
        })
        .collect();
    serde_json::json!({"run": run_json.display().to_string(), "evaluations": evals, "comparisons": report.comparisons})
}

/// The results as text for a terminal: each evaluation's size, pass@k, nodes and the policy's
/// measures, then each comparison (a command prints it on stdout; logs go to stderr).
pub fn terminal(report: &RunReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    for e in &report.evaluations {
        evaluation_lines(&mut o, e);
    }
    for c in &report.comparisons {
        comparison_lines(&mut o, c);
    }
    for n in &report.notes {
        let _ = writeln!(o, "  {n}");
    }
    o
}

/// One evaluation's lines of [`terminal`]: its size, pass@k, checked nodes, node outcomes and
/// the policy's own measures.
fn evaluation_lines(o: &mut String, e: &Evaluation) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "{}: {} theorems, {} trees each (T = {})",
        e.name, e.theorems, e.samples_per_theorem, e.temperature
    );
    for p in &e.pass_at_k {
        let _ = writeln!(
            o,
            "  pass@{:<2} = {:5.1}%  (95% CI {:.1}–{:.1}%, {} theorems judged, {} skipped)",
            p.k,
            100.0 * p.estimate,
            100.0 * p.ci_low,
            100.0 * p.ci_high,
            p.theorems_judged,
            p.theorems_skipped
        );
    }
    let _ = writeln!(
        o,
        "  nodes checked {}, lost to infra {}",
        e.checked_nodes, e.infra_nodes
    );
    if let Some(oc) = &e.node_outcomes {
        node_outcome_lines(o, oc);
    }
    policy_measure_lines(o, e);
}

/// The nodes by outcome class, and the most common failure.
fn node_outcome_lines(o: &mut String, oc: &NodeOutcomes) {
    use std::fmt::Write as _;
    let classes: Vec<String> = oc
        .classes()
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let _ = writeln!(
        o,
        "  nodes: {} ({} globally correct)",
        classes.join(", "),
        oc.globally_correct
    );
    if let Some(f) = oc.top_failures.first() {
        let _ = writeln!(
            o,
            "  most common failure ({} nodes): {}",
            f.count, f.message
        );
    }
}

/// The evaluation's measures of the policy's proofs: `<use_invoke>` share, lemma proposals,
/// hammer use, novel lemmas (the first two not for the CoqHammer baseline).
fn policy_measure_lines(o: &mut String, e: &Evaluation) {
    use std::fmt::Write as _;
    // CoqHammer alone writes no proofs of its own: the policy's measures say nothing there.
    let policy = e.name != crate::HAMMER_BASELINE;
    if let Some(s) = e.use_invoke_share_root.filter(|_| policy) {
        let _ = writeln!(o, "  <use_invoke> share of root samples: {:.1}%", 100.0 * s);
    }
    if let (Some(p), Some(t), true) = (e.proposals, e.sampled_trees_height_ge1, policy) {
        let _ = writeln!(
            o,
            "  lemmas proposed: {p}; proved trees of height >= 1 built only from sampled nodes: {t}"
        );
    }
    if let Some(n) = e.lemmas_closed_by_hammer.filter(|&n| n > 0) {
        let _ = writeln!(
            o,
            "  proposed lemmas closed by a sampled hammer. child: {n}"
        );
    }
    if let Some(l) = &e.hammer_leaves {
        let _ = writeln!(o, "  hammer leaves: {}", crate::tables::leaves_line(l));
    }
    if let Some(h) = &e.hammer {
        let _ = writeln!(o, "  hammer.: {}", crate::tables::hammer_line(h));
    }
    if let Some(s) = e.novel_lemma_share {
        let _ = writeln!(
            o,
            "  novel lemmas among proved trees' lemmas: {:.1}%",
            100.0 * s
        );
    }
}

/// One comparison's lines of [`terminal`]: pass@k of method and baseline with the paired
/// difference, then the theorems proved by both, either or neither.
fn comparison_lines(o: &mut String, c: &Comparison) {
    use std::fmt::Write as _;
    let _ = writeln!(
        o,
        "{} against {} (same theorems and checker; Δ with a paired 95% CI, bootstrap ∪ Newcombe):",
        c.method, c.baseline
    );
    for row in &c.rows {
        let pct = |p: &Option<PassAtK>| {
            p.as_ref()
                .map_or("–".to_string(), |p| format!("{:.1}%", 100.0 * p.estimate))
        };
        let _ = writeln!(
            o,
            "  pass@{:<2}: {} vs {}{}",
            row.k,
            pct(&row.method),
            pct(&row.baseline),
            row.difference.as_ref().map_or(String::new(), |d| format!(
                ", Δ {:+.1} points (95% CI {:+.1} to {:+.1}, {} theorems)",
                100.0 * d.estimate,
                100.0 * d.ci_low,
                100.0 * d.ci_high,
                d.theorems
            ))
        );
    }
    let _ = writeln!(
        o,
        "  proved by both {}, only by {} {}, only by {} {}, by neither {}",
        c.both, c.method, c.method_only, c.baseline, c.baseline_only, c.neither
    );
}
