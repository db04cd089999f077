//! `prod bench hammer`: what CoqHammer alone proves and what it costs, under several hammer
//! profiles side by side, on a dataset split's theorems.
//!
//! Every theorem gets one root `<no_invoke> hammer.` (the CoqHammer-alone baseline's proof) under
//! each profile. The profiles run interleaved — each worker thread takes the next theorem and
//! runs every profile on it in turn, in an order that rotates with the theorem — so that a
//! machine's load weighs on all of them alike and the ratios stay fair. Each thread owns one
//! single-worker checker per profile, so a goal's hammer counters (`fixed_s`, `atp_s`, which
//! phase closed it) are its own. The cross-run cache is never used: the bench measures.
//!
//! What a goal cost is its *hammer seconds* (the fixed list's and the provers' time; context
//! loading is the same for every profile and is reported apart, in the wall time). The curve
//! is the number of goals closed within t hammer seconds, for growing t: where the limits can
//! go without losing goals.
//!
//! Resumable: each (profile, theorem) row is appended to `OUT/rows.jsonl` as it is measured,
//! with the digest of the profile's settings, and a rerun measures only what is missing for
//! the profiles as they are now (a row of a profile whose settings changed since is neither
//! reused nor counted; an infrastructure verdict is not written, so it is measured again; a
//! torn last line is ignored).

use std::collections::{BTreeMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, Context as _};
use prod_check::{CheckRequest, Checker, HammerStats, Verdict, VerdictKind};
use prod_check_coq::{CoqCheckConfig, CoqChecker, HammerConfig};
use prod_core::ConditionalProof;
use prod_library::theorem::{load_named_theorems, Theorem};
use serde::{Deserialize, Serialize};

use crate::BenchError;

/// The proof every theorem gets: CoqHammer alone.
pub const HAMMER_PROOF: &str = "<no_invoke> hammer.";

/// The per-goal hammer-second limits the curve is read at.
pub const CURVE_SECONDS: [f64; 9] = [0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0, 40.0];

/// A named hammer configuration to measure.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: String,
    pub hammer: HammerConfig,
}

impl Profile {
    /// The digest of the profile's settings, kept in each row: a row stands for these settings.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let text = serde_json::to_string(&self.hammer).unwrap_or_default();
        hex::encode(&Sha256::digest(text.as_bytes())[..8])
    }
}

/// The built-in profiles' names, in the order `--profiles` lists them.
pub const PROFILES: [&str; 6] = [
    "before",
    "default",
    "fixed-only",
    "provers-only",
    "atp-3s",
    "atp-5s",
];

/// A built-in profile: `before` (the hammer as it was before this bench measured it,
/// [`HammerConfig::before`]), `default` (the checker's default hammer), `fixed-only` (its
/// fixed tactic list, no provers) and `provers-only` (its provers alone, no fixed list): the
/// next two say where the default's time and goals come from; `atp-3s` (the default with the
/// provers at 3 s) and `atp-5s` (at 5 s within 40 s, the default until this bench's curve
/// lowered it to 2 s within 30 s) read the proved-against-seconds curve at higher limits.
pub fn profile(name: &str) -> Option<Profile> {
    let default = HammerConfig::default();
    let hammer = match name {
        "before" => HammerConfig::before(),
        "default" => default,
        "fixed-only" => HammerConfig {
            use_atp: false,
            ..default
        },
        "provers-only" => HammerConfig {
            fixed_tactics: Vec::new(),
            ..default
        },
        "atp-3s" => HammerConfig {
            atp_limit_s: 3,
            ..default
        },
        "atp-5s" => HammerConfig {
            atp_limit_s: 5,
            timeout_s: 40,
            ..default
        },
        _ => return None,
    };
    Some(Profile {
        name: name.to_string(),
        hammer,
    })
}

/// The built-in profiles `names` names, in that order; an unknown or repeated name is an
/// error naming it.
pub fn profiles(names: &[String]) -> Result<Vec<Profile>, String> {
    let mut out: Vec<Profile> = Vec::new();
    for name in names {
        if out.iter().any(|p| p.name == *name) {
            return Err(format!("--profiles: {name} is listed twice"));
        }
        out.push(profile(name).ok_or_else(|| format!("--profiles: no profile {name}"))?);
    }
    Ok(out)
}

