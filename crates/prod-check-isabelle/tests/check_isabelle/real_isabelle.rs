//! Against a real Isabelle2022 server — run by hand where one exists:
//!
//! ```text
//! isabelle server -n prod &      # prints: server "prod" = 127.0.0.1:PORT (password "PW")
//! PROD_ISABELLE_SERVER=127.0.0.1:PORT PROD_ISABELLE_PASSWORD=PW \
//!   cargo test -p prod-check-isabelle --test check_isabelle real_isabelle:: -- --nocapture
//! ```
//!
//! Without the variables every test prints `SKIPPED` and passes (no Isabelle on CI machines).

use prod_check::{CheckRequest, Checker, Verdict};
use prod_check_isabelle::rules::{Effect, Step};
use prod_check_isabelle::{plan, IsabelleCheckConfig, IsabelleChecker};
use prod_core::ConditionalProof;

fn checker() -> Option<IsabelleChecker> {
    let (Ok(server), Ok(password)) = (
        std::env::var("PROD_ISABELLE_SERVER"),
        std::env::var("PROD_ISABELLE_PASSWORD"),
    ) else {
        prod_test_support::skip(
            "set PROD_ISABELLE_SERVER and PROD_ISABELLE_PASSWORD to run against a real Isabelle",
        );
        return None;
    };
    let cfg = IsabelleCheckConfig {
        server,
        password,
        session: std::env::var("PROD_ISABELLE_SESSION").unwrap_or_else(|_| "HOL".into()),
        ..Default::default()
    };
    Some(IsabelleChecker::connect(cfg).expect("connect"))
}

fn req(statement: &str, proof: &str) -> CheckRequest {
    CheckRequest::new(
        "Main",
        "",
        statement,
        ConditionalProof::parse_with(proof, &prod_isar::IsarLanguage).unwrap(),
    )
}

#[test]
fn real_verdicts() {
    let Some(c) = checker() else { return };
    let cases: Vec<(CheckRequest, &str)> = vec![
        (req("lemma a: \"(n::nat) + 0 = n\"", "<no_invoke> by simp"), "proved"),
        (req("lemma a: \"(n::nat) + 1 = n\"", "<no_invoke> by simp"), "failed"),
        (req("lemma a: \"rev (rev xs) = xs\"", "<no_invoke> proof (induct xs)\n  case Nil then show ?case by simp\nnext\n  case (Cons x xs) then show ?case by simp\nqed"), "proved"),
        (req("lemma a: \"(x::nat) < 5 \\<Longrightarrow> x < 7\"", "<no_invoke> sledgehammer"), "proved"),
        (req("theorem t: \"P \\<and> Q\"", "<use_invoke> <invoke> lemma p: \"P\" </invoke> <invoke> lemma q: \"Q\" </invoke> using p q by simp"), "proved"),
        (req("lemma a: \"True\"", "<no_invoke> proof -\n  have \"True\" by simp"), "failed"),
    ];
    for (r, want) in cases {
        let v = c.check(&r);
        eprintln!("{} -> {v:?}", r.statement);
        assert_eq!(v.kind().as_str(), want, "{}: {v:?}", r.statement);
    }
}

#[test]
fn the_audit_alone_catches_sorry() {
    let Some(c) = checker() else { return };
    // Plan an honest proof, then swap its step for `sorry` behind the rules' back.
    let mut p = plan(&req("lemma a: \"False\"", "<no_invoke> by simp")).unwrap();
    p.steps = vec![Step {
        text: "sorry".into(),
        range: 0..5,
        command: "sorry".into(),
        effect: Effect::Close,
    }];
    let v = c.run_plan_without_rules(&p);
    eprintln!("sorry -> {v:?}");
    assert!(
        matches!(&v, Verdict::Rejected { reason } if reason.contains("skip_proof")),
        "{v:?}"
    );
}
