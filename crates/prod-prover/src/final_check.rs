//! The cold re-check of an assembled proof (paper §2: a tree's proof is complete only when the
//! prover accepts it from nothing but the root's context). The same code serves a run's final
//! phase, `prod serve`'s `/v1/assemble` and `prod dataset validate --trees`.

use std::time::Duration;

use prod_check::Verdict;
use prod_check_coq::CoqCheckConfig;
use prod_check_isabelle::IsabelleCheckConfig;
use prod_core::AssembledProof;

use crate::ProverKind;

/// What the cold re-check of one globally correct root gets.
pub struct FinalProof<'a> {
    /// The root's imports when they are given apart from its context (Isabelle: the theory
    /// header's imports; Coq: `Require` sentences put before the context); may be empty.
    pub imports: &'a str,
    /// The root's full, checkable context.
    pub context: &'a str,
    /// Coq: the Sections/Modules the context leaves open, outermost first.
    pub scope: &'a [String],
    /// Coq: the root's qualified name (`M.name` inside module `M`); empty = its own name.
    pub qualified_name: &'a str,
    /// The root's own statement, as its theorem states it (the kernel is asked about this).
    pub statement: &'a str,
    pub assembled: &'a AssembledProof,
    /// Some node's `hammer.` steps were replaced by the tactic its check found.
    pub hammer_replaced: bool,
    pub timeout: Duration,
}

/// The cold re-check of an assembled proof, from nothing but the root's context.
pub trait FinalCheck: Send + Sync {
    /// The verdict and the complete text that was checked (kept beside the verdict).
    fn final_check(&self, proof: &FinalProof<'_>) -> (Verdict, String);
}

/// Coq: the whole file compiled by `coqc` in the sandbox, then `Print Assumptions` and
/// `coqchk` ([`prod_check_coq::final_check`]).
pub struct CoqFinal(pub CoqCheckConfig);

impl FinalCheck for CoqFinal {
    fn final_check(&self, p: &FinalProof<'_>) -> (Verdict, String) {
        let file = match coq_file(p) {
            Ok(r) => r,
            Err(e) => return (Verdict::rejected(e), String::new()),
        };
        let v = prod_check_coq::final_check(&file, &self.0, p.timeout);
        (v, file.text())
    }
}

/// The complete text of an assembled proof exactly as its cold re-check takes it (Coq: the
/// file `coqc` compiles — imports, context, the root's anchor, the lemmas child-first, the
/// root and the kernel's comparison; Isabelle: the theory), so that it checks by itself.
/// `Err` when the root's statement does not parse.
pub fn complete_text(prover: ProverKind, p: &FinalProof<'_>) -> Result<String, String> {
    match prover {
        ProverKind::Coq => coq_file(p).map(|file| file.text()),
        ProverKind::Isabelle => Ok(prod_check_isabelle::assembled_theory_text(
            p.imports,
            p.context,
            p.assembled,
        )),
    }
}

/// The Coq file of `p` ([`prod_check_coq::AssembledFile::render`]).
fn coq_file(p: &FinalProof<'_>) -> Result<prod_check_coq::RenderedFile, String> {
    let context = if p.imports.trim().is_empty() {
        p.context.to_string()
    } else {
        format!("{}\n{}", p.imports, p.context)
    };
    let root = &p.assembled.root().name;
    let qualified_name = if p.qualified_name.is_empty() {
        root.as_str()
    } else {
        p.qualified_name
    };
    prod_check_coq::AssembledFile {
        context: &context,
        scope: p.scope,
        qualified_name,
        root_statement: p.statement,
        assembled: &p.assembled.text,
        root,
        hammer_replaced: p.hammer_replaced,
    }
    .render()
}

/// Isabelle: the assembled theory in a fresh session of the server, the root audited.
pub struct IsabelleFinal(pub IsabelleCheckConfig);

impl FinalCheck for IsabelleFinal {
    fn final_check(&self, p: &FinalProof<'_>) -> (Verdict, String) {
        let cfg = IsabelleCheckConfig {
            attempt_timeout_s: u32::try_from(p.timeout.as_secs().max(1)).unwrap_or(u32::MAX),
            ..self.0.clone()
        };
        prod_check_isabelle::final_check_assembled(&cfg, p.imports, p.context, p.assembled)
    }
}