/// What `prod bench hammer` measures, and how.
#[derive(Clone, Debug)]
pub struct HammerSettings {
    pub dataset: PathBuf,
    pub split: String,
    /// Theorems drawn with `seed` (None: every named theorem of the split).
    pub theorems: Option<usize>,
    pub seed: u64,
    /// Worker threads (each with one single-worker checker per profile).
    pub workers: usize,
    pub profiles: Vec<Profile>,
    /// A Debian root holding the prover instead of the host's Coq.
    pub coq_root: Option<PathBuf>,
    /// Where the rows go (`OUT/rows.jsonl`); a rerun resumes from them.
    pub out: PathBuf,
}

/// One theorem under one profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalRow {
    pub profile: String,
    /// [`Profile::digest`] of the settings it was measured with (empty: not recorded, a row
    /// that is never reused).
    #[serde(default)]
    pub settings: String,
    pub theorem: String,
    /// Ground-truth depth of the theorem (0 when the dataset does not say).
    pub depth: u32,
    pub verdict: VerdictKind,
    /// The tactic recorded in place of `hammer.` when proved.
    pub closed_by: Option<String>,
    /// `fixed` or `provers` when proved.
    pub phase: Option<String>,
    /// The check's wall time (context loading included), s.
    pub wall_s: f64,
    /// The fixed list's and the provers' seconds.
    pub fixed_s: f64,
    pub provers_s: f64,
}

impl GoalRow {
    /// The hammer's own seconds on this goal.
    pub fn hammer_s(&self) -> f64 {
        self.fixed_s + self.provers_s
    }

    pub fn proved(&self) -> bool {
        self.verdict == VerdictKind::Proved
    }
}

/// A profile's figures over the measured theorems.
#[derive(Clone, Debug, Serialize)]
pub struct ProfileSummary {
    pub name: String,
    pub goals: usize,
    pub proved: usize,
    pub by_fixed: usize,
    pub by_provers: usize,
    pub timed_out: usize,
    pub hammer_s: f64,
    pub fixed_s: f64,
    pub provers_s: f64,
    pub wall_s: f64,
    /// (t, goals closed within t hammer seconds) at [`CURVE_SECONDS`].
    pub curve: Vec<(f64, usize)>,
    /// Closing tactic (its head word) → goals.
    pub by_tactic: BTreeMap<String, usize>,
}

/// The figures of one `prod bench hammer`.
#[derive(Clone, Debug, Serialize)]
pub struct HammerReport {
    pub dataset: String,
    pub split: String,
    pub theorems: usize,
    pub workers: usize,
    /// Theorems whose every profile's row is in (the summaries count only these).
    pub complete: usize,
    pub profiles: Vec<ProfileSummary>,
    /// Against the first profile: (profile, proved only by it, proved only by the first,
    /// hammer-second ratio first / it).
    pub against_first: Vec<(String, usize, usize, f64)>,
}

/// Run (or resume) the bench; `progress(done, total)` after each row.
pub fn bench_hammer(
    s: &HammerSettings,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<HammerReport, BenchError> {
    if s.profiles.is_empty() {
        return Err(BenchError::BadInput(anyhow!("no profile to measure")));
    }
    let theorems = load_named_theorems(&s.dataset, &s.split, s.theorems, s.seed)
        .map_err(|e| BenchError::BadInput(anyhow!(e)))?;
    std::fs::create_dir_all(&s.out).with_context(|| format!("create {}", s.out.display()))?;
    let path = s.out.join("rows.jsonl");
    let current: HashSet<(String, String)> = s
        .profiles
        .iter()
        .map(|p| (p.name.clone(), p.digest()))
        .collect();
    let done: HashSet<(String, String)> = read_rows(&path)?
        .into_iter()
        .filter(|r| current.contains(&(r.profile.clone(), r.settings.clone())))
        .map(|r| (r.profile, r.theorem))
        .collect();
    let ids: HashSet<&str> = theorems.iter().map(|t| t.id.as_str()).collect();
    let total = theorems.len() * s.profiles.len();
    let already = done
        .iter()
        .filter(|(_, t)| ids.contains(t.as_str()))
        .count();
    let counter = AtomicUsize::new(already);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    let sink = Mutex::new(file);
    let next = AtomicUsize::new(0);
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..s.workers.max(1) {
            scope.spawn(|| {
                let r = worker(s, &theorems, &done, &next, &sink, &|| {
                    progress(counter.fetch_add(1, Ordering::SeqCst) + 1, total)
                });
                if let Err(e) = r {
                    errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                }
            });
        }
    });
    if let Some(e) = errors.into_inner().unwrap_or_else(|p| p.into_inner()).pop() {
        return Err(BenchError::Failure(e));
    }
    let rows = read_rows(&path)?;
    Ok(summarize(s, &theorems, &rows))
}

