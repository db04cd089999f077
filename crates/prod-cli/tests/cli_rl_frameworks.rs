//! ProD's rewards inside the real RL frameworks: `python/tests/test_frameworks.py` run with the
//! RL venv's interpreter (`PROD_RL_PYTHON`: TRL, verl and OpenRLHF pinned by
//! `python/requirements-rl.txt`, installed by `scripts/install-deps.sh --with-python`) against
//! the real `prod serve` with the real Coq. TRL's GRPO trainer runs three steps on the CPU with
//! a tiny model and must log the checker's rewards; verl's reward loop loads ProD's reward from
//! its own config; OpenRLHF's rollout executor gets the checker's rewards from
//! `prod_client.openrlhf`. Without the interpreter the test is skipped, except under `CI=true`,
//! where it fails.

use std::path::PathBuf;
use std::process::Command;

mod common;

const KEY: &str = "rl-key";

#[test]
fn trl_verl_and_openrlhf_get_the_checkers_rewards() {
    let python = std::env::var_os("PROD_RL_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let here = python.as_ref().is_some_and(|p| p.exists());
    if !prod_test_support::require(
        here,
        "PROD_RL_PYTHON (the RL venv of scripts/install-deps.sh --with-python) is not set or missing",
    ) {
        return;
    }
    let python = python.unwrap();
    let (mut child, addr) = common::start_serve(&[
        "--addr",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-hammer",
        "--api-key",
        KEY,
    ]);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let out = Command::new(&python)
        .args(["-m", "unittest", "-v", "tests.test_frameworks"])
        .current_dir(&root)
        .env("PYTHONPATH", &root)
        .env("PROD_SERVE_URL", format!("http://{addr}"))
        .env("PROD_API_KEY", KEY)
        // No telemetry or hub look-ups from the frameworks (nothing outside is reachable).
        .env("HF_HUB_OFFLINE", "1")
        .env("WANDB_MODE", "disabled")
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .output()
        .expect("run PROD_RL_PYTHON");
    let _ = child.kill();
    let _ = child.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the framework tests failed:\n{}\n{err}",
        String::from_utf8_lossy(&out.stdout)
    );
    for t in [
        "test_grpo_logs_the_checkers_rewards",
        "test_documented_file_path_with_a_prod_tokenizer",
        "test_reward_manager_keeps_special_markers",
        "test_remote_reward_server",
        "test_python_file_reward",
    ] {
        assert!(err.contains(&format!("{t} (")), "{t} did not run:\n{err}");
    }
    assert!(!err.contains("skipped"), "{err}");
}

/// `pip install ./python` builds the client without writing into the source folder (no
/// `build/`, no `*.egg-info`): checked on a copy, installed into a scratch target.
#[test]
fn pip_install_leaves_the_python_folder_as_it_was() {
    let python = std::env::var_os("PROD_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    if !prod_test_support::require(
        python.as_ref().is_some_and(|p| p.exists()),
        "PROD_PYTHON (a Python with pip) is not set or missing",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("python");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../python");
    prod_test_support::copy_tree(&src, &copy);
    let listing = |dir: &std::path::Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing(&copy);
    let out = Command::new(python.unwrap())
        .args(["-m", "pip", "install", "-q", "--no-cache-dir", "--target"])
        .arg(tmp.path().join("site"))
        .arg(&copy)
        .output()
        .expect("run pip");
    assert!(
        out.status.success(),
        "pip install ./python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp.path().join("site/prod_client/reward.py").is_file());
    assert_eq!(
        listing(&copy),
        before,
        "pip install wrote into the source folder"
    );
}
