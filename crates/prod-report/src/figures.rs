//! The report's figures, each an SVG document of its own (inlined in the HTML, also written
//! beside it by `prod report`).

use crate::model::{Evaluation, RoundMetrics, RunReport};
use crate::svg::{Axis, Bar, BarChart, BarGroup, Format, LineChart, Point, Series};
use crate::tables::{
    all_k, depth_count, depth_name, depth_total, ground_truth_depths, labels, temperature_sweeps,
};
use crate::text::percent;

#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// File-name-safe identifier, e.g. `pass-at-k`, `depth`, `rounds-time`.
    pub id: String,
    pub title: String,
    /// One sentence on how to read it.
    pub caption: String,
    pub svg: String,
}

/// Every figure the report has data for, in report order.
pub fn figures(r: &RunReport) -> Vec<Figure> {
    let mut v = Vec::new();
    v.extend(pass_at_k(r));
    v.extend(depth(r));
    v.extend(temperature(r));
    v.extend(rounds(r));
    v
}

fn ci(p: &crate::model::PassAtK) -> Option<(f64, f64)> {
    Some((p.ci_low, p.ci_high))
}

/// pass@k against k (log2 axis), one line per evaluation, 95% CIs (bootstrap ∪ Wilson) as error bars.
pub fn pass_at_k(r: &RunReport) -> Option<Figure> {
    if r.evaluations.iter().all(|e| e.pass_at_k.is_empty()) {
        return None;
    }
    let evals: Vec<&Evaluation> = r.evaluations.iter().collect();
    let mut ks: Vec<f64> = all_k(&evals).into_iter().map(|k| k as f64).collect();
    if ks.len() > 12 {
        // Too many to label: powers of two only.
        ks.retain(|k| (*k as u64).is_power_of_two());
    }
    let names = labels(&r.evaluations);
    let series = r
        .evaluations
        .iter()
        .zip(names)
        .filter(|(e, _)| !e.pass_at_k.is_empty())
        .map(|(e, label)| Series {
            label,
            points: e
                .pass_at_k
                .iter()
                .filter(|p| p.k > 0)
                .map(|p| Point {
                    x: p.k as f64,
                    y: p.estimate,
                    ci: ci(p),
                })
                .collect(),
        })
        .collect();
    let chart = LineChart {
        title: "pass@k (95% CI)".to_string(),
        x: Axis {
            log2: true,
            ticks: Some(ks),
            ..Axis::new("k (samples per theorem)", Format::Integer)
        },
        y: Axis::share("pass@k"),
        series,
    };
    Some(Figure {
        id: "pass-at-k".to_string(),
        title: chart.title.clone(),
        caption: "Share of theorems proved by at least one of k proof trees (unbiased estimate from n samples per \
                  theorem); error bars: 95% confidence intervals over theorems (the hull of the bootstrap and Wilson's score interval, open at 0 and n)."
            .to_string(),
        svg: chart.render(),
    })
}

/// Paper Fig. 5: pass rate per ground-truth depth, stacked by the depth of the proving tree,
/// one bar per evaluation.
pub fn depth(r: &RunReport) -> Option<Figure> {
    let names = labels(&r.evaluations);
    let evals = with_depth_table(&r.evaluations, &names);
    if evals.is_empty() {
        return None;
    }
    let gts = ground_truth_depth_groups(&evals);
    let pds = proving_depth_segments(&evals);
    let groups = gts
        .iter()
        .map(|&g| BarGroup {
            label: depth_name(g),
            bars: evals
                .iter()
                .map(|&(i, e, name)| depth_bar(i, e, name, g, &pds))
                .collect(),
        })
        .collect();
    let chart = BarChart {
        title: "Pass rate by depth of the ground-truth proof (Fig. 5)".to_string(),
        x_label: "Depth of the ground-truth proof tree (bars: evaluations)".to_string(),
        y: Axis::share("pass rate"),
        segments: pds
            .iter()
            .map(|d| format!("proved by a proof tree of depth {d}"))
            .collect(),
        bar_legend: evals
            .iter()
            .map(|(i, _, name)| format!("{}: {name}", i + 1))
            .collect(),
        groups,
    };
    Some(Figure {
        id: "depth".to_string(),
        title: chart.title.clone(),
        caption: "Theorems grouped by the depth of their ground-truth proof; each bar is the share one evaluation \
                  proved, coloured by the depth of the proof tree that proved it."
            .to_string(),
        svg: chart.render(),
    })
}