/// One thread: its own checkers, the next theorem under every profile until none is left.
fn worker(
    s: &HammerSettings,
    theorems: &[Theorem],
    done: &HashSet<(String, String)>,
    next: &AtomicUsize,
    sink: &Mutex<std::fs::File>,
    tick: &dyn Fn(),
) -> anyhow::Result<()> {
    let mut checkers = Vec::new();
    for p in &s.profiles {
        let mut cfg = CoqCheckConfig {
            workers: 1,
            hammer: p.hammer.clone(),
            ..Default::default()
        };
        prod_prover::set_root(&mut cfg, s.coq_root.as_deref()).map_err(|e| anyhow!(e))?;
        let c = CoqChecker::new(cfg).map_err(|e| anyhow!("start the checker: {e}"))?;
        if !c.config().hammer.enabled {
            return Err(anyhow!("CoqHammer is not installed for this Coq"));
        }
        checkers.push(c);
    }
    let proof = ConditionalProof::parse(HAMMER_PROOF).map_err(|e| anyhow!("{e}"))?;
    loop {
        let i = next.fetch_add(1, Ordering::SeqCst);
        let Some(t) = theorems.get(i) else {
            return Ok(());
        };
        let request = CheckRequest::new("", &t.context, &t.statement, proof.clone());
        let n = s.profiles.len();
        for j in 0..n {
            let k = (i + j) % n;
            let p = &s.profiles[k];
            if done.contains(&(p.name.clone(), t.id.clone())) {
                continue;
            }
            let Some(row) = measure(&checkers[k], p, t, &request) else {
                tick();
                continue;
            };
            let line = serde_json::to_string(&row)?;
            let mut f = sink.lock().unwrap_or_else(|p| p.into_inner());
            writeln!(f, "{line}")?;
            f.flush()?;
            drop(f);
            tick();
        }
    }
}

/// One check, timed, with the hammer counters' share of it; `None` for an infrastructure
/// verdict (nothing is known: measured again on a rerun).
fn measure(
    checker: &CoqChecker,
    profile: &Profile,
    t: &Theorem,
    request: &CheckRequest,
) -> Option<GoalRow> {
    let before = checker.hammer_stats().unwrap_or_default();
    let start = Instant::now();
    let verdict = checker.check(request);
    let wall_s = start.elapsed().as_secs_f64();
    let d: HammerStats = checker.hammer_stats().unwrap_or_default().since(&before);
    if matches!(verdict, Verdict::Infra { .. }) {
        return None;
    }
    let closed_by = match &verdict {
        Verdict::Proved { replacements, .. } => replacements.first().map(|r| r.tactic.clone()),
        _ => None,
    };
    let phase = match (d.fixed_closed, d.atp_closed) {
        (_, a) if a > 0 => Some("provers".to_string()),
        (f, _) if f > 0 => Some("fixed".to_string()),
        _ => None,
    };
    Some(GoalRow {
        profile: profile.name.clone(),
        settings: profile.digest(),
        theorem: t.id.clone(),
        depth: t.depth.unwrap_or(0),
        verdict: verdict.kind(),
        closed_by,
        phase: phase.filter(|_| verdict.kind() == VerdictKind::Proved),
        wall_s,
        fixed_s: d.fixed_s,
        provers_s: d.atp_s,
    })
}

/// The rows written so far (a torn last line is ignored).
fn read_rows(path: &Path) -> anyhow::Result<Vec<GoalRow>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut rows = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        match serde_json::from_str::<GoalRow>(l) {
            Ok(r) => rows.push(r),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => return Err(anyhow!("{}: line {}: {e}", path.display(), i + 1)),
        }
    }
    Ok(rows)
}

