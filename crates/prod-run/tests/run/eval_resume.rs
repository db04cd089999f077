//! End to end with the real Coq checker: Algorithm 1 trees from a scripted policy (the model is
//! a test double; every check and the cold re-check are real Coq), pass@k, the depth table, and
//! kill-and-resume (killed during sampling, then during checking) giving the same result as an
//! uninterrupted run with nothing sampled or checked twice.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_rl::{Completion, PolicyError, SampleRequest};
use prod_run::{run_eval, Bars, CheckSetup, EvalOptions, Phase, RunStore, SeqPolicy, Theorem};

use crate::common;
use common::{Counting, SOURCE as CONTEXT};

/// Answers by statement and sequence number; panics after `die_after` fresh samples (a kill).
struct Scripted {
    asked: Vec<u64>,
    die_after: Option<usize>,
}

impl SeqPolicy for Scripted {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        let mut out = vec![];
        for (i, r) in requests.iter().enumerate() {
            let seq = first_seq + i as u64;
            if self.die_after.is_some_and(|d| self.asked.len() >= d) {
                panic!("killed during sampling");
            }
            self.asked.push(seq);
            let s = r.statement;
            let text = if s.contains("t_add") {
                match seq % 3 {
                    0 => "<use_invoke> <invoke> Lemma aux : forall m : nat, m + 0 = m. </invoke> intros n. apply aux.",
                    1 => "<no_invoke> intros n. lia.",
                    _ => "<no_invoke> reflexivity.",
                }
            } else if s.contains("aux") {
                // Depth 1: half right, half wrong; the forced `<no_invoke>` is put back by Algorithm 1.
                if seq.is_multiple_of(2) {
                    "<no_invoke> intros m. lia."
                } else {
                    "<no_invoke> intros m. reflexivity."
                }
            } else if s.contains("t_double") {
                "<no_invoke> intros n. unfold double. lia."
            } else {
                // t_false: unprovable; sometimes not even a conditional proof, because the
                // token limit cut it.
                if seq.is_multiple_of(2) {
                    "<no_invoke> reflexivity."
                } else {
                    out.push(Completion::cut("no t0 here"));
                    continue;
                }
            };
            out.push(Completion::ended(text));
        }
        Ok(out)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Ok(vec![0.5; goals.len()])
    }
}

fn theorems() -> Vec<Theorem> {
    let t = |id: &str, statement: &str, depth: u32| Theorem {
        id: id.into(),
        context: CONTEXT.into(),
        statement: statement.into(),
        ground_truth: None,
        depth: Some(depth),
        scope: vec![],
        qualified_name: id.into(),
        file: "Fix.v".into(),
    };
    vec![
        t("t_add", "Lemma t_add : forall n : nat, n + 0 = n.", 1),
        t(
            "t_double",
            "Lemma t_double : forall n : nat, double n = 2 * n.",
            0,
        ),
        t("t_false", "Lemma t_false : 1 = 2.", 0),
    ]
}

fn coq() -> (CoqChecker, CoqCheckConfig) {
    (common::coq(), common::coq_config())
}

fn opts() -> EvalOptions {
    EvalOptions {
        ks: vec![1, 2, 4],
        samples: 4,
        depth: 2,
        bootstrap: 200,
        final_timeout_s: 60,
        // The tests' checker has no hammer: no hammer leaves.
        hammer_leaves: false,
        ..Default::default()
    }
}

