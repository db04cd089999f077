//! Configuration of the Coq checker (`[check.coq]` in `prod.toml`; the lead loads the file and
//! hands this section over).

use std::path::PathBuf;
use std::time::Duration;

use prod_check::TimeLimits;
use serde::{Deserialize, Serialize};

/// Options of the Coq backend. Every field has a default (`#[serde(default)]`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct CoqCheckConfig {
    /// Persistent `coqtop` workers (0 = one per core).
    pub workers: usize,
    /// Time limit of one proof step (Coq `Set Default Timeout`), in seconds.
    pub step_timeout_s: u32,
    /// Address-space limit of each Coq process (`prlimit --as`), in MiB.
    pub memory_limit_mb: u64,
    /// Restart a worker after this many attempts (Coq's memory grows ~100 MB per 1,000).
    pub recycle_after: u64,
    /// Restart a worker whose resident memory exceeds this many MiB.
    pub recycle_rss_mb: u64,
    /// Time limit for loading one context (imports + context text), in seconds.
    pub context_timeout_s: u32,
    /// Time budget of a whole attempt (all its steps), in seconds: a proof of thousands of
    /// steps each just under `step_timeout_s` is stopped here.
    pub attempt_timeout_s: u32,
    /// Run Coq under bubblewrap (no network, read-only file system, private `/tmp`). Only turn
    /// off on a machine without `bwrap`; the checks stay sound but proofs could touch files.
    pub sandbox: bool,
    /// Total runs of a request whose verdict is `Infra`.
    pub max_attempts: u32,
    /// A Debian root that holds the prover instead of the host (Rocq 9.2 from
    /// `scripts/install-rocq.sh`, see docs/provers.md): the sandbox mounts its `/usr`, `/lib*`
    /// and `/etc` files read-only in place of the host's, so `coqtop`, `coqc` and `coqchk` are
    /// the root's. Needs `sandbox = true`; the ProD plugin is built by the root's toolchain.
    pub root: Option<PathBuf>,
    pub coqtop: PathBuf,
    pub coqc: PathBuf,
    /// Coq's independent checker; the final check of an assembled proof re-checks the compiled
    /// file with it (`coqchk -norec`) when `final_coqchk` is on.
    pub coqchk: PathBuf,
    pub final_coqchk: bool,
    /// On Coq 8.16, print assumptions with the ProD plugin's `ProdAssumptions` (same output as
    /// `Print Assumptions`, with the walk of library constants remembered across checks). The
    /// plugin itself is always loaded: it holds the term audit.
    pub assumptions_plugin: bool,
    /// Where the plugin is compiled (must be readable inside the sandbox, so not `/tmp`);
    /// default `$XDG_CACHE_HOME/prod/coq-plugin` or `~/.cache/prod/coq-plugin`.
    pub plugin_cache_dir: Option<PathBuf>,
    /// Set by the pool when the plugin is built and loads (not a configuration key); the
    /// checker does not start without it.
    #[serde(skip)]
    pub plugin: Option<PluginPaths>,
    pub hammer: HammerConfig,
    /// The per-goal memory of `hammer.` results and the attempt's scope in it; set by the pool
    /// for each attempt (not a configuration key). See [`crate::hammer_cache`].
    #[serde(skip)]
    pub hammer_cache: Option<crate::hammer_cache::HammerCacheHandle>,
    /// Extra axioms accepted anywhere (fully qualified names, e.g.
    /// `Coq.Logic.FunctionalExtensionality.functional_extensionality_dep`). Normally empty: the
    /// context's own axioms are always accepted.
    pub allowed_axioms: Vec<String>,
    /// Compiled libraries that are not installed (a user's own project, compiled into its
    /// dataset's `lib/`): each bound with `-Q dir Root` in every worker, the final `coqc` and
    /// `coqchk`, its directory mounted read-only in the sandbox. Normally taken from the
    /// dataset's `stats.json` (only directories inside the dataset) or `--load-path`; a root may
    /// not shadow the prover's own or an installed library, and the compiled files are part of
    /// the checker's fingerprint.
    pub load_paths: Vec<LoadPathBinding>,
}

