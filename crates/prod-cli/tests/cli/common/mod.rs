//! Shared by the integration tests of `prod`.

/// `prod ARGS` as a user without a config file runs it (`PROD_CONFIG` unset): the exit code,
/// stdout and stderr.
pub fn prod<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    prod_test_support::run(
        std::process::Command::new(env!("CARGO_BIN_EXE_prod"))
            .args(args)
            .env_remove("PROD_CONFIG"),
    )
}

/// Start `prod serve ARGS` (PROD_API_KEY unset) and wait for its address line; its stderr is
/// drained from then on so the server never blocks on a full pipe. Returns the child and
/// `HOST:PORT`.
#[allow(dead_code)] // only the serve tests start a server
pub fn start_serve(args: &[&str]) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_prod"))
        .arg("serve")
        .args(args)
        .env_remove("PROD_API_KEY")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prod serve starts");
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "prod serve exited");
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (child, addr)
}

/// The one Coq file of the binary tests' small datasets.
#[allow(dead_code)] // only the dataset-building tests use it
pub const SOURCE: &str =
    "From Coq Require Import Arith Lia.\nDefinition double (n : nat) := n + n.\n";

/// A dataset line (with its newline) about a theorem of [`SOURCE`].
#[allow(dead_code)] // only the dataset-building tests use it
pub fn line(name: &str, statement: &str, proof: &str, lemmas: &[&str], variant: &str) -> String {
    let e = prod_library::dataset::Example {
        id: format!("Fix:{name}"),
        library: "fixture".into(),
        package: "fixture".into(),
        file: "Fix.v".into(),
        logical_path: "Fix".into(),
        line: 3,
        position: 0,
        scope: vec![],
        qualified_name: name.into(),
        name: name.into(),
        imports: vec![],
        flags: vec![],
        context: SOURCE.into(),
        context_start: 0,
        context_end: SOURCE.len(),
        context_extra: String::new(),
        context_axioms: vec![],
        statement: statement.into(),
        conditional_proof: proof.into(),
        conditional_proof_original: proof.into(),
        proposed_lemmas: lemmas.iter().map(|s| s.to_string()).collect(),
        proposed_names: vec![],
        depth: u32::from(!lemmas.is_empty()),
        in_tree: true,
        proof_end: "qed".into(),
        replaced_steps: 0,
        split: "train".into(),
        variant: variant.into(),
    };
    serde_json::to_string(&e).unwrap() + "\n"
}

/// A scripted policy for `prod eval --remote-url`: a fake inference server whose completions
/// are `answers` in turn, and in `tmp/model` a model folder holding only the tokenizer (all
/// `--remote-url` needs) for the `project_r` fixture's text.
#[cfg(feature = "policy")]
#[allow(dead_code)] // not every test binary evaluates
pub fn scripted_policy(
    tmp: &std::path::Path,
    answers: &'static [&'static str],
) -> (prod_remote::testing::Fake, std::path::PathBuf) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let turn = std::sync::Arc::new(AtomicUsize::new(0));
    let fake = prod_remote::testing::serve(std::sync::Arc::new(
        move |_path: &str, req: &serde_json::Value, _n: usize| {
            let n = req["n"].as_u64().unwrap_or(1);
            let choices: Vec<serde_json::Value> = (0..n)
                .map(|i| {
                    let text = answers[turn.fetch_add(1, Ordering::Relaxed) % answers.len()];
                    serde_json::json!({"index": i, "text": text})
                })
                .collect();
            (200, serde_json::json!({"choices": choices}).to_string())
        },
    ));
    let model = tmp.join("model");
    std::fs::create_dir_all(&model).unwrap();
    let texts = [
        "From MyLib Require Import Base.",
        "Lemma other_a : twice 0 + 0 = 0.",
    ];
    let tok =
        prod_policy::ProdTokenizer::train_bpe(texts.iter().map(|s| s.to_string()), 300, 1).unwrap();
    tok.save(&model.join("tokenizer.json")).unwrap();
    (fake, model)
}

/// Are Coq and the Debian CoqHammer package installed? (A test that needs them is skipped
/// here, and fails under `CI=true`, when they are not.)
#[allow(dead_code)] // only the hammer tests use it
pub fn have_coq_hammer() -> bool {
    let ok = std::process::Command::new("coqtop")
        .arg("-v")
        .output()
        .is_ok()
        && std::path::Path::new("/var/lib/dpkg/info/libcoq-hammer.list").exists();
    prod_test_support::require(
        ok,
        "coqtop or libcoq-hammer is not installed (scripts/install-deps.sh)",
    )
}
