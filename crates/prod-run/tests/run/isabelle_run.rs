//! Evaluation (Algorithm 1) and ProD-RL rounds (Algorithm 2) on Isabelle through exactly the
//! run pipeline Coq uses: the theorems of a small AFP-like library (prod-library's `afp_mini`,
//! built into a dataset here), the prover bundle started from the job's settings, and a fake
//! Isabelle server that replays recorded replies of a real Isabelle2022 server (a check fails
//! where its theory says `WRONG`, and passes otherwise). What the fake cannot show — that a
//! real Isabelle accepts the generated theories — needs a real server (see
//! crates/prod-check-isabelle/README.md).
//!
//! Shown: proved trees through a proposed lemma, the assembled proof re-checked in a fresh
//! session, pass@k; and a resumed run (evaluation and RL) that checks nothing twice.

use std::path::Path;

use crate::common;

use prod_check::{CheckRequest, Checker, Progress, Verdict};
use prod_check_isabelle::testing::{Fake, PASSWORD};
use prod_check_isabelle::IsabelleCheckConfig;
use prod_library::dataset::{self, DatasetConfig};
use prod_library::isar::{AfpOptions, AfpSource, AfpSplit, EntrySelection};
use prod_rl::{Completion, PolicyError, SampleRequest};
use prod_run::{
    run_eval, Bars, CoqJobConfig, EvalOptions, FinalCheck, NativeParams, Phase, ProverChoice,
    ProverKind, RlConfig, RunStore, SeqPolicy,
};

fn afp_mini() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../prod-library/tests/data/afp_mini")
        .canonicalize()
        .expect("prod-library's afp_mini fixture")
}

/// The afp_mini dataset (holdout split: the `XML` entry is the test split) and a tiny random
/// model with a tokenizer trained on its text.
fn dataset(dir: &Path) {
    let src = AfpSource::load(
        &afp_mini(),
        AfpOptions {
            split: AfpSplit::Holdout,
            entries: EntrySelection::All,
        },
    )
    .expect("afp_mini loads");
    let cfg = DatasetConfig {
        threads: 1,
        context_bytes: 4096,
        ..Default::default()
    };
    dataset::build_from(&src, dir, &cfg, &|_, _| {}, std::time::Instant::now()).expect("build");
    let texts: Vec<String> = dataset::read_examples(&dir.join("rl.jsonl"))
        .unwrap()
        .into_iter()
        .map(|e| format!("{}\n{}\n{}", e.context, e.statement, e.conditional_proof))
        .collect();
    common::tiny_model(&dir.join("model"), &texts);
}

/// The fake server: `WRONG` in a theory is an error there; anything else is proved.
fn fake() -> Option<Fake> {
    prod_check_isabelle::testing::fails_where("WRONG")
}

fn isabelle(fake: &Fake, work: &Path) -> IsabelleCheckConfig {
    IsabelleCheckConfig {
        server: fake.addr.clone(),
        password: PASSWORD.into(),
        session: "HOL".into(),
        dirs: vec![afp_mini().join("thys").display().to_string()],
        work_dir: Some(work.to_path_buf()),
        max_attempts: 1,
        command_timeout_s: 5,
        attempt_timeout_s: 20,
        ..Default::default()
    }
}

/// `tag_main` is proved through a proposed lemma the first time it is asked and wrongly the
/// second; every `twice 1 = 2` (the proposed lemma, and `tag_helper`) by unfolding.
#[derive(Default)]
struct Scripted {
    main_asked: usize,
}