/// What a Coq process needs to load the ProD plugin (built by `plugin.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginPaths {
    /// Pass `-I <ml_path>` to coqtop/coqc (findlib looks for `coq-prod-assumptions/META`
    /// there); inside bubblewrap this directory must be bound read-only at the same path.
    pub ml_path: PathBuf,
    /// The compiled plugin (`<ml_path>/coq-prod-assumptions/prod_assumptions_plugin.cmxs`).
    pub cmxs: PathBuf,
    /// The sentence that loads it, sent once per worker before the context.
    pub declare_sentence: &'static str,
    /// The plugin's memoised `Print Assumptions` (`ProdAssumptions`, Coq 8.16), when this build
    /// has it.
    pub print_command: Option<&'static str>,
    /// How long the build took; `None` when an earlier build was reused.
    pub build_time: Option<Duration>,
}

impl PluginPaths {
    /// coqtop arguments that make the declare sentence work.
    pub fn coqtop_args(&self) -> Vec<String> {
        vec!["-I".into(), self.ml_path.to_string_lossy().into_owned()]
    }

    /// Directories the sandbox must bind read-only at the same path (`--ro-bind d d`).
    pub fn ro_binds(&self) -> Vec<PathBuf> {
        vec![self.ml_path.clone()]
    }
}

/// A logical root bound to a directory of compiled `.vo` files (`-Q dir Root`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoadPathBinding {
    /// An absolute, existing directory (canonicalised when the checker starts).
    pub dir: PathBuf,
    /// The logical root, e.g. `MyLib`.
    pub logical: String,
}

/// Logical roots of the prover itself (Coq 8, Rocq 9): never bound by a [`LoadPathBinding`].
pub const PROVER_ROOTS: &[&str] = &["Coq", "Stdlib", "Corelib", "Rocq", "Ltac2"];

impl LoadPathBinding {
    /// `DIR=Root` (the `--load-path` flag).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (dir, logical) = s
            .rsplit_once('=')
            .ok_or_else(|| format!("{s:?}: expected DIR=Root, e.g. data/mine/lib/MyLib=MyLib"))?;
        Ok(LoadPathBinding {
            dir: PathBuf::from(dir),
            logical: logical.to_string(),
        })
    }

    /// The binding's own rules: a dotted identifier that is not the prover's root, an existing
    /// directory. Shadowing an installed library is checked where the library directory is
    /// known ([`crate::CoqChecker::new`]).
    pub fn validate(&self) -> Result<(), String> {
        let what = format!("load path {}={}", self.dir.display(), self.logical);
        if self.logical.is_empty() || !self.logical.split('.').all(prod_coq::is_identifier) {
            return Err(format!(
                "{what}: the logical root is not a dotted identifier"
            ));
        }
        let first = self.logical.split('.').next().unwrap_or_default();
        if PROVER_ROOTS.contains(&first) {
            return Err(format!(
                "{what}: {first} is the prover's own library; binding it would shadow it"
            ));
        }
        if !self.dir.is_dir() {
            return Err(format!("{what}: not a directory"));
        }
        Ok(())
    }
}

impl Default for CoqCheckConfig {
    fn default() -> Self {
        CoqCheckConfig {
            workers: 0,
            step_timeout_s: TimeLimits::DEFAULT.step_s,
            memory_limit_mb: 4096,
            recycle_after: 2000,
            recycle_rss_mb: 2048,
            context_timeout_s: 300,
            attempt_timeout_s: TimeLimits::DEFAULT.attempt_s,
            sandbox: true,
            max_attempts: 3,
            root: None,
            coqtop: PathBuf::from("coqtop"),
            coqc: PathBuf::from("coqc"),
            coqchk: PathBuf::from("coqchk"),
            final_coqchk: true,
            assumptions_plugin: true,
            plugin_cache_dir: None,
            plugin: None,
            hammer: HammerConfig::default(),
            hammer_cache: None,
            allowed_axioms: vec![],
            load_paths: vec![],
        }
    }
}

