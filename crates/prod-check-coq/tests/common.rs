//! Shared helpers for the tests that run the real Coq.
#![allow(dead_code)]

use prod_check::CheckRequest;
use prod_check_coq::CoqCheckConfig;
use prod_core::ConditionalProof;
use serde::Deserialize;

#[derive(Deserialize)]
pub struct Case {
    pub id: String,
    pub imports: String,
    pub context: String,
    pub statement: String,
    pub proof: String,
    pub expect: String,
    pub axioms: Option<Vec<String>>,
}

pub fn load(name: &str) -> Vec<Case> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}:{}: {e}", i + 1)))
        .collect()
}

pub fn request(c: &Case) -> CheckRequest {
    let proof = ConditionalProof::parse(&c.proof).unwrap_or_else(|e| panic!("{}: {e}", c.id));
    CheckRequest::new(&c.imports, &c.context, &c.statement, proof)
}

/// Small limits so the suite stays quick on 2 cores.
pub fn config(workers: usize) -> CoqCheckConfig {
    let mut cfg = CoqCheckConfig {
        workers,
        step_timeout_s: 5,
        memory_limit_mb: 3000,
        ..Default::default()
    };
    cfg.hammer.atp_limit_s = 5;
    cfg.hammer.timeout_s = 40;
    cfg
}
