//! Data-driven tests: every `tests/data/NAME.json` is rendered; the Markdown summary must equal
//! `NAME.md` and each figure `NAME.FIGURE.svg` (refresh with `UPDATE_EXPECT=1 cargo test -p
//! prod-report`). Every SVG and the HTML must be well-formed with finite coordinates.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use prod_report::{
    figures, render_html, render_markdown, DepthCell, Evaluation, PassAtK, RoundMetrics, RunReport,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn update() -> bool {
    std::env::var_os("UPDATE_EXPECT").is_some()
}

fn expect(path: &Path, actual: &str) {
    if update() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("missing {}: run with UPDATE_EXPECT=1", path.display()));
    assert_eq!(
        actual,
        want,
        "output differs from {} (UPDATE_EXPECT=1 to refresh)",
        path.display()
    );
}

/// Well-formed, finite coordinates, and no non-number leaked into the text.
fn assert_valid_svg(svg: &str, what: &str) {
    let elements =
        common::check(svg).unwrap_or_else(|e| panic!("{what}: not well-formed: {e}\n{svg}"));
    assert_eq!(
        elements.first().map(|e| e.0.as_str()),
        Some("svg"),
        "{what}: root is <svg>"
    );
    common::check_numbers(&elements).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        !svg.contains("NaN") && !svg.contains("inf\"") && !svg.contains(">inf"),
        "{what}: non-finite number printed"
    );
}

fn assert_valid_html(html: &str, what: &str) {
    let elements =
        common::check(html).unwrap_or_else(|e| panic!("{what}: HTML not well-formed: {e}"));
    assert_eq!(elements.first().map(|e| e.0.as_str()), Some("html"));
    common::check_numbers(&elements).unwrap_or_else(|e| panic!("{what}: {e}"));
    // Self-contained: nothing is fetched and nothing runs.
    for bad in [
        "<script",
        "src=\"",
        "href=\"http",
        "<link",
        "@import",
        "url(",
    ] {
        assert!(!html.contains(bad), "{what}: HTML contains {bad}");
    }
}

#[test]
fn golden() {
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    inputs.sort();
    assert!(inputs.len() >= 4, "the fixtures are there");
    for input in inputs {
        let stem = input.file_stem().unwrap().to_string_lossy().to_string();
        let report = prod_report::parse(&std::fs::read_to_string(&input).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", input.display()));
        expect(
            &data_dir().join(format!("{stem}.md")),
            &render_markdown(&report),
        );
        let figs = figures(&report);
        let mut produced = BTreeSet::new();
        for f in &figs {
            assert_valid_svg(&f.svg, &format!("{stem}/{}", f.id));
            let name = format!("{stem}.{}.svg", f.id);
            expect(&data_dir().join(&name), &f.svg);
            produced.insert(name);
        }
        // No stale expectation: every NAME.*.svg on disk is still produced.
        for e in std::fs::read_dir(data_dir()).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            if name.starts_with(&format!("{stem}."))
                && name.ends_with(".svg")
                && !produced.contains(&name)
            {
                if update() {
                    std::fs::remove_file(data_dir().join(&name)).unwrap();
                } else {
                    panic!("{name} is no longer produced (UPDATE_EXPECT=1 removes it)");
                }
            }
        }
        let html = render_html(&report);
        assert_valid_html(&html, &stem);
        for f in &figs {
            assert!(
                html.contains(&f.svg),
                "{stem}: the HTML inlines figure {}",
                f.id
            );
        }
    }
}

fn load(name: &str) -> RunReport {
    prod_report::parse(&std::fs::read_to_string(data_dir().join(name)).unwrap()).unwrap()
}

