//! The cold final check of an assembled file (`coqc` in a fresh sandbox).

use crate::common;

use std::time::Duration;

use prod_check::VerdictKind;
use prod_check_coq::{final_check, RenderedFile};

const HEAD: &str = "From Coq Require Import Arith List Lia.\n";

fn run(body: &str, root: &str, allowed: &[&str]) -> prod_check::Verdict {
    run_in(HEAD, body, root, allowed)
}

fn run_in(context: &str, body: &str, root: &str, allowed: &[&str]) -> prod_check::Verdict {
    let mut cfg = common::config(1);
    cfg.allowed_axioms = allowed.iter().map(|s| s.to_string()).collect();
    final_check(
        &RenderedFile::from_parts(context, body, root),
        &cfg,
        Duration::from_secs(60),
    )
}

#[test]
fn assembled_files() {
    let _machine = common::shared_machine();
    // Child first, then the root that uses it: closed.
    let good = "Lemma child : forall n, n + 0 = n.\nProof. intros; lia. Qed.\n\
                Lemma root : forall n, (n + 0) + 0 = n.\nProof. intros n. rewrite !child. reflexivity. Qed.\n";
    let v = run(good, "root", &[]);
    assert_eq!(v.kind(), VerdictKind::Proved, "{v:?}");

    // A child left admitted: the root is not closed.
    let admitted = "Lemma child : forall n, n + 0 = n.\nAdmitted.\n\
                    Lemma root : forall n, (n + 0) + 0 = n.\nProof. intros n. rewrite !child. reflexivity. Qed.\n";
    assert_eq!(run(admitted, "root", &[]).kind(), VerdictKind::Failed);

    // An axiom of the context is fine when declared as such; any other is not.
    let with_axiom = "Axiom ax : 1 = 2.\nLemma root : 1 = 2.\nProof. exact ax. Qed.\n";
    assert_eq!(run(with_axiom, "root", &["ax"]).kind(), VerdictKind::Proved);
    assert_eq!(run(with_axiom, "root", &[]).kind(), VerdictKind::Failed);

    // Library axioms loaded by the imports are the context's own.
    let classical = "Lemma root : forall P : Prop, P \\/ ~ P.\nProof. exact classic. Qed.\n";
    let context = format!("{HEAD}Require Import Classical.\n");
    assert_eq!(
        run_in(&context, classical, "root", &[]).kind(),
        VerdictKind::Proved
    );
    // A library loaded after the context is not the trusted base: the term audit refuses
    // what untrusted text could not have made (here an inductive type).
    let late = format!("Require Import Classical.\n{classical}");
    let v = run(&late, "root", &[]);
    assert_eq!(v.kind(), VerdictKind::Rejected, "{v:?}");
    assert!(v.message().contains("term audit"), "{v:?}");

    // A wrong proof, a printed fake verdict, a bad root name.
    let wrong = "Lemma root : 1 = 2.\nProof. idtac \"Closed under the global context\". reflexivity. Qed.\n";
    assert_eq!(run(wrong, "root", &[]).kind(), VerdictKind::Failed);
    let fake =
        "Lemma root : 1 = 2.\nProof. idtac \"Closed under the global context\". admit. Admitted.\n";
    assert_eq!(run(fake, "root", &[]).kind(), VerdictKind::Failed);
    assert_eq!(run(good, "root.", &[]).kind(), VerdictKind::Rejected);
}

/// The complete file of an assembled proof as both the run pipeline and `prod dataset validate
/// --trees` build it: a context that ends inside a module and a section, the `End`s, the root
/// reached under its module-qualified name, and CoqHammer's tactic library when a replaced
/// `hammer.` step (or a written-out hammer tactic) needs it.
#[test]
fn assembled_file_closes_scopes_and_loads_hammer_tactics_when_used() {
    let _machine = common::shared_machine();
    let context = format!("{HEAD}Module M.\nSection S.\nVariable k : nat.\n");
    let scope = vec!["M".to_string(), "S".to_string()];
    let assembled = "Lemma child : forall n, n + 0 = n.\nProof. intros; lia. Qed.\n\
                     Lemma root : forall n, (n + 0) + 0 = n.\nProof. intros n. rewrite !child. reflexivity. Qed.\n";
    let file = |root_statement: &str, assembled: &str, hammer_replaced: bool| {
        prod_check_coq::AssembledFile {
            context: &context,
            scope: &scope,
            qualified_name: "M.root",
            root_statement,
            assembled,
            root: "root",
            hammer_replaced,
        }
        .render()
        .unwrap()
    };
    let statement = "Lemma root : forall n, (n + 0) + 0 = n.";
    let rendered = file(statement, assembled, false);
    let text = rendered.text();
    assert_eq!(rendered.checked_name, "prod_checked_root");
    assert!(text.ends_with("End S.\nEnd M.\nDefinition prod_checked_root := @M.root.\n"));
    assert!(!text.contains("Hammer"), "{text}");
    let cfg = common::config(1);
    let v = final_check(&rendered, &cfg, Duration::from_secs(60));
    assert_eq!(v.kind(), VerdictKind::Proved, "{v:?}");
    // A hammer tactic in a proof: its library goes first, and the file compiles.
    let with_hammer = "Lemma root : forall n, n + 0 = n.\nProof. sauto. Qed.\n";
    let rendered = file("Lemma root : forall n, n + 0 = n.", with_hammer, false);
    let text = rendered.text();
    assert!(
        text.starts_with(prod_check_coq::HAMMER_TACTICS_IMPORT),
        "{text}"
    );
    let v = final_check(&rendered, &cfg, Duration::from_secs(60));
    assert_eq!(v.kind(), VerdictKind::Proved, "{v:?}");
    assert!(file(statement, assembled, true)
        .text()
        .starts_with(prod_check_coq::HAMMER_TACTICS_IMPORT));
}