/// Flags every checking Coq process gets (one list with the dataset's compiled projects).
pub use prod_coq::PROVER_FLAGS;

impl CoqCheckConfig {
    /// The time limit of one proof step (and of `Qed`).
    pub fn step_limit(&self) -> Duration {
        Duration::from_secs(self.step_timeout_s.into())
    }

    /// The time budget of a whole attempt.
    pub fn attempt_limit(&self) -> Duration {
        Duration::from_secs(self.attempt_timeout_s.into())
    }

    /// The command that prints a constant's assumptions in a worker.
    pub fn assumptions_command(&self) -> &'static str {
        match self.plugin.as_ref().and_then(|p| p.print_command) {
            Some(c) if self.assumptions_plugin => c,
            _ => "Print Assumptions",
        }
    }

    /// The plugin's build directory.
    pub fn plugin_dir(&self) -> PathBuf {
        if let Some(d) = &self.plugin_cache_dir {
            return d.clone();
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        base.join("prod").join("coq-plugin")
    }

    /// Every number in its range (`workers` may be 0: one per core); the error names the key,
    /// e.g. `step_timeout_s = 0: must be at least 1`.
    pub fn validate(&self) -> Result<(), String> {
        let h = &self.hammer;
        let at_least_one: [(&str, u64); 11] = [
            ("step_timeout_s", self.step_timeout_s.into()),
            ("attempt_timeout_s", self.attempt_timeout_s.into()),
            ("context_timeout_s", self.context_timeout_s.into()),
            ("memory_limit_mb", self.memory_limit_mb),
            ("recycle_after", self.recycle_after),
            ("recycle_rss_mb", self.recycle_rss_mb),
            ("max_attempts", self.max_attempts.into()),
            ("hammer.atp_limit_s", h.atp_limit_s.into()),
            ("hammer.timeout_s", h.timeout_s.into()),
            ("hammer.gs_mode", h.gs_mode.into()),
            ("hammer.reconstr_limit_s", h.reconstr_limit_s.into()),
        ];
        for (key, v) in at_least_one {
            prod_core::range::Range::at_least_one(key, v)?;
        }
        if let Some(root) = &self.root {
            if !self.sandbox {
                return Err(
                    "root: a prover root is mounted by the sandbox; needs sandbox = true".into(),
                );
            }
            if !root.join("usr/bin").is_dir() {
                return Err(format!(
                    "root = {}: not a Debian root (no usr/bin); build one with scripts/install-rocq.sh",
                    root.display()
                ));
            }
        }
        for lp in &self.load_paths {
            lp.validate()?;
        }
        for (i, t) in h.fixed_tactics.iter().enumerate() {
            let key = format!("hammer.fixed_tactics[{i}].timeout_s");
            prod_core::range::Range::at_least_one(&key, t.timeout_s.into())
                .map_err(|e| e.replacen(": must", &format!(" ({}): must", t.tactic), 1))?;
        }
        Ok(())
    }

    /// The number of workers to start.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    }
}

/// One tactic of the fixed list tried before CoqHammer, with its own time limit.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct FixedTactic {
    pub tactic: String,
    pub timeout_s: u32,
}

