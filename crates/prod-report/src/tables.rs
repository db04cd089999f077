//! The report's tables, built once as plain text and rendered as HTML or Markdown (each renderer
//! escapes every cell).

use std::collections::BTreeSet;

use crate::model::{Evaluation, RunReport, TheoremDetail};
use crate::text::{fixed, opt_fixed, opt_percent, pass_cell, percent, short};

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// The first `text_columns` columns hold text (left-aligned); the others numbers (right-aligned).
    pub text_columns: usize,
}

/// All k values that appear in any evaluation, ascending (k = 0 is meaningless and dropped).
pub fn all_k(evals: &[&Evaluation]) -> Vec<usize> {
    let ks: BTreeSet<usize> = evals
        .iter()
        .flat_map(|e| e.pass_at_k.iter().map(|p| p.k))
        .filter(|&k| k > 0)
        .collect();
    ks.into_iter().collect()
}

/// Legend labels that tell evaluations apart: the name, then temperature, split and position
/// only where needed.
pub fn labels(evals: &[Evaluation]) -> Vec<String> {
    let unique = |v: &[String]| v.iter().collect::<BTreeSet<_>>().len() == v.len();
    let mut l: Vec<String> = evals.iter().map(|e| e.name.clone()).collect();
    if unique(&l) {
        return l;
    }
    for (i, e) in evals.iter().enumerate() {
        if evals.iter().filter(|o| o.name == e.name).count() > 1 {
            l[i] = format!("{} · T={}", e.name, short(e.temperature, 3));
        }
    }
    if unique(&l) {
        return l;
    }
    let base = l.clone();
    for (i, e) in evals.iter().enumerate() {
        if base.iter().filter(|o| **o == base[i]).count() > 1 {
            l[i] = format!("{} · {}", base[i], e.split);
        }
    }
    if unique(&l) {
        return l;
    }
    l.iter()
        .enumerate()
        .map(|(i, s)| format!("{s} #{}", i + 1))
        .collect()
}

pub fn meta(r: &RunReport) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let mut put = |k: &str, s: String| {
        if !s.is_empty() {
            v.push((k.to_string(), s));
        }
    };
    put("Created", r.created.clone());
    put("Prover", r.prover.clone());
    let d = &r.dataset;
    if !d.name.is_empty() || d.size > 0 {
        let mut s = d.name.clone();
        if !d.split.is_empty() {
            s.push_str(&format!(", split {}", d.split));
        }
        s.push_str(&format!(
            ", {} theorem{}",
            d.size,
            if d.size == 1 { "" } else { "s" }
        ));
        put("Dataset", s);
    }
    let m = &r.model;
    let params = m
        .params
        .map(|p| format!(" ({} parameters)", human_count(p)))
        .unwrap_or_default();
    put("Model", format!("{}{params}", m.name).trim().to_string());
    put("Sampling", sampling(&r.config).unwrap_or_default());
    if !r.canaries.is_empty() {
        let checked: usize = r.canaries.iter().map(|c| c.canaries).sum();
        let accepted: usize = r.canaries.iter().map(|c| c.alarms.len()).sum();
        put(
            "Canaries",
            format!(
                "{checked} checked ({} nodes), {accepted} accepted",
                r.canaries.iter().map(|c| c.nodes).sum::<usize>()
            ),
        );
    }
    v
}