/// The figures over the theorems every profile has a row for, measured with its settings as
/// they are now (the first such row of each pair).
pub fn summarize(s: &HammerSettings, theorems: &[Theorem], rows: &[GoalRow]) -> HammerReport {
    let ids: HashSet<&str> = theorems.iter().map(|t| t.id.as_str()).collect();
    let digests: Vec<(String, String)> = s
        .profiles
        .iter()
        .map(|p| (p.name.clone(), p.digest()))
        .collect();
    let current = |r: &GoalRow| {
        digests
            .iter()
            .any(|(n, d)| *n == r.profile && *d == r.settings)
    };
    let mut by: BTreeMap<(&str, &str), &GoalRow> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| ids.contains(r.theorem.as_str()) && current(r))
    {
        by.entry((r.profile.as_str(), r.theorem.as_str()))
            .or_insert(r);
    }
    let complete: Vec<&str> = theorems
        .iter()
        .map(|t| t.id.as_str())
        .filter(|id| {
            s.profiles
                .iter()
                .all(|p| by.contains_key(&(p.name.as_str(), *id)))
        })
        .collect();
    let rows_of =
        |name: &str| -> Vec<&GoalRow> { complete.iter().map(|id| by[&(name, *id)]).collect() };
    let profiles: Vec<ProfileSummary> = s
        .profiles
        .iter()
        .map(|p| profile_summary(&p.name, &rows_of(&p.name)))
        .collect();
    let first = rows_of(&s.profiles[0].name);
    let against_first = s.profiles[1..]
        .iter()
        .zip(&profiles[1..])
        .map(|(p, sum)| {
            let other = rows_of(&p.name);
            let only_it = first
                .iter()
                .zip(&other)
                .filter(|(a, b)| !a.proved() && b.proved())
                .count();
            let only_first = first
                .iter()
                .zip(&other)
                .filter(|(a, b)| a.proved() && !b.proved())
                .count();
            let ratio = profiles[0].hammer_s / sum.hammer_s.max(1e-9);
            (p.name.clone(), only_it, only_first, ratio)
        })
        .collect();
    HammerReport {
        dataset: s.dataset.display().to_string(),
        split: s.split.clone(),
        theorems: theorems.len(),
        workers: s.workers,
        complete: complete.len(),
        profiles,
        against_first,
    }
}

fn profile_summary(name: &str, rows: &[&GoalRow]) -> ProfileSummary {
    let proved: Vec<&&GoalRow> = rows.iter().filter(|r| r.proved()).collect();
    let mut by_tactic = BTreeMap::new();
    for r in &proved {
        let head = r
            .closed_by
            .as_deref()
            .map(tactic_head)
            .unwrap_or_else(|| "?".to_string());
        *by_tactic.entry(head).or_insert(0) += 1;
    }
    let phase = |p: &str| {
        proved
            .iter()
            .filter(|r| r.phase.as_deref() == Some(p))
            .count()
    };
    ProfileSummary {
        name: name.to_string(),
        goals: rows.len(),
        proved: proved.len(),
        by_fixed: phase("fixed"),
        by_provers: phase("provers"),
        timed_out: rows
            .iter()
            .filter(|r| r.verdict == VerdictKind::TimedOut)
            .count(),
        hammer_s: rows.iter().map(|r| r.hammer_s()).sum(),
        fixed_s: rows.iter().map(|r| r.fixed_s).sum(),
        provers_s: rows.iter().map(|r| r.provers_s).sum(),
        wall_s: rows.iter().map(|r| r.wall_s).sum(),
        curve: CURVE_SECONDS
            .iter()
            .map(|&t| (t, proved.iter().filter(|r| r.hammer_s() <= t).count()))
            .collect(),
        by_tactic,
    }
}

/// A closing tactic's name for the tally: `hauto use: …` → `hauto`, `(intros; sauto).` kept.
fn tactic_head(t: &str) -> String {
    let t = t.trim().trim_end_matches('.');
    if t.starts_with('(') {
        return t.to_string();
    }
    t.split_whitespace().next().unwrap_or("").to_string()
}

