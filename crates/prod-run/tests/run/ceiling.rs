//! The ceiling with the real Coq (the hammer's fixed tactic list; the provers off to keep the
//! suite quick): the dataset's ground truth at the root with hammer leaves, and the
//! ground-truth tree to depth 1, beside CoqHammer alone on the same theorems, paired, by
//! ground-truth depth; a theorem of depth 0 left out; a rerun resumes and checks nothing again.

use prod_library::dataset::Example;
use prod_run::ceiling::{run_ceiling_job, CeilingJob, ROOT_ROW};
use prod_run::{Bars, CoqJobConfig};

use crate::common;

/// `dbl` needs induction: the fixed list proves nothing about it that is not one unfolding.
const CONTEXT: &str = "From Coq Require Import Arith Lia.\nFixpoint dbl (n : nat) : nat := match n with 0 => 0 | S k => S (S (dbl k)) end.\n";

/// Each theorem's context ends in its own comment: contexts differ as a library's do (a lemma
/// proposed in one theorem's context is another goal than a theorem of the same statement).
fn example(name: &str, statement: &str, proof: &str, lemmas: &[&str], depth: u32) -> Example {
    Example {
        context: CONTEXT.into(),
        context_end: CONTEXT.len(),
        context_extra: format!("(* {name} *)\n"),
        depth,
        split: "test".into(),
        ..common::example(name, statement, proof, lemmas)
    }
}

const DBL_S: &str = "Lemma dbl_S : forall k : nat, dbl (S k) = S (S (dbl k)).";
const DBL_PLUS: &str = "Lemma dbl_plus : forall n : nat, dbl n = n + n.";

/// t_add through `aux` (the hammer closes both); dbl_plus by induction through `dbl_S` (a leaf
/// closes it; the hammer alone cannot do the induction); t_dbl2 through `dbl_plus` (its leaf
/// fails; its own human decomposition, one level down, proves it with dbl_S's leaf); t_zero
/// and aux of depth 0.
fn examples() -> Vec<Example> {
    let aux = "Lemma aux : forall m : nat, m + 0 = m.";
    vec![
        example(
            "t_add",
            "Lemma t_add : forall n : nat, n + 0 = n.",
            &format!("<use_invoke> <invoke> {aux} </invoke> intros n. apply aux."),
            &[aux],
            1,
        ),
        example(
            "dbl_plus",
            DBL_PLUS,
            &format!("<use_invoke> <invoke> {DBL_S} </invoke> intros n. induction n as [|k IH]; [reflexivity | rewrite dbl_S, IH; lia]."),
            &[DBL_S],
            1,
        ),
        example(
            "t_dbl2",
            "Lemma t_dbl2 : forall n : nat, dbl (dbl n) = 4 * n.",
            &format!("<use_invoke> <invoke> {DBL_PLUS} </invoke> intros n. rewrite !dbl_plus. lia."),
            &[DBL_PLUS],
            2,
        ),
        example("t_zero", "Lemma t_zero : 0 + 0 = 0.", "<no_invoke> reflexivity.", &[], 0),
        // aux's own human proof is flat: the tree row leaves it to its hammer leaf.
        example("aux", aux, "<no_invoke> intros m. lia.", &[], 0),
    ]
}

fn write_dataset(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let lines: Vec<String> = examples()
        .iter()
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    std::fs::write(dir.join("test.jsonl"), lines.join("\n") + "\n").unwrap();
    let src = serde_json::json!({"logical_path": "Fix", "file": "Fix.v", "package": "fixture", "flags": [], "source": CONTEXT, "reduced": CONTEXT});
    std::fs::write(dir.join("sources.jsonl"), src.to_string() + "\n").unwrap();
}

fn proved(e: &prod_run::prod_report::Evaluation) -> Vec<(String, usize)> {
    e.theorems_detail
        .iter()
        .map(|t| (t.name.clone(), t.proved_trees))
        .collect()
}