/// What the report shows beyond pass@k, on the reference run: every node in one verdict
/// bucket, the per-theorem table agreeing with pass@k's counts, the `<use_invoke>` share of
/// the roots, proved trees built through a proposed lemma, and the example trees.
fn check_details(r: &prod_run::EvalResult) {
    let e = &r.evaluation;
    let o = e.node_outcomes.as_ref().expect("node outcomes");
    assert_eq!(o.nodes, r.nodes);
    assert_eq!(
        o.proved + o.failed + o.rejected + o.truncated.unwrap_or(0) + o.timed_out + o.infra,
        o.nodes
    );
    assert_eq!(o.proved, r.locally_correct);
    assert_eq!(o.infra, 0);
    // Completions that are not conditional proofs are rejected before Coq sees them; here
    // they are all samples the token limit cut, which are counted as cut instead (through
    // the sample log, so a resumed run counts them alike).
    assert!(r.nodes > r.parsed_nodes);
    assert_eq!(o.truncated, Some(r.nodes - r.parsed_nodes));
    assert!(o.failed > 0 && !o.top_failures.is_empty());
    let listed: usize = o.top_failures.iter().map(|f| f.count).sum();
    assert!(listed <= o.failed + o.rejected);
    assert!(o.top_failures.iter().all(|f| !f.message.contains('\n')));

    // Theorems in order, agreeing with pass@k's per-theorem counts.
    let d = &e.theorems_detail;
    assert_eq!(d.len(), 3);
    for (t, (id, judged, proved, depth)) in d.iter().zip(&r.per_theorem) {
        assert_eq!(
            (&t.id, t.trees, t.proved_trees, t.proving_depth),
            (id, *judged, *proved, *depth)
        );
        assert_eq!(t.file, "Fix.v");
        assert!(t.locally_correct <= t.nodes);
    }
    let double = &d[1];
    assert_eq!(
        (
            double.first_proved_sample,
            double.proving_depth,
            double.nodes,
            double.locally_correct
        ),
        (Some(1), Some(0), 4, 4)
    );
    assert_eq!(
        (
            d[2].proved_trees,
            d[2].first_proved_sample,
            d[2].locally_correct
        ),
        (0, None, 0)
    );
    let nodes: usize = d.iter().map(|t| t.nodes).sum();
    assert_eq!(
        nodes, r.nodes,
        "every node belongs to one theorem's tree here"
    );

    // Only t_add's roots propose a lemma (`aux`), one each.
    let share = e.use_invoke_share_root.expect("root samples");
    let use_invoke = (share * 12.0).round() as usize;
    assert!(use_invoke >= 1 && (share * 12.0 - use_invoke as f64).abs() < 1e-9);
    assert_eq!(e.proposals, Some(use_invoke));
    // Trees of height 1 proved t_add through `aux`, all sampled.
    let deep = e.sampled_trees_height_ge1.expect("counted");
    assert_eq!(deep > 0, d[0].deepest_proving_depth == Some(1));

    let kinds: Vec<&str> = e.examples.iter().map(|x| x.kind.as_str()).collect();
    let flat = e
        .examples
        .iter()
        .find(|x| x.kind == "proved by a flat proof")
        .expect("a flat proof");
    assert!(flat.proved && flat.height == Some(0) && flat.nodes.len() == 1);
    assert!(flat
        .assembled_proof
        .as_deref()
        .is_some_and(|p| p.contains("Qed.")));
    if deep > 0 {
        let x = e
            .examples
            .iter()
            .find(|x| x.kind == "proved with proposed lemmas")
            .unwrap_or_else(|| panic!("{kinds:?}"));
        assert_eq!((x.theorem.as_str(), x.height), ("t_add", Some(1)));
        assert!(x.nodes[0].completion.starts_with("<use_invoke>") && x.nodes[0].lemmas.len() == 1);
        assert!(x.nodes[1..]
            .iter()
            .any(|n| n.depth == 1 && n.verdict == "proved" && n.global == "correct"));
        assert!(x
            .assembled_proof
            .as_deref()
            .is_some_and(|p| p.contains("aux") && p.contains("t_add")));
    }
    if let Some(x) = e
        .examples
        .iter()
        .find(|x| x.kind == "not proved, with proposed lemmas")
    {
        assert!(!x.proved && x.assembled_proof.is_none());
        assert!(x
            .nodes
            .iter()
            .any(|n| n.verdict != "proved" && !n.message.is_empty()));
    }
}

