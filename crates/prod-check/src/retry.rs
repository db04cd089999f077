//! Retrying infrastructure failures.

use serde::Deserialize;

use crate::verdict::Verdict;

/// How often a request whose verdict is `Infra` is run again (on a fresh worker). Proof verdicts
/// are final and never retried.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RetryPolicy {
    /// Total runs of one request, the first included (at least 1).
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_attempts: 3 }
    }
}

impl RetryPolicy {
    pub fn new(max_attempts: u32) -> Self {
        RetryPolicy { max_attempts }
    }

    /// Run `attempt(n)` (n = 0, 1, …) until it gives a non-`Infra` verdict or the attempts are
    /// used up; the last `Infra` names how many runs it took.
    pub fn run(&self, mut attempt: impl FnMut(u32) -> Verdict) -> Verdict {
        let max = self.max_attempts.max(1);
        let mut last = None;
        for n in 0..max {
            match attempt(n) {
                Verdict::Infra { message } => last = Some(message),
                v => return v,
            }
        }
        let message = last.unwrap_or_default();
        Verdict::infra(if max > 1 {
            format!("{message} (after {max} attempts)")
        } else {
            message
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_only_infra() {
        let mut calls = 0;
        let v = RetryPolicy::new(3).run(|n| {
            calls += 1;
            if n < 1 {
                Verdict::infra("lost worker")
            } else {
                Verdict::Failed {
                    step: 1,
                    message: "no".into(),
                }
            }
        });
        assert_eq!(calls, 2);
        assert_eq!(v.kind().as_str(), "failed");

        let mut calls = 0;
        let v = RetryPolicy::new(2).run(|_| {
            calls += 1;
            Verdict::infra("oom")
        });
        assert_eq!(calls, 2);
        assert_eq!(v, Verdict::infra("oom (after 2 attempts)"));

        let mut calls = 0;
        RetryPolicy::new(0).run(|_| {
            calls += 1;
            Verdict::rejected("r")
        });
        assert_eq!(calls, 1);
    }
}