/// The evaluations with a non-empty depth table (only those get a bar), each with its index
/// (the bar's number) and its label from `names`.
fn with_depth_table<'a>(
    evaluations: &'a [Evaluation],
    names: &'a [String],
) -> Vec<(usize, &'a Evaluation, &'a String)> {
    evaluations
        .iter()
        .zip(names.iter())
        .enumerate()
        .filter(|(_, (e, _))| e.depth_table.iter().any(|c| c.count > 0))
        .map(|(i, (e, n))| (i, e, n))
        .collect()
}

/// The ground-truth depths of all `evals`, each once, ascending with unknown last: the groups
/// of bars, in the order they are drawn.
fn ground_truth_depth_groups(evals: &[(usize, &Evaluation, &String)]) -> Vec<Option<u32>> {
    let mut gts: Vec<Option<u32>> = evals
        .iter()
        .flat_map(|(_, e, _)| ground_truth_depths(e))
        .collect();
    gts.sort_by_key(|g| (g.is_none(), g.unwrap_or(0)));
    gts.dedup();
    gts
}

/// The depths of the proving trees of all `evals`, each once, ascending: the bars' segments.
fn proving_depth_segments(evals: &[(usize, &Evaluation, &String)]) -> Vec<u32> {
    let mut pds: Vec<u32> = evals
        .iter()
        .flat_map(|(_, e, _)| crate::tables::proving_depths(e))
        .collect();
    pds.sort_unstable();
    pds.dedup();
    pds
}

/// The bar of evaluation number `i` in the group of ground-truth depth `g`: the share it
/// proved, one segment per proving depth in `pds`, with the counts in its tooltip.
fn depth_bar(i: usize, e: &Evaluation, name: &str, g: Option<u32>, pds: &[u32]) -> Bar {
    let total = depth_total(e, g);
    let share = |n: usize| {
        if total == 0 {
            0.0
        } else {
            n as f64 / total as f64
        }
    };
    let segments: Vec<f64> = pds
        .iter()
        .map(|&p| share(depth_count(e, g, Some(p))))
        .collect();
    let proved: usize = pds.iter().map(|&p| depth_count(e, g, Some(p))).sum();
    let by_depth: Vec<String> = pds
        .iter()
        .map(|&p| format!("depth {p}: {}", depth_count(e, g, Some(p))))
        .collect();
    Bar {
        label: (i + 1).to_string(),
        tooltip: format!(
            "{name}, ground-truth depth {}: proved {proved} of {total} ({}); {}",
            depth_name(g),
            percent(share(proved)),
            by_depth.join(", ")
        ),
        segments,
    }
}

/// pass@k against temperature, one line per k, for evaluations that differ only by temperature.
pub fn temperature(r: &RunReport) -> Vec<Figure> {
    temperature_sweeps(r)
        .into_iter()
        .enumerate()
        .map(|(gi, group)| {
            let ks = all_k(&group);
            let series = ks
                .iter()
                .map(|&k| Series {
                    label: format!("pass@{k}"),
                    points: group
                        .iter()
                        .filter_map(|e| {
                            let p = e.pass_at_k.iter().find(|p| p.k == k)?;
                            Some(Point {
                                x: e.temperature,
                                y: p.estimate,
                                ci: ci(p),
                            })
                        })
                        .collect(),
                })
                .collect();
            let first = group[0];
            let title = format!(
                "Temperature sweep: {} ({}, n = {})",
                first.name, first.split, first.samples_per_theorem
            );
            let chart = LineChart {
                title: title.clone(),
                x: Axis {
                    ticks: Some(group.iter().map(|e| e.temperature).collect()),
                    ..Axis::new("sampling temperature", Format::Number)
                },
                y: Axis::share("pass@k"),
                series,
            };
            Figure {
                id: format!("temperature-{}", gi + 1),
                title,
                caption:
                    "pass@k at each sampling temperature (error bars: 95% CIs, bootstrap ∪ Wilson)."
                        .to_string(),
                svg: chart.render(),
            }
        })
        .collect()
}

fn round_series(r: &RunReport, label: &str, f: impl Fn(&RoundMetrics) -> Option<f64>) -> Series {
    Series {
        label: label.to_string(),
        // Round 0 is the starting model's evaluation only: no training figures.
        points: r
            .rounds
            .iter()
            .filter(|m| !m.is_start())
            .map(|m| Point {
                x: m.round as f64,
                y: f(m).unwrap_or(f64::NAN),
                ci: None,
            })
            .collect(),
    }
}

fn has_values(s: &Series) -> bool {
    s.points.iter().any(|p| p.y.is_finite())
}

