//! The report's outline, written once: what a run report says, in which order, under which
//! headings, with which notes. `html.rs` and `markdown.rs` each turn these blocks into their
//! format, so a section added here appears in both; figures and collapsible parts are what
//! only HTML has, and a note's wording may differ where the formats quote differently.

use crate::figures::Figure;
use crate::model::{Evaluation, RunReport};
use crate::tables::{self, Table};

/// One piece of the report, in reading order.
pub(crate) enum Block<'a> {
    /// The run's settings (model, dataset, prover, sampling, …) as key–value lines.
    Meta(Vec<(String, String)>),
    /// Canaries the checker accepted: the run is not to be trusted.
    Alarm(Vec<String>),
    /// Values in the run file that cannot be right as given.
    Warnings(Vec<String>),
    /// A top-level section: its anchor id and heading (Markdown's may say more).
    Section {
        id: String,
        heading: String,
        md_heading: Option<&'static str>,
    },
    /// A comparison's section: a method against its baseline.
    Versus {
        id: String,
        method: String,
        baseline: String,
    },
    /// A heading inside a section.
    Sub(String),
    /// A temperature sweep's heading: its evaluation name, split and samples per theorem.
    SweepSub {
        name: String,
        split: String,
        samples: usize,
    },
    /// Plain text, escaped by each format.
    Para(String),
    /// Fixed text, already in each format (empty: that format has none here).
    Note {
        html: &'static str,
        md: &'static str,
    },
    Table(Table),
    /// The theorems either method proved: collapsible in HTML; in Markdown only while short.
    EitherProved(Table),
    /// A figure (HTML only).
    Figure(&'a Figure),
    /// One evaluation's measures, node breakdown, theorems and example trees.
    Details(&'a Evaluation),
    /// The run's notes, one item each.
    Notes(&'a [String]),
    /// The configuration as loaded (pretty JSON).
    Config(String),
}

const PASS_AT_K_HTML: &str = "<p>pass@k: unbiased estimator from n samples per theorem, in parentheses the 95% confidence \
     interval (percentage points; the hull of the bootstrap over theorems and Wilson's score interval, so it stays open at 0 and n). Theorems whose samples were lost to infrastructure failures are left out \
     (\u{201c}judged\u{201d}), never counted as failures.</p>\n";
const PASS_AT_K_MD: &str = "pass@k: unbiased estimator from n samples per theorem; in parentheses the 95% confidence \
     interval (percentage points; the hull of the bootstrap over theorems and Wilson's score interval, so it stays open at 0 and n). Theorems whose samples were lost to infrastructure failures are left \
     out (\"judged\"), never counted as failures.\n\n";
const HAMMER_HTML: &str = "<p>Fixed tactic list first, then the automated provers; a goal met before in the same environment is answered from the checker\u{2019}s per-goal memory (a remembered tactic is re-run by the prover, never trusted). Checks answered by the verification cache run no hammer.</p>\n";
const LEAVES_HTML: &str = "<p>Every distinct lemma a tree proposed also got a <code>&lt;no_invoke&gt; hammer.</code> node (never the root itself). A theorem counts as proved without leaves when some tree proved it with the policy\u{2019}s own nodes; the evaluation of the same trees without their leaves is its own row above, set against CoqHammer alone like the others.</p>\n";
const LEAVES_MD: &str = "Every distinct lemma a tree proposed also got a `<no_invoke> hammer.` node (never the root itself). A theorem counts as proved without leaves when some tree proved it with the policy's own nodes; the evaluation of the same trees without their leaves is its own row above.\n\n";
const REINFORCED_HTML: &str = "<h3>What each round reinforced</h3>\n<p>Training examples by origin: with weight &gt; 0 / all, and their summed weight Σw.</p>\n";
const REINFORCED_MD: &str = "What each round reinforced (training examples by origin: with weight > 0 / all, and their summed weight Σw):\n\n";

fn section(id: &str, heading: &str) -> Block<'static> {
    Block::Section {
        id: id.into(),
        heading: heading.into(),
        md_heading: None,
    }
}

/// The whole report as blocks; `figs` are the run's figures ([`crate::figures::figures`]).
pub(crate) fn outline<'a>(r: &'a RunReport, figs: &'a [Figure]) -> Vec<Block<'a>> {
    let fig = |id: &str| figs.iter().find(|f| f.id == id).map(Block::Figure);
    let mut out = vec![
        Block::Meta(tables::meta(r)),
        Block::Alarm(tables::canary_alarms(r)),
        Block::Warnings(tables::warnings(r)),
        section("evaluations", "Evaluations"),
    ];
    if r.evaluations.is_empty() {
        out.push(Block::Para("No evaluations in this run.".into()));
    } else {
        out.push(Block::Table(tables::evaluations(r)));
        out.push(Block::Note {
            html: PASS_AT_K_HTML,
            md: PASS_AT_K_MD,
        });
        out.extend(fig("pass-at-k"));
    }
    comparisons(r, &mut out);
    if let Some(t) = tables::hammer_leaves(r) {
        out.push(section("hammer-leaves", "Hammer leaves"));
        out.push(Block::Note {
            html: LEAVES_HTML,
            md: LEAVES_MD,
        });
        out.push(Block::Table(t));
    }
    if let Some(t) = tables::hammer_phases(r) {
        out.push(section("hammer", "hammer. steps per phase"));
        out.push(Block::Note {
            html: HAMMER_HTML,
            md: "",
        });
        out.push(Block::Table(t));
    }
    depth_tables(r, figs, &mut out);
    let with_details: Vec<&Evaluation> = r
        .evaluations
        .iter()
        .filter(|e| tables::has_details(e))
        .collect();
    if !with_details.is_empty() {
        out.push(section("details", "What the evaluation did"));
        out.extend(with_details.into_iter().map(Block::Details));
    }
    sweeps(r, figs, &mut out);
    rounds(r, figs, &mut out);
    if !r.notes.is_empty() {
        out.push(section("notes", "Notes"));
        out.push(Block::Notes(&r.notes));
    }
    if !r.config.is_null() {
        out.push(section("config", "Configuration"));
        let json = serde_json::to_string_pretty(&r.config).unwrap_or_default();
        out.push(Block::Config(json));
    }
    out
}

/// Each method against its baseline: the paired difference, the counts, who proved what.
fn comparisons<'a>(r: &'a RunReport, out: &mut Vec<Block<'a>>) {
    for (i, c) in r.comparisons.iter().enumerate() {
        out.push(Block::Versus {
            id: format!("comparison-{}", i + 1),
            method: c.method.clone(),
            baseline: c.baseline.clone(),
        });
        out.push(Block::Para(comparison_text(c)));
        out.push(Block::Table(tables::comparison(c)));
        out.push(Block::Table(tables::comparison_counts(c)));
        let t = tables::comparison_theorems(c);
        if !t.rows.is_empty() {
            out.push(Block::EitherProved(t));
        }
    }
}

