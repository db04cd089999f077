//! The Isabelle checker end to end against the fake server (recorded real replies, positions
//! moved onto the generated theory; the audit line synthesised where a real Isabelle would print
//! it). What these tests cannot show — that Isabelle2022 accepts the generated theory and its ML —
//! needs a real Isabelle (see the crate's README).

use crate::common;

use common::*;
use prod_check::{CheckRequest, Checker, Verdict};
use prod_check_isabelle::{IsabelleCheckConfig, IsabelleChecker};
use prod_core::ConditionalProof;
use serde_json::json;

fn config(fake: &Fake, work: &std::path::Path) -> IsabelleCheckConfig {
    IsabelleCheckConfig {
        server: fake.addr.clone(),
        password: PASSWORD.into(),
        session: "HOL".into(),
        dirs: vec!["/opt/afp-2022-12-06/thys".into()],
        work_dir: Some(work.to_path_buf()),
        max_attempts: 1,
        command_timeout_s: 5,
        attempt_timeout_s: 20,
        ..Default::default()
    }
}

fn req(statement: &str, proof: &str) -> CheckRequest {
    CheckRequest::new(
        "Main",
        "",
        statement,
        ConditionalProof::parse_with(proof, &prod_isar::IsarLanguage).expect("conditional proof"),
    )
}

fn setup() -> Option<(Fake, tempfile::TempDir)> {
    replies_dir()?;
    Some((Fake::start(false), tempfile::tempdir().unwrap()))
}

#[test]
fn proved_and_the_requests_it_sends() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::connect(config(&fake, work.path())).unwrap();
    assert!(checker.fingerprint().contains("Isabelle2022"));
    let v = checker.check(&req(
        "lemma plus_0: \"(n::nat) + 0 = n\"",
        "<no_invoke> by simp",
    ));
    assert!(v.is_proved(), "{v:?}");
    let log = fake.log();
    let names: Vec<&str> = log.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["session_start", "use_theories", "purge_theories"]);
    assert_eq!(
        log[0].1,
        json!({"session": "HOL", "dirs": ["/opt/afp-2022-12-06/thys"]})
    );
    let use_args = &log[1].1;
    // The session id of the recorded session_start reply.
    assert_eq!(
        use_args["session_id"],
        "167dd6d8-1eeb-4315-8022-c8c527d9bd87"
    );
    assert_eq!(use_args["watchdog_timeout"], 10);
    let theory = use_args["theories"][0].as_str().unwrap();
    assert!(theory.starts_with("PRODCHK_Check_"));
    assert!(use_args["master_dir"]
        .as_str()
        .unwrap()
        .starts_with(work.path().to_str().unwrap()));
    assert_eq!(log[2].1["theories"], json!([theory]));
    assert_eq!(log[2].1["master_dir"], use_args["master_dir"]);
    // The theory the server saw: the statement renamed, the checker's audit after the proof.
    let text = fake.shared.lock().unwrap().theories[0].clone();
    assert!(text.contains("lemma PRODCHK_goal_"), "{text}");
    assert!(!text.contains("plus_0"), "{text}");
    assert!(text.contains("by simp\n\nML \\<open>()\\<close>"), "{text}");
    assert!(text.contains("Thm_Deps.all_oracles"), "{text}");
    // The file is gone after the check.
    let dir = std::path::Path::new(use_args["master_dir"].as_str().unwrap());
    assert!(!dir.exists());
}

