//! Differential tests of the `ProdAssumptions` plugin against Coq's own `Print Assumptions`,
//! on the real Coq: stdlib files re-checked in place, and hand-written unsafe cases.
//!
//! Outputs are compared byte for byte after removing Coq's `Fetching opaque proofs from disk
//! for M` notices (printed once per library by whichever command forces its proofs first).
//!
//! Figures: `cargo test -p prod-check-coq --test check_coq plugin:: -- --nocapture` prints the per-lemma
//! times of both commands (each includes one sentinel round trip, the same for both).

use crate::common;

use prod_check_coq::plugin;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use prod_check_coq::worker::Worker;
use prod_check_coq::CoqCheckConfig;

const LIMIT: Duration = Duration::from_secs(300);

/// Build once per test binary, into the cargo target dir (outside /tmp, like the checker).
fn plugin_paths() -> &'static plugin::PluginPaths {
    static P: OnceLock<plugin::PluginPaths> = OnceLock::new();
    P.get_or_init(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        let cfg = CoqCheckConfig {
            sandbox: false,
            ..Default::default()
        };
        let paths = plugin::ensure_built(&cfg, &target.join("prod-coq-plugin"))
            .unwrap_or_else(|e| panic!("plugin build failed: {e}"));
        match paths.build_time {
            Some(t) => eprintln!("plugin built in {:.2} s", t.as_secs_f64()),
            None => eprintln!("plugin reused from {}", paths.ml_path.display()),
        }
        paths
    })
}

/// A plain (unsandboxed) coqtop with the plugin loaded. The worker starts coqtop without extra
/// arguments, so the plugin's findlib directory is given through `OCAMLPATH`.
fn start() -> Worker {
    let p = plugin_paths();
    std::env::set_var("OCAMLPATH", &p.ml_path);
    let cfg = CoqCheckConfig {
        sandbox: false,
        memory_limit_mb: 6000,
        ..Default::default()
    };
    let mut w = Worker::start(&cfg).expect("coqtop starts");
    let r = w.run(p.declare_sentence, LIMIT).expect("declare");
    assert!(r.ok(), "cannot load the plugin: {}", r.output);
    w
}

