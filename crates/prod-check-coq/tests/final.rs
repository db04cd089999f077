//! The cold final check of an assembled file (`coqc` in a fresh sandbox).

mod common;

use std::time::Duration;

use prod_check::VerdictKind;
use prod_check_coq::final_check;

const HEAD: &str = "From Coq Require Import Arith List Lia.\n";

fn run(body: &str, root: &str, allowed: &[&str]) -> prod_check::Verdict {
    let cfg = common::config(1);
    let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
    final_check(
        &format!("{HEAD}{body}"),
        root,
        &allowed,
        &cfg,
        Duration::from_secs(60),
    )
}

#[test]
fn assembled_files() {
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
    let classical = "Require Import Classical.\nLemma root : forall P : Prop, P \\/ ~ P.\nProof. exact classic. Qed.\n";
    assert_eq!(run(classical, "root", &[]).kind(), VerdictKind::Proved);

    // A wrong proof, a printed fake verdict, a bad root name.
    let wrong = "Lemma root : 1 = 2.\nProof. idtac \"Closed under the global context\". reflexivity. Qed.\n";
    assert_eq!(run(wrong, "root", &[]).kind(), VerdictKind::Failed);
    let fake =
        "Lemma root : 1 = 2.\nProof. idtac \"Closed under the global context\". admit. Admitted.\n";
    assert_eq!(run(fake, "root", &[]).kind(), VerdictKind::Failed);
    assert_eq!(run(good, "root.", &[]).kind(), VerdictKind::Rejected);
}