#[test]
fn the_ceiling_proves_through_the_ground_truth_beside_coqhammer_alone_and_resumes() {
    let mut cfg = prod_check_coq::CoqCheckConfig {
        workers: 1,
        ..Default::default()
    };
    cfg.hammer.use_atp = false;
    let probe = prod_check_coq::CoqChecker::new(cfg).expect("coq is installed");
    if !prod_test_support::require(
        probe.config().hammer.enabled,
        "CoqHammer is not installed (scripts/install-deps.sh)",
    ) {
        return;
    }
    drop(probe);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    write_dataset(&data);
    let job = CeilingJob {
        dataset: data,
        split: "test".into(),
        depth: 1,
        coq: CoqJobConfig {
            workers: 1,
            step_timeout_s: 5,
            hammer: true,
            hammer_atp: false,
            ..CoqJobConfig::default()
        },
        out: tmp.path().join("run"),
        hammer_cache: Some(tmp.path().join("hammer-cache.sqlite")),
        bootstrap: 200,
        final_timeout_s: 60,
        ..CeilingJob::default()
    };
    let (report, c) = run_ceiling_job(&job, &Bars::hidden()).unwrap();

    // t_zero (depth 0) is left out. At the root: t_add and dbl_plus; to depth 1 also t_dbl2;
    // CoqHammer alone t_add only.
    let names = |v: &[(&str, usize)]| -> Vec<(String, usize)> {
        v.iter().map(|(n, p)| (n.to_string(), *p)).collect()
    };
    assert_eq!(
        proved(&c.root.evaluation),
        names(&[("t_add", 1), ("dbl_plus", 1), ("t_dbl2", 0)])
    );
    let tree = c.tree.as_ref().expect("the second row");
    assert_eq!(
        proved(&tree.evaluation),
        names(&[("t_add", 1), ("dbl_plus", 1), ("t_dbl2", 1)])
    );
    assert_eq!(
        proved(&c.hammer.result.evaluation),
        names(&[("t_add", 1), ("dbl_plus", 0), ("t_dbl2", 0)])
    );
    assert_eq!(c.roots_correct, 3, "every human root is locally correct");
    // To depth 1: dbl_plus under t_dbl2 with its human decomposition; aux (its human proof
    // flat) and dbl_S under the theorem dbl_plus (no example) with their leaves only.
    assert_eq!(
        c.tree_lemmas,
        prod_run::ceiling::TreeLemmas {
            decomposed: 1,
            flat: 1,
            without_example: 1
        }
    );
    // The leaves: aux, dbl_S (closed) and dbl_plus (not) at the root.
    let l = c.root.evaluation.hammer_leaves.as_ref().expect("leaves");
    assert_eq!((l.leaves, l.proved), (3, 2));
    assert_eq!(
        (l.theorems_without_leaves, l.theorems_only_with_leaves),
        (Some(0), Some(2))
    );
    // Without its leaves the tree row proves nothing that needed the hammer: t_dbl2 needs
    // dbl_S's leaf too.
    let w = tree
        .without_leaves
        .as_ref()
        .expect("tree row without leaves");
    assert_eq!(
        w.theorems_detail
            .iter()
            .map(|t| t.proved_trees)
            .collect::<Vec<_>>(),
        [0, 0, 0]
    );

    // The report: the rows, the tree without leaves, CoqHammer alone; each row paired with it.
    let names: Vec<&str> = report.evaluations.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names[0], ROOT_ROW);
    assert_eq!(names.len(), 4);
    assert_eq!(names[3], prod_run::baseline::HAMMER_BASELINE);
    let root_vs = &report.comparisons[0];
    assert_eq!(
        (
            root_vs.both,
            root_vs.method_only,
            root_vs.baseline_only,
            root_vs.neither
        ),
        (1, 1, 0, 1)
    );
    let d = root_vs.rows[0]
        .difference
        .as_ref()
        .expect("paired difference");
    assert!((d.estimate - 1.0 / 3.0).abs() < 1e-12, "{d:?}");
    assert!(d.ci_low <= d.estimate && d.estimate <= d.ci_high);
    assert_eq!(report.comparisons[1].method_only, 2);
    // By ground-truth depth, paired: depth 1 (t_add, dbl_plus) and depth 2 (t_dbl2).
    let at = |prefix: &str| -> Vec<&String> {
        report
            .notes
            .iter()
            .filter(|n| n.starts_with(prefix))
            .collect()
    };
    let one = at("ground-truth depth 1: 2 theorems");
    assert_eq!(one.len(), 2, "{:?}", report.notes);
    assert!(one[0].contains("only by the first 1"), "{}", one[0]);
    let two = at("ground-truth depth 2: 1 theorems");
    assert!(two[0].contains("by neither 1") && two[1].contains("only by the first 1"));
    assert!(at("ground-truth depth 0").is_empty());
    assert!(report.notes[0].starts_with(
        "the ground truth at the root: 3 of 3 roots locally correct; CoqHammer closes 2 of their 3 lemmas; 2 of 3 theorems globally correct"
    ));
    for f in ["run.json", "report.html", "summary.md"] {
        assert!(job.out.join(f).is_file(), "{f}");
    }

    // Resumed: nothing checked again, the same figures.
    let (again_report, again) = run_ceiling_job(&job, &Bars::hidden()).unwrap();
    assert_eq!(again.root.times.checked_now, 0);
    assert_eq!(again.tree.as_ref().unwrap().times.checked_now, 0);
    assert_eq!(again.hammer.result.times.checked_now, 0);
    // The same figures; the hammer's counts are this invocation's (none ran).
    let unhammered = |r: &prod_run::prod_report::RunReport| {
        let mut v = r.evaluations.clone();
        v.iter_mut().for_each(|e| e.hammer = None);
        v
    };
    assert_eq!(unhammered(&again_report), unhammered(&report));
    assert_eq!(again_report.comparisons, report.comparisons);
    // Another split or depth is another job: refused, naming what differs.
    let other = CeilingJob {
        depth: 2,
        ..job.clone()
    };
    let Err(e) = run_ceiling_job(&other, &Bars::hidden()) else {
        panic!("another depth resumed the store");
    };
    assert!(format!("{e:#}").contains("depth"), "{e:#}");
}