/// The `hammer.` step (paper §4.1: fixed tactic list first, then the premise-selection tool).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct HammerConfig {
    /// Load CoqHammer (`From Hammer Require Import Hammer.`) right after the imports of every
    /// context, and expand `hammer.` steps. When off, `hammer.` is an ordinary (failing) tactic.
    pub enabled: bool,
    /// Tried in order; the first that closes the goal is recorded as the replacement.
    pub fixed_tactics: Vec<FixedTactic>,
    /// Run CoqHammer itself when the fixed list fails.
    pub use_atp: bool,
    /// `Set Hammer ATPLimit` (seconds).
    pub atp_limit_s: u32,
    /// Wall-clock limit of the whole `hammer` call (feature extraction + ATPs + reconstruction).
    pub timeout_s: u32,
    /// `Set Hammer GSMode` (parallel strategies; ≈ cores).
    pub gs_mode: u32,
    /// `Set Hammer SAutoLimit` (seconds): CoqHammer's own `sauto` try before its provers; 0
    /// turns it off (the fixed list has tried `sauto` already when it holds it).
    pub sauto_limit_s: u32,
    /// `Set Hammer ReconstrLimit` (seconds): each reconstruction try of a provers' proof.
    pub reconstr_limit_s: u32,
    /// Turn off (`Unset Hammer Vampire.` …) the provers whose program the checker's Coq cannot
    /// run. CoqHammer schedules its parallel strategies (`gs_mode` of them) over every prover it
    /// knows, installed or not: without this, a strategy slot given to a missing Vampire or Z3
    /// fails at once and the call runs on fewer provers than `gs_mode`.
    pub only_installed_provers: bool,
    /// CoqHammer's provers turned off, found at the checker's start when
    /// `only_installed_provers` is on (their option names: `Vampire`, `Z3` …); not a
    /// configuration key.
    #[serde(skip)]
    pub unset_provers: Vec<&'static str>,
}

/// CoqHammer's provers: the option that turns each off (`Hammer Vampire`) and the program it
/// runs.
pub const HAMMER_PROVERS: [(&str, &str); 4] = [
    ("Vampire", "vampire"),
    ("Eprover", "eprover"),
    ("Z3", "z3_tptp"),
    ("CVC4", "cvc4"),
];

fn fixed(tactic: &str, timeout_s: u32) -> FixedTactic {
    FixedTactic {
        tactic: tactic.into(),
        timeout_s,
    }
}

/// CoqHammer's own strong tactics first, then every simple tactic a dataset replaces by
/// `hammer.` (`prod_coq::HAMMER_CLOSING_TACTICS`, `HAMMER_MAYBE_CLOSING_TACTICS`) that is not
/// already there: a replaced step is always found again by the tactic it was. Each gets 1 s:
/// on a goal it does not close, `sauto` runs to its limit; `best` (which does not always
/// stop at its `timeout`) and `intros; sauto` (`sauto` introduces) are left to the provers'
/// reconstruction (`prod bench hammer` measures the list against [`HammerConfig::before`]).
fn default_fixed_tactics() -> Vec<FixedTactic> {
    let mut list = vec![
        fixed("lia", 1),
        fixed("sfirstorder", 1),
        fixed("sauto", 1),
        fixed("(intuition auto with *)", 1),
        fixed("congruence", 1),
        fixed("(auto with *)", 1),
    ];
    let simple = prod_coq::HAMMER_CLOSING_TACTICS
        .iter()
        .chain(prod_coq::HAMMER_MAYBE_CLOSING_TACTICS);
    for t in simple {
        if !list.iter().any(|f| f.tactic == *t) {
            list.push(fixed(t, 1));
        }
    }
    list
}

impl Default for HammerConfig {
    fn default() -> Self {
        HammerConfig {
            enabled: true,
            fixed_tactics: default_fixed_tactics(),
            use_atp: true,
            // Read off `prod bench hammer`'s curve (docs/results.md §10): on the stdlib's test
            // roots the provers at 2 s prove as many goals as the hammer did before at a quarter
            // of its seconds; at 3 s or 5 s they prove a goal or two more for 1.5–1.7× the time.
            atp_limit_s: 2,
            // A worker's first call extracts the features of every object in scope (about
            // 15 s for the stdlib; later calls reuse them): the whole call keeps room for it.
            timeout_s: 30,
            gs_mode: 2,
            sauto_limit_s: 0,
            reconstr_limit_s: 5,
            only_installed_provers: true,
            unset_provers: Vec::new(),
        }
    }
}

