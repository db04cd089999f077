//! Defence in depth: sentences that the text rules would reject are sent to Coq anyway (the
//! rules bypassed, as if the lexer had been fooled), and the worker still never says `Proved`,
//! judging only by Coq's own prompt and `Print Assumptions`. Also: the sandbox keeps writes in.

mod common;

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
    let mut cfg = common::config(1);
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
    let cfg = common::config(1);
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
