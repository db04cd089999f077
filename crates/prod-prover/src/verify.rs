//! The verification of an export (`prod dataset export`, on by default for the RL split,
//! `--no-verify` to skip): every row kept is one whose reward the real checker can give. Two
//! passes with one Coq checker (the caller's: `[check.coq]`, the prover root, the dataset's
//! bindings, the command's flags):
//!
//! 1. **contexts** — does each row's context load? The contexts of one file are prefixes of
//!    one text, so one probe per file (its longest context) settles most files; where it fails,
//!    a binary search finds the first context that fails, and every longer one fails with it
//!    (`context_does_not_load`, Coq's reason per file in `not_loaded`).
//! 2. **ground truths** — does each remaining row's own proof (`conditional_proof_original`,
//!    the library's proof with its lemma proposals) check as the reward input states it? A row
//!    whose ground truth is refused (a proof that relies on its file's own `Axiom`s, which the
//!    checker excuses only when `allowed_axioms` names them; a primitive it cannot resolve; a
//!    time-out) states a theorem no completion is known to prove under this checker:
//!    `ground_truth_not_proved`, with the verdict per row in `not_proved`. An infra verdict
//!    (after the checker's own retries) says nothing about the proof: such rows are left out
//!    too, counted apart (`ground_truth_infra`), and named to the caller's [`VerifyReport`].
//!
//! The rows and what the verification left out are `prod_library::export`'s ([`Candidate`],
//! [`Verification`]); the progress and the lines about rows left out are the caller's to
//! show ([`VerifyReport`]).

use std::collections::BTreeMap;

use prod_check::{CheckRequest, Checker, Verdict};
use prod_library::export::{Candidate, Verification};

/// How a verification shows what it does: the progress of each batch of checks, and the rows
/// it leaves out for a reason the checker gave.
pub trait VerifyReport {
    /// A batch of `total` checks begins (`phase`: `verify` for the contexts, `ground truths`);
    /// its verdicts go to the progress returned.
    fn batch(&self, phase: &str, total: usize) -> Box<dyn BatchProgress>;
    /// The last `rows` rows of `file` were left out: their context does not load (`reason`).
    fn context_not_loaded(&self, file: &str, rows: usize, reason: &str);
    /// Row `id`'s ground truth got an infra verdict (`why`): the row is left out.
    fn ground_truth_infra(&self, id: &str, why: &str);
}

/// The progress of one batch of checks.
pub trait BatchProgress: Sync {
    /// One verdict came in.
    fn record(&self, v: &Verdict);
    /// The batch is over.
    fn finish(&self);
}

/// Is this verdict a context that does not load (the checker's own wording)? Its reason.
pub fn context_failure(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Infra { message } => message.strip_prefix("context does not load: "),
        _ => None,
    }
}

/// Both passes with `checker` (a Coq checker): the candidates that stay are those whose
/// context loads and whose ground truth the checker proves; the others are counted in the
/// outcome.
pub fn verify_ground_truths(
    checker: &dyn Checker,
    candidates: &mut Vec<Candidate<'_>>,
    report: &dyn VerifyReport,
) -> Verification {
    let mut outcome = Verification::default();
    keep_loading(checker, candidates, &mut outcome, report);
    keep_proved(checker, candidates, &mut outcome, report);
    outcome
}

/// Longest reason kept per row in `not_proved`.
const REASON_CHARS: usize = 300;

/// Pass 2: the candidates whose ground truth the checker proves stay.
fn keep_proved(
    checker: &dyn Checker,
    candidates: &mut Vec<Candidate<'_>>,
    outcome: &mut Verification,
    report: &dyn VerifyReport,
) {
    let mut requests = Vec::with_capacity(candidates.len());
    let mut unparsed = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        let e = c.example;
        match prod_core::ConditionalProof::parse_with(
            &e.conditional_proof_original,
            &prod_coq::CoqLanguage,
        ) {
            Ok(proof) => requests.push((i, CheckRequest::new("", &c.full, &e.statement, proof))),
            Err(err) => {
                unparsed.insert(i, format!("the ground truth does not parse: {err}"));
            }
        }
    }
    let progress = report.batch("ground truths", requests.len());
    let batch: Vec<CheckRequest> = requests.iter().map(|(_, r)| r.clone()).collect();
    let verdicts = checker.check_batch(&batch, &|_, v| progress.record(v));
    progress.finish();
    // Per candidate, why it is left out (none: it stays).
    let mut refused: Vec<Option<(&'static str, String)>> = vec![None; candidates.len()];
    for (i, why) in unparsed {
        refused[i] = Some(("ground_truth_not_proved", why));
    }
    for ((i, _), v) in requests.iter().zip(&verdicts) {
        refused[*i] = match v {
            Verdict::Proved { .. } => None,
            Verdict::Infra { .. } => Some(("ground_truth_infra", v.message())),
            _ => Some((
                "ground_truth_not_proved",
                format!("{}: {}", v.kind().as_str(), v.message()),
            )),
        };
    }
    let mut keep = refused.iter();
    let mut dropped = Vec::new();
    candidates.retain(|c| match keep.next().and_then(|o| o.as_ref()) {
        None => true,
        Some((reason, why)) => {
            dropped.push((c.example.id.clone(), *reason, why.clone()));
            false
        }
    });
    for (id, reason, why) in dropped {
        *outcome.dropped.entry(reason).or_default() += 1;
        if reason == "ground_truth_infra" {
            report.ground_truth_infra(&id, &why);
        }
        let why: String = why.split_whitespace().collect::<Vec<_>>().join(" ");
        outcome
            .not_proved
            .insert(id, why.chars().take(REASON_CHARS).collect());
    }
}

