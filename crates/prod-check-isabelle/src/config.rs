//! Configuration of the Isabelle checker (`[check.isabelle]` in `prod.toml`; the lead loads the
//! file and hands this section over).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Options of the Isabelle backend. Every field has a default (`#[serde(default)]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IsabelleCheckConfig {
    /// `HOST:PORT` of a running `isabelle server` (its first output line names it).
    pub server: String,
    /// The server's password (the UUID in that first line).
    pub password: String,
    /// How to start a server when nobody listens at `server` (also after it died), e.g.
    /// `["isabelle", "server", "-n", "prod"]`; its first output line gives the address and
    /// password. Empty: never start one (a dead server gives `Infra` until it is back).
    pub server_command: Vec<String>,
    /// Logic session to start, e.g. `HOL`, `HOL-Analysis`, or an AFP entry's session.
    pub session: String,
    /// Extra directories with `ROOT`/`ROOTS` files, e.g. `["/opt/afp-2022-12-06/thys"]`.
    pub dirs: Vec<String>,
    /// Extra system options for `session_start` (`"name=value"`). Worth trying:
    /// `headless_consolidate_delay=0.5` (the default 2 s is added to every check); not set by
    /// default because an option the server does not know makes `session_start` fail.
    pub options: Vec<String>,
    /// Where the checker writes theory files. It must be visible to the server under the same
    /// path (same machine or shared file system). Empty: the session's own `tmp_dir`.
    pub work_dir: Option<PathBuf>,
    /// Parallel checks (each its own connection to the same session).
    pub workers: usize,
    /// `use_theories` watchdog: the check ends when no command made progress for this long —
    /// the closest the server offers to a per-step time limit (seconds).
    pub step_timeout_s: u32,
    /// Wall-clock limit of one `use_theories` pass (seconds); the task is cancelled after it.
    pub attempt_timeout_s: u32,
    /// Limit for `session_start` (builds the heap if it is missing: can take hours).
    pub session_start_timeout_s: u32,
    /// Limit for synchronous commands (`purge_theories`, `cancel`, the handshake).
    pub command_timeout_s: u32,
    /// Total runs of a request whose verdict is `Infra`.
    pub max_attempts: u32,
    /// Oracles a proof may use besides the proposed lemmas (full names). The default accepts
    /// `by eval` (code generator evaluation), which the paper's sledgehammer list contains.
    pub allowed_oracles: Vec<String>,
    /// Command keywords of the session beyond Pure, HOL and the distribution (e.g. those the
    /// AFP theories in the imports declare), in `keywords` header syntax:
    /// `"foo" :: thy_decl and "bar" :: prf_decl`. A known command that is not a proof command
    /// is rejected in untrusted text; an unknown one would be taken for a plain word.
    pub extra_keywords: String,
    pub hammer: HammerConfig,
}

impl Default for IsabelleCheckConfig {
    fn default() -> Self {
        IsabelleCheckConfig {
            server: "127.0.0.1:4711".into(),
            password: String::new(),
            server_command: vec![],
            session: "HOL".into(),
            dirs: vec![],
            options: vec![],
            work_dir: None,
            workers: 1,
            step_timeout_s: prod_check::TimeLimits::DEFAULT.step_s,
            attempt_timeout_s: prod_check::TimeLimits::DEFAULT.attempt_s,
            session_start_timeout_s: 3600,
            command_timeout_s: 60,
            max_attempts: 3,
            allowed_oracles: vec!["Code_Generator.holds_by_evaluation".into()],
            extra_keywords: String::new(),
            hammer: HammerConfig::default(),
        }
    }
}

impl IsabelleCheckConfig {
    /// Every number in its range; the error names the key, e.g. `workers = 0: must be at
    /// least 1`.
    pub fn validate(&self) -> Result<(), String> {
        let at_least_one: [(&str, u64); 7] = [
            ("workers", self.workers as u64),
            ("step_timeout_s", self.step_timeout_s.into()),
            ("attempt_timeout_s", self.attempt_timeout_s.into()),
            (
                "session_start_timeout_s",
                self.session_start_timeout_s.into(),
            ),
            ("command_timeout_s", self.command_timeout_s.into()),
            ("max_attempts", self.max_attempts.into()),
            ("hammer.timeout_s", self.hammer.timeout_s.into()),
        ];
        at_least_one
            .into_iter()
            .try_for_each(|(key, v)| prod_core::range::Range::at_least_one(key, v))
    }
}

/// The `sledgehammer` step (paper, appendix: the fixed list first, then Sledgehammer itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HammerConfig {
    /// Expand `sledgehammer` steps. When off, they fail like any step that proves nothing.
    pub enabled: bool,
    /// Tried in order; the first that closes the goal is recorded as the replacement.
    pub fixed_methods: Vec<String>,
    /// Run Sledgehammer itself when the fixed list fails.
    pub use_atp: bool,
    /// `sledgehammer [timeout = N]`.
    pub timeout_s: u32,
}

impl Default for HammerConfig {
    fn default() -> Self {
        HammerConfig {
            enabled: true,
            // The paper's list, shared with the dataset's sledgehammer rule.
            fixed_methods: prod_isar::sledgehammer::SIMPLE_STEPS
                .map(String::from)
                .to_vec(),
            use_atp: true,
            timeout_s: 10,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_key_out_of_range() {
        let mut c = IsabelleCheckConfig::default();
        assert_eq!(c.validate(), Ok(()));
        c.command_timeout_s = 0;
        assert_eq!(
            c.validate(),
            Err("command_timeout_s = 0: must be at least 1".into())
        );
        c.workers = 0;
        assert_eq!(c.validate(), Err("workers = 0: must be at least 1".into()));
    }
}