#[test]
fn full_report_has_every_section_and_figure() {
    let r = load("full.json");
    let ids: Vec<String> = figures(&r).into_iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        [
            "pass-at-k",
            "depth",
            "temperature-1",
            "rounds-correct",
            "rounds-weight",
            "rounds-loss",
            "rounds-time",
            "rounds-novel"
        ]
    );
    let md = render_markdown(&r);
    assert!(
        md.contains("| ProD-RL round 3 | test | 0.7 | 16 | 227 | 20.3% (17.0–23.8) |"),
        "{md}"
    );
    // The temperature sweep groups the three SFT evaluations, and only them.
    assert!(md.contains("#### SFT w/o lemma proposal (test, n = 16)"));
    assert_eq!(md.matches("### Temperature sweep").count(), 1);
    // Round totals: time per phase summed.
    assert!(
        md.contains("| total | 703 |  | 3072 | 633 | 447 |  |  |  |  | 181.1 | 246.2 | 122.8 |"),
        "{md}"
    );
    // Infra-reduced theorem count is shown, not hidden.
    assert!(md.contains("17.0% (14.0–20.0), 225 judged"), "{md}");
    assert!(
        prod_report::warnings(&r).is_empty(),
        "{:?}",
        prod_report::warnings(&r)
    );
}

#[test]
fn serde_round_trip() {
    let r = load("full.json");
    let again: RunReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(again, r);
}

#[test]
fn hostile_names_are_escaped() {
    let r = load("hostile.json");
    let html = render_html(&r);
    assert!(
        !html.contains("<script"),
        "markup from the run file is escaped"
    );
    assert!(!html.contains("<svg onload"));
    assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(!html.contains('\u{0}') && !html.contains('\u{1b}'));
    assert!(
        !html.contains('\u{202e}'),
        "a right-to-left override cannot reorder the report"
    );
    for f in figures(&r) {
        assert_valid_svg(&f.svg, &f.id);
        assert!(!f.svg.contains("<script"));
    }
    let md = render_markdown(&r);
    // (The configuration is shown verbatim inside a code fence, where nothing is markup.)
    let prose = md.split("### Configuration").next().unwrap();
    for bad in ["<script", "<b>", "<svg", "<!--", "[link]"] {
        assert!(!unescaped(prose, bad), "{bad} is escaped in {prose}");
    }
    assert!(!md.contains('\u{0}') && !md.contains('\u{202e}'));
    // Every table row has exactly as many unescaped cell separators as its header.
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        let cols = |line: &str| {
            let b = line.as_bytes();
            (0..b.len())
                .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
                .count()
        };
        let lines: Vec<&str> = table.lines().collect();
        for l in &lines {
            assert_eq!(cols(l), cols(lines[0]), "row breaks the table: {l}");
        }
    }
    // The configuration cannot close its code fence early.
    assert!(md.contains("`````json\n"), "{md}");
    // Notes cannot start lists, headings or setext underlines.
    assert!(
        md.contains("- 1\\. numbered?") && md.contains("- \\=== setext"),
        "{md}"
    );
}