/// The kernel decides about the root's own statement: a lemma of the file named like an
/// identifier of the root's statement changes what the statement means after it, and the
/// root's type is compared with the statement as it reads in the bare context.
#[test]
fn a_captured_root_statement_fails_the_final_check() {
    let _machine = common::shared_machine();
    let cfg = common::config(1);
    let check = |statement: &str, assembled: &str| {
        let rendered = prod_check_coq::AssembledFile {
            context: HEAD,
            scope: &[],
            qualified_name: "root",
            root_statement: statement,
            assembled,
            root: "root",
            hammer_replaced: false,
        }
        .render()
        .unwrap();
        final_check(&rendered, &cfg, Duration::from_secs(60))
    };
    // `if false then True else False` is `False` in the context; after a lemma named
    // `false : {True} + {False}` it is provable.
    let captured = "Lemma false : {True} + {False}.\nProof. left; exact I. Qed.\n\
                    Lemma root : if false then True else False.\nProof. destruct false as [t|f]; [exact I | destruct f]. Qed.\n";
    let v = check("Lemma root : if false then True else False.", captured);
    assert_eq!(v.kind(), VerdictKind::Failed, "{v:?}");
    // A lemma named like a constructor the statement uses: the root is provable either way,
    // but after the lemma it states something else, which the kernel does not identify.
    let captured =
        "Definition prod_t := True.\nLemma S : nat -> nat.\nProof. exact (fun n => 0). Qed.\n\
                    Lemma root : forall n : nat, n = S n -> True.\nProof. intros; exact I. Qed.\n";
    let v = check("Lemma root : forall n : nat, n = S n -> True.", captured);
    assert_eq!(v.kind(), VerdictKind::Failed, "{v:?}");
    // The honest tree whose lemma is named `length` (renamed by assembly): proved.
    let honest = "Lemma length_2 : forall A (l : list A), length (rev l) = length l.\nProof. intros; apply rev_length. Qed.\n\
                  Lemma root : forall l : list nat, length (rev (rev l)) = length l.\nProof. intros l. rewrite !length_2. reflexivity. Qed.\n";
    let v = check(
        "Lemma root : forall l : list nat, length (rev (rev l)) = length l.",
        honest,
    );
    assert_eq!(v.kind(), VerdictKind::Proved, "{v:?}");
    // The anchor's statement must be the root's: another statement is not identified.
    let v = check("Lemma root : 0 = 1.", honest);
    assert_eq!(v.kind(), VerdictKind::Failed, "{v:?}");
}

/// A context's own axiom or admitted lemma excuses nothing unless allowed by name; the
/// prover's library axioms do.
#[test]
fn context_axioms_excuse_nothing_unless_allowed() {
    let _machine = common::shared_machine();
    let admitted = "Lemma oracle : forall n : nat, n = S n.\nAdmitted.\n\
                    Lemma root : 0 = 1.\nProof. exact (oracle 0). Qed.\n";
    let v = run(admitted, "root", &[]);
    assert_ne!(v.kind(), VerdictKind::Proved, "{v:?}");
    let param = "Parameter p : nat.\nAxiom p_zero : p = 0.\nLemma root : p = 0.\nProof. exact p_zero. Qed.\n";
    assert_eq!(run(param, "root", &[]).kind(), VerdictKind::Failed);
    assert_eq!(
        run(param, "root", &["p", "p_zero"]).kind(),
        VerdictKind::Proved
    );
}