fn strip_fetch(s: &str) -> String {
    const OPEN: &str = "<infomsg>";
    const CLOSE: &str = "</infomsg>";
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(OPEN) {
        let Some(j) = rest[i..].find(CLOSE) else {
            break;
        };
        let body = rest[i + OPEN.len()..i + j].trim();
        let end = i + j + CLOSE.len();
        if body.starts_with("Fetching opaque proofs from disk for ") && !body.contains('<') {
            out.push_str(&rest[..i]);
            rest = &rest[end..];
            rest = rest.strip_prefix('\n').unwrap_or(rest);
        } else {
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Both commands on `name`, `prod_first` choosing the order; returns (print, prod) outputs and
/// their times in ms.
fn both(w: &mut Worker, name: &str, prod_first: bool) -> ((String, f64), (String, f64)) {
    let mut q = |cmd: &str| {
        let r = w.run(&format!("{cmd} {name}."), LIMIT).expect("query");
        (strip_fetch(&r.output), r.elapsed.as_secs_f64() * 1000.0)
    };
    if prod_first {
        let b = q(plugin::PRINT_COMMAND);
        let a = q("Print Assumptions");
        (a, b)
    } else {
        let a = q("Print Assumptions");
        let b = q(plugin::PRINT_COMMAND);
        (a, b)
    }
}

fn same(w: &mut Worker, name: &str) -> String {
    for prod_first in [false, true] {
        let ((a, _), (b, _)) = both(w, name, prod_first);
        assert_eq!(a, b, "outputs differ for {name}");
    }
    let ((a, _), _) = both(w, name, false);
    assert!(!a.contains("Error"), "{name}: {a}");
    a
}

fn run_ok(w: &mut Worker, text: &str) -> u64 {
    let r = w.run(text, LIMIT).expect("sentence");
    assert!(r.ok(), "sentence failed: {text}\n{}", r.output);
    r.before
}

fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    (mean, v[v.len() / 2], v[v.len() - 1])
}

struct InPlace {
    compared: usize,
    /// First query of each lemma, right after its `Qed.` (memo warmed only by earlier lemmas).
    print_ms: Vec<(String, f64)>,
    prod_ms: Vec<(String, f64)>,
    /// As the checker's hot loop does: `BackTo` the state before the lemma, prove it again
    /// (a new kernel record under the same name), query again.
    recheck_print_ms: Vec<(String, f64)>,
    recheck_prod_ms: Vec<(String, f64)>,
}

/// Re-check a stdlib file sentence by sentence in one coqtop; after each `Qed.`/`Defined.`/
/// `Admitted.` of a theorem-like command, compare both commands on it.
fn in_place(file: &str) -> InPlace {
    let path = format!("/usr/lib/ocaml/coq/theories/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let lexed = prod_coq::lexer::sentences(&text);
    assert!(lexed.is_ok(), "{path}: {:?}", lexed.errors);
    let mut w = start();
    let mut res = InPlace {
        compared: 0,
        print_ms: vec![],
        prod_ms: vec![],
        recheck_print_ms: vec![],
        recheck_prod_ms: vec![],
    };
    let mut batch: Vec<String> = vec![];
    let mut current: Option<String> = None;
    // Index in `batch` of the current theorem's first sentence.
    let mut lemma_start: Option<usize> = None;
    let mut failed = 0;
    for s in &lexed.sentences {
        let sentence = s.text(&text);
        let head = prod_coq::sentence_head(sentence);
        if let Some(k) = head.keyword {
            if prod_coq::is_theorem_keyword(k) {
                current = head.body[k.len()..]
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\''))
                    .find(|w| !w.is_empty())
                    .map(str::to_string);
                lemma_start = Some(batch.len());
            }
        }
        // `Proof term.` does not close a proof in coqtop; run it as `exact`.
        let proof_term = (head.keyword == Some("Proof"))
            .then(|| {
                head.body["Proof".len()..]
                    .trim()
                    .trim_end_matches('.')
                    .trim()
            })
            .filter(|t| !t.is_empty() && !t.starts_with("using") && !t.starts_with("with"));
        let ends = match proof_term {
            Some(t) => {
                batch.push("Proof.".into());
                batch.push(format!("exact ({t})."));
                batch.push("Qed.".into());
                true
            }
            None => {
                batch.push(sentence.to_string());
                matches!(head.keyword, Some("Qed" | "Defined" | "Admitted"))
            }
        };
        if ends {
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            let replies = w.run_many(&refs, LIMIT).expect("batch");
            for (r, t) in replies.iter().zip(&batch) {
                if !r.ok() {
                    if failed == 0 {
                        eprintln!("{file}: first failed sentence {t:?}: {}", r.output.trim());
                    }
                    failed += 1;
                }
            }
            let last_ok = replies.last().is_some_and(|r| r.ok());
            let lemma: Vec<String> = match lemma_start.take() {
                Some(i) if i < batch.len() => batch[i..].to_vec(),
                _ => vec![],
            };
            let lemma_state = lemma_start_state(&replies, batch.len(), lemma.len());
            batch.clear();
            if let (true, Some(name)) = (last_ok, current.take()) {
                let prod_first = res.compared % 2 == 1;
                let ((a, ta), (b, tb)) = both(&mut w, &name, prod_first);
                assert_eq!(a, b, "{file}: outputs differ for {name}");
                assert!(!a.contains("Error") && !a.is_empty(), "{file}: {name}: {a}");
                res.print_ms.push((name.clone(), ta));
                res.prod_ms.push((name.clone(), tb));
                res.compared += 1;
                if let (Some(state), false) = (lemma_state, lemma.is_empty()) {
                    let r = w.run(&format!("BackTo {state}."), LIMIT).expect("BackTo");
                    assert_eq!(
                        r.prompt.state, state,
                        "{file}: BackTo {state}: {}",
                        r.output
                    );
                    let refs: Vec<&str> = lemma.iter().map(String::as_str).collect();
                    let replies = w.run_many(&refs, LIMIT).expect("re-check");
                    assert!(
                        replies.iter().all(|r| r.ok()),
                        "{file}: re-check of {name} failed"
                    );
                    let ((a2, ta), (b2, tb)) = both(&mut w, &name, !prod_first);
                    assert_eq!(a2, b2, "{file}: outputs differ for {name} (re-check)");
                    assert_eq!(a2, a, "{file}: {name}: re-check changed the answer");
                    res.recheck_print_ms.push((name.clone(), ta));
                    res.recheck_prod_ms.push((name, tb));
                }
            }
        }
    }
    eprintln!(
        "{file}: {} lemmas compared, {failed} sentences of the file failed in place",
        res.compared
    );
    res
}

/// The state before the lemma's first sentence (the last `lemma_len` of `batch_len` replies).
fn lemma_start_state(
    replies: &[prod_check_coq::worker::Reply],
    batch_len: usize,
    lemma_len: usize,
) -> Option<u64> {
    if lemma_len == 0 || replies.len() != batch_len {
        return None;
    }
    Some(replies[batch_len - lemma_len].before)
}

fn report(label: &str, r: &mut InPlace) {
    report_pass(
        &format!("{label} (first query after Qed)"),
        &r.print_ms,
        &r.prod_ms,
    );
    report_pass(
        &format!("{label} (re-check after BackTo, as the hot loop)"),
        &r.recheck_print_ms,
        &r.recheck_prod_ms,
    );
}

fn report_pass(label: &str, print_ms: &[(String, f64)], prod_ms: &[(String, f64)]) {
    if print_ms.is_empty() {
        return;
    }
    let mut a: Vec<f64> = print_ms.iter().map(|x| x.1).collect();
    let mut b: Vec<f64> = prod_ms.iter().map(|x| x.1).collect();
    let (am, amed, amax) = stats(&mut a);
    let (bm, bmed, bmax) = stats(&mut b);
    eprintln!(
        "{label}: n={} Print Assumptions mean {am:.3} / median {amed:.3} / max {amax:.3} ms; \
         ProdAssumptions mean {bm:.3} / median {bmed:.3} / max {bmax:.3} ms",
        print_ms.len()
    );
    let mut worst = print_ms.to_vec();
    worst.sort_by(|x, y| y.1.total_cmp(&x.1));
    for (name, t) in worst.iter().take(5) {
        let p = prod_ms
            .iter()
            .find(|x| &x.0 == name)
            .map_or(f64::NAN, |x| x.1);
        eprintln!("  {name}: Print {t:.2} ms, Prod {p:.2} ms");
    }
}

#[test]
fn stdlib_lists_in_place() {
    let _machine = common::shared_machine();
    let mut total = 0;
    let mut r = in_place("Lists/List.v");
    total += r.compared;
    report("Lists/List.v", &mut r);
    assert!(
        r.compared >= 150,
        "only {} List.v lemmas compared",
        r.compared
    );
    for f in ["Sorting/Permutation.v", "Lists/ListDec.v"] {
        let mut r = in_place(f);
        total += r.compared;
        report(f, &mut r);
    }
    eprintln!("total compared: {total}");
}

#[test]
fn stdlib_modules_and_axioms_in_place() {
    let _machine = common::shared_machine();
    // PeanoNat: module Nat built by Include of functors; Classical_Prop / ClassicalFacts:
    // axioms and section hypotheses; Eqdep_dec: Defined lemmas.
    for f in [
        "Arith/PeanoNat.v",
        "Logic/Classical_Prop.v",
        "Logic/ClassicalFacts.v",
        "Logic/Eqdep_dec.v",
    ] {
        let mut r = in_place(f);
        assert!(r.compared > 5, "{f}: only {} compared", r.compared);
        report(f, &mut r);
    }
}

/// A fresh cache directory gets a build; the second call reuses it (same paths, no build).
#[test]
fn build_is_cached() {
    let _machine = common::shared_machine();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    std::fs::create_dir_all(&target).expect("target dir");
    let dir = tempfile::tempdir_in(&target).expect("temp dir");
    // Built as the checker builds it: inside the sandbox, by the prover's own toolchain.
    let cfg = CoqCheckConfig::default();
    let first = plugin::ensure_built(&cfg, dir.path()).expect("build");
    let t = first.build_time.expect("a fresh directory needs a build");
    eprintln!("fresh plugin build: {:.2} s", t.as_secs_f64());
    assert!(first.cmxs.is_file());
    assert!(first
        .ml_path
        .join(plugin::FINDLIB_PACKAGE)
        .join("META")
        .is_file());
    let second = plugin::ensure_built(&cfg, dir.path()).expect("reuse");
    assert_eq!(second.build_time, None);
    assert_eq!(second.cmxs, first.cmxs);
    // Nothing but the finished build is left behind.
    let entries = std::fs::read_dir(dir.path()).expect("list").count();
    assert_eq!(entries, 1);
}

#[test]
fn repeated_calls_use_the_memo() {
    let _machine = common::shared_machine();
    let mut w = start();
    run_ok(&mut w, "Require Import List Arith.");
    for name in [
        "List.nth_split",
        "List.NoDup_nth",
        "List.firstn_skipn_rev",
        "List.count_occ_repeat_excl",
    ] {
        // Force the opaque proofs once so both commands see warm .vo tables.
        let _ = w
            .run(&format!("Print Assumptions {name}."), LIMIT)
            .expect("q");
        let mut t = vec![];
        for _ in 0..3 {
            let r = w
                .run(&format!("{} {name}.", plugin::PRINT_COMMAND), LIMIT)
                .expect("q");
            t.push(r.elapsed.as_secs_f64() * 1000.0);
        }
        let r = w
            .run(&format!("Print Assumptions {name}."), LIMIT)
            .expect("q");
        eprintln!(
            "{name}: ProdAssumptions 1st {:.2} ms, 2nd {:.2} ms, 3rd {:.2} ms; Print Assumptions {:.2} ms",
            t[0],
            t[1],
            t[2],
            r.elapsed.as_secs_f64() * 1000.0
        );
    }
    let r = w.run("ProdAssumptionsStats.", LIMIT).expect("stats");
    eprintln!("{}", r.output.trim());
    assert!(r.output.contains("hits"), "{}", r.output);
}

/// Hand-written cases: every kind of assumption `Print Assumptions` reports.
#[test]
fn unsafe_cases_agree() {
    let _machine = common::shared_machine();
    let mut w = start();
    let check = |w: &mut Worker, sentences: &[&str], name: &str, must: &[&str]| {
        for s in sentences {
            run_ok(w, s);
        }
        let out = same(w, name);
        for m in must {
            assert!(out.contains(m), "{name}: expected {m:?} in\n{out}");
        }
        out
    };
    // Axioms and parameters.
    check(
        &mut w,
        &[
            "Axiom ax1 : forall n : nat, n = 0.",
            "Parameter p : nat.",
            "Lemma l1 : p = 0.",
            "Proof.",
            "apply ax1.",
            "Qed.",
        ],
        "l1",
        &["Axioms:", "ax1 :", "p : nat"],
    );
    // Admitted lemmas, through transparent and opaque intermediates, and `abstract`.
    check(
        &mut w,
        &[
            "Lemma adm : 1 = 2.",
            "Admitted.",
            "Definition tdef : 1 = 2 := adm.",
            "Lemma odef : 1 = 2.",
            "Proof.",
            "exact adm.",
            "Qed.",
            "Lemma l2 : (1 = 2 /\\ 1 = 2) /\\ True.",
            "Proof.",
            "split; [split; [exact tdef | exact odef] | exact I].",
            "Qed.",
        ],
        "l2",
        &["adm : 1 = 2"],
    );
    check(
        &mut w,
        &[
            "Lemma l2b : 1 = 2 /\\ True.",
            "Proof.",
            "split.",
            "abstract (apply adm).",
            "abstract exact I.",
            "Qed.",
        ],
        "l2b",
        &["adm"],
    );
    // Guard checking off.
    check(
        &mut w,
        &[
            "Unset Guard Checking.",
            "Fixpoint bad (n : nat) : False := bad n.",
            "Set Guard Checking.",
            "Lemma l3 : False.",
            "Proof.",
            "exact (bad 0).",
            "Qed.",
        ],
        "l3",
        &["bad is assumed to be guarded."],
    );
    check(
        &mut w,
        &[
            "#[bypass_check(guard)] Fixpoint bad2 (n : nat) : False := bad2 n.",
            "Lemma l3b : False.",
            "Proof.",
            "exact (bad2 0).",
            "Qed.",
        ],
        "l3b",
        &["bad2 is assumed to be guarded."],
    );
    // Positivity checking off.
    check(
        &mut w,
        &[
            "Unset Positivity Checking.",
            "Inductive Neg := mkNeg : (Neg -> False) -> Neg.",
            "Set Positivity Checking.",
            "Lemma l4 : (Neg -> False) -> Neg.",
            "Proof.",
            "exact mkNeg.",
            "Qed.",
        ],
        "l4",
        &["Neg is assumed to be positive."],
    );
    // Queries on an inductive and a constructor, and from inside an open proof.
    check(&mut w, &[], "Neg", &["Neg is assumed to be positive."]);
    check(&mut w, &[], "mkNeg", &["Neg is assumed to be positive."]);
    check(
        &mut w,
        &["Goal True."],
        "l4",
        &["Neg is assumed to be positive."],
    );
    run_ok(&mut w, "Abort.");
    // Universe checking off.
    check(
        &mut w,
        &[
            "Unset Universe Checking.",
            "Definition tt' := Type : Type.",
            "Set Universe Checking.",
            "Lemma l5 : tt' = tt'.",
            "Proof.",
            "reflexivity.",
            "Qed.",
        ],
        "l5",
        &["relies on an unsafe hierarchy."],
    );
    // While universe checking is off, the printer adds the collapsed-hierarchy line.
    run_ok(&mut w, "Unset Universe Checking.");
    let out = same(&mut w, "l5");
    assert!(out.contains("Type hierarchy is collapsed"), "{out}");
    run_ok(&mut w, "Set Universe Checking.");
    // Empty match on an axiom of an empty type: the `used in … to prove` lists.
    check(
        &mut w,
        &[
            "Axiom f : False.",
            "Lemma l6 : 1 = 2.",
            "Proof.",
            "exact (match f with end).",
            "Qed.",
            "Definition l6b : 2 = 3 := match f return 2 = 3 with end.",
            "Lemma l6c : 1 = 2 /\\ 2 = 3.",
            "Proof.",
            "split; [exact l6 | exact l6b].",
            "Qed.",
        ],
        "l6c",
        &["used in l6 to prove", "used in l6b to prove"],
    );
    // Section variables, hypotheses and Let.
    check(
        &mut w,
        &[
            "Section S.",
            "Variable A : Type.",
            "Hypothesis H : A.",
            "Let lv : 1 = 2 := adm.",
            "Lemma l7 : A * (1 = 2).",
            "Proof.",
            "exact (H, lv).",
            "Qed.",
        ],
        "l7",
        &["Section Variables:", "adm"],
    );
    run_ok(&mut w, "End S.");
    check(&mut w, &[], "l7", &["adm"]);
    // Inductive whose constructor type mentions an admitted lemma.
    check(
        &mut w,
        &[
            "Inductive Ti : Type := ti : tdef = tdef -> Ti.",
            "Lemma l8 : Ti.",
            "Proof.",
            "exact (ti eq_refl).",
            "Qed.",
        ],
        "l8",
        &["adm"],
    );
    // Library axioms.
    check(
        &mut w,
        &[
            "Require Import Classical.",
            "Lemma l9 : forall P : Prop, ~ ~ P -> P.",
            "Proof.",
            "exact NNPP.",
            "Qed.",
        ],
        "l9",
        &["classic"],
    );
    // Universe polymorphism.
    check(
        &mut w,
        &[
            "Polymorphic Lemma pl@{u} (T : Type@{u}) (x : T) : x = x /\\ 1 = 2.",
            "Proof.",
            "split; [reflexivity | exact adm].",
            "Qed.",
            "Lemma l10 : 1 = 2.",
            "Proof.",
            "exact (proj2 (pl nat 0)).",
            "Qed.",
        ],
        "l10",
        &["adm"],
    );
}

/// Modules: functor application, `Include`, sealed modules (bodies looked up in the
/// implementation), queries inside an open module.
#[test]
fn modules_agree() {
    let _machine = common::shared_machine();
    let mut w = start();
    for s in [
        "Lemma madm : 0 = 1.",
        "Admitted.",
        "Module Type T.",
        "Parameter x : nat.",
        "Axiom xax : x = 0.",
        "End T.",
        "Module F (X : T).",
        "Lemma fl : X.x = 0.",
        "Proof.",
        "apply X.xax.",
        "Qed.",
        "End F.",
        "Module M <: T.",
        "Definition x := 0.",
        "Lemma xax : x = 0.",
        "Proof.",
        "reflexivity.",
        "Qed.",
        "End M.",
        "Module N := F M.",
        "Module Sealed : T.",
        "Definition x := 0.",
        "Lemma xax : x = 0.",
        "Admitted.",
        "End Sealed.",
        "Module N2 := F Sealed.",
        "Module Sealed2 : T.",
        "Definition x := 1.",
        "Lemma xax : x = 0.",
        "Proof.",
        "exact (eq_sym madm).",
        "Qed.",
        "End Sealed2.",
        "Module N3 := F Sealed2.",
        "Module I.",
        "Include F M.",
        "Lemma il : M.x = 0.",
        "Proof.",
        "exact fl.",
        "Qed.",
        "End I.",
    ] {
        run_ok(&mut w, s);
    }
    assert!(same(&mut w, "N.fl").contains("Closed under the global context"));
    assert!(same(&mut w, "N2.fl").contains("Sealed.xax"));
    assert!(same(&mut w, "N3.fl").contains("madm"));
    same(&mut w, "I.fl");
    same(&mut w, "I.il");
    for s in [
        "Module Open.",
        "Axiom a : nat = nat.",
        "Lemma ol : nat = nat.",
        "Proof.",
        "exact a.",
        "Qed.",
    ] {
        run_ok(&mut w, s);
    }
    assert!(same(&mut w, "ol").contains("a : nat = nat"));
    run_ok(&mut w, "End Open.");
    assert!(same(&mut w, "Open.ol").contains("Open.a"));
}

/// A name redefined after `BackTo` is never answered from the memo of its old body: `dep`
/// keeps its name and statement but is proved closed, proved from an admitted lemma, or
/// admitted, in turn; `mid` and `user` (same text every round) must follow.
#[test]
fn backto_redefinition_is_seen() {
    let _machine = common::shared_machine();
    let mut w = start();
    run_ok(&mut w, "Require Import List.");
    run_ok(&mut w, "Lemma adm0 : length (1 :: nil) = 1.");
    run_ok(&mut w, "Admitted.");
    let closed = [
        "Lemma dep : length (1 :: nil) = 1.",
        "Proof.",
        "reflexivity.",
        "Qed.",
    ];
    let via_admitted = [
        "Lemma dep : length (1 :: nil) = 1.",
        "Proof.",
        "exact adm0.",
        "Qed.",
    ];
    let admitted = ["Lemma dep : length (1 :: nil) = 1.", "Admitted."];
    let users = [
        "Lemma mid : length (1 :: nil) = 1 /\\ True.",
        "Proof.",
        "split; [exact dep | exact I].",
        "Qed.",
        "Lemma user : length (1 :: nil) = 1.",
        "Proof.",
        "exact (proj1 mid).",
        "Qed.",
    ];
    // Warm the memo on the library first.
    same(&mut w, "List.app_length");
    let base = w.run("Check I.", LIMIT).expect("check").after.state;
    let rounds: [(&[&str], &str); 7] = [
        (&closed, "Closed under the global context"),
        (&via_admitted, "adm0 : length"),
        (&closed, "Closed under the global context"),
        (&admitted, "dep : length"),
        (&via_admitted, "adm0 : length"),
        (&admitted, "dep : length"),
        (&closed, "Closed under the global context"),
    ];
    for (round, (body, expect)) in rounds.iter().enumerate() {
        for s in body.iter().chain(users.iter()) {
            run_ok(&mut w, s);
        }
        for name in ["user", "user", "mid"] {
            let out = same(&mut w, name);
            assert!(out.contains(expect), "round {round}: {name}: {out}");
        }
        let r = w.run(&format!("BackTo {base}."), LIMIT).expect("BackTo");
        assert!(!r.output.contains("Error"), "BackTo: {}", r.output);
        assert_eq!(r.prompt.state, base, "BackTo did not return to {base}");
    }
    let r = w.run("ProdAssumptionsStats.", LIMIT).expect("stats");
    eprintln!("{}", r.output.trim());
}
