//! The cold re-check of an assembled proof (paper §2: a globally correct tree becomes one
//! complete proof, which the prover must accept as a whole).
//!
//! The assembled theory is built in a **fresh session** (its own connection and
//! `session_start`, stopped afterwards), so nothing the local checks loaded or admitted is
//! around: the lemmas below the root come with their proofs, the root is the audited goal, and
//! the audit follows the goal's dependencies through every lemma (a `sorry` or an oracle
//! anywhere in the tree is in the goal's oracles). Every piece goes through the rules again:
//! assembly only joins texts that were checked one by one, but the final check trusts nothing
//! it did not check itself.

use prod_check::{CheckRequest, Verdict};
use prod_core::ConditionalProof;

use crate::checker::{plan_with, IsabelleChecker};
use crate::config::IsabelleCheckConfig;
use crate::rules::{RuleError, Rules};

/// An assembled proof as the final check takes it.
pub struct FinalTheory<'a> {
    /// Trusted imports; empty when `context` starts with its theory header.
    pub imports: &'a str,
    /// The theorem's context (trusted).
    pub context: &'a str,
    /// `(statement, proof)` of every assembled lemma below the root, in dependency order.
    pub lemmas: &'a [(String, String)],
    /// The root: the theorem's statement and its proof (no proposals left).
    pub statement: &'a str,
    pub proof: &'a str,
}

impl FinalTheory<'_> {
    /// The complete theory as a person would read it (what the run store keeps).
    pub fn text(&self) -> String {
        let (imports, context) = crate::checker::split_header(self.imports, self.context);
        let mut t = format!("theory Assembled\n  imports {imports}\nbegin\n\n{context}\n\n");
        for (s, p) in self.lemmas {
            t.push_str(&format!("{s}\n{p}\n\n"));
        }
        t.push_str(&format!("{}\n{}\n\nend\n", self.statement, self.proof));
        t
    }
}

/// [`final_check`] of an assembled proof: its lemmas below the root with their proofs, then the
/// root. Returns the verdict and the theory as a person would read it.
pub fn final_check_assembled(
    cfg: &IsabelleCheckConfig,
    imports: &str,
    context: &str,
    assembled: &prod_core::AssembledProof,
) -> (Verdict, String) {
    with_assembled_theory(imports, context, assembled, |fin| {
        (final_check(cfg, fin), fin.text())
    })
}

/// The theory [`final_check_assembled`] checks, as a person would read it.
pub fn assembled_theory_text(
    imports: &str,
    context: &str,
    assembled: &prod_core::AssembledProof,
) -> String {
    with_assembled_theory(imports, context, assembled, |fin| fin.text())
}

/// `f` of the [`FinalTheory`] of an assembled proof: its lemmas below the root, then the root.
fn with_assembled_theory<T>(
    imports: &str,
    context: &str,
    assembled: &prod_core::AssembledProof,
    f: impl FnOnce(&FinalTheory<'_>) -> T,
) -> T {
    let root = assembled.root();
    let below = &assembled.lemmas[..assembled.lemmas.len().saturating_sub(1)];
    let lemmas: Vec<(String, String)> = below
        .iter()
        .map(|l| (l.statement.clone(), l.proof.clone()))
        .collect();
    f(&FinalTheory {
        imports,
        context,
        lemmas: &lemmas,
        statement: &root.statement,
        proof: &root.proof,
    })
}

/// Check `fin` in a fresh session of the server `cfg` names. `Proved` only when the root's
/// theorem relies on no oracle (beyond `cfg.allowed_oracles`) and the theory adds no axiom.
pub fn final_check(cfg: &IsabelleCheckConfig, fin: &FinalTheory<'_>) -> Verdict {
    let rules = match Rules::with_keywords(&cfg.extra_keywords) {
        Ok(r) => r,
        Err(e) => return Verdict::infra(format!("[check.isabelle] extra_keywords: {e}")),
    };
    let mut proved = Vec::with_capacity(fin.lemmas.len());
    for (i, (statement, proof)) in fin.lemmas.iter().enumerate() {
        let piece = |e: RuleError| {
            Verdict::rejected(format!(
                "assembled lemma {}: {}",
                i + 1,
                e.into_verdict().message()
            ))
        };
        if let Err(e) = rules.check_statement(statement) {
            return piece(e);
        }
        if let Err(e) = rules.check_proof(proof) {
            return piece(e);
        }
        proved.push(format!("{statement}\n{proof}"));
    }
    let Ok(root) = ConditionalProof::parse_with(
        &format!("<no_invoke> {}", fin.proof),
        &prod_isar::IsarLanguage,
    ) else {
        return Verdict::rejected("the root's proof is not a proof without proposals");
    };
    let req = CheckRequest::new(fin.imports, fin.context, fin.statement, root);
    let mut plan = match plan_with(&rules, &req) {
        Ok(p) => p,
        Err(v) => return v,
    };
    plan.proved = proved;
    let fresh = IsabelleCheckConfig {
        workers: 1,
        ..cfg.clone()
    };
    let checker = match IsabelleChecker::connect(fresh) {
        Ok(c) => c,
        Err(e) => return Verdict::infra(format!("final check: cannot connect: {e}")),
    };
    let v = checker.run_plan(&plan);
    // The session goes with the check; a failure to stop it does not change the verdict.
    if let Err(e) = checker.stop_session() {
        eprintln!("warning: final check: session_stop: {e}");
    }
    v
}
