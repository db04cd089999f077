//! Defence in depth: sentences that the text rules would reject are sent to Coq anyway (the
//! rules bypassed, as if the lexer had been fooled), and the worker still never says `Proved`,
//! judging only by Coq's own prompt and `Print Assumptions`. Also: the sandbox keeps writes in.

use crate::common;

use prod_check::Verdict;
use prod_check_coq::rules::{Statement, Step};
use prod_check_coq::session::{ContextSpec, Plan, PreparedContext, Session};

fn stmt(text: &str) -> Statement {
    let name = text.split_whitespace().nth(1).unwrap().to_string();
    Statement {
        text: text.into(),
        name,
    }
}

fn plan(statement: &str, lemmas: &[&str], steps: &[&str]) -> Plan {
    Plan {
        lemmas: lemmas.iter().map(|l| stmt(l)).collect(),
        statement: stmt(statement),
        steps: steps
            .iter()
            .map(|s| Step {
                text: s.to_string(),
                range: 0..0,
                hammer: false,
                ltac_head: None,
            })
            .collect(),
        rules: prod_check_coq::rules::RuleSet::strictest(),
    }
}

#[test]
fn smuggled_commands_are_caught_by_coqs_own_record() {
    let _machine = common::shared_machine();
    let mut cfg = common::config_with_plugin(1);
    // The context's axiom is allowed by name, so the honest proof after each case may use it.
    cfg.allowed_axioms = vec!["ctx_ax".into()];
    let mut s = Session::start(&cfg).unwrap();
    let ctx = PreparedContext::new(ContextSpec {
        imports: "From Coq Require Import Arith.".into(),
        hammer: false,
        context: "Axiom ctx_ax : 0 = 0.".into(),
    })
    .unwrap();
    s.ensure(&ctx, &cfg).unwrap();
    let f = "Lemma goal : False.";
    let cases: Vec<(&str, Plan)> = vec![
        (
            "axiom in proof",
            plan(f, &[], &["Axiom cheat : False.", "exact cheat."]),
        ),
        (
            "axiom named like a proposed lemma's neighbour",
            plan(
                f,
                &["Lemma p : True."],
                &["Axiom cheat2 : False.", "exact cheat2."],
            ),
        ),
        (
            "require a library axiom",
            plan(
                "Lemma goal : forall P : Prop, P \\/ ~ P.",
                &[],
                &["Require Import Classical.", "exact classic."],
            ),
        ),
        (
            "unset guard checking",
            plan(
                "Lemma goal : forall n : nat, n = S n.",
                &[],
                &["Unset Guard Checking.", "fix IH 1.", "exact IH."],
            ),
        ),
        (
            "unset universe checking",
            plan(f, &[], &["Unset Universe Checking.", "admit."]),
        ),
        (
            "admitted then new lemma",
            plan(f, &[], &["admit.", "Admitted.", "Lemma goal2 : True."]),
        ),
        ("qed early", plan(f, &[], &["admit.", "Qed."])),
        ("abort", plan(f, &[], &["Abort."])),
        ("backto base", plan(f, &[], &["BackTo 1."])),
        (
            "nested lemma",
            plan(
                f,
                &[],
                &[
                    "Set Nested Proofs Allowed.",
                    "Lemma cheat : False.",
                    "Admitted.",
                    "exact cheat.",
                ],
            ),
        ),
        ("silence output", plan(f, &[], &["Set Silent.", "admit."])),
        (
            "statement smuggles an axiom",
            plan(
                "Lemma goal : True. Axiom cheat3 : False. Lemma goal3 : False.",
                &[],
                &["exact cheat3."],
            ),
        ),
        (
            "proposed lemma smuggles an axiom",
            plan(
                f,
                &["Lemma p : True. Axiom cheat4 : False. Lemma p2 : True."],
                &["exact cheat4."],
            ),
        ),
        // The lexer fooled: Coq reads several sentences out of one step. The per-sentence
        // protocol invariant (one prompt, state +0/+1) catches every one of them, even when
        // the restated lemma has the checker's own name.
        (
            "desync: abort and restate under the same name",
            plan(
                f,
                &[],
                &["idtac.(* . Abort. Lemma goal : True. idtac *).", "exact I."],
            ),
        ),
        (
            "desync: backquote",
            plan(
                f,
                &[],
                &[
                    "idtac `(* . Abort. Lemma goal : True. idtac *).",
                    "exact I.",
                ],
            ),
        ),
        (
            "desync: two sentences in one step",
            plan(f, &[], &["admit. Admitted. Lemma goal : True.", "exact I."]),
        ),
        (
            "desync: the statement",
            plan(
                "Lemma goal : False.(* . Abort. Lemma goal : True. *).",
                &[],
                &["exact I."],
            ),
        ),
        (
            "desync: a proposed lemma",
            plan(
                f,
                &["Lemma p : True.(* . Axiom cheat5 : False. *)."],
                &["exact cheat5."],
            ),
        ),
    ];
    for (what, p) in &cases {
        let v = s.attempt(p, &cfg);
        assert!(!v.is_proved(), "{what}: PROVED {v:?}");
        assert!(!matches!(v, Verdict::Infra { .. }), "{what}: {v:?}");
        eprintln!("{what:45} {v:?}");
        if s.worker.broken {
            // What the pool does with a worker it cannot trust any more.
            s = Session::start(&cfg).unwrap();
            s.ensure(&ctx, &cfg).unwrap();
        }
        // The worker is back at its base state: an honest proof still works.
        let ok = s.attempt(&plan("Lemma ok : 0 = 0.", &[], &["exact ctx_ax."]), &cfg);
        assert!(
            matches!(&ok, Verdict::Proved { axioms, .. } if axioms == &["ctx_ax".to_string()]),
            "after {what}: {ok:?}"
        );
    }
}

