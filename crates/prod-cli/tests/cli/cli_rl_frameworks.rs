//! ProD's rewards inside the real RL frameworks: `python/tests/test_frameworks.py` run with the
//! RL venv's interpreter (`PROD_RL_PYTHON`: TRL, verl and OpenRLHF pinned by
//! `python/requirements-rl.txt`, installed by `scripts/install-deps.sh --with-python`) against
//! two real `prod serve` servers with the real Coq. TRL's GRPO trainer runs three steps on the
//! CPU with a tiny model and must log the checker's rewards, also with the marker in the prompt
//! and an async reward spread over both servers, one of which the test kills mid-run; verl's
//! reward loop loads ProD's reward from its own config (end tokens, marker in the prompt);
//! OpenRLHF's rollout executor gets the checker's rewards from `prod_client.openrlhf`, also for
//! prompts it cut from the left; and `python/tests/test_docs.py` checks the commands of
//! docs/serve.md against the same frameworks. Without the interpreter the test is skipped,
//! except under `CI=true`, where it fails.

use std::path::PathBuf;
use std::process::Command;

use crate::common;

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
    let args = [
        "--addr",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--no-hammer",
        "--api-key",
        KEY,
    ];
    let (mut child, addr) = common::start_serve(&args);
    // The second server, which the TRL test kills (SIGKILL) while it checks.
    let (mut child_b, addr_b) = common::start_serve(&args);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let out = Command::new(&python)
        .args([
            "-m",
            "unittest",
            "-v",
            "tests.test_frameworks",
            "tests.test_docs",
        ])
        .current_dir(&root)
        .env("PYTHONPATH", &root)
        .env("PROD_SERVE_URL", format!("http://{addr}"))
        .env("PROD_API_KEY", KEY)
        .env("PROD_SERVE_URL_B", format!("http://{addr_b}"))
        .env("PROD_SERVE_PID_B", child_b.id().to_string())
        .env("PROD_BIN", env!("CARGO_BIN_EXE_prod"))
        // No telemetry or hub look-ups from the frameworks (nothing outside is reachable).
        .env("HF_HUB_OFFLINE", "1")
        .env("WANDB_MODE", "disabled")
        .env("RAY_USAGE_STATS_ENABLED", "0")
        .output()
        .expect("run PROD_RL_PYTHON");
    for c in [&mut child, &mut child_b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the framework tests failed:\n{}\n{err}",
        String::from_utf8_lossy(&out.stdout)
    );
    for t in [
        "Trl.test_grpo_logs_the_checkers_rewards",
        "Trl.test_marker_in_prompt_async_reward_over_two_servers_one_killed",
        "Verl.test_documented_file_path_with_a_prod_tokenizer",
        "Verl.test_reward_manager_keeps_special_markers",
        "Verl.test_marker_in_the_prompt",
        "OpenRlhf.test_remote_reward_server",
        "OpenRlhf.test_python_file_reward",
        "OpenRlhf.test_prompt_cut_from_the_left",
        "OpenRlhf.test_marker_in_the_prompt",
    ]
    .map(|t| format!("tests.test_frameworks.{t})"))
    .into_iter()
    .chain(
        [
            "test_verl_command_composes_and_loads_the_reward",
            "test_openrlhf_command_uses_flags_that_exist",
            "test_reward_server_command_parses",
            "test_trl_block_builds_its_config",
            "test_prod_commands_use_flags_that_exist",
        ]
        .map(|t| format!("tests.test_docs.Docs.{t})")),
    ) {
        assert!(err.contains(&t), "{t} did not run:\n{err}");
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

/// The client as a wheel: `pip wheel ./python` builds one, a fresh venv installs it without an
/// index, and the installed package (not the source folder) passes the offline tests, with
/// its metadata's version the one the package reports.
#[test]
fn the_client_wheel_installs_and_runs_in_a_fresh_venv() {
    let python = std::env::var_os("PROD_PYTHON")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    if !prod_test_support::require(
        python.as_ref().is_some_and(|p| p.exists()),
        "PROD_PYTHON (a Python with pip) is not set or missing",
    ) {
        return;
    }
    let python = python.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let copy = tmp.path().join("python");
    prod_test_support::copy_tree(&src, &copy);
    let run = |cmd: &mut Command, what: &str| {
        let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let wheels = tmp.path().join("wheels");
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-cache-dir",
                "-w",
            ])
            .arg(&wheels)
            .arg(&copy),
        "pip wheel ./python",
    );
    let wheel: Vec<PathBuf> = std::fs::read_dir(&wheels)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert_eq!(wheel.len(), 1, "{wheel:?}");
    let venv = tmp.path().join("venv");
    run(
        Command::new(&python).args(["-m", "venv"]).arg(&venv),
        "python -m venv",
    );
    let vpy = venv.join("bin/python");
    run(
        Command::new(&vpy)
            .args(["-m", "pip", "install", "-q", "--no-index"])
            .arg(&wheel[0]),
        "pip install the wheel",
    );
    // Run from a folder without the sources: the tests import the installed package.
    let work = tmp.path().join("work");
    prod_test_support::copy_tree(&src.join("tests"), &work.join("tests"));
    let where_ = run(
        Command::new(&vpy)
            .args([
                "-c",
                "import importlib.metadata as m, prod_client, prod_client.aio, prod_client.openrlhf; \
                 assert m.version('prod-client') == prod_client.__version__, prod_client.__version__; \
                 print(prod_client.__file__)",
            ])
            .current_dir(&work),
        "import the installed package",
    );
    assert!(
        where_.contains("site-packages"),
        "not the installed package: {where_}"
    );
    let out = Command::new(&vpy)
        .args(["-m", "unittest", "-v", "tests.test_offline"])
        .current_dir(&work)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "offline tests on the wheel:\n{err}");
    assert!(err.contains("Ran ") && !err.contains("skipped"), "{err}");
}
