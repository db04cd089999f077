//! Progress of a batch of checks (`prod check`, `prod dataset validate` and `export`): `prod_progress`'s bar
//! on a terminal, otherwise a line every `PROD_PROGRESS_SECS` (also while nothing finishes, so a
//! long batch never stalls silently), with the verdicts so far by kind.
//! Also the per-context summary: a context that does not load is reported once, with its
//! reason and how many examples it cost, instead of one line per example.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prod_check::Verdict;
use prod_progress::{Display, Progress};

/// See the module documentation.
pub struct CheckProgress {
    progress: Progress,
    by_kind: Mutex<BTreeMap<&'static str, usize>>,
}

impl CheckProgress {
    /// `what`: the phase named in the lines; `json`: machine output asked for (no bar).
    pub fn new(what: &str, total: usize, json: bool) -> CheckProgress {
        CheckProgress {
            progress: Progress::new(Display::for_stderr(json), what, "nodes", Some(total as u64)),
            by_kind: Mutex::new(BTreeMap::new()),
        }
    }

    /// One verdict came in.
    pub fn record(&self, v: &Verdict) {
        let Ok(mut k) = self.by_kind.lock() else {
            return;
        };
        *k.entry(v.kind().as_str()).or_default() += 1;
        let tally: Vec<String> = k.iter().map(|(k, n)| format!("{k} {n}")).collect();
        self.progress.set_message(tally.join(", "));
        self.progress.inc(1);
    }

    /// The batch is over.
    pub fn finish(&self) {
        self.progress.finish();
    }
}

/// The progress of a verification's batches (`prod dataset export`).
impl prod_prover::BatchProgress for CheckProgress {
    fn record(&self, v: &Verdict) {
        CheckProgress::record(self, v)
    }

    fn finish(&self) {
        CheckProgress::finish(self)
    }
}

/// Context failures grouped: (file, reason) → examples. One stderr line per group.
pub fn report_context_failures<'a>(failures: impl Iterator<Item = (&'a str, &'a str)>) -> usize {
    let mut groups: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (file, reason) in failures {
        *groups.entry((file, reason)).or_default() += 1;
    }
    for ((file, reason), n) in &groups {
        let reason: String = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        eprintln!("context does not load ({n} example(s) of {file}): {reason}");
    }
    groups.len()
}