impl HammerReport {
    /// The figures as a Markdown table, the curve and the comparisons.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{} ({}): {} of {} theorems under every profile, {} workers\n",
            self.dataset, self.split, self.complete, self.theorems, self.workers
        );
        let _ = writeln!(o, "| profile | proved | by fixed list | by provers | timed out | hammer s | fixed list s | provers s | wall s |");
        let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
        for p in &self.profiles {
            let _ = writeln!(
                o,
                "| {} | {} / {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
                p.name,
                p.proved,
                p.goals,
                p.by_fixed,
                p.by_provers,
                p.timed_out,
                p.hammer_s,
                p.fixed_s,
                p.provers_s,
                p.wall_s
            );
        }
        let ts: Vec<String> = CURVE_SECONDS.iter().map(|t| format!("≤ {t} s")).collect();
        let _ = writeln!(
            o,
            "\ngoals closed within t hammer seconds:\n\n| profile | {} |",
            ts.join(" | ")
        );
        let _ = writeln!(o, "|---|{}", "---|".repeat(ts.len()));
        for p in &self.profiles {
            let cs: Vec<String> = p.curve.iter().map(|c| c.1.to_string()).collect();
            let _ = writeln!(o, "| {} | {} |", p.name, cs.join(" | "));
        }
        let _ = writeln!(o);
        for p in &self.profiles {
            let ts: Vec<String> = p
                .by_tactic
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            let _ = writeln!(
                o,
                "{} closed by: {}",
                p.name,
                if ts.is_empty() {
                    "-".into()
                } else {
                    ts.join(", ")
                }
            );
        }
        let first = self.profiles.first().map_or("", |p| p.name.as_str());
        for (name, only_it, only_first, ratio) in &self.against_first {
            let _ = writeln!(o, "{name} against {first}: {ratio:.2}x fewer hammer seconds; proved only by {name} {only_it}, only by {first} {only_first}");
        }
        o
    }

    /// `--json`'s object.
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(profile: &str, theorem: &str, proved: bool, fixed_s: f64, provers_s: f64) -> GoalRow {
        GoalRow {
            profile: profile.into(),
            settings: super::profile(profile).unwrap().digest(),
            theorem: theorem.into(),
            depth: 1,
            verdict: if proved {
                VerdictKind::Proved
            } else {
                VerdictKind::Failed
            },
            closed_by: proved.then(|| "hauto use: foo.".to_string()),
            phase: proved.then(|| "provers".to_string()),
            wall_s: fixed_s + provers_s + 0.5,
            fixed_s,
            provers_s,
        }
    }

    fn theorem(id: &str) -> Theorem {
        Theorem {
            id: id.into(),
            context: String::new(),
            statement: String::new(),
            ground_truth: None,
            depth: None,
            scope: Vec::new(),
            qualified_name: String::new(),
            file: String::new(),
        }
    }

    /// Only theorems every profile has a row for count; the pairs and the ratio are the
    /// first profile's against each other; the curve counts closed goals within t seconds.
    #[test]
    fn summaries_pair_complete_theorems_only() {
        let s = HammerSettings {
            dataset: "d".into(),
            split: "test".into(),
            theorems: None,
            seed: 0,
            workers: 1,
            profiles: vec![profile("before").unwrap(), profile("default").unwrap()],
            coq_root: None,
            out: "o".into(),
        };
        let ts = [theorem("a"), theorem("b"), theorem("c")];
        let rows = vec![
            row("before", "a", true, 4.0, 8.0),
            row("default", "a", true, 1.0, 2.0),
            row("before", "b", true, 2.0, 0.0),
            row("default", "b", false, 1.0, 3.0),
            row("before", "c", false, 5.0, 15.0),
            // Measured with other settings: neither counted nor paired.
            GoalRow {
                settings: "0000".into(),
                ..row("default", "c", true, 1.0, 1.0)
            },
        ];
        let r = summarize(&s, &ts, &rows);
        assert_eq!((r.theorems, r.complete), (3, 2));
        assert_eq!((r.profiles[0].proved, r.profiles[1].proved), (2, 1));
        assert_eq!(r.profiles[0].hammer_s, 14.0);
        assert_eq!(r.profiles[1].hammer_s, 7.0);
        assert_eq!(r.against_first, vec![("default".to_string(), 0, 1, 2.0)]);
        let within = |p: &ProfileSummary, t: f64| p.curve.iter().find(|c| c.0 == t).unwrap().1;
        assert_eq!(
            (within(&r.profiles[0], 2.0), within(&r.profiles[0], 15.0)),
            (1, 2)
        );
        assert_eq!(r.profiles[0].by_tactic.get("hauto"), Some(&2));
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_every_builtin_profile_validates() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rows.jsonl");
        let good = serde_json::to_string(&row("default", "a", true, 1.0, 0.0)).unwrap();
        std::fs::write(&p, format!("{good}\n{{\"profile\":\"def")).unwrap();
        assert_eq!(read_rows(&p).unwrap().len(), 1);
        std::fs::write(&p, format!("{{\"x\n{good}\n")).unwrap();
        assert!(read_rows(&p).is_err());
        for name in PROFILES {
            let cfg = CoqCheckConfig {
                hammer: profile(name).unwrap().hammer,
                ..Default::default()
            };
            cfg.validate().unwrap();
        }
        assert!(profile("nope").is_none());
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            profiles(&names(&["default", "before"])).unwrap()[1].name,
            "before"
        );
        assert!(profiles(&names(&["default", "default"]))
            .unwrap_err()
            .contains("twice"));
        assert!(profiles(&names(&["quick"]))
            .unwrap_err()
            .contains("no profile quick"));
    }
}