/// Paper Fig. 5: proved theorems by the depth of their proof, per evaluation.
fn depth_tables<'a>(r: &'a RunReport, figs: &'a [Figure], out: &mut Vec<Block<'a>>) {
    let with_depth: Vec<&Evaluation> = r
        .evaluations
        .iter()
        .filter(|e| !e.depth_table.is_empty())
        .collect();
    if with_depth.is_empty() {
        return;
    }
    out.push(Block::Section {
        id: "depth".into(),
        heading: "Proved theorems by proof depth".into(),
        md_heading: Some("Proved theorems by proof depth (Fig. 5)"),
    });
    out.extend(figs.iter().find(|f| f.id == "depth").map(Block::Figure));
    for e in with_depth {
        out.push(Block::Sub(e.name.clone()));
        out.push(Block::Table(tables::depth(e)));
    }
}

/// pass@k against temperature, one table and plot per swept evaluation.
fn sweeps<'a>(r: &'a RunReport, figs: &'a [Figure], out: &mut Vec<Block<'a>>) {
    let sweeps = tables::temperature_sweeps(r);
    if sweeps.is_empty() {
        return;
    }
    out.push(section("temperature", "Temperature sweep"));
    for (i, g) in sweeps.iter().enumerate() {
        out.push(Block::SweepSub {
            name: g[0].name.clone(),
            split: g[0].split.clone(),
            samples: g[0].samples_per_theorem,
        });
        out.push(Block::Table(tables::sweep(g)));
        let id = format!("temperature-{}", i + 1);
        out.extend(figs.iter().find(|f| f.id == id).map(Block::Figure));
    }
}

/// ProD-RL's rounds: their measures, what each reinforced, the per-round curves.
fn rounds<'a>(r: &'a RunReport, figs: &'a [Figure], out: &mut Vec<Block<'a>>) {
    out.push(section("rounds", "RL rounds"));
    if r.rounds.is_empty() {
        out.push(Block::Para("No RL rounds in this run.".into()));
        return;
    }
    out.push(Block::Table(tables::rounds(r)));
    if let Some(t) = tables::reinforced(r) {
        out.push(Block::Note {
            html: REINFORCED_HTML,
            md: REINFORCED_MD,
        });
        out.push(Block::Table(t));
    }
    out.extend(
        figs.iter()
            .filter(|f| f.id.starts_with("rounds-"))
            .map(Block::Figure),
    );
}

/// What a comparison's table shows, in one paragraph.
fn comparison_text(c: &crate::model::Comparison) -> String {
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