/// The sampling settings of the run's configuration (`config.sampling`, as `prod eval`, `prod
/// rl` and `prod demo` write it) in one line, in plain view beside the results they explain:
/// a short context or a forced first token changes what pass@k means. The paper's values are
/// named where they differ.
pub fn sampling(config: &serde_json::Value) -> Option<String> {
    let s = config.get("sampling")?.as_object()?;
    let num = |k: &str| s.get(k).and_then(|v| v.as_f64());
    let mut parts = Vec::new();
    if let Some(t) = num("temperature") {
        let paper = if (t - 0.7).abs() > 1e-9 {
            " (paper: 0.7)"
        } else {
            ""
        };
        parts.push(format!("T = {}{paper}", short(t, 3)));
    }
    if let Some(p) = num("top_p") {
        parts.push(format!("top-p {}", short(p, 3)));
    }
    if let Some(n) = num("max_new_tokens") {
        parts.push(format!("{} new tokens", n as u64));
    }
    if let Some(c) = num("context_tokens") {
        let paper = if c as u64 != 1000 {
            " (paper: 1,000)"
        } else {
            ""
        };
        parts.push(format!("last {} context tokens{paper}", c as u64));
    }
    if let Some(f) = s.get("first_token").and_then(|v| v.as_str()) {
        parts.push(match f {
            "free" => "first token free".to_string(),
            other => format!("first token {other} (forced to a t0 token)"),
        });
    }
    if let Some(w) = s.get("decode_weights").and_then(|v| v.as_str()) {
        parts.push(format!("decoding weights {w}"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// One line per accepted canary (the report's alarm banner).
pub fn canary_alarms(r: &RunReport) -> Vec<String> {
    r.canaries
        .iter()
        .flat_map(|c| &c.alarms)
        .map(|a| {
            format!(
                "{} (tree {}, node {}): {} — {} {}",
                a.canary,
                a.tree,
                a.node,
                a.what,
                a.statement,
                crate::text::truncate(&a.completion, 300)
            )
        })
        .collect()
}

/// 124000000 -> "124M"; small counts verbatim.
pub fn human_count(n: u64) -> String {
    let f = n as f64;
    if n >= 1_000_000_000 {
        format!("{}B", short(f / 1e9, 2))
    } else if n >= 1_000_000 {
        format!("{}M", short(f / 1e6, 1))
    } else if n >= 10_000 {
        format!("{}k", short(f / 1e3, 1))
    } else {
        n.to_string()
    }
}

/// One row per evaluation: setup, pass@k with CIs for every k, node counts, novel lemmas.
pub fn evaluations(r: &RunReport) -> Table {
    let evals: Vec<&Evaluation> = r.evaluations.iter().collect();
    let ks = all_k(&evals);
    let mut header: Vec<String> = ["Evaluation", "Split", "T", "n", "Theorems"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(ks.iter().map(|k| format!("pass@{k}")));
    header.extend(
        ["Checked nodes", "Infra nodes", "Novel lemmas"]
            .iter()
            .map(|s| s.to_string()),
    );
    let rows = r
        .evaluations
        .iter()
        .map(|e| {
            let mut row = vec![
                e.name.clone(),
                e.split.clone(),
                short(e.temperature, 3),
                e.samples_per_theorem.to_string(),
                e.theorems.to_string(),
            ];
            for k in &ks {
                row.push(match e.pass_at_k.iter().find(|p| p.k == *k) {
                    Some(p) => {
                        let mut s = pass_cell(p.estimate, p.ci_low, p.ci_high);
                        if p.theorems_judged != e.theorems {
                            s.push_str(&format!(", {} judged", p.theorems_judged));
                        }
                        s
                    }
                    None => "–".to_string(),
                });
            }
            row.push(e.checked_nodes.to_string());
            row.push(e.infra_nodes.to_string());
            row.push(opt_percent(e.novel_lemma_share));
            row
        })
        .collect();
    Table {
        header,
        rows,
        text_columns: 2,
    }
}

/// A depth as the report writes it (`unknown` when the depth is not known).
pub(crate) fn depth_name(d: Option<u32>) -> String {
    d.map_or_else(|| "unknown".to_string(), |d| d.to_string())
}

/// Ground-truth depths of an evaluation, ascending, unknown last.
pub fn ground_truth_depths(e: &Evaluation) -> Vec<Option<u32>> {
    let s: BTreeSet<(bool, u32)> = e
        .depth_table
        .iter()
        .map(|c| {
            (
                c.ground_truth_depth.is_none(),
                c.ground_truth_depth.unwrap_or(0),
            )
        })
        .collect();
    s.into_iter()
        .map(|(none, d)| if none { None } else { Some(d) })
        .collect()
}

pub fn proving_depths(e: &Evaluation) -> Vec<u32> {
    let s: BTreeSet<u32> = e
        .depth_table
        .iter()
        .filter_map(|c| c.proving_depth)
        .collect();
    s.into_iter().collect()
}

/// Count of theorems for (ground-truth depth, proving depth); cells may repeat and are summed.
pub fn depth_count(e: &Evaluation, g: Option<u32>, p: Option<u32>) -> usize {
    e.depth_table
        .iter()
        .filter(|c| c.ground_truth_depth == g && c.proving_depth == p)
        .fold(0usize, |a, c| a.saturating_add(c.count))
}

pub fn depth_total(e: &Evaluation, g: Option<u32>) -> usize {
    e.depth_table
        .iter()
        .filter(|c| c.ground_truth_depth == g)
        .fold(0usize, |a, c| a.saturating_add(c.count))
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

/// Paper Fig. 5 as a table: per ground-truth depth, how many theorems were proved by a tree of
/// each depth.
pub fn depth(e: &Evaluation) -> Table {
    let pds = proving_depths(e);
    let mut header: Vec<String> = ["Ground-truth depth", "Theorems", "Proved", "Pass rate"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    header.extend(pds.iter().map(|d| format!("Proved at depth {d}")));
    header.push("Not proved".to_string());
    let mut rows = Vec::new();
    let (mut all, mut all_proved) = (0usize, 0usize);
    let mut per_depth = vec![0usize; pds.len()];
    let mut all_unproved = 0usize;
    for g in ground_truth_depths(e) {
        let total = depth_total(e, g);
        let unproved = depth_count(e, g, None);
        let proved = total.saturating_sub(unproved);
        let mut row = vec![
            depth_name(g),
            total.to_string(),
            proved.to_string(),
            percent(ratio(proved, total)),
        ];
        for (i, d) in pds.iter().enumerate() {
            let n = depth_count(e, g, Some(*d));
            per_depth[i] = per_depth[i].saturating_add(n);
            row.push(n.to_string());
        }
        row.push(unproved.to_string());
        rows.push(row);
        all = all.saturating_add(total);
        all_proved = all_proved.saturating_add(proved);
        all_unproved = all_unproved.saturating_add(unproved);
    }
    if rows.len() > 1 {
        let mut row = vec![
            "all".to_string(),
            all.to_string(),
            all_proved.to_string(),
            percent(ratio(all_proved, all)),
        ];
        row.extend(per_depth.iter().map(|n| n.to_string()));
        row.push(all_unproved.to_string());
        rows.push(row);
    }
    Table {
        header,
        rows,
        text_columns: 1,
    }
}

/// Evaluations that differ only by temperature: same name, split, n and theorem count, at least
/// two temperatures. Each group is sorted by temperature.
pub fn temperature_sweeps(r: &RunReport) -> Vec<Vec<&Evaluation>> {
    let mut groups: Vec<Vec<&Evaluation>> = Vec::new();
    for e in &r.evaluations {
        let same = |o: &&Evaluation| {
            o.name == e.name
                && o.split == e.split
                && o.samples_per_theorem == e.samples_per_theorem
                && o.theorems == e.theorems
        };
        match groups.iter_mut().find(|g| g.first().is_some_and(same)) {
            Some(g) => g.push(e),
            None => groups.push(vec![e]),
        }
    }
    groups
        .into_iter()
        .filter_map(|mut g| {
            g.sort_by(|a, b| a.temperature.total_cmp(&b.temperature));
            let temps: BTreeSet<u64> = g.iter().map(|e| e.temperature.to_bits()).collect();
            (temps.len() > 1).then_some(g)
        })
        .collect()
}

pub fn sweep(group: &[&Evaluation]) -> Table {
    let ks = all_k(group);
    let mut header = vec!["T".to_string()];
    header.extend(ks.iter().map(|k| format!("pass@{k}")));
    let rows = group
        .iter()
        .map(|e| {
            let mut row = vec![short(e.temperature, 3)];
            for k in &ks {
                row.push(e.pass_at_k.iter().find(|p| p.k == *k).map_or_else(
                    || "–".to_string(),
                    |p| pass_cell(p.estimate, p.ci_low, p.ci_high),
                ));
            }
            row
        })
        .collect();
    Table {
        header,
        rows,
        text_columns: 1,
    }
}

/// The k of the rounds' held-out evaluations, ascending.
pub fn round_eval_ks(r: &RunReport) -> Vec<usize> {
    let ks: BTreeSet<usize> = r
        .rounds
        .iter()
        .flat_map(|m| m.eval.iter().flatten().map(|p| p.k))
        .collect();
    ks.into_iter().collect()
}

/// The columns of [`rounds`] before the held-out pass@k ones.
const ROUND_COLUMNS: [&str; 15] = [
    "Round",
    "Examples",
    "Mean weight",
    "Nodes",
    "Locally correct",
    "Globally correct",
    "Replay buffer",
    "Novel lemmas",
    "Loss",
    "Value loss",
    "Sample (s)",
    "Check (s)",
    "Train (s)",
    "Filter (s)",
    "Tokens/s",
];

/// One row per RL round (round 0: the starting model's evaluation only), and a total row
/// (examples, nodes, time per phase). Held-out pass@k columns when the rounds were evaluated.
pub fn rounds(r: &RunReport) -> Table {
    let ks = round_eval_ks(r);
    let mut header: Vec<String> = ROUND_COLUMNS.iter().map(|s| s.to_string()).collect();
    header.extend(ks.iter().map(|k| format!("Held-out pass@{k}")));
    let mut rows: Vec<Vec<String>> = r.rounds.iter().map(|m| round_row(m, &ks)).collect();
    if r.rounds.len() > 1 {
        rows.push(rounds_total_row(r, &ks));
    }
    Table {
        header,
        rows,
        text_columns: 1,
    }
}

/// A round's row of [`rounds`]: its counts, losses and phase times (blank for the starting
/// model, evaluated and not trained), then its held-out pass@k cells.
fn round_row(m: &crate::model::RoundMetrics, ks: &[usize]) -> Vec<String> {
    if m.is_start() {
        // The starting model: evaluated, not trained.
        let mut row = vec![round_label(m)];
        row.extend(std::iter::repeat_n(String::new(), 14));
        row.extend(round_eval_cells(m, ks));
        return row;
    }
    let mut row = vec![
        m.round.to_string(),
        m.examples.to_string(),
        opt_fixed(m.mean_weight, 4),
        m.nodes.to_string(),
        m.locally_correct.to_string(),
        m.globally_correct.to_string(),
        m.replay_size.to_string(),
        opt_percent(m.novel_lemma_share),
        opt_fixed(m.loss, 4),
        opt_fixed(m.value_loss, 4),
        fixed(m.sample_s, 1),
        fixed(m.check_s, 1),
        fixed(m.train_s, 1),
        fixed(m.filter_s, 1),
        opt_fixed(m.tokens_per_s, 1),
    ];
    row.extend(round_eval_cells(m, ks));
    row
}

/// A round's held-out pass@k cells for each of `ks` ("–" where it was not evaluated at k).
fn round_eval_cells(m: &crate::model::RoundMetrics, ks: &[usize]) -> Vec<String> {
    ks.iter()
        .map(|k| {
            m.eval.iter().flatten().find(|p| p.k == *k).map_or_else(
                || "–".to_string(),
                |p| pass_cell(p.estimate, p.ci_low, p.ci_high),
            )
        })
        .collect()
}

/// The total row of [`rounds`]: summed examples, nodes, correct counts and phase times.
fn rounds_total_row(r: &RunReport, ks: &[usize]) -> Vec<String> {
    let sum_u = |f: fn(&crate::model::RoundMetrics) -> usize| {
        r.rounds
            .iter()
            .fold(0usize, |a, m| a.saturating_add(f(m)))
            .to_string()
    };
    let sum_f =
        |f: fn(&crate::model::RoundMetrics) -> f64| fixed(r.rounds.iter().map(f).sum::<f64>(), 1);
    let mut row = vec![
        "total".to_string(),
        sum_u(|m| m.examples),
        String::new(),
        sum_u(|m| m.nodes),
        sum_u(|m| m.locally_correct),
        sum_u(|m| m.globally_correct),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        sum_f(|m| m.sample_s),
        sum_f(|m| m.check_s),
        sum_f(|m| m.train_s),
        sum_f(|m| m.filter_s),
    ];
    row.extend(std::iter::repeat_n(String::new(), 1 + ks.len()));
    row
}

/// A round's first cell: its number, or "0 (start)" for the starting model's evaluation.
fn round_label(m: &crate::model::RoundMetrics) -> String {
    if m.is_start() {
        "0 (start)".to_string()
    } else {
        m.round.to_string()
    }
}

/// The header of [`reinforced_cells`].
pub const REINFORCED_HEADER: [&str; 6] = [
    "generated",
    "augmented",
    "ground truth",
    "replayed",
    "<use_invoke> share of the weight",
    "held-out roots with <use_invoke>",
];

/// What a round trained on: per origin "weighted/all, Σw", the share of the batch's weight on
/// targets that propose lemmas, and the share of its held-out root samples that do.
pub fn reinforced_cells(m: &crate::model::RoundMetrics) -> Vec<String> {
    let mut row: Vec<String> = match &m.reinforced {
        Some(r) => r
            .origins()
            .iter()
            .map(|(_, t)| format!("{}/{}, Σw {}", t.weighted, t.examples, fixed(t.weight, 1)))
            .collect(),
        None => vec!["–".to_string(); 4],
    };
    row.push(opt_percent(
        m.reinforced.as_ref().and_then(|r| r.use_invoke_share()),
    ));
    row.push(opt_percent(m.eval_use_invoke_share_root));
    row
}

/// Per round, what the policy was trained on (see [`reinforced_cells`]); None when no round
/// recorded it. The starting model's row has only its held-out share.
pub fn reinforced(r: &RunReport) -> Option<Table> {
    if r.rounds.iter().all(|m| m.reinforced.is_none()) {
        return None;
    }
    let mut header = vec!["Round".to_string()];
    header.extend(REINFORCED_HEADER.iter().map(|s| s.to_string()));
    let rows = r
        .rounds
        .iter()
        .map(|m| {
            let mut row = vec![round_label(m)];
            row.extend(reinforced_cells(m));
            row
        })
        .collect();
    Some(Table {
        header,
        rows,
        text_columns: 1,
    })
}

/// Values that look wrong for what they claim to be; shown in the report, never hidden.
pub fn warnings(r: &RunReport) -> Vec<String> {
    let mut w = Vec::new();
    for e in &r.evaluations {
        for p in &e.pass_at_k {
            let vals = [p.estimate, p.ci_low, p.ci_high];
            if vals.iter().any(|v| !v.is_finite()) {
                w.push(format!(
                    "{}: pass@{} has a value that is not a number",
                    e.name, p.k
                ));
            } else if vals.iter().any(|v| !(0.0..=1.0).contains(v)) {
                w.push(format!("{}: pass@{} lies outside [0, 1]", e.name, p.k));
            } else if p.ci_low > p.estimate + 1e-12 || p.ci_high < p.estimate - 1e-12 {
                w.push(format!(
                    "{}: pass@{} lies outside its confidence interval",
                    e.name, p.k
                ));
            }
            if p.k == 0 || (e.samples_per_theorem > 0 && p.k > e.samples_per_theorem) {
                w.push(format!(
                    "{}: pass@{} needs 1 ≤ k ≤ n = {}",
                    e.name, p.k, e.samples_per_theorem
                ));
            }
        }
        if !e.temperature.is_finite() {
            w.push(format!("{}: temperature is not a number", e.name));
        }
        let depth_theorems = e
            .depth_table
            .iter()
            .fold(0usize, |a, c| a.saturating_add(c.count));
        if !e.depth_table.is_empty() && depth_theorems != e.theorems {
            w.push(format!(
                "{}: the depth table counts {depth_theorems} theorems, the evaluation {}",
                e.name, e.theorems
            ));
        }
        if let Some(s) = e.novel_lemma_share {
            if !(0.0..=1.0).contains(&s) {
                w.push(format!(
                    "{}: novel lemma share {} lies outside [0, 1]",
                    e.name,
                    fixed(s, 3)
                ));
            }
        }
    }
    for m in &r.rounds {
        if m.globally_correct > m.locally_correct || m.locally_correct > m.nodes {
            w.push(format!(
                "round {}: expected globally correct ≤ locally correct ≤ nodes, got {} ≤ {} ≤ {}",
                m.round, m.globally_correct, m.locally_correct, m.nodes
            ));
        }
        for (name, v) in [
            ("sample_s", m.sample_s),
            ("check_s", m.check_s),
            ("train_s", m.train_s),
            ("filter_s", m.filter_s),
        ] {
            if !v.is_finite() || v < 0.0 {
                w.push(format!("round {}: {name} is not a valid duration", m.round));
            }
        }
    }
    w
}

/// Whether an evaluation carries the per-theorem and per-node details (run files written before
/// they existed do not).
pub fn has_details(e: &Evaluation) -> bool {
    !e.theorems_detail.is_empty()
        || e.node_outcomes.is_some()
        || !e.examples.is_empty()
        || e.use_invoke_share_root.is_some()
        || e.sampled_trees_height_ge1.is_some()
        || e.hammer.is_some()
        || e.hammer_leaves.is_some()
}

fn opt_count(x: Option<usize>) -> String {
    x.map_or_else(|| "n/a".to_string(), |n| n.to_string())
}

fn opt_depth(x: Option<u32>) -> String {
    x.map_or_else(|| "–".to_string(), |n| n.to_string())
}

/// The headline measures of one evaluation: how often the policy proposed lemmas at the root,
/// how many lemmas it proposed, and how many proved trees of height ≥ 1 it built on its own.
pub fn measures(e: &Evaluation) -> Vec<(String, String)> {
    let mut v = vec![
        (
            "<use_invoke> share of root samples".to_string(),
            opt_percent(e.use_invoke_share_root),
        ),
        (
            "Lemmas proposed (<invoke>)".to_string(),
            opt_count(e.proposals),
        ),
        (
            "Proved trees of height ≥ 1 built only from sampled nodes".to_string(),
            opt_count(e.sampled_trees_height_ge1),
        ),
    ];
    if e.lemmas_closed_by_hammer.is_some() {
        v.push((
            "Proposed lemmas closed by a sampled hammer. child".to_string(),
            opt_count(e.lemmas_closed_by_hammer),
        ));
    }
    if let Some(l) = &e.hammer_leaves {
        v.push(("Hammer leaves".to_string(), leaves_line(l)));
    }
    if let Some(h) = &e.hammer {
        v.push(("hammer. steps".to_string(), hammer_line(h)));
    }
    if let Some(o) = &e.node_outcomes {
        v.push((
            "Nodes".to_string(),
            format!(
                "{} ({}; {} globally correct)",
                o.nodes,
                o.classes()
                    .iter()
                    .map(|(k, n)| format!("{n} {k}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                o.globally_correct
            ),
        ));
    }
    v
}

/// What the hammer leaves did, in a line: leaves and those proved, then (evaluations) the
/// theorems proved without them and only with them.
pub fn leaves_line(l: &crate::model::HammerLeaves) -> String {
    let mut s = format!(
        "{} (one per distinct proposed lemma and tree), {} proved by the hammer",
        l.leaves, l.proved
    );
    if let (Some(a), Some(b)) = (l.theorems_without_leaves, l.theorems_only_with_leaves) {
        s.push_str(&format!(
            "; theorems proved without hammer leaves {a}, only with them {b}"
        ));
    }
    if let Some(t) = l.trees_with_leaves {
        s.push_str(&format!("; proved trees that needed a leaf {t}"));
    }
    if let Some(w) = &l.without {
        s.push_str(&format!(" (the trees without leaves: \u{201c}{w}\u{201d})"));
    }
    s
}

/// One phase's `hammer.` steps in a line.
pub fn hammer_line(h: &crate::model::HammerUse) -> String {
    if h.calls == 0 {
        return "none checked".to_string();
    }
    format!(
        "{} calls: {} closed by the fixed list ({} s), provers called {} times and closed {} ({} s); goals met before: {} closed again, {} failed again, {} remembered tactics refused",
        h.calls,
        h.fixed_closed,
        fixed(h.fixed_s, 1),
        h.atp_calls,
        h.atp_closed,
        fixed(h.atp_s, 1),
        h.cache_closed,
        h.cache_failed,
        h.cache_stale
    )
}

/// The hammer leaves per phase (each evaluation, each RL round that had them): leaves, those the
/// hammer proved, and the theorems proved without leaves and only with them. `None` when no
/// phase had leaves.
pub fn hammer_leaves(r: &RunReport) -> Option<Table> {
    let opt = |x: Option<usize>| x.map_or_else(|| "–".to_string(), |n| n.to_string());
    let mut rows = Vec::new();
    for e in &r.evaluations {
        if let Some(l) = &e.hammer_leaves {
            rows.push(vec![
                e.name.clone(),
                l.leaves.to_string(),
                l.proved.to_string(),
                opt(l.theorems_without_leaves),
                opt(l.theorems_only_with_leaves),
                opt(l.trees_with_leaves),
            ]);
        }
    }
    for m in &r.rounds {
        if let Some(l) = &m.hammer_leaves {
            rows.push(vec![
                format!("RL round {}", m.round),
                l.leaves.to_string(),
                l.proved.to_string(),
                opt(l.theorems_without_leaves),
                opt(l.theorems_only_with_leaves),
                opt(l.trees_with_leaves),
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let header = [
        "Phase",
        "Hammer leaves",
        "Proved by the hammer",
        "Theorems proved without leaves",
        "Theorems proved only with leaves",
        "Proved trees that needed a leaf",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Some(Table {
        header,
        rows,
        text_columns: 1,
    })
}

/// The `hammer.` steps per phase (each evaluation, each RL round): calls, how they were closed,
/// the per-goal memory's answers and the seconds in the fixed list and the provers. `None` when
/// no phase counted them.
pub fn hammer_phases(r: &RunReport) -> Option<Table> {
    let mut phases: Vec<(String, &crate::model::HammerUse)> = Vec::new();
    for e in &r.evaluations {
        if let Some(h) = &e.hammer {
            phases.push((e.name.clone(), h));
        }
    }
    for m in &r.rounds {
        if let Some(h) = &m.hammer {
            phases.push((format!("RL round {}", m.round), h));
        }
    }
    if phases.is_empty() {
        return None;
    }
    let header = [
        "Phase",
        "hammer. calls",
        "Fixed list closed",
        "Prover calls",
        "Provers closed",
        "Memory: closed again",
        "Memory: failed again",
        "Memory: refused",
        "Fixed list (s)",
        "Provers (s)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows = phases
        .into_iter()
        .map(|(name, h)| {
            vec![
                name,
                h.calls.to_string(),
                h.fixed_closed.to_string(),
                h.atp_calls.to_string(),
                h.atp_closed.to_string(),
                h.cache_closed.to_string(),
                h.cache_failed.to_string(),
                h.cache_stale.to_string(),
                fixed(h.fixed_s, 1),
                fixed(h.atp_s, 1),
            ]
        })
        .collect();
    Some(Table {
        header,
        rows,
        text_columns: 1,
    })
}

/// A comparison's pass@k rows: the method, the baseline and the paired difference.
pub fn comparison(c: &crate::compare::Comparison) -> Table {
    let header = vec![
        "k".to_string(),
        c.method.clone(),
        if c.baseline_single_attempt {
            format!("{} (one attempt: pass@k = pass@1)", c.baseline)
        } else {
            c.baseline.clone()
        },
        format!("Δ = {} − {} (paired 95% CI)", c.method, c.baseline),
        "Theorems paired".to_string(),
    ];
    let cell = |p: &Option<crate::model::PassAtK>| {
        p.as_ref().map_or_else(
            || "–".to_string(),
            |p| pass_cell(p.estimate, p.ci_low, p.ci_high),
        )
    };
    let rows = c
        .rows
        .iter()
        .map(|row| {
            let (delta, paired) = match &row.difference {
                Some(d) => (
                    format!(
                        "{:+.1} ({:+.1} to {:+.1})",
                        100.0 * d.estimate,
                        100.0 * d.ci_low,
                        100.0 * d.ci_high
                    ),
                    d.theorems.to_string(),
                ),
                None => ("–".to_string(), "0".to_string()),
            };
            vec![
                format!("pass@{}", row.k),
                cell(&row.method),
                cell(&row.baseline),
                delta,
                paired,
            ]
        })
        .collect();
    Table {
        header,
        rows,
        text_columns: 1,
    }
}

/// Who proved which theorem: the four counts.
pub fn comparison_counts(c: &crate::compare::Comparison) -> Table {
    let header = ["Proved by", "Theorems"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut rows = vec![
        vec!["both".to_string(), c.both.to_string()],
        vec![format!("{} only", c.method), c.method_only.to_string()],
        vec![format!("{} only", c.baseline), c.baseline_only.to_string()],
        vec!["neither".to_string(), c.neither.to_string()],
    ];
    if c.unpaired > 0 {
        rows.push(vec![
            "not judged by both (infrastructure)".to_string(),
            c.unpaired.to_string(),
        ]);
    }
    Table {
        header,
        rows,
        text_columns: 1,
    }
}

/// Per theorem proved by either side: trees proving it and whether the baseline proved it.
pub fn comparison_theorems(c: &crate::compare::Comparison) -> Table {
    let header = vec![
        "Theorem".to_string(),
        format!("{}: trees proving / judged", c.method),
        format!("{}: proved", c.baseline),
    ];
    let yes_no = |b: Option<bool>| match b {
        Some(true) => "yes",
        Some(false) => "no",
        None => "not judged",
    };
    let rows = c
        .theorems
        .iter()
        .filter(|t| t.method_proved() == Some(true) || t.baseline_proved() == Some(true))
        .map(|t| {
            vec![
                if t.name.is_empty() || t.name == t.id {
                    t.id.clone()
                } else {
                    format!("{} ({})", t.name, t.id)
                },
                format!("{} / {}", t.method_proved, t.method_trees),
                yes_no(t.baseline_proved()).to_string(),
            ]
        })
        .collect();
    Table {
        header,
        rows,
        text_columns: 1,
    }
}

/// One row per theorem: proved or not, where, by how deep a tree, and what its nodes did.
pub fn theorems(e: &Evaluation) -> Table {
    // Files relative to the directory they all share, and no file column at all when every id
    // already names its file (`Coq.Lists.List:12:app_nil_r`): the table fits a laptop screen.
    let dir = common_dir(e.theorems_detail.iter().map(|t| t.file.as_str()));
    let relative = |file: &str| file.strip_prefix(dir.as_str()).unwrap_or(file).to_string();
    let show_file = !e
        .theorems_detail
        .iter()
        .all(|t| id_names_file(&t.id, &relative(&t.file)));
    let mut header = vec!["Theorem".to_string()];
    if show_file {
        header.push(if dir.is_empty() {
            "File".to_string()
        } else {
            format!("File (in {})", dir.trim_end_matches('/'))
        });
    }
    header.extend(
        [
            "Proved",
            "Ground-truth depth",
            "Trees judged",
            "Trees proving",
            "First proving sample",
            "Proving depth (min–max)",
            "Nodes",
            "Locally correct",
        ]
        .map(String::from),
    );
    let rows = e
        .theorems_detail
        .iter()
        .map(|t| {
            let mut row = vec![theorem_label(t)];
            if show_file {
                row.push(relative(&t.file));
            }
            row.extend(theorem_counts(t));
            row
        })
        .collect();
    Table {
        header,
        rows,
        text_columns: if show_file { 3 } else { 2 },
    }
}

/// A theorem's name and id, once when the id ends in the name (`Coq.Lists.List:12:app_nil_r`).
fn theorem_label(t: &TheoremDetail) -> String {
    if t.name.is_empty() || t.name == t.id || t.id.ends_with(&format!(":{}", t.name)) {
        t.id.clone()
    } else {
        format!("{} ({})", t.name, t.id)
    }
}

/// Does `id` name the file `relative` (`QArith/Qcabs.v` in `Coq.QArith.Qcabs:14:Qcabs_null`)?
fn id_names_file(id: &str, relative: &str) -> bool {
    let stem = relative.rsplit_once('.').map_or(relative, |(s, _)| s);
    !stem.is_empty() && id.contains(&format!("{}:", stem.replace('/', ".")))
}

/// A theorem's row after its name and file: proved, depths, trees and nodes.
fn theorem_counts(t: &TheoremDetail) -> Vec<String> {
    let depth = match (t.proving_depth, t.deepest_proving_depth) {
        (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
        (a, b) => opt_depth(a.or(b)),
    };
    vec![
        if t.proved_trees > 0 { "yes" } else { "no" }.to_string(),
        opt_depth(t.ground_truth_depth),
        t.trees.to_string(),
        t.proved_trees.to_string(),
        t.first_proved_sample
            .map_or_else(|| "–".to_string(), |k| k.to_string()),
        depth,
        t.nodes.to_string(),
        t.locally_correct.to_string(),
    ]
}

/// The longest directory (ending in `/`) that every non-empty path of `files` lies under; empty
/// when there is none or only one file.
fn common_dir<'a>(files: impl Iterator<Item = &'a str>) -> String {
    let files: Vec<&str> = files.filter(|f| !f.is_empty()).collect();
    let Some((first, rest)) = files.split_first() else {
        return String::new();
    };
    if rest.is_empty() {
        return String::new();
    }
    let mut len = first.rfind('/').map_or(0, |i| i + 1);
    for f in rest {
        while len > 0 && !(f.len() > len && f.as_bytes()[..len] == first.as_bytes()[..len]) {
            len = first[..len - 1].rfind('/').map_or(0, |i| i + 1);
        }
    }
    first[..len].to_string()
}

/// The verdict kinds of all nodes, with their shares. Infra nodes are their own row, never
/// failures.
pub fn node_outcomes(e: &Evaluation) -> Option<Table> {
    let o = e.node_outcomes.as_ref()?;
    let header = ["Verdict", "Nodes", "Share"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut classes = o.classes();
    classes.push(("total", o.nodes));
    let rows = classes
        .iter()
        .map(|&(k, n)| {
            let k = if k == "infra" {
                "infra (no verdict)"
            } else {
                k
            };
            vec![k.to_string(), n.to_string(), percent(ratio(n, o.nodes))]
        })
        .collect();
    Some(Table {
        header,
        rows,
        text_columns: 1,
    })
}

/// The most common failure messages.
pub fn failures(e: &Evaluation) -> Option<Table> {
    let o = e.node_outcomes.as_ref()?;
    if o.top_failures.is_empty() {
        return None;
    }
    let header = ["Kind", "Message", "Nodes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows = o
        .top_failures
        .iter()
        .map(|f| vec![f.kind.clone(), f.message.clone(), f.count.to_string()])
        .collect();
    Some(Table {
        header,
        rows,
        text_columns: 2,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_id_that_names_its_file_makes_the_file_column_redundant() {
        assert!(super::id_names_file(
            "Coq.QArith.Qcabs:14:Qcabs_null",
            "QArith/Qcabs.v"
        ));
        assert!(super::id_names_file("Fix:0:t_add", "Fix.v"));
        assert!(!super::id_names_file("Fix:0:t_add", "Other.v"));
        assert!(!super::id_names_file("t1", ""));
    }

    #[test]
    fn files_are_shown_under_their_common_directory() {
        let d = |fs: &[&str]| super::common_dir(fs.iter().copied());
        assert_eq!(d(&["/a/b/c.v", "/a/b/d/e.v", ""]), "/a/b/");
        assert_eq!(d(&["/a/bc/x.v", "/a/bd/y.v"]), "/a/");
        assert_eq!(d(&["/a/b/c.v"]), "");
        assert_eq!(d(&["x.v", "y.v"]), "");
        assert_eq!(d(&["/a/b/c.v", "/a/b/c.v"]), "/a/b/");
        assert_eq!(d(&[]), "");
    }

    use super::sampling;

    #[test]
    fn sampling_settings_are_one_plain_line_naming_the_papers_values() {
        let demo = serde_json::json!({"sampling": {"temperature": 0.7, "top_p": 1.0,
            "max_new_tokens": 128, "context_tokens": 64, "first_token": "t0",
            "decode_weights": "q8", "seed": 0}});
        assert_eq!(
            sampling(&demo).unwrap(),
            "T = 0.7, top-p 1, 128 new tokens, last 64 context tokens (paper: 1,000), \
             first token t0 (forced to a t0 token), decoding weights q8"
        );
        let paper = serde_json::json!({"sampling": {"temperature": 1.0, "context_tokens": 1000,
            "first_token": "free"}});
        assert_eq!(
            sampling(&paper).unwrap(),
            "T = 1 (paper: 0.7), last 1000 context tokens, first token free"
        );
        assert_eq!(sampling(&serde_json::json!({"model": "m"})), None);
        assert_eq!(sampling(&serde_json::Value::Null), None);
    }
}