/// The universe gap, closed at the checker: the child's verdict records the constraint its
/// proof adds to its statement's levels, and an unconstrained proof records none.
#[test]
fn a_proof_that_constrains_its_statement_s_universes_is_recorded() {
    let _machine = common::shared_machine();
    use prod_check::{CheckRequest, Checker, Verdict};
    use prod_core::ConditionalProof;
    let cfg = common::config(1);
    let checker = prod_check_coq::CoqChecker::new(cfg).unwrap();
    let req = |statement: &str, proof: &str| {
        CheckRequest::new(
            HEAD,
            "",
            statement,
            ConditionalProof::parse_with(proof, &prod_coq::CoqLanguage).unwrap(),
        )
    };
    let v = checker.check_batch(
        &[
            req(
                "Lemma h : forall A : Type, {B : Type & A = B}.",
                "<no_invoke> intros A. exists A. reflexivity.",
            ),
            req(
                "Lemma rr : forall (A : Type) (l : list A), rev (rev l) = l.",
                "<no_invoke> intros A l. apply rev_involutive.",
            ),
            req(
                "Lemma two : forall (A B : Type) (a : A) (b : B), (a, b) = (a, b).",
                "<no_invoke> reflexivity.",
            ),
        ],
        &|_, _| {},
    );
    let constraints = |v: &Verdict| match v {
        Verdict::Proved {
            universe_constraints,
            ..
        } => universe_constraints.clone(),
        other => panic!("{other:?}"),
    };
    let added = constraints(&v[0]);
    // The plugin names the levels as the kernel does; one constraint ties the two.
    assert!(added.iter().any(|c| c.contains(" = ")), "{:?}", v[0]);
    assert_eq!(
        v[0].local_verdict(),
        prod_core::tree::LocalVerdict::CorrectAlone
    );
    assert!(constraints(&v[1]).is_empty(), "{:?}", v[1]);
    assert!(constraints(&v[2]).is_empty(), "{:?}", v[2]);
    // One level of its own, tied to a level of the context (`A = Small`); none of its own,
    // the context's levels constrained (`Big <= Small`): both recorded.
    let ctx = "Definition Small := Type.\nDefinition Big := Type.";
    let req = |statement: &str, proof: &str| {
        CheckRequest::new(
            HEAD,
            ctx,
            statement,
            ConditionalProof::parse(proof).unwrap(),
        )
    };
    let v = checker.check_batch(
        &[
            req(
                "Lemma h : forall A : Type, {B : Small & A = B}.",
                "<no_invoke> intros A. exists A. reflexivity.",
            ),
            req(
                "Lemma h : forall A : Big, {B : Small & A = B}.",
                "<no_invoke> intros A. exists A. reflexivity.",
            ),
            req(
                "Lemma ok : forall A : Type, A -> A.",
                "<no_invoke> intros A a. exact a.",
            ),
        ],
        &|_, _| {},
    );
    assert!(!constraints(&v[0]).is_empty(), "{:?}", v[0]);
    assert!(!constraints(&v[1]).is_empty(), "{:?}", v[1]);
    assert!(constraints(&v[2]).is_empty(), "{:?}", v[2]);
}

/// The same in a context with `Set Universe Polymorphism`: the lemma's levels are bound in a
/// universe context of its own and the proof's constraint goes there (`u = u0`), where the
/// monomorphic comparison never looks. The verdict records it; an honest proof of a
/// polymorphic statement whose constraints the statement already has records none, and one
/// that fixes its level to a library's (`rev_length` is monomorphic) records that.
#[test]
fn a_proof_that_constrains_a_polymorphic_statement_s_universes_is_recorded() {
    let _machine = common::shared_machine();
    use prod_check::{CheckRequest, Checker, Verdict};
    use prod_core::tree::LocalVerdict;
    use prod_core::ConditionalProof;
    let cfg = common::config(1);
    let checker = prod_check_coq::CoqChecker::new(cfg).unwrap();
    let req = |statement: &str, proof: &str| {
        CheckRequest::new(
            HEAD,
            "Set Universe Polymorphism.",
            statement,
            ConditionalProof::parse(proof).unwrap(),
        )
    };
    let v = checker.check_batch(
        &[
            req(
                "Lemma h : forall A : Type, {B : Type & A = B}.",
                "<no_invoke> intros A. exists A. reflexivity.",
            ),
            req(
                "Lemma rr : forall (A : Type) (l : list A), rev (rev l) = l.",
                "<no_invoke> intros A l. apply rev_involutive.",
            ),
            req("Lemma one : 1 = 1.", "<no_invoke> reflexivity."),
            req(
                "Lemma len : forall (A : Type) (l : list A), length (rev l) = length l.",
                "<no_invoke> apply rev_length.",
            ),
        ],
        &|_, _| {},
    );
    let constraints = |v: &Verdict| match v {
        Verdict::Proved {
            universe_constraints,
            ..
        } => universe_constraints.clone(),
        other => panic!("{other:?}"),
    };
    let added = constraints(&v[0]);
    assert!(
        added.iter().any(|c| c == "u = u0" || c == "u0 = u"),
        "{:?}",
        v[0]
    );
    assert_eq!(v[0].local_verdict(), LocalVerdict::CorrectAlone);
    assert!(constraints(&v[1]).is_empty(), "{:?}", v[1]);
    assert_eq!(v[1].local_verdict(), LocalVerdict::Correct);
    assert!(constraints(&v[2]).is_empty(), "{:?}", v[2]);
    assert!(
        !constraints(&v[3]).is_empty() && !constraints(&v[3])[0].starts_with("unknown"),
        "{:?}",
        v[3]
    );
}