#[test]
fn failed_step_from_the_recorded_error_position() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::AfterGoal("by auto".into()),
    ));
    let v = checker.check(&req(
        "lemma \"\\<forall>x y. x = y\"",
        "<no_invoke> proof -\n  have \"True\" by simp\n  show ?thesis by auto\nqed",
    ));
    match v {
        Verdict::Failed { step, message } => {
            assert_eq!(step, 5, "proof have by show [by] qed");
            assert!(message.starts_with("Failed to finish proof"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn proposed_lemmas_are_admitted_by_the_checker_oracle() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    let v = checker.check(&req(
        "theorem icard_insert_if: \"icard (insert x A) = (if x \\<in> A then icard A else eSuc (icard A))\"",
        "<use_invoke> <invoke> lemma icard_insert_disjoint: \"x \\<notin> A \\<Longrightarrow> icard (insert x A) = eSuc (icard A)\" </invoke>\n<invoke> lemma icard_insert_eq: \"x \\<in> A \\<Longrightarrow> icard (insert x A) = icard A\" </invoke>\nby (simp add: icard_insert_eq icard_insert_disjoint)",
    ));
    assert!(v.is_proved(), "{v:?}");
    let text = fake.shared.lock().unwrap().theories[0].clone();
    let nonce = text
        .split("PRODCHK_Check_")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(text.contains(&format!("lemma icard_insert_disjoint: \"x \\<notin> A \\<Longrightarrow> icard (insert x A) = eSuc (icard A)\"\n  by PRODCHK_admit_{nonce}")), "{text}");
    assert!(
        text.contains(&format!("oracle PRODCHK_admitted_{nonce} = ")),
        "{text}"
    );
    // The error of a proposed lemma is step 0.
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::Text("lemma icard_insert_eq".into()),
    ));
    let v = checker.check(&req(
        "theorem t: \"P\"",
        "<use_invoke> <invoke> lemma icard_insert_eq: \"x\" </invoke> by simp",
    ));
    assert!(matches!(v, Verdict::Failed { step: 0, .. }), "{v:?}");
}

#[test]
fn the_audit_decides() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    let r = req("lemma a: \"x = x\"", "<no_invoke> by simp");
    fake.push(UseAction::Audit(
        "theorems=1 oracles=Pure.skip_proof axioms=".into(),
    ));
    assert!(matches!(checker.check(&r), Verdict::Rejected { .. }));
    fake.push(UseAction::Audit(
        "theorems=1 oracles=SMT.smt_oracle axioms=".into(),
    ));
    assert!(matches!(checker.check(&r), Verdict::Failed { step: 2, .. }));
    fake.push(UseAction::Audit(
        "theorems=1 oracles= axioms=Draft.X.false_ax".into(),
    ));
    assert!(matches!(checker.check(&r), Verdict::Rejected { .. }));
    fake.push(UseAction::Audit("theorems=0 oracles= axioms=".into()));
    assert!(matches!(checker.check(&r), Verdict::Infra { .. }));
    // An audit line printed from the proof's own position (a forgery) is not the audit.
    fake.push(UseAction::AuditAt(At::AfterGoal("by simp".into())));
    assert!(matches!(checker.check(&r), Verdict::Infra { .. }));
    // No audit line at all: never proved.
    fake.push(UseAction::Replay(
        "use_theories",
        At::AfterGoal("by simp".into()),
    ));
    assert!(matches!(checker.check(&r), Verdict::Infra { .. }));
    // The close check failing means Isabelle still had the goal open.
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::Text("ML \\<open>()".into()),
    ));
    assert!(matches!(checker.check(&r), Verdict::Failed { step: 2, .. }));
    fake.push(UseAction::Proved);
    assert!(checker.check(&r).is_proved());
}

#[test]
fn sledgehammer_fixed_list_then_the_real_thing() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    let proof = "<no_invoke> using assms sledgehammer";
    let r = req(
        "lemma p: assumes \"n > (0::nat)\" shows \"n \\<noteq> 0\"",
        proof,
    );
    let ham = r.proof.proof_text().find("sledgehammer").unwrap();
    // `by auto` fails, `by simp` works.
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::AfterGoal("by auto".into()),
    ));
    fake.push(UseAction::Proved);
    match checker.check(&r) {
        Verdict::Proved { replacements, .. } => {
            assert_eq!(replacements.len(), 1);
            assert_eq!(replacements[0].step, 2);
            assert_eq!(replacements[0].tactic, "by simp");
            assert_eq!(replacements[0].range, ham..ham + "sledgehammer".len());
        }
        other => panic!("{other:?}"),
    }
    let theories = fake.shared.lock().unwrap().theories.clone();
    assert!(theories[0].contains("using assms\nby auto\n"));
    assert!(theories[1].contains("using assms\nby simp\n"));

    // With a one-method list: it fails, Sledgehammer runs (the recorded run: presburger, simp,
    // auto, blast, fast and metis found proofs), its first suggestion is replayed and recorded.
    let mut cfg = config(&fake, work.path());
    cfg.hammer.fixed_methods = vec!["by auto".into()];
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::AfterGoal("by auto".into()),
    ));
    fake.push(UseAction::Replay(
        "use_theories.Sledgehammer",
        At::AfterGoal("sledgehammer [timeout = 10]".into()),
    ));
    fake.push(UseAction::Proved);
    match checker.check(&r) {
        Verdict::Proved { replacements, .. } => {
            assert_eq!(replacements[0].tactic, "by presburger");
        }
        other => panic!("{other:?}"),
    }
    let theories = fake.shared.lock().unwrap().theories.clone();
    assert!(theories[3].contains("using assms\nsledgehammer [timeout = 10]\n"));
    assert!(theories[4].contains("using assms\nby presburger\n"));

    // Sledgehammer's proof fails on replay: the step fails.
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::AfterGoal("by auto".into()),
    ));
    fake.push(UseAction::Replay(
        "use_theories.Sledgehammer",
        At::AfterGoal("sledgehammer [timeout = 10]".into()),
    ));
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::AfterGoal("by presburger".into()),
    ));
    assert!(matches!(checker.check(&r), Verdict::Failed { step: 2, .. }));

    // Sledgehammer finds nothing (its output is not at the step): failed.
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::AfterGoal("by auto".into()),
    ));
    fake.push(UseAction::Replay(
        "use_theories.Sledgehammer",
        At::Text("theory".into()),
    ));
    assert!(matches!(checker.check(&r), Verdict::Failed { step: 2, .. }));
}