#[test]
fn eval_with_real_coq_resumes_after_kills_without_duplicates() {
    let (coq, cfg) = coq();
    let lang = prod_coq::CoqLanguage;
    let none = HashSet::new();
    let ths = theorems();

    // Uninterrupted reference run.
    let ref_dir = tempfile::tempdir().unwrap();
    let sent_ref = Mutex::new(vec![]);
    let reference = {
        let store = RunStore::open_dir(ref_dir.path()).unwrap();
        let checker = Counting {
            inner: &coq,
            sent: &sent_ref,
            die_after: None,
        };
        let setup = CheckSetup {
            checker: &checker,
            lang: &lang,
            final_check: &prod_run::CoqFinal(cfg.clone()),
        };
        let mut p = Scripted {
            asked: vec![],
            die_after: None,
        };
        run_eval(
            &prod_run::RunContext {
                store: &store,
                prover: setup,
                out: std::path::Path::new("."),
                bars: &Bars::hidden(),
                dataset_statements: &none,
            },
            &mut p,
            &ths,
            &opts(),
            0,
            Phase::Eval,
        )
        .unwrap()
    };
    let e = &reference.evaluation;
    // t_add: trees 0..4 get roots at seq (per level order) — proved by `lia` or via `aux`;
    // t_double always proved; t_false never. Every proved tree passed the cold coqc check.
    let proved: Vec<(String, usize, usize)> = reference
        .per_theorem
        .iter()
        .map(|(id, n, c, _)| (id.clone(), *n, *c))
        .collect();
    assert_eq!(proved[1], ("t_double".into(), 4, 4));
    assert_eq!(proved[2], ("t_false".into(), 4, 0));
    assert_eq!(proved[0].1, 4);
    assert!(
        proved[0].2 >= 1 && proved[0].2 < 4,
        "t_add proved in some but not all trees: {proved:?}"
    );
    let p1 = e.pass_at_k.iter().find(|p| p.k == 1).unwrap();
    let want = (proved[0].2 as f64 / 4.0 + 1.0 + 0.0) / 3.0;
    assert!(
        (p1.estimate - want).abs() < 1e-9,
        "{} vs {want}",
        p1.estimate
    );
    assert_eq!(e.infra_nodes, 0);
    // Depth table: t_double at (0, Some(0)), t_false at (0, None).
    assert!(e
        .depth_table
        .iter()
        .any(|c| c.ground_truth_depth == Some(0) && c.proving_depth == Some(0) && c.count == 1));
    assert!(e
        .depth_table
        .iter()
        .any(|c| c.ground_truth_depth == Some(0) && c.proving_depth.is_none() && c.count == 1));
    check_details(&reference);
    // No node was sent to Coq twice.
    let uniq: HashSet<_> = sent_ref.lock().unwrap().iter().cloned().collect();
    assert_eq!(uniq.len(), sent_ref.lock().unwrap().len());

    // Killed during sampling, then during checking, then finished.
    let dir = tempfile::tempdir().unwrap();
    let sent = Mutex::new(vec![]);
    let mut fresh_samples = vec![];
    let r = catch_unwind(AssertUnwindSafe(|| {
        let store = RunStore::open_dir(dir.path()).unwrap();
        let checker = Counting {
            inner: &coq,
            sent: &sent,
            die_after: None,
        };
        let setup = CheckSetup {
            checker: &checker,
            lang: &lang,
            final_check: &prod_run::CoqFinal(cfg.clone()),
        };
        let mut p = Scripted {
            asked: vec![],
            die_after: Some(9),
        };
        let r = run_eval(
            &prod_run::RunContext {
                store: &store,
                prover: setup,
                out: std::path::Path::new("."),
                bars: &Bars::hidden(),
                dataset_statements: &none,
            },
            &mut p,
            &ths,
            &opts(),
            0,
            Phase::Eval,
        );
        drop(r);
    }));
    assert!(r.is_err(), "the first run must have been killed");
    let store = RunStore::open_dir(dir.path()).unwrap();
    // Chunks (at most 8 requests, one level call) are committed as they finish.
    let committed = store.log_len(0, Phase::Eval).unwrap();
    assert!(
        committed > 0 && committed <= 9,
        "samples before the kill were committed: {committed}"
    );
    drop(store);
    let r = catch_unwind(AssertUnwindSafe(|| {
        let store = RunStore::open_dir(dir.path()).unwrap();
        let checker = Counting {
            inner: &coq,
            sent: &sent,
            die_after: Some(3),
        };
        let setup = CheckSetup {
            checker: &checker,
            lang: &lang,
            final_check: &prod_run::CoqFinal(cfg.clone()),
        };
        let mut p = Scripted {
            asked: vec![],
            die_after: None,
        };
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_eval(
                &prod_run::RunContext {
                    store: &store,
                    prover: setup,
                    out: std::path::Path::new("."),
                    bars: &Bars::hidden(),
                    dataset_statements: &none,
                },
                &mut p,
                &ths,
                &opts(),
                0,
                Phase::Eval,
            )
        }));
        let asked = p.asked.clone();
        (r, asked)
    }));
    let (inner, asked) = r.unwrap();
    assert!(
        inner.is_err(),
        "the second run must have been killed while checking"
    );
    fresh_samples.extend(asked);
    assert_eq!(sent.lock().unwrap().len(), 3);
    let store = RunStore::open_dir(dir.path()).unwrap();
    assert!(store.verdict_count().unwrap() >= 3);
    let checker = Counting {
        inner: &coq,
        sent: &sent,
        die_after: None,
    };
    let setup = CheckSetup {
        checker: &checker,
        lang: &lang,
        final_check: &prod_run::CoqFinal(cfg.clone()),
    };
    let mut p = Scripted {
        asked: vec![],
        die_after: None,
    };
    let resumed = run_eval(
        &prod_run::RunContext {
            store: &store,
            prover: setup,
            out: std::path::Path::new("."),
            bars: &Bars::hidden(),
            dataset_statements: &none,
        },
        &mut p,
        &ths,
        &opts(),
        0,
        Phase::Eval,
    )
    .unwrap();
    // Nothing sampled after the sampling phase completed. The first run committed requests
    // 0..committed before it died inside the next chunk: those are never asked again; only
    // the chunk in flight is.
    assert!(
        p.asked.is_empty(),
        "the finished run sampled again: {:?}",
        p.asked
    );
    assert_eq!(
        fresh_samples.first(),
        Some(&committed),
        "resume starts after the committed chunk"
    );
    let mut all = fresh_samples.clone();
    all.dedup();
    assert_eq!(
        all.len(),
        fresh_samples.len(),
        "a request was sampled twice"
    );
    // Nothing checked twice, and exactly what the uninterrupted run checked.
    let sent = sent.lock().unwrap().clone();
    let uniq: HashSet<_> = sent.iter().cloned().collect();
    assert_eq!(uniq.len(), sent.len(), "a node was checked twice");
    assert_eq!(
        uniq,
        sent_ref
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .collect::<HashSet<_>>()
    );
    assert_eq!(resumed.evaluation, reference.evaluation);
    assert_eq!(resumed.per_theorem, reference.per_theorem);
}