impl HammerConfig {
    /// The hammer as it was before `prod bench hammer` measured it: `sauto`, `intros; sauto`
    /// and `best` at 2 s in the fixed list, CoqHammer's own `sauto` try (1 s), the provers at
    /// 10 s within 40 s, and strategy slots given to provers that are not installed.
    pub fn before() -> HammerConfig {
        let mut fixed_tactics = vec![
            fixed("lia", 1),
            fixed("sfirstorder", 1),
            fixed("sauto", 2),
            fixed("(intros; sauto)", 2),
            fixed("best", 2),
        ];
        fixed_tactics.extend(
            default_fixed_tactics()
                .into_iter()
                .filter(|t| !["lia", "sfirstorder", "sauto"].contains(&t.tactic.as_str())),
        );
        HammerConfig {
            fixed_tactics,
            atp_limit_s: 10,
            timeout_s: 40,
            sauto_limit_s: 1,
            only_installed_provers: false,
            ..HammerConfig::default()
        }
    }
}

/// The line a file needs so that hammer's replacement tactics (`sauto`, `hauto use: …`) run
/// without any external prover. Assembly must add it after the imports when a proof has
/// replacements or uses these tactics directly.
pub const HAMMER_TACTICS_IMPORT: &str = "From Hammer Require Import Tactics.";

/// What every checked node and every assembled file says right after its context. A library
/// that sets `Default Proof Using "Type"` (iris, stdpp, reglang) makes `Qed` refuse a proof
/// that uses a section variable its statement does not mention; the original proof said which
/// with `Proof using X`, a clause no node carries. Unset, Coq computes the section variables a
/// proof uses when the section ends: it only decides what a lemma is abstracted over after
/// `End`, never whether a proof is accepted.
pub const AFTER_CONTEXT: &str = "Unset Default Proof Using.";

/// What the checker loads after the imports when hammer is enabled.
pub const HAMMER_PLUGIN_IMPORT: &str = "From Hammer Require Import Hammer.";

#[cfg(test)]
mod tests {
    use super::*;

    fn validate_with(f: impl FnOnce(&mut CoqCheckConfig)) -> Result<(), String> {
        let mut c = CoqCheckConfig::default();
        f(&mut c);
        c.validate()
    }

    /// A dataset's `hammer.` stands for one of these tactics: the checker must try each.
    #[test]
    fn hammer_tries_every_tactic_a_dataset_replaces() {
        let fixed = HammerConfig::default().fixed_tactics;
        for t in prod_coq::HAMMER_CLOSING_TACTICS
            .iter()
            .chain(prod_coq::HAMMER_MAYBE_CLOSING_TACTICS)
        {
            assert!(fixed.iter().any(|f| f.tactic == *t), "{t} missing");
        }
        assert_eq!(fixed[0].tactic, "lia");
    }

    #[test]
    fn validate_names_the_key_out_of_range() {
        assert_eq!(CoqCheckConfig::default().validate(), Ok(()));
        // `workers = 0` is documented: one per core.
        assert_eq!(validate_with(|c| c.workers = 0), Ok(()));
        let err = |f: fn(&mut CoqCheckConfig)| validate_with(f).unwrap_err();
        assert_eq!(
            err(|c| c.step_timeout_s = 0),
            "step_timeout_s = 0: must be at least 1"
        );
        assert!(err(|c| c.attempt_timeout_s = 0).starts_with("attempt_timeout_s"));
        assert!(err(|c| c.context_timeout_s = 0).starts_with("context_timeout_s"));
        assert!(err(|c| c.memory_limit_mb = 0).starts_with("memory_limit_mb"));
        assert!(err(|c| c.max_attempts = 0).starts_with("max_attempts"));
        assert!(err(|c| c.hammer.timeout_s = 0).starts_with("hammer.timeout_s"));
        assert!(err(|c| c.hammer.atp_limit_s = 0).starts_with("hammer.atp_limit_s"));
        assert!(err(|c| c.hammer.fixed_tactics[2].timeout_s = 0)
            .starts_with("hammer.fixed_tactics[2].timeout_s = 0 (sauto)"));
    }
}