#[test]
fn dead_server_mid_task_is_infra_then_reconnects() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    let r = req("lemma a: \"x = x\"", "<no_invoke> by simp");
    fake.push(UseAction::DieAfterNote);
    let v = checker.check(&r);
    assert!(matches!(v, Verdict::Infra { .. }), "{v:?}");
    // The next check reconnects (same session: sessions outlive connections) and is judged.
    let v = checker.check(&r);
    assert!(v.is_proved(), "{v:?}");
    assert_eq!(checker.connections_opened(), 2);
    assert_eq!(fake.accepts.load(std::sync::atomic::Ordering::SeqCst), 2);
    let starts = fake
        .commands()
        .iter()
        .filter(|c| *c == "session_start")
        .count();
    assert_eq!(starts, 1);

    // With retries, one request survives a dying server.
    let mut cfg = config(&fake, work.path());
    cfg.max_attempts = 2;
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    fake.push(UseAction::DieAfterNote);
    assert!(checker.check(&r).is_proved());
}

#[test]
fn refused_session_restarts_it() {
    let Some((fake, work)) = setup() else { return };
    let mut cfg = config(&fake, work.path());
    cfg.max_attempts = 2;
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    fake.push(UseAction::Refuse);
    let v = checker.check(&req("lemma a: \"x = x\"", "<no_invoke> by simp"));
    assert!(v.is_proved(), "{v:?}");
    let starts = fake
        .commands()
        .iter()
        .filter(|c| *c == "session_start")
        .count();
    assert_eq!(starts, 2);
}

#[test]
fn timeout_cancels_and_purges() {
    let Some((fake, work)) = setup() else { return };
    let mut cfg = config(&fake, work.path());
    cfg.attempt_timeout_s = 1;
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    fake.push(UseAction::Hang);
    let v = checker.check(&req("lemma a: \"x = x\"", "<no_invoke> by auto"));
    assert!(matches!(v, Verdict::TimedOut { .. }), "{v:?}");
    let log = fake.log();
    let names: Vec<&str> = log.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["session_start", "use_theories", "cancel", "purge_theories"]
    );
    assert_eq!(log[2].1, json!({"task": "fake-task-1"}));
}

