//! End to end with the real Coq checker: Algorithm 1 trees from a scripted policy (the model is
//! a test double; every check and the cold re-check are real Coq), pass@k, the depth table, and
//! kill-and-resume (killed during sampling, then during checking) giving the same result as an
//! uninterrupted run with nothing sampled or checked twice.

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_rl::{PolicyError, SampleRequest};
use prod_run::{run_eval, Bars, CheckSetup, EvalOptions, RunStore, SeqPolicy, Theorem};

mod common;
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
    ) -> Result<Vec<String>, PolicyError> {
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
                // t_false: unprovable; sometimes not even a conditional proof.
                if seq.is_multiple_of(2) {
                    "<no_invoke> reflexivity."
                } else {
                    "no t0 here"
                }
            };
            out.push(text.to_string());
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
        ..Default::default()
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
            coq: &cfg,
            lang: &lang,
        };
        let mut p = Scripted {
            asked: vec![],
            die_after: None,
        };
        run_eval(
            &store,
            &mut p,
            &setup,
            &ths,
            &none,
            &opts(),
            0,
            "eval",
            &Bars::hidden(),
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
            coq: &cfg,
            lang: &lang,
        };
        let mut p = Scripted {
            asked: vec![],
            die_after: Some(9),
        };
        let r = run_eval(
            &store,
            &mut p,
            &setup,
            &ths,
            &none,
            &opts(),
            0,
            "eval",
            &Bars::hidden(),
        );
        drop(r);
    }));
    assert!(r.is_err(), "the first run must have been killed");
    let store = RunStore::open_dir(dir.path()).unwrap();
    // Chunks (at most 8 requests, one level call) are committed as they finish.
    let committed = store.log_len(0, "eval").unwrap();
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
            coq: &cfg,
            lang: &lang,
        };
        let mut p = Scripted {
            asked: vec![],
            die_after: None,
        };
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run_eval(
                &store,
                &mut p,
                &setup,
                &ths,
                &none,
                &opts(),
                0,
                "eval",
                &Bars::hidden(),
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
        coq: &cfg,
        lang: &lang,
    };
    let mut p = Scripted {
        asked: vec![],
        die_after: None,
    };
    let resumed = run_eval(
        &store,
        &mut p,
        &setup,
        &ths,
        &none,
        &opts(),
        0,
        "eval",
        &Bars::hidden(),
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