/// Pass 1: only the candidates whose context loads in the prover stay; the others are counted
/// as `context_does_not_load`.
fn keep_loading(
    checker: &dyn Checker,
    candidates: &mut Vec<Candidate<'_>>,
    outcome: &mut Verification,
    report: &dyn VerifyReport,
) {
    let loads = contexts_load(checker, candidates, &mut outcome.not_loaded, report);
    let before = candidates.len();
    let mut keep = loads.into_iter();
    candidates.retain(|_| keep.next().unwrap_or(false));
    if before > candidates.len() {
        outcome
            .dropped
            .insert("context_does_not_load", before - candidates.len());
    }
}

/// The lemma `--verify` proves after a context to see that it loads.
const PROBE_STATEMENT: &str = "Lemma prod_context_probe : True.";
const PROBE_PROOF: &str = "<no_invoke> exact I.";

/// The candidates of each file (by logical path, then base text), shortest context first.
fn rows_by_file<'c>(candidates: &'c [Candidate<'_>]) -> BTreeMap<(&'c str, &'c str), Vec<usize>> {
    let mut files: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, c) in candidates.iter().enumerate() {
        let base = if c.example.variant == "w_lemmas" {
            "source"
        } else {
            "reduced"
        };
        files
            .entry((c.example.logical_path.as_str(), base))
            .or_default()
            .push(i);
    }
    for rows in files.values_mut() {
        rows.sort_by_key(|&i| candidates[i].full.len());
    }
    files
}

/// One file's binary search for its longest loading context, over its rows sorted by
/// context length: `rows[..lo]` load, `rows[hi]` does not (`hi = len`: none known to fail).
struct ContextSearch<'f> {
    key: &'f (&'f str, &'f str),
    rows: &'f [usize],
    lo: usize,
    hi: usize,
    /// Why the last failing probe failed.
    reason: Option<String>,
}

impl<'f> ContextSearch<'f> {
    fn new(key: &'f (&'f str, &'f str), rows: &'f [usize]) -> Self {
        ContextSearch {
            key,
            rows,
            lo: 0,
            hi: rows.len(),
            reason: None,
        }
    }

    /// The row to probe next: first the longest context (most files load whole), then the
    /// middle of what is not yet known; none when the search is over.
    fn next_probe(&self, first: bool) -> Option<usize> {
        let len = self.rows.len();
        if first {
            Some(len - 1)
        } else if self.hi < len && self.lo < self.hi {
            Some((self.lo + self.hi) / 2)
        } else {
            None
        }
    }

    /// What the probe of row `p` said: only an infra verdict says the context did not load.
    fn record(&mut self, p: usize, v: &Verdict) {
        if matches!(v, Verdict::Infra { .. }) {
            self.hi = p;
            self.reason = Some(match context_failure(v) {
                Some(r) => r.to_string(),
                None => v.message(),
            });
        } else {
            self.lo = p + 1;
        }
    }
}

/// Per candidate: does its context load in the real Coq? The contexts of one file are prefixes
/// of one text (`sources.jsonl`'s `reduced`, or `source` for `w_lemmas`), so a file's longest
/// context loading means they all do; when it does not, a binary search over the file's
/// contexts (by length) finds the shortest that fails, and every longer one fails with it (it
/// holds the sentence Coq refused). Each check proves `True` after the context: only an infra
/// verdict (the context did not load) counts. The probes of all files are batched per round;
/// files whose longest contexts do not load are named to `report` and in `not_loaded`.
fn contexts_load(
    checker: &dyn Checker,
    candidates: &[Candidate<'_>],
    not_loaded: &mut BTreeMap<String, String>,
    report: &dyn VerifyReport,
) -> Vec<bool> {
    let files = rows_by_file(candidates);
    // The probe: a trivial lemma stated after the context, so that only the context decides
    // the verdict, never a rule about the row's own statement or proof (a context that shadows
    // `I` fails the proof, which still says the context loaded).
    let probe = prod_core::ConditionalProof::parse_with(PROBE_PROOF, &prod_coq::CoqLanguage)
        .expect("the probe proof parses");
    let mut search: Vec<ContextSearch> = files
        .iter()
        .map(|(k, rows)| ContextSearch::new(k, rows))
        .collect();
    let mut first = true;
    let progress = report.batch("verify", files.len());
    loop {
        let probes: Vec<(usize, usize)> = search
            .iter()
            .enumerate()
            .filter_map(|(n, s)| s.next_probe(first).map(|p| (n, p)))
            .collect();
        if probes.is_empty() {
            break;
        }
        let requests: Vec<CheckRequest> = probes
            .iter()
            .map(|&(n, p)| {
                let full = &candidates[search[n].rows[p]].full;
                CheckRequest::new("", full, PROBE_STATEMENT, probe.clone())
            })
            .collect();
        let verdicts = checker.check_batch(&requests, &|_, v| {
            if first {
                progress.record(v)
            }
        });
        for (&(n, p), v) in probes.iter().zip(&verdicts) {
            search[n].record(p, v);
        }
        if first {
            progress.finish();
        }
        first = false;
    }
    loading_rows(candidates.len(), &search, not_loaded, report)
}

/// Per candidate, whether its context loads, from the finished searches; each file with rows
/// that do not load is reported.
fn loading_rows(
    candidates: usize,
    search: &[ContextSearch],
    not_loaded: &mut BTreeMap<String, String>,
    report: &dyn VerifyReport,
) -> Vec<bool> {
    let mut loads = vec![true; candidates];
    for s in search {
        for &i in &s.rows[s.hi..] {
            loads[i] = false;
        }
        if s.hi < s.rows.len() {
            let reason = s.reason.clone().unwrap_or_default();
            report.context_not_loaded(s.key.0, s.rows.len() - s.hi, &reason);
            not_loaded.insert(s.key.0.to_string(), reason);
        }
    }
    loads
}