#[test]
fn wrong_password_is_infra() {
    let Some((fake, work)) = setup() else { return };
    let mut cfg = config(&fake, work.path());
    cfg.password = "wrong".into();
    assert!(IsabelleChecker::connect(cfg.clone()).is_err());
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    let v = checker.check(&req("lemma a: \"x = x\"", "<no_invoke> by simp"));
    match v {
        Verdict::Infra { message } => assert!(message.contains("password"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn context_lives_in_its_own_theory() {
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    let mut r = req("lemma f0: \"f 0 = 0\"", "<no_invoke> by (simp add: f_def)");
    r.context = "definition f :: \"nat \\<Rightarrow> nat\" where \"f n = n\"".into();
    assert!(checker.check(&r).is_proved());
    assert!(checker.check(&r).is_proved());
    let s = fake.shared.lock().unwrap();
    assert_eq!(s.context_files_seen.len(), 2);
    assert_eq!(s.context_files_seen[0], s.context_files_seen[1]);
    assert!(s.theories[0].contains("imports \""));
    assert!(!s.theories[0].contains("definition f"));
    drop(s);
    // A context that fails to load is infra, and is not retried.
    let mut r2 = r.clone();
    r2.context = "definition g where \"g = h\"".into();
    fake.push(UseAction::ContextError);
    let v = checker.check(&r2);
    assert!(
        matches!(&v, Verdict::Infra { message } if message.starts_with("context does not load")),
        "{v:?}"
    );
    let uses = fake
        .commands()
        .iter()
        .filter(|c| *c == "use_theories")
        .count();
    let v = checker.check(&r2);
    assert!(matches!(v, Verdict::Infra { .. }));
    assert_eq!(
        fake.commands()
            .iter()
            .filter(|c| *c == "use_theories")
            .count(),
        uses
    );
    // A context that leaves a block open goes inline, and the checker closes it.
    let mut r3 = r.clone();
    r3.context = "context fixes c :: nat begin".into();
    assert!(checker.check(&r3).is_proved());
    let s = fake.shared.lock().unwrap();
    let t = s.theories.last().unwrap();
    assert!(t.contains("context fixes c :: nat begin"));
    assert!(t.ends_with("end\nend\n"), "{t}");
}

#[test]
fn a_server_is_started_when_nobody_listens() {
    let Some((fake, work)) = setup() else { return };
    let mut cfg = config(&fake, work.path());
    // Nothing listens here (a port that was just free).
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    cfg.server = free.to_string();
    cfg.password = "unused".into();
    // Stands in for `isabelle server -n prod`: prints the banner of the fake, then stays up.
    cfg.server_command = vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo 'server \"prod\" = {} (password \"{PASSWORD}\")'; exec sleep 60",
            fake.addr
        ),
    ];
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    let v = checker.check(&req("lemma a: \"x = x\"", "<no_invoke> by simp"));
    assert!(v.is_proved(), "{v:?}");
    assert_eq!(fake.accepts.load(std::sync::atomic::Ordering::SeqCst), 1);
    // A command that prints no banner: infra, not a proof failure.
    let mut cfg = config(&fake, work.path());
    cfg.server = free.to_string();
    cfg.server_command = vec!["sh".into(), "-c".into(), "echo hello".into()];
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    let v = checker.check(&req("lemma a: \"x = x\"", "<no_invoke> by simp"));
    assert!(
        matches!(&v, Verdict::Infra { message } if message.contains("unexpected first line")),
        "{v:?}"
    );
}

#[test]
fn workers_share_one_session() {
    let Some((fake, work)) = setup() else { return };
    let mut cfg = config(&fake, work.path());
    cfg.workers = 3;
    let checker = IsabelleChecker::with_version(cfg, "Isabelle2022");
    let mut reqs: Vec<CheckRequest> = (0..6)
        .map(|i| req(&format!("lemma a{i}: \"x = x\""), "<no_invoke> by simp"))
        .collect();
    reqs.push(req("lemma c: \"x = x\"", "<no_invoke> sorry"));
    let seen = std::sync::Mutex::new(vec![]);
    let verdicts = checker.check_batch(&reqs, &|i, v| seen.lock().unwrap().push((i, v.kind())));
    assert_eq!(verdicts.len(), 7);
    assert!(verdicts[..6].iter().all(Verdict::is_proved), "{verdicts:?}");
    assert!(matches!(verdicts[6], Verdict::Rejected { .. }));
    // One progress call per request; one session for all workers; each theory its own name.
    assert_eq!(seen.lock().unwrap().len(), 7);
    let cmds = fake.commands();
    assert_eq!(cmds.iter().filter(|c| *c == "session_start").count(), 1);
    assert_eq!(cmds.iter().filter(|c| *c == "use_theories").count(), 6);
    assert_eq!(cmds.iter().filter(|c| *c == "purge_theories").count(), 6);
    assert!(checker.connections_opened() <= 3);
    let s = fake.shared.lock().unwrap();
    let mut names: Vec<&str> = s
        .theories
        .iter()
        .map(|t| t.split_whitespace().nth(1).unwrap())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 6);
}

#[test]
fn a_context_with_its_header_takes_its_imports_from_it() {
    let (imports, body) = prod_check_isabelle::checker::split_header(
        "",
        "(* c *)\ntheory T imports Main \"HOL-Library.Multiset\" keywords \"foo\" :: thy_decl begin\ndefinition f where \"f = (0::nat)\"\n",
    );
    assert_eq!(
        imports,
        "Main \"HOL-Library.Multiset\" keywords \"foo\" :: thy_decl"
    );
    assert_eq!(body, "\ndefinition f where \"f = (0::nat)\"\n");
    // Given imports, or a context without a header: as they are.
    let ctx = "definition g where \"g = (1::nat)\"";
    assert_eq!(
        prod_check_isabelle::checker::split_header("Main", ctx),
        ("Main".to_string(), ctx.to_string())
    );
    assert_eq!(
        prod_check_isabelle::checker::split_header("", ctx),
        (String::new(), ctx.to_string())
    );
    // The checker imports the header's theories and loads the body as the context theory.
    let Some((fake, work)) = setup() else { return };
    let checker = IsabelleChecker::with_version(config(&fake, work.path()), "Isabelle2022");
    let v = checker.check(&CheckRequest::new(
        "",
        "theory T imports \"HOL-Library.Multiset\" begin\ndefinition f where \"f = (0::nat)\"\n",
        "lemma f0: \"f = 0\"",
        ConditionalProof::parse_with("<no_invoke> by (simp add: f_def)", &prod_isar::IsarLanguage)
            .unwrap(),
    ));
    assert!(v.is_proved(), "{v:?}");
    let seen = fake.shared.lock().unwrap().context_files_seen.clone();
    let ctx = std::fs::read_to_string(&seen[0]).unwrap_or_default();
    assert!(
        ctx.contains("imports \"HOL-Library.Multiset\"\nbegin\n\n\ndefinition f"),
        "{ctx}"
    );
    assert!(!ctx.contains("theory T"), "{ctx}");
}

fn assembled() -> Vec<(String, String)> {
    vec![(
        "lemma aux: \"(n::nat) + 0 = n\"".to_string(),
        "by simp".to_string(),
    )]
}

#[test]
fn final_check_builds_the_assembled_theory_in_a_fresh_session() {
    let Some((fake, work)) = setup() else { return };
    let lemmas = assembled();
    let fin = prod_check_isabelle::FinalTheory {
        imports: "Main",
        context: "",
        lemmas: &lemmas,
        statement: "theorem t: \"(m::nat) + 0 + 0 = m\"",
        proof: "by (simp add: aux)",
    };
    let v = prod_check_isabelle::final_check(&config(&fake, work.path()), &fin);
    assert!(v.is_proved(), "{v:?}");
    assert_eq!(
        fake.commands(),
        [
            "session_start",
            "use_theories",
            "purge_theories",
            "session_stop"
        ]
    );
    let text = fake.shared.lock().unwrap().theories[0].clone();
    // The lemma with its proof, after the axiom snapshot; nothing admitted; the root audited.
    let lemma = text
        .find("lemma aux: \"(n::nat) + 0 = n\"\nby simp")
        .expect(&text);
    assert!(text.find("PRODCHK_axioms_").unwrap() < lemma, "{text}");
    assert!(!text.contains("by PRODCHK_admit_"), "{text}");
    assert!(
        text.contains("\"(m::nat) + 0 + 0 = m\"\nby (simp add: aux)"),
        "{text}"
    );
    assert!(fin.text().contains("lemma aux"));

    // An error inside an assembled lemma is a failure of the proof, not of the infrastructure.
    fake.push(UseAction::Replay(
        "use_theories.Fail",
        At::Text("lemma aux".into()),
    ));
    let v = prod_check_isabelle::final_check(&config(&fake, work.path()), &fin);
    match v {
        Verdict::Failed { step: 0, message } => {
            assert!(message.starts_with("assembled lemma 1: "), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The audit sees a `sorry` anywhere below the root.
    fake.push(UseAction::Audit(
        "theorems=1 oracles=Pure.skip_proof axioms=".into(),
    ));
    let v = prod_check_isabelle::final_check(&config(&fake, work.path()), &fin);
    assert!(matches!(v, Verdict::Rejected { .. }), "{v:?}");
}

#[test]
fn final_check_runs_the_rules_on_every_piece() {
    let Some((fake, work)) = setup() else { return };
    for (lemmas, proof) in [
        (
            vec![("lemma aux: \"P\"".to_string(), "sorry".to_string())],
            "by (simp add: aux)",
        ),
        (
            vec![(
                "axiomatization where ax: \"False\"".to_string(),
                "by simp".to_string(),
            )],
            "by simp",
        ),
        (assembled(), "oops"),
    ] {
        let fin = prod_check_isabelle::FinalTheory {
            imports: "Main",
            context: "",
            lemmas: &lemmas,
            statement: "theorem t: \"P\"",
            proof,
        };
        let v = prod_check_isabelle::final_check(&config(&fake, work.path()), &fin);
        assert!(matches!(v, Verdict::Rejected { .. }), "{v:?}");
    }
    // Nothing reached the server.
    assert_eq!(fake.accepts.load(std::sync::atomic::Ordering::SeqCst), 0);
}