impl SeqPolicy for Scripted {
    fn sample_at(
        &mut self,
        requests: &[SampleRequest<'_>],
        _first_seq: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        Ok(requests
            .iter()
            .map(|r| {
                if r.statement.contains("twice 1 = 2") {
                    return "<no_invoke> by (simp add: twice_def)".to_string();
                }
                self.main_asked += 1;
                if self.main_asked == 1 {
                    "<use_invoke> <invoke> lemma one: \"twice 1 = 2\" </invoke> using one twice_0 by (metis add_0_right)".to_string()
                } else {
                    "<no_invoke> by (simp add: WRONG)".to_string()
                }
            })
            .map(Completion::ended)
            .collect())
    }

    fn p_use_invoke(&mut self, goals: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        Ok(vec![0.5; goals.len()])
    }
}

/// A policy, checker and final check that must not be asked anything (a resumed run).
struct Never;

impl SeqPolicy for Never {
    fn sample_at(
        &mut self,
        _: &[SampleRequest<'_>],
        _: u64,
    ) -> Result<Vec<Completion>, PolicyError> {
        panic!("a resumed run sampled again")
    }
    fn p_use_invoke(&mut self, _: &[(&str, &str)]) -> Result<Vec<f64>, PolicyError> {
        panic!("a resumed run sampled again")
    }
}

impl Checker for Never {
    fn prover(&self) -> &'static str {
        "isabelle"
    }
    fn fingerprint(&self) -> String {
        "never".into()
    }
    fn check_batch(&self, r: &[CheckRequest], _: Progress<'_>) -> Vec<Verdict> {
        assert!(
            r.is_empty(),
            "a resumed run checked {} nodes again",
            r.len()
        );
        vec![]
    }
}

impl FinalCheck for Never {
    fn final_check(&self, _: &prod_run::prover::FinalProof<'_>) -> (Verdict, String) {
        panic!("a resumed run re-checked an assembled proof again")
    }
}

fn use_theories(fake: &Fake) -> usize {
    fake.commands()
        .iter()
        .filter(|c| *c == "use_theories")
        .count()
}

#[test]
fn eval_on_isabelle_proves_through_a_lemma_and_resumes_without_checking_again() {
    let Some(fake) = fake() else { return };
    let (data, work, run) = (tempdir(), tempdir(), tempdir());
    dataset(data.path());
    let theorems = prod_run::load_theorems(data.path(), "test", None, 0).unwrap();
    assert_eq!(theorems.len(), 2);
    assert!(theorems[0].context.starts_with("theory Xml"));
    let cfg = isabelle(&fake, work.path());
    let coq = CoqJobConfig::default();
    let prover = ProverChoice {
        kind: ProverKind::Isabelle,
        coq: &coq,
        isabelle: Some(&cfg),
    }
    .start(
        data.path(),
        &run.path().join("cache.sqlite"),
        run.path(),
        None,
    )
    .expect("the fake server answers");
    assert_eq!(prover.name, "isabelle Isabelle2022");
    let opts = EvalOptions {
        ks: vec![1, 2],
        samples: 2,
        depth: 1,
        bootstrap: 100,
        final_timeout_s: 20,
        // Hammer leaves are Coq's.
        hammer_leaves: false,
        ..Default::default()
    };
    let store = RunStore::open_dir(run.path()).unwrap();
    let statements = Default::default();
    let first = run_eval(
        &prod_run::RunContext {
            store: &store,
            prover: prover.setup(),
            out: std::path::Path::new("."),
            bars: &Bars::hidden(),
            dataset_statements: &statements,
        },
        &mut Scripted::default(),
        &theorems,
        &opts,
        0,
        Phase::Eval,
    )
    .unwrap();
    // tag_helper in both trees; tag_main in the tree that proposed `one`.
    let per: std::collections::HashMap<&str, usize> = first
        .per_theorem
        .iter()
        .map(|(id, _, proved, _)| (id.rsplit(':').next().unwrap(), *proved))
        .collect();
    assert_eq!(per["tag_helper"], 2, "{:?}", first.per_theorem);
    assert_eq!(per["tag_main"], 1, "{:?}", first.per_theorem);
    let p1 = &first.evaluation.pass_at_k[0];
    assert_eq!((p1.k, p1.estimate), (1, 0.75));
    assert_eq!(first.evaluation.sampled_trees_height_ge1, Some(1));
    // Every proved tree was re-checked in a session of its own: three `session_stop`s.
    let commands = fake.commands();
    assert_eq!(commands.iter().filter(|c| *c == "session_stop").count(), 3);
    // The assembled proof of tag_main: the lemma with its proof, then the root, audited.
    let theories = fake.shared.lock().unwrap().theories.clone();
    let assembled = theories
        .iter()
        .find(|t| t.contains("lemma one: \"twice 1 = 2\"\n by (simp add: twice_def)"))
        .unwrap_or_else(|| panic!("the final check's theory in {theories:#?}"));
    assert!(assembled.contains("by (metis add_0_right)"), "{assembled}");
    assert!(!assembled.contains("by PRODCHK_admit_"), "{assembled}");
    // The theorems' contexts are Xml.thy's prefix: its header gave the imports (the body
    // before them is empty once the peeled lemma is gone).
    for t in &theories {
        assert!(t.contains("imports \"Base.Base_Thy\"\nbegin"), "{t}");
        assert!(!t.contains("theory Xml"), "{t}");
    }

    // Resumed: nothing sampled, checked or re-checked again; the same figures.
    let before = use_theories(&fake);
    let again = run_eval(
        &prod_run::RunContext {
            store: &store,
            prover: prod_run::CheckSetup {
                checker: &Never,
                lang: prover.lang,
                final_check: &Never,
            },
            out: run.path(),
            bars: &Bars::hidden(),
            dataset_statements: &statements,
        },
        &mut Never,
        &theorems,
        &opts,
        0,
        Phase::Eval,
    )
    .unwrap();
    assert_eq!(again.per_theorem, first.per_theorem);
    assert_eq!(again.evaluation.pass_at_k, first.evaluation.pass_at_k);
    assert_eq!(use_theories(&fake), before);
}

#[test]
fn rl_rounds_on_isabelle_from_the_config_and_resumed() {
    let Some(fake) = fake() else { return };
    let (data, work, run) = (tempdir(), tempdir(), tempdir());
    dataset(data.path());
    let cfg: RlConfig = RlConfig {
        model: data.path().join("model"),
        dataset: data.path().to_path_buf(),
        prover: ProverKind::Isabelle,
        isabelle: Some(isabelle(&fake, work.path())),
        rounds: 1,
        batch: 3,
        depth: 1,
        learning_rate: 1e-3,
        warmup_steps: 0,
        macro_batch: 8,
        micro_batch: 4,
        max_seq_len: 512,
        sampling: NativeParams {
            sampling: prod_core::Sampling {
                max_new_tokens: 8,
                ..prod_core::Sampling::default()
            },
            ..NativeParams::default()
        },
        ..RlConfig::default()
    };
    assert_eq!(cfg.trivial_tactic(), "using {lemma} by auto");
    let (report, records) = prod_run::run_rl_job(&cfg, run.path(), &Bars::hidden()).unwrap();
    assert_eq!(report.prover, "isabelle Isabelle2022");
    assert_eq!(records.len(), 1);
    // The ground truth joined level 0 and was checked by the (fake) Isabelle server.
    let checked = use_theories(&fake);
    assert!(checked > 0);
    assert!(records[0].metrics.examples > 0, "{:?}", records[0].metrics);
    assert!(run.path().join("checkpoints/round-1/config.json").is_file());
    // The same command again: the round is done, nothing is checked again.
    let (_, again) = prod_run::run_rl_job(&cfg, run.path(), &Bars::hidden()).unwrap();
    assert_eq!(again, records);
    assert_eq!(use_theories(&fake), checked);
    // A resumed run must be the same experiment: the prover is part of it.
    let coq = RlConfig {
        prover: ProverKind::Coq,
        isabelle: None,
        ..cfg
    };
    let err = prod_run::run_rl_job(&coq, run.path(), &Bars::hidden()).unwrap_err();
    assert!(
        format!("{err:#}").contains("different rl_config"),
        "{err:#}"
    );
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
