//! Starting a prover's checker from its settings, the same way for every command and job
//! (`prod check`, `prod serve`, the run jobs), and the name its verdicts carry.
//!
//! What wraps the checker differs by caller and stays with it: a run puts it behind the run's
//! verification cache or its shared check queue, `prod check` keeps its own cache to say where
//! each verdict came from. The checker itself, and its name, are made here only.

use std::path::PathBuf;

use prod_check_coq::{CoqCheckConfig, CoqChecker};
use prod_check_isabelle::{IsabelleCheckConfig, IsabelleChecker};

use crate::ProverKind;

/// Where Debian's CoqHammer keeps its helper programs (`htimeout`, `predict`).
const HAMMER_HELPERS: &str = "/usr/libexec/coq-hammer";

/// The version [`start_isabelle`] gives a checker whose server is not up yet (the first check
/// starts it), and so whose Isabelle version is not known.
const NOT_YET_STARTED: &str = "started by prod";

/// The Coq checker's pool for `cfg`, with CoqHammer's helpers on `PATH` (outside the sandbox
/// a `hammer.` step runs them from there).
pub fn start_coq(cfg: CoqCheckConfig) -> Result<CoqChecker, String> {
    hammer_helpers_on_path();
    CoqChecker::new(cfg).map_err(|e| format!("cannot start the Coq checker: {e}"))
}

/// The Isabelle checker for `cfg`: connected to its running server, or, when `cfg` names a
/// command that starts one, a checker whose first check starts the server.
pub fn start_isabelle(cfg: IsabelleCheckConfig) -> Result<IsabelleChecker, String> {
    if cfg.server_command.is_empty() {
        let server = cfg.server.clone();
        IsabelleChecker::connect(cfg)
            .map_err(|e| format!("cannot reach the Isabelle server {server}: {e}"))
    } else {
        Ok(IsabelleChecker::with_version(cfg, NOT_YET_STARTED))
    }
}

/// The name and version a prover's verdicts and reports carry, from its checker's
/// fingerprint: `coq 8.16.1`, `rocq 9.2.0`, `isabelle Isabelle2022` (`isabelle` alone while
/// the version is not known).
pub fn prover_name(kind: ProverKind, fingerprint: &str) -> String {
    match kind {
        ProverKind::Coq => prod_check_coq::prover_name(fingerprint),
        ProverKind::Isabelle => match isabelle_version(fingerprint) {
            Some(v) => format!("isabelle {v}"),
            None => "isabelle".to_string(),
        },
    }
}

/// `Isabelle2022` from an Isabelle checker's fingerprint (`isabelle: Isabelle2022 (id); …`).
fn isabelle_version(fingerprint: &str) -> Option<&str> {
    let version = fingerprint.strip_prefix("isabelle: ")?.split(';').next()?;
    if version == NOT_YET_STARTED {
        return None;
    }
    version.split(' ').next().filter(|v| !v.is_empty())
}

/// Puts [`HAMMER_HELPERS`] on this process's `PATH` when it exists and is not there yet.
fn hammer_helpers_on_path() {
    let Some(path) = std::env::var_os("PATH") else {
        return;
    };
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    let helpers = PathBuf::from(HAMMER_HELPERS);
    if helpers.is_dir() && !dirs.contains(&helpers) {
        dirs.push(helpers);
        if let Ok(joined) = std::env::join_paths(dirs) {
            std::env::set_var("PATH", joined);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_fingerprints() {
        let isabelle = |fp: &str| prover_name(ProverKind::Isabelle, fp);
        assert_eq!(
            isabelle("isabelle: Isabelle2022 (fake); session HOL"),
            "isabelle Isabelle2022"
        );
        assert_eq!(
            isabelle(&format!("isabelle: {NOT_YET_STARTED}; session HOL")),
            "isabelle"
        );
        assert_eq!(isabelle("nonsense"), "isabelle");
        assert_eq!(
            prover_name(ProverKind::Coq, "coqtop version 8.16.1; workers 2"),
            prod_check_coq::prover_name("coqtop version 8.16.1; workers 2")
        );
    }

    #[test]
    fn a_server_started_by_the_first_check_needs_no_connection() {
        let cfg = IsabelleCheckConfig {
            server_command: vec!["isabelle".into(), "server".into()],
            ..Default::default()
        };
        let c = start_isabelle(cfg).unwrap();
        assert_eq!(c.connections_opened(), 0);
        let fp = prod_check::Checker::fingerprint(&c);
        assert_eq!(prover_name(ProverKind::Isabelle, &fp), "isabelle");
    }
}