#[test]
fn the_sandbox_keeps_files_in() {
    let _machine = common::shared_machine();
    let cfg = common::config_with_plugin(1);
    let mut s = Session::start(&cfg).unwrap();
    let ctx = PreparedContext::new(ContextSpec {
        imports: String::new(),
        hammer: false,
        context: String::new(),
    })
    .unwrap();
    s.ensure(&ctx, &cfg).unwrap();
    let probe = std::env::temp_dir().join(format!("prod_sandbox_probe_{}", std::process::id()));
    let target = format!("{}", probe.display());
    let p = plan(
        "Lemma goal : True.",
        &[],
        &[&format!("Redirect \"{target}\" Print nat."), "exact I."],
    );
    let _ = s.attempt(&p, &cfg);
    assert!(
        !std::path::Path::new(&format!("{target}.out")).exists(),
        "Redirect escaped the sandbox"
    );
    let p = plan(
        "Lemma goal : True.",
        &[],
        &["Redirect \"/usr/prod_probe\" Print nat.", "exact I."],
    );
    let _ = s.attempt(&p, &cfg);
    assert!(
        !std::path::Path::new("/usr/prod_probe.out").exists(),
        "Redirect wrote into /usr"
    );
}

/// Fixpoints built at run time, from terms that hold no fixpoint, with the text rules bypassed
/// (as if the first filter had missed the builder): the term audit reads the kernel's term,
/// whatever built it. Ltac2's `Constr.Unsafe` turns a lambda into rocq#20455's ill-guarded
/// fixpoint (Coq 8.16 proves `False` with it); Ltac1's `context` rewrites a library fixpoint;
/// `abstract` hides one in a side constant. A re-mark from inside a proof is refused. Honest
/// proofs that unfold library fixpoints (`unfold`, `cbv`) pass.
#[test]
fn built_fixpoints_are_refused_by_the_term_audit() {
    let _machine = common::shared_machine();
    let cfg = common::config_with_plugin(1);
    let mut s = Session::start(&cfg).unwrap();
    let ctx = PreparedContext::new(ContextSpec {
        imports: "From Coq Require Import List. From Ltac2 Require Import Ltac2.".into(),
        hammer: false,
        context: format!("Set Default Proof Mode \"Classic\".\n{NOT_ZERO}"),
    })
    .unwrap();
    s.ensure(&ctx, &cfg).unwrap();
    let built = format!(
        "exact ltac2:(let body := constr:({FUNCTIONAL}) in match Constr.Unsafe.kind body with \
         | Constr.Unsafe.Lambda b inner => let fx := Constr.Unsafe.make (Constr.Unsafe.Fix \
         (Array.make 1 0) 0 (Array.make 1 b) (Array.make 1 inner)) in exact ($fx 1 I) \
         | _ => Control.throw Not_found end)."
    );
    let rewrite = "let f := eval cbv delta [Nat.add] in Nat.add in match f with context C [S] => \
                   let g := context C [Nat.pred] in exact (g 1 1) end.";
    let cases: Vec<(&str, Plan)> = vec![
        (
            "Ltac2-built fixpoint (rocq#20455)",
            plan("Lemma goal : False.", &[], &[&built]),
        ),
        (
            "Ltac1 context rewrite of Nat.add",
            plan("Lemma goal : nat.", &[], &[rewrite]),
        ),
        (
            "the same inside abstract",
            plan(
                "Lemma goal : nat.",
                &[],
                &[&format!("abstract ({}).", rewrite.trim_end_matches('.'))],
            ),
        ),
        (
            "a re-mark inside the proof",
            plan("Lemma goal : nat.", &[], &["ProdAuditMark.", rewrite]),
        ),
    ];
    for (what, p) in &cases {
        let v = s.attempt(p, &cfg);
        eprintln!("{what:45} {v:?}");
        assert!(!v.is_proved(), "{what}: PROVED {v:?}");
        assert!(!matches!(v, Verdict::Infra { .. }), "{what}: {v:?}");
        if s.worker.broken {
            s = Session::start(&cfg).unwrap();
            s.ensure(&ctx, &cfg).unwrap();
        }
    }
    // The first three reach Qed and are refused there, by the audit.
    for (what, p) in &cases[..3] {
        let v = s.attempt(p, &cfg);
        assert!(
            matches!(&v, Verdict::Rejected { reason } if reason.contains("term audit")),
            "{what}: {v:?}"
        );
    }
    let honest = [
        (
            "Lemma ok : forall l : list nat, List.map (fun x => x) l = l.",
            vec![
                "intros l.",
                "unfold List.map.",
                "induction l as [|x l IH].",
                "reflexivity.",
                "rewrite <- IH at 2.",
                "reflexivity.",
            ],
        ),
        (
            "Lemma ok : forall l : list nat, List.map (fun x => x + 1) l = List.map S l.",
            vec![
                "intros l.",
                "cbv.",
                "induction l as [|x l IH].",
                "reflexivity.",
                "rewrite IH.",
                "f_equal.",
                "apply PeanoNat.Nat.add_1_r.",
            ],
        ),
    ];
    for (statement, steps) in &honest {
        let v = s.attempt(&plan(statement, &[], steps), &cfg);
        assert!(v.is_proved(), "{statement}: {v:?}");
    }
}

const NOT_ZERO: &str = "Definition not_zero n := match n with 0 => False | S _ => True end.\n\
                        Definition not_one n := match n with 0 => False | S n => not_zero n end.";

/// rocq#20455's functional: its fixpoint is ill-guarded, and Coq 8.16's kernel accepts it.
const FUNCTIONAL: &str = "fun (issue : forall n : nat, not_zero n -> False) (n : nat) => \
    match n as n0 return (not_zero n0 -> False) with | O => fun h => h | S subn => fun _ => \
    let f := fun (b : bool) (e : b = true) (x : nat) (Hx : not_one x) => let arg := match \
    (if b then x else subn) with O => subn | S k => k end in issue arg (@eq_ind_r bool true \
    (fun b0 : bool => not_zero (match (if b0 then x else subn) with O => subn | S k => k end)) \
    (match x as n0 return (not_one n0 -> not_zero (match n0 with O => subn | S k => k end)) with \
    | O => fun Hx0 => False_ind _ Hx0 | S n0 => fun Hx0 => Hx0 end Hx) b e) in f true eq_refl 5 I end";