/// Held-out pass@k per round (round 0: the starting model), one line per k, 95% CIs.
fn round_eval_series(r: &RunReport) -> Vec<Series> {
    crate::tables::round_eval_ks(r)
        .into_iter()
        .map(|k| Series {
            label: format!("pass@{k}"),
            points: r
                .rounds
                .iter()
                .filter_map(|m| {
                    let p = m.eval.iter().flatten().find(|p| p.k == k)?;
                    Some(Point {
                        x: m.round as f64,
                        y: p.estimate,
                        ci: ci(p),
                    })
                })
                .collect(),
        })
        .collect()
}

/// Per-round curves: held-out pass@k, correct nodes, mean weight, losses, time per phase,
/// throughput, novel lemmas.
pub fn rounds(r: &RunReport) -> Vec<Figure> {
    if r.rounds.is_empty() {
        return Vec::new();
    }
    let mut figures = RoundFigures { r, out: Vec::new() };
    figures.learning();
    figures.costs_and_novelty();
    figures.out
}

/// [`rounds`]'s figures as they are drawn: the report, and the figures so far.
struct RoundFigures<'a> {
    r: &'a RunReport,
    out: Vec<Figure>,
}

impl RoundFigures<'_> {
    /// Adds a line chart over the rounds of those `series` that have values (none: no figure).
    fn push(&mut self, id: &str, title: &str, caption: &str, y: Axis, series: Vec<Series>) {
        let series: Vec<Series> = series.into_iter().filter(has_values).collect();
        if series.is_empty() {
            return;
        }
        let chart = LineChart {
            title: title.to_string(),
            x: Axis {
                ticks: None,
                ..Axis::new("round", Format::Integer)
            },
            y,
            series,
        };
        self.out.push(Figure {
            id: id.to_string(),
            title: title.to_string(),
            caption: caption.to_string(),
            svg: chart.render(),
        });
    }

    /// What the rounds learned: held-out pass@k, correct nodes, mean weight, losses.
    fn learning(&mut self) {
        let r = self.r;
        self.push(
            "rounds-eval",
            "Held-out pass@k per round",
            "pass@k of each round's checkpoint on the same held-out theorems with the same sampling seeds \
             (round 0: the starting model); error bars: 95% confidence intervals over theorems (the hull of the bootstrap and Wilson's score interval, open at 0 and n).",
            Axis::share("pass@k"),
            round_eval_series(r),
        );
        self.push(
            "rounds-correct",
            "Correct nodes per round",
            "Nodes of the round's train-time proof trees that were locally correct (their own proof checks) and \
             globally correct (every proposed lemma proved too).",
            Axis { zero_based: true, ..Axis::new("nodes", Format::Integer) },
            vec![
                round_series(r, "globally correct", |m| Some(m.globally_correct as f64)),
                round_series(r, "locally correct", |m| Some(m.locally_correct as f64)),
            ],
        );
        self.push(
            "rounds-weight",
            "Mean example weight per round",
            "Mean REINFORCE weight w = γ^h · ∏ V(lᵢ) over the round's training examples.",
            Axis {
                zero_based: true,
                ..Axis::new("mean weight", Format::Number)
            },
            vec![round_series(r, "mean weight", |m| m.mean_weight)],
        );
        self.push(
            "rounds-loss",
            "Training loss per round",
            "Weighted cross-entropy of the policy update, and the value model's loss where one is trained.",
            Axis { zero_based: true, ..Axis::new("loss", Format::Number) },
            vec![round_series(r, "policy loss", |m| m.loss), round_series(r, "value loss", |m| m.value_loss)],
        );
    }

    /// What the rounds cost (time per phase, sampling throughput) and the replay buffer's
    /// novel lemmas.
    fn costs_and_novelty(&mut self) {
        let r = self.r;
        self.push(
            "rounds-time",
            "Time per phase per round",
            "Wall-clock seconds spent sampling, checking, filtering lemma proposals and training in each round.",
            Axis { zero_based: true, ..Axis::new("seconds", Format::Number) },
            vec![
                round_series(r, "sample", |m| Some(m.sample_s)),
                round_series(r, "check", |m| Some(m.check_s)),
                round_series(r, "filter", |m| Some(m.filter_s)),
                round_series(r, "train", |m| Some(m.train_s)),
            ],
        );
        self.push(
            "rounds-throughput",
            "Sampling throughput per round",
            "Sampled tokens per second of the sampling phase (absent where the samples came from the log or a server).",
            Axis { zero_based: true, ..Axis::new("tokens/s", Format::Number) },
            vec![round_series(r, "tokens/s", |m| m.tokens_per_s)],
        );
        self.push(
            "rounds-novel",
            "Novel lemmas in the replay buffer",
            "Share of the replay buffer's lemmas that are not in the dataset (paper: 37.7%).",
            Axis::share("novel share"),
            vec![round_series(r, "novel lemma share", |m| {
                m.novel_lemma_share
            })],
        );
    }
}
