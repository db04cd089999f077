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

/// The complete file of an assembled proof as both the run pipeline and `prod dataset validate
/// --trees` build it: a context that ends inside a module and a section, the `End`s, the root
/// reached under its module-qualified name, and CoqHammer's tactic library when a replaced
/// `hammer.` step (or a written-out hammer tactic) needs it.
#[test]
fn assembled_file_closes_scopes_and_loads_hammer_tactics_when_used() {
    let context = format!("{HEAD}Module M.\nSection S.\nVariable k : nat.\n");
    let scope = vec!["M".to_string(), "S".to_string()];
    let assembled = "Lemma child : forall n, n + 0 = n.\nProof. intros; lia. Qed.\n\
                     Lemma root : forall n, (n + 0) + 0 = n.\nProof. intros n. rewrite !child. reflexivity. Qed.\n";
    let file = |assembled: &str, hammer_replaced: bool| {
        prod_check_coq::AssembledFile {
            context: &context,
            scope: &scope,
            qualified_name: "M.root",
            assembled,
            root: "root",
            hammer_replaced,
        }
        .render()
    };
    let (text, name) = file(assembled, false);
    assert_eq!(name, "prod_checked_root");
    assert!(text.ends_with("End S.\nEnd M.\nDefinition prod_checked_root := @M.root.\n"));
    assert!(!text.contains("Hammer"), "{text}");
    let cfg = common::config(1);
    let v = final_check(&text, &name, &[], &cfg, Duration::from_secs(60));
    assert_eq!(v.kind(), VerdictKind::Proved, "{v:?}");
    // A hammer tactic in a proof: its library goes first, and the file compiles.
    let with_hammer = "Lemma root : forall n, n + 0 = n.\nProof. sauto. Qed.\n";
    let (text, name) = file(with_hammer, false);
    assert!(
        text.starts_with(prod_check_coq::HAMMER_TACTICS_IMPORT),
        "{text}"
    );
    let v = final_check(&text, &name, &[], &cfg, Duration::from_secs(60));
    assert_eq!(v.kind(), VerdictKind::Proved, "{v:?}");
    assert!(file(assembled, true)
        .0
        .starts_with(prod_check_coq::HAMMER_TACTICS_IMPORT));
}
