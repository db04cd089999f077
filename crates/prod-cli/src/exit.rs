//! Exit codes shared by every subcommand: 0 success, 1 failure, 2 bad input, 3 soundness alarm
//! (a canary was accepted: the checker rewarded a statement no proof may prove).

/// Bad input (unreadable file, malformed line): message on stderr, exit 2.
pub fn bad_input(e: anyhow::Error) -> i32 {
    eprintln!("error: {e:#}");
    2
}

/// Any other failure: message on stderr, exit 1.
pub fn failure(e: anyhow::Error) -> i32 {
    eprintln!("error: {e:#}");
    1
}

/// A soundness alarm (a canary was accepted: a run's canary, or a node of `prod tree solve`
/// that states one): message on stderr, exit 3.
pub fn soundness_alarm(e: anyhow::Error) -> i32 {
    eprintln!("error: {e:#}");
    3
}

/// The result of writing output: a closed pipe (`prod … | head`) is not an error.
pub fn written(r: std::io::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => failure(e.into()),
    }
}

/// A checker that could not be set up: exit 2 for the user's input, 1 for anything else.
pub fn setup(e: prod_prover::SetupError) -> i32 {
    match e {
        prod_prover::SetupError::BadInput(e) => bad_input(anyhow::anyhow!(e)),
        prod_prover::SetupError::Failure(e) => failure(anyhow::anyhow!(e)),
    }
}
