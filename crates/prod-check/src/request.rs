//! What one local check is about.

use prod_core::ConditionalProof;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One node to check (paper §2, local correctness): in the context `imports` + `context`, is
/// `proof` a proof of `statement` once its proposed lemmas (the `<invoke>` segments) are admitted?
///
/// Only `proof` (and, for inner nodes, `statement`) come from a model; `imports` and `context`
/// come from the dataset and are trusted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckRequest {
    /// Library loading, e.g. `From Coq Require Import Arith List Lia.`
    pub imports: String,
    /// Prover text that comes after the imports (definitions, earlier lemmas); may be empty.
    pub context: String,
    /// The statement to prove, e.g. `Lemma foo : forall n : nat, n + 0 = n.`
    pub statement: String,
    /// The conditional proof; its proposed lemmas are admitted before it runs.
    pub proof: ConditionalProof,
}

impl CheckRequest {
    pub fn new(imports: &str, context: &str, statement: &str, proof: ConditionalProof) -> Self {
        CheckRequest {
            imports: imports.into(),
            context: context.into(),
            statement: statement.into(),
            proof,
        }
    }

    /// The proposed lemma statements, in order (trimmed).
    pub fn lemmas(&self) -> Vec<&str> {
        self.proof.lemmas().collect()
    }

    /// Requests with the same key can share one loaded prover state.
    pub fn context_key(&self) -> String {
        let mut h = Sha256::new();
        for part in [&self.imports, &self.context] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        hex::encode(h.finalize())
    }
}

/// Does a conditional proof's `t0` agree with its blocks? `<no_invoke>` proposes nothing and
/// `<use_invoke>` proposes at least one lemma (paper §2): a proof that proposes lemmas under
/// `<no_invoke>` would be rewarded as a proof without any.
pub fn check_t0(proof: &ConditionalProof) -> Result<(), crate::RuleError> {
    if proof.t0_consistent() {
        return Ok(());
    }
    Err(crate::RuleError::Rejected(match proof.t0() {
        prod_core::T0::NoInvoke => format!(
            "<no_invoke> proof proposes {} lemma(s): a proof that proposes lemmas starts with <use_invoke>",
            proof.lemma_count()
        ),
        prod_core::T0::UseInvoke => {
            "<use_invoke> proof proposes no lemma: a proof without proposals starts with <no_invoke>"
                .into()
        }
    }))
}