/// Answers by statement and by how often that statement was asked: `t_add` always proposes
/// `aux`, whose first proof is right and second wrong; `t_false` gets a failing proof, then
/// markup instead of a proof.
struct ByCount(HashMap<String, usize>);

impl SeqPolicy for ByCount {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        _first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        let mut out = vec![];
        for r in requests {
            let s = r.statement;
            let key = ["t_add", "aux", "t_double", "t_false"]
                .into_iter()
                .find(|k| s.contains(k))
                .unwrap_or("");
            let n = self.0.entry(key.to_string()).or_default();
            *n += 1;
            let text = match (key, *n) {
                ("t_add", _) => "<use_invoke> <invoke> Lemma aux : forall m : nat, m + 0 = m. </invoke> intros n. apply aux.",
                ("aux", 1) => "<no_invoke> intros m. lia.",
                ("aux", _) => "<no_invoke> intros m. reflexivity.",
                ("t_double", _) => "<no_invoke> intros n. unfold double. lia.",
                ("t_false", 1) => "<no_invoke> reflexivity.",
                _ => "</pre><script>alert('x')</script>",
            };
            out.push(Completion::ended(text));
        }
        Ok(out)
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Ok(vec![0.5; goals.len()])
    }
}

/// `theorems` evaluated with [`ByCount`] and real Coq: 2 trees each, depth 1.
fn eval_by_count(theorems: &[Theorem]) -> prod_run::EvalResult {
    let (coq, cfg) = coq();
    let lang = prod_coq::CoqLanguage;
    let dir = tempfile::tempdir().unwrap();
    let store = RunStore::open_dir(dir.path()).unwrap();
    let setup = CheckSetup {
        checker: &coq,
        lang: &lang,
        final_check: &prod_run::CoqFinal(cfg.clone()),
    };
    let opts = EvalOptions {
        ks: vec![1, 2],
        samples: 2,
        depth: 1,
        bootstrap: 50,
        final_timeout_s: 60,
        // The tests' checker has no hammer: no hammer leaves.
        hammer_leaves: false,
        ..Default::default()
    };
    run_eval(
        &prod_run::RunContext {
            store: &store,
            prover: setup,
            out: std::path::Path::new("."),
            bars: &Bars::hidden(),
            dataset_statements: &HashSet::new(),
        },
        &mut ByCount(HashMap::new()),
        theorems,
        &opts,
        0,
        Phase::Eval,
    )
    .unwrap()
}

