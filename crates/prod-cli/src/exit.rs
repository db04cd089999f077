//! How a command ends, and the one place that turns it into the process's exit code: 0 success,
//! 1 failure, 2 bad input, 3 soundness alarm (a canary was accepted: the checker rewarded a
//! statement no proof may prove).
//!
//! Every command returns [`Result`]. An error of the libraries' own kinds is classified by its
//! type ([`Failure::from`]): the user's input (`BadInput`, a run store made by another command,
//! a policy's bad input or model config, a checker that cannot be set up from the flags) exits
//! 2, an accepted canary 3, anything else 1; an error the CLI finds itself says which it is.

use std::io::Write as _;

/// A command that did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The user's input (unreadable file, malformed line, contradictory flags): exit 2.
    BadInput(anyhow::Error),
    /// A canary was accepted (a run's canary, or a node of `prod tree solve` stating one): exit 3.
    Alarm(anyhow::Error),
    /// Anything else (infra, a failed write, a benchmark that did not prove): exit 1.
    Other(anyhow::Error),
}

/// What every command returns.
pub type Result<T = ()> = std::result::Result<T, Failure>;

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        if run_alarm(&e) {
            return Failure::Alarm(e);
        }
        let setup = matches!(
            e.downcast_ref::<prod_prover::SetupError>(),
            Some(prod_prover::SetupError::BadInput(_))
        );
        match setup || run_input(&e) {
            true => Failure::BadInput(e),
            false => Failure::Other(e),
        }
    }
}

/// An accepted canary of a run.
#[cfg(feature = "policy")]
fn run_alarm(e: &anyhow::Error) -> bool {
    e.downcast_ref::<prod_run::canary::CanaryAccepted>()
        .is_some()
}

/// The user's input to a run or to the policy: `BadInput`, a run store made by another
/// command, a policy's bad input or model config.
#[cfg(feature = "policy")]
fn run_input(e: &anyhow::Error) -> bool {
    use prod_policy::PolicyError;
    e.downcast_ref::<prod_run::BadInput>().is_some()
        || matches!(
            e.downcast_ref::<prod_run::StoreError>(),
            Some(prod_run::StoreError::Mismatch(_))
        )
        || matches!(
            e.downcast_ref::<PolicyError>(),
            Some(PolicyError::BadInput(_) | PolicyError::Config(_))
        )
}

#[cfg(not(feature = "policy"))]
fn run_alarm(_: &anyhow::Error) -> bool {
    false
}

#[cfg(not(feature = "policy"))]
fn run_input(_: &anyhow::Error) -> bool {
    false
}

impl From<prod_prover::SetupError> for Failure {
    fn from(e: prod_prover::SetupError) -> Self {
        match e {
            prod_prover::SetupError::BadInput(e) => Failure::BadInput(anyhow::anyhow!(e)),
            prod_prover::SetupError::Failure(e) => Failure::Other(anyhow::anyhow!(e)),
        }
    }
}

impl From<prod_bench::BenchError> for Failure {
    fn from(e: prod_bench::BenchError) -> Self {
        match e {
            prod_bench::BenchError::BadInput(e) => Failure::BadInput(e),
            prod_bench::BenchError::Failure(e) => Failure::Other(e),
        }
    }
}

#[cfg(feature = "policy")]
impl From<prod_run::BadInput> for Failure {
    fn from(e: prod_run::BadInput) -> Self {
        Failure::BadInput(e.into())
    }
}

impl From<prod_queue::QueueError> for Failure {
    fn from(e: prod_queue::QueueError) -> Self {
        Failure::Other(e.into())
    }
}

/// The user's input was wrong: `.map_err(exit::input)?` on a library's message.
pub fn input(e: impl std::fmt::Display) -> Failure {
    Failure::BadInput(anyhow::anyhow!("{e}"))
}

/// Anything else went wrong: `.map_err(exit::other)?` on a library's message.
pub fn other(e: impl std::fmt::Display) -> Failure {
    Failure::Other(anyhow::anyhow!("{e}"))
}

/// The result of writing output: a closed pipe (`prod … | head`) is not an error.
pub fn written(r: std::io::Result<()>) -> Result {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Other(e.into())),
        _ => Ok(()),
    }
}

/// `text` on stdout, flushed (a closed pipe is not an error).
pub fn print(text: &str) -> Result {
    let mut out = std::io::stdout().lock();
    written(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
}

/// `line` and a newline on stdout.
pub fn println(line: impl std::fmt::Display) -> Result {
    print(&format!("{line}\n"))
}

/// The exit code of a command's result, its error on stderr.
pub fn code(r: Result) -> i32 {
    let (code, e) = match r {
        Ok(()) => return 0,
        Err(Failure::Other(e)) => (1, e),
        Err(Failure::BadInput(e)) => (2, e),
        Err(Failure::Alarm(e)) => (3, e),
    };
    eprintln!("error: {e:#}");
    code
}

#[cfg(all(test, feature = "policy"))]
mod tests {
    use super::*;

    fn of(e: anyhow::Error) -> i32 {
        code(Err(e.into()))
    }

    #[test]
    fn an_accepted_canary_exits_3_bad_input_2_other_failures_1() {
        let alarm = prod_run::canary::CanaryAccepted(Default::default(), "x".into());
        assert_eq!(of(alarm.into()), 3);
        assert_eq!(of(prod_run::BadInput("x".into()).into()), 2);
        let setup = prod_prover::SetupError::BadInput("no such root".into());
        assert_eq!(code(Err(setup.into())), 2);
        let mismatch = prod_run::StoreError::Mismatch("another run".into());
        assert_eq!(of(mismatch.into()), 2);
        assert_eq!(of(anyhow::anyhow!("x")), 1);
        assert_eq!(code(written(Err(std::io::ErrorKind::BrokenPipe.into()))), 0);
        assert_eq!(code(written(Err(std::io::ErrorKind::Other.into()))), 1);
    }
}