#[test]
fn evaluation_details_are_shown_and_escaped() {
    let r = load("details.json");
    let again: RunReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(again, r);
    let html = render_html(&r);
    expect(&data_dir().join("details.html"), &html);
    assert_valid_html(&html, "details");
    // Model output cannot inject markup: not a script, not the end of its <pre>.
    assert!(!html.contains("<script") && !html.contains("</pre><script"));
    assert!(html
        .contains("reflexivity. &lt;/pre&gt;&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"));
    assert!(html.contains("not a conditional proof: &lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("t_&lt;b&gt;false&lt;/b&gt;|x"));
    // The measures, the breakdown, the per-theorem table, the example trees.
    assert!(html.contains("<h2 id=\"details\">"));
    assert!(
        html.contains("<tr><th>&lt;use_invoke&gt; share of root samples</th><td>33.3%</td></tr>"),
        "{html}"
    );
    assert!(html
        .contains("<th>Proved trees of height ≥ 1 built only from sampled nodes</th><td>1</td>"));
    assert!(html.contains("<td>infra (no verdict)</td><td class=\"n\">1</td>"));
    // Every id names its file (`Fix:0:t_add` in `theories/Fix.v`): no file column.
    assert!(html.contains("<td>Fix:0:t_add</td><td>yes</td>"));
    assert!(!html.contains("<th>File"));
    assert!(html.contains(
        "<details class=\"tree\">\n<summary>proved with proposed lemmas: t_add (tree 1, proved, height 1)</summary>"
    ));
    assert!(html.contains(
        "<summary>not proved, with proposed lemmas: t_false (tree 0, not proved)</summary>"
    ));
    assert!(
        html.contains("<pre class=\"msg\">Coq: step 1: In environment\nm : nat\nUnable to unify")
    );
    assert!(html
        .contains("<pre>Lemma aux : forall m : nat, m + 0 = m.\nProof.\nintros m. lia.\nQed.\n"));
    assert!(html.contains("3 more nodes not shown."));

    let md = render_markdown(&r);
    assert!(
        md.contains("#### ProD-SFT details\n\n- \\<use\\_invoke\\> share of root samples: 33.3%\n"),
        "{md}"
    );
    assert!(md.contains("| infra (no verdict) | 1 | 10.0% |"), "{md}");
    assert!(
        md.contains(
            "| rejected | not a conditional proof: \\<script\\>alert(1)\\</script\\> | 1 |"
        ),
        "{md}"
    );
    assert!(md.contains("- proved with proposed lemmas: t\\_add (tree 1): proved, height 1; nodes: 3, proposed lemmas: 1"));
    // The assembled proof sits in a fence its own backticks cannot close.
    assert!(md.contains("````coq\nLemma aux"), "{md}");
    assert!(!unescaped(&md, "<script") && !unescaped(&md, "<b>"));
}

/// A run that recorded cuts: nodes the token limit cut are their own class in the summary line,
/// the breakdown bar and table (every node in exactly one class), and an example node says it
/// was cut; without the record (the golden `details.json`) there is no such class at all.
#[test]
fn cut_nodes_are_their_own_class_when_the_run_recorded_them() {
    let mut r = load("details.json");
    let before = render_html(&r);
    assert!(!before.contains("cut at the token limit"));
    let e = &mut r.evaluations[0];
    let o = e.node_outcomes.as_mut().unwrap();
    // Of the 10 nodes, 2 failed ones were cut: 5 proved, 0 failed, 1 rejected, 2 cut, ...
    o.failed -= 2;
    o.truncated = Some(2);
    let classes: usize = o.classes().iter().map(|(_, n)| n).sum();
    assert_eq!(classes, o.nodes);
    e.examples[0].nodes[0].truncated = true;
    let again: RunReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(again, r);
    let html = render_html(&r);
    assert_valid_html(&html, "cut");
    assert!(
        html.contains("<td>cut at the token limit</td><td class=\"n\">2</td>"),
        "{html}"
    );
    assert!(html.contains("10 (5 proved, 0 failed, 1 rejected, 2 cut at the token limit, 1 timed out, 1 infra; 4 globally correct)"), "{html}");
    assert!(
        html.contains("<title>cut at the token limit: 2</title>"),
        "{html}"
    );
    assert!(
        html.contains(" (cut at the token limit) \u{b7} global:"),
        "{html}"
    );
    let md = render_markdown(&r);
    assert!(
        md.contains("| cut at the token limit | 2 | 20.0% |"),
        "{md}"
    );
}

/// `pat` occurs in `md` without a backslash before it.
fn unescaped(md: &str, pat: &str) -> bool {
    md.match_indices(pat).any(|(i, _)| !md[..i].ends_with('\\'))
}

fn nan_report() -> RunReport {
    let bad = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        -f64::MAX,
        f64::MIN_POSITIVE,
    ];
    let evaluations = bad
        .iter()
        .enumerate()
        .map(|(i, &v)| Evaluation {
            name: format!("eval {i}"),
            split: "test".into(),
            temperature: v,
            samples_per_theorem: 4,
            theorems: 2,
            pass_at_k: vec![
                PassAtK {
                    k: 1,
                    estimate: v,
                    ci_low: v,
                    ci_high: v,
                    theorems_judged: 2,
                    theorems_skipped: 0,
                },
                PassAtK {
                    k: 2,
                    estimate: 0.5,
                    ci_low: v,
                    ci_high: 1.0,
                    theorems_judged: 2,
                    theorems_skipped: 0,
                },
                PassAtK {
                    k: 4,
                    estimate: 0.6,
                    ci_low: 0.4,
                    ci_high: 0.8,
                    theorems_judged: 2,
                    theorems_skipped: 0,
                },
            ],
            depth_table: vec![DepthCell {
                ground_truth_depth: Some(0),
                proving_depth: Some(0),
                count: usize::MAX,
            }],
            infra_nodes: 0,
            checked_nodes: 8,
            novel_lemma_share: Some(v),
            ..Default::default()
        })
        .collect();
    let rounds = bad
        .iter()
        .enumerate()
        .map(|(i, &v)| RoundMetrics {
            round: i as u32,
            examples: 1,
            mean_weight: Some(v),
            locally_correct: 1,
            globally_correct: 1,
            nodes: 1,
            sample_s: v,
            check_s: 1.0,
            train_s: v,
            loss: Some(v),
            value_loss: None,
            replay_size: 0,
            novel_lemma_share: Some(v),
            ..Default::default()
        })
        .collect();
    RunReport {
        title: "non-finite".into(),
        evaluations,
        rounds,
        ..Default::default()
    }
}

#[test]
fn non_finite_values_never_reach_the_svg() {
    let r = nan_report();
    let figs = figures(&r);
    assert!(figs.len() >= 5);
    for f in &figs {
        assert_valid_svg(&f.svg, &f.id);
    }
    let html = render_html(&r);
    assert_valid_html(&html, "non-finite");
    assert!(
        !html.contains("NaN") && !html.contains("inf<"),
        "text says n/a instead"
    );
    assert!(render_markdown(&r).contains("n/a"));
    assert!(
        !prod_report::warnings(&r).is_empty(),
        "bad values are reported"
    );
}

#[test]
fn empty_report_is_valid() {
    let r = RunReport::default();
    assert!(figures(&r).is_empty());
    let html = render_html(&r);
    assert_valid_html(&html, "empty");
    assert!(
        html.contains("No evaluations in this run.") && html.contains("No RL rounds in this run.")
    );
}

#[test]
fn conversions_from_the_estimator() {
    use prod_core::pass_at_k::{estimate, DepthTable, TheoremOutcome};
    let outcomes = [
        TheoremOutcome {
            samples: 4,
            correct: 1,
        },
        TheoremOutcome {
            samples: 4,
            correct: 0,
        },
        TheoremOutcome {
            samples: 1,
            correct: 1,
        },
    ];
    let e = estimate(
        &outcomes,
        2,
        prod_core::pass_at_k::Bootstrap {
            resamples: 200,
            seed: 1,
        },
    )
    .unwrap();
    let p = PassAtK::from_estimate(&e);
    assert_eq!((p.k, p.theorems_judged, p.theorems_skipped), (2, 2, 1));
    assert_eq!(
        (p.estimate, p.ci_low, p.ci_high),
        (e.estimate, e.ci_low, e.ci_high)
    );
    let mut t = DepthTable::default();
    t.add(Some(1), Some(0));
    t.add(Some(1), None);
    t.add(Some(1), Some(0));
    assert_eq!(
        DepthCell::from_table(&t),
        [
            DepthCell {
                ground_truth_depth: Some(1),
                proving_depth: None,
                count: 1
            },
            DepthCell {
                ground_truth_depth: Some(1),
                proving_depth: Some(0),
                count: 2
            },
        ]
    );
}

#[test]
fn bad_json_names_the_position() {
    let err = prod_report::parse("{\n  \"title\": \"x\",\n  \"evaluations\": [ {\"name\": 3} ]\n}")
        .unwrap_err();
    assert_eq!(err.line(), 3, "{err}");
    assert!(err.to_string().contains("line 3 column"), "{err}");
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            0.0..1.0f64,
            any::<f64>(),
        ]
    }

    fn evaluation() -> impl Strategy<Value = Evaluation> {
        (
            ".{0,40}",
            any_f64(),
            proptest::collection::vec((0usize..40, any_f64(), any_f64(), any_f64()), 0..6),
            proptest::collection::vec(
                (
                    proptest::option::of(0u32..5),
                    proptest::option::of(0u32..5),
                    0usize..50,
                ),
                0..8,
            ),
        )
            .prop_map(|(name, t, ps, cells)| Evaluation {
                name,
                split: "test".into(),
                temperature: t,
                samples_per_theorem: 16,
                theorems: 10,
                pass_at_k: ps
                    .into_iter()
                    .map(|(k, e, lo, hi)| PassAtK {
                        k,
                        estimate: e,
                        ci_low: lo,
                        ci_high: hi,
                        theorems_judged: 10,
                        theorems_skipped: 0,
                    })
                    .collect(),
                depth_table: cells
                    .into_iter()
                    .map(|(g, p, count)| DepthCell {
                        ground_truth_depth: g,
                        proving_depth: p,
                        count,
                    })
                    .collect(),
                infra_nodes: 0,
                checked_nodes: 0,
                novel_lemma_share: None,
                ..Default::default()
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn any_report_renders_valid_svg_and_html(
            title in ".{0,30}",
            evals in proptest::collection::vec(evaluation(), 0..4),
            rounds in proptest::collection::vec((0u32..30, any_f64(), proptest::option::of(any_f64())), 0..5),
            notes in proptest::collection::vec(".{0,30}", 0..3),
        ) {
            let rounds = rounds
                .into_iter()
                .map(|(round, s, loss)| RoundMetrics { round, sample_s: s, check_s: s, train_s: 1.0, loss, mean_weight: loss, ..Default::default() })
                .collect();
            let r = RunReport { title, evaluations: evals, rounds, notes, ..Default::default() };
            for f in figures(&r) {
                let elements = common::check(&f.svg).map_err(|e| TestCaseError::fail(format!("{}: {e}", f.id)))?;
                common::check_numbers(&elements).map_err(|e| TestCaseError::fail(format!("{}: {e}", f.id)))?;
            }
            let html = render_html(&r);
            common::check(&html).map_err(|e| TestCaseError::fail(format!("html: {e}")))?;
            let md = render_markdown(&r);
            prop_assert!(!unescaped(&md, "<"), "no raw markup in Markdown");
        }
    }
}

/// Held-out pass@k per round: round 0 (the starting model) and the trained rounds form one
/// curve per k with CIs and table columns; round 0 adds nothing to the training figures.
#[test]
fn rounds_held_out_eval_curve_and_columns() {
    use prod_report::PassAtK;
    let p = |k, e: f64| PassAtK {
        k,
        estimate: e,
        ci_low: e - 0.05,
        ci_high: e + 0.05,
        theorems_judged: 20,
        ..Default::default()
    };
    let rounds = (0u32..3)
        .map(|round| RoundMetrics {
            round,
            nodes: if round == 0 { 0 } else { 10 },
            sample_s: if round == 0 { 0.0 } else { 2.0 },
            filter_s: if round == 0 { 0.0 } else { 0.5 },
            tokens_per_s: (round > 0).then_some(120.0),
            eval: Some(vec![
                p(1, 0.1 + 0.1 * round as f64),
                p(4, 0.3 + 0.1 * round as f64),
            ]),
            eval_theorems: 20,
            ..Default::default()
        })
        .collect();
    let r = RunReport {
        title: "rl".into(),
        rounds,
        ..Default::default()
    };
    let figs = figures(&r);
    let eval = figs
        .iter()
        .find(|f| f.id == "rounds-eval")
        .expect("a held-out pass@k curve");
    assert!(eval.svg.contains("pass@1") && eval.svg.contains("pass@4"));
    assert!(figs.iter().any(|f| f.id == "rounds-throughput"));
    let md = render_markdown(&r);
    assert!(
        md.contains("Held-out pass@1")
            && md.contains("Held-out pass@4")
            && md.contains("Filter (s)"),
        "{md}"
    );
    assert!(md.contains("| 0 (start) |"), "{md}");
    assert!(md.contains("30.0% (25.0–35.0)"), "{md}");
    assert!(md.contains("| 120.0 |"), "{md}");
    assert!(
        prod_report::warnings(&r).is_empty(),
        "{:?}",
        prod_report::warnings(&r)
    );
}

/// What each round reinforced: per origin the weighted/all counts and Σw, the `<use_invoke>`
/// share of the weight (not of the count: weight-0 examples push nothing), and the held-out
/// roots' share; the starting model's row has only the latter.
#[test]
fn rounds_show_what_each_round_reinforced() {
    use prod_report::{ExampleTally, PassAtK, Reinforced};
    let mut rf = Reinforced::default();
    for i in 0..16 {
        rf.ground_truth.add(1.0, i < 10);
    }
    rf.generated.add(0.5, false);
    for _ in 0..37 {
        rf.generated.add(0.0, true);
    }
    assert_eq!(
        rf.generated,
        ExampleTally {
            examples: 38,
            weighted: 1,
            weight: 0.5,
            use_invoke_weight: 0.0
        }
    );
    // 10 of the 16.5 units of weight propose lemmas.
    assert!((rf.use_invoke_share().unwrap() - 10.0 / 16.5).abs() < 1e-12);
    assert_eq!(Reinforced::default().use_invoke_share(), None);
    let eval = Some(vec![PassAtK {
        k: 1,
        theorems_judged: 4,
        ..Default::default()
    }]);
    let rounds = vec![
        RoundMetrics {
            eval: eval.clone(),
            eval_use_invoke_share_root: Some(0.1),
            ..Default::default()
        },
        RoundMetrics {
            round: 1,
            nodes: 54,
            examples: 54,
            eval,
            eval_use_invoke_share_root: Some(0.25),
            reinforced: Some(rf),
            ..Default::default()
        },
    ];
    let r = RunReport {
        title: "rl".into(),
        rounds,
        ..Default::default()
    };
    let md = render_markdown(&r);
    assert!(md.contains("What each round reinforced"), "{md}");
    assert!(
        md.contains("| 0 (start) | – | – | – | – | n/a | 10.0% |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| 1 | 1/38, Σw 0.5 | 0/0, Σw 0.0 | 16/16, Σw 16.0 | 0/0, Σw 0.0 | 60.6% | 25.0% |"
        ),
        "{md}"
    );
    let html = render_html(&r);
    common::check(&html).unwrap();
    assert!(html.contains("&lt;use_invoke&gt; share of the weight"));
    // Without any round's record the table is left out.
    let mut old = r.clone();
    old.rounds.iter_mut().for_each(|m| m.reinforced = None);
    assert!(!render_markdown(&old).contains("What each round reinforced"));
}

#[test]
fn an_accepted_canary_is_a_banner_and_checked_canaries_a_line() {
    let mut r = RunReport {
        title: "canaries".into(),
        canaries: vec![prod_report::CanaryCheck {
            canaries: 3,
            nodes: 12,
            alarms: vec![],
        }],
        ..Default::default()
    };
    let html = prod_report::render_html(&r);
    assert_valid_html(&html, "canaries");
    assert!(html.contains("<th>Canaries</th><td>3 checked (12 nodes), 0 accepted</td>"));
    assert!(!html.contains("SOUNDNESS ALARM"));
    r.canaries[0].alarms.push(prod_report::CanaryAlarm {
        canary: "canary/false".into(),
        tree: 2,
        node: 41,
        what: "globally correct".into(),
        statement: "Lemma prod_canary_false : False.".into(),
        completion: "<no_invoke> exact <b>x</b>.".into(),
    });
    let html = prod_report::render_html(&r);
    assert_valid_html(&html, "alarm");
    assert!(html.contains("<div class=\"alarm\">") && html.contains("SOUNDNESS ALARM"));
    assert!(html.contains("canary/false (tree 2, node 41): globally correct"));
    assert!(html.contains("&lt;b&gt;x&lt;/b&gt;") && !html.contains("<b>x</b>"));
    let md = prod_report::render_markdown(&r);
    assert!(md.contains("**SOUNDNESS ALARM**") && md.contains("1 accepted"));
}

#[test]
fn a_method_against_coqhammer_alone_and_the_hammer_per_phase() {
    use prod_report::{HammerUse, TheoremDetail};
    let detail = |id: &str, trees: usize, proved: usize| TheoremDetail {
        id: id.into(),
        name: format!("{id}_name"),
        trees,
        proved_trees: proved,
        ..Default::default()
    };
    let p = |k: usize, e: f64| PassAtK {
        k,
        estimate: e,
        ci_low: 0.0,
        ci_high: e,
        theorems_judged: 3,
        theorems_skipped: 0,
    };
    let method = Evaluation {
        name: "<b>ProD</b>".into(),
        samples_per_theorem: 4,
        theorems: 3,
        pass_at_k: vec![p(1, 0.25), p(4, 1.0 / 3.0)],
        theorems_detail: vec![detail("a", 4, 1), detail("b", 4, 0), detail("c", 4, 0)],
        lemmas_closed_by_hammer: Some(2),
        hammer: Some(HammerUse {
            calls: 5,
            fixed_closed: 1,
            atp_calls: 2,
            atp_closed: 1,
            cache_closed: 1,
            cache_failed: 1,
            atp_s: 12.5,
            ..Default::default()
        }),
        ..Default::default()
    };
    let hammer = Evaluation {
        name: "CoqHammer alone".into(),
        samples_per_theorem: 1,
        theorems: 3,
        pass_at_k: vec![p(1, 2.0 / 3.0)],
        theorems_detail: vec![detail("a", 1, 1), detail("b", 1, 1), detail("c", 1, 0)],
        ..Default::default()
    };
    let c = prod_report::compare(
        &method,
        &hammer,
        &[1, 4],
        true,
        prod_core::pass_at_k::Bootstrap {
            resamples: 200,
            seed: 0,
        },
    );
    assert_eq!(
        (c.both, c.method_only, c.baseline_only, c.neither),
        (1, 0, 1, 1)
    );
    let r = RunReport {
        title: "vs hammer".into(),
        evaluations: vec![method, hammer],
        rounds: vec![RoundMetrics {
            round: 1,
            nodes: 3,
            hammer: Some(HammerUse {
                calls: 7,
                ..Default::default()
            }),
            ..Default::default()
        }],
        comparisons: vec![c],
        ..Default::default()
    };
    let again: RunReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(again, r);
    let html = render_html(&r);
    assert_valid_html(&html, "comparison");
    assert!(!html.contains("<b>ProD"), "names are escaped");
    assert!(
        html.contains("&lt;b&gt;ProD&lt;/b&gt; against CoqHammer alone</h2>"),
        "{html}"
    );
    // pass@4: ProD 33.3%, the hammer its pass@1 66.7%; per theorem a 1 vs 1, b 0 vs 1, c 0 vs
    // 0: Δ −33.3 points.
    assert!(
        html.contains("<td>pass@4</td><td class=\"n\">33.3% (0.0–33.3)</td><td class=\"n\">66.7% (0.0–66.7)</td><td class=\"n\">-33.3"),
        "{html}"
    );
    assert!(html.contains("<td>CoqHammer alone only</td><td class=\"n\">1</td>"));
    assert!(html.contains("<td>b_name (b)</td><td class=\"n\">0 / 4</td><td class=\"n\">yes</td>"));
    assert!(html.contains("hammer. steps per phase</h2>"));
    assert!(html.contains("<td>RL round 1</td><td class=\"n\">7</td>"));
    assert!(html.contains("<th>Proposed lemmas closed by a sampled hammer. child</th><td>2</td>"));
    let md = render_markdown(&r);
    assert!(
        md.contains("### \\<b\\>ProD\\</b\\> against CoqHammer alone"),
        "{md}"
    );
    assert!(
        md.contains("| pass@1 | 25.0% (0.0–25.0) | 66.7% (0.0–66.7) | -58.3"),
        "{md}"
    );
    assert!(
        md.contains("| \\<b\\>ProD\\</b\\> | 5 | 1 | 2 | 1 | 1 | 1 | 0 | 0.0 | 12.5 |"),
        "{md}"
    );
    assert!(!unescaped(&md, "<b>"));
}