/// A run that proves nothing and proposes no lemma still shows an example tree: one whose
/// root Coq refused, with Coq's message.
#[test]
fn eval_details_show_a_failed_tree_when_nothing_is_proved() {
    let only_false: Vec<Theorem> = theorems()
        .into_iter()
        .filter(|t| t.id == "t_false")
        .collect();
    let r = eval_by_count(&only_false);
    let e = &r.evaluation;
    assert_eq!(e.proposals, Some(0));
    let kinds: Vec<&str> = e.examples.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds, ["not proved"]);
    let x = &e.examples[0];
    assert_eq!((x.theorem.as_str(), x.proved), ("t_false", false));
    assert_eq!(x.nodes[0].verdict, "failed");
    assert!(!x.nodes[0].message.is_empty(), "{:?}", x.nodes[0]);
}

#[test]
fn eval_details_show_a_tree_built_through_a_proposed_lemma() {
    let r = eval_by_count(&theorems());
    let e = &r.evaluation;
    // Tree 0: t_add through a correct `aux` (height 1), t_double flat, t_false fails.
    // Tree 1: `aux` fails, so t_add is not proved; t_false's answer is not a proof.
    assert_eq!(
        r.per_theorem.iter().map(|p| p.2).collect::<Vec<_>>(),
        [1, 2, 0]
    );
    assert_eq!(e.use_invoke_share_root, Some(2.0 / 6.0));
    assert_eq!(e.proposals, Some(2));
    assert_eq!(e.sampled_trees_height_ge1, Some(1));
    let o = e.node_outcomes.as_ref().unwrap();
    assert_eq!(
        (
            o.nodes,
            o.proved,
            o.failed,
            o.rejected,
            o.timed_out,
            o.infra
        ),
        (8, 5, 2, 1, 0, 0)
    );
    // t_add (tree 0), aux (tree 0), t_double ×2.
    assert_eq!(o.globally_correct, 4);
    let add = &e.theorems_detail[0];
    assert_eq!(
        (
            add.first_proved_sample,
            add.proving_depth,
            add.nodes,
            add.locally_correct
        ),
        (Some(1), Some(1), 4, 3)
    );
    let kinds: Vec<&str> = e.examples.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "proved with proposed lemmas",
            "proved by a flat proof",
            "not proved, with proposed lemmas"
        ]
    );
    let deep = &e.examples[0];
    assert_eq!(
        (deep.theorem.as_str(), deep.tree, deep.height),
        ("t_add", 0, Some(1))
    );
    assert_eq!(deep.nodes.len(), 2);
    assert_eq!(
        (
            deep.nodes[1].depth,
            deep.nodes[1].verdict.as_str(),
            deep.nodes[1].global.as_str()
        ),
        (1, "proved", "correct")
    );
    let text = deep.assembled_proof.as_deref().unwrap();
    assert!(
        text.find("aux").unwrap() < text.find("t_add").unwrap(),
        "the lemma comes before the theorem: {text}"
    );
    let failed = &e.examples[2];
    assert_eq!((failed.theorem.as_str(), failed.tree), ("t_add", 1));
    assert_eq!(failed.nodes[1].verdict, "failed");
    assert!(
        failed.nodes[1].message.contains("Unable to unify"),
        "{:?}",
        failed.nodes[1]
    );
    assert!(o
        .top_failures
        .iter()
        .any(|f| f.kind == "failed" && f.message.starts_with("Unable to unify")));

    // The rendered report escapes the model's markup.
    let report = prod_run::prod_report::RunReport {
        title: "details".into(),
        evaluations: vec![e.clone()],
        ..Default::default()
    };
    let html = prod_run::prod_report::render_html(&report);
    assert!(
        !html.contains("<script"),
        "model output reached the HTML as markup"
    );
    assert!(html.contains("proved with proposed lemmas: t_add (tree 0, proved, height 1)"));
    let md = prod_run::prod_report::render_markdown(&report);
    assert!(
        md.contains("- Proved trees of height ≥ 1 built only from sampled nodes: 1"),
        "{md}"
    );
}
