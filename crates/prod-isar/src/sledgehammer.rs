//! The paper's sledgehammer rule (Appendix A.4, "Details of using sledgehammer in the proof"):
//! a proof step becomes `sledgehammer` when it uses one of the tactics sledgehammer typically
//! finds (`meson`, `metis`, `smt`) or is one of a fixed list of simple steps. When checking, the
//! same list is tried first, then `sledgehammer [timeout = 10]`.

use crate::lexer::{lex, TokenKind};

/// The fixed list of simple steps, in the paper's order (also the checker's first attempts).
pub const SIMPLE_STEPS: [&str; 11] = [
    "by auto",
    "by simp",
    "by blast",
    "by fastforce",
    "by force",
    "by eval",
    "by presburger",
    "by sos",
    "by arith",
    "by linarith",
    "by (auto simp: field_simps)",
];

/// Methods whose use marks a step as sledgehammer-found.
pub const SLEDGEHAMMER_METHODS: [&str; 3] = ["meson", "metis", "smt"];

/// The step's proper tokens joined by single spaces: comments and layout do not matter.
fn canonical(text: &str) -> String {
    let (tokens, _) = lex(text);
    tokens
        .iter()
        .filter(|t| !t.is_improper())
        .map(|t| t.text(text))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the paper replaces this proof step (one command's text, e.g. `by (metis foo)` or
/// `apply (smt (z3) bar)`) by `sledgehammer` in the training data.
pub fn replaced_by_sledgehammer(step: &str) -> bool {
    let (tokens, _) = lex(step);
    let proper: Vec<_> = tokens.iter().filter(|t| !t.is_improper()).collect();
    let Some(first) = proper.first() else {
        return false;
    };
    // Only steps that run methods: `by`, `apply`, `proof`, `qed`, `..`-like terminal steps.
    if !matches!(
        first.text(step),
        "by" | "apply" | "proof" | "qed" | "apply_end"
    ) {
        return false;
    }
    if proper
        .iter()
        .any(|t| t.kind == TokenKind::Ident && SLEDGEHAMMER_METHODS.contains(&t.text(step)))
    {
        return true;
    }
    let c = canonical(step);
    SIMPLE_STEPS.iter().any(|s| canonical(s) == c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_rule() {
        assert!(replaced_by_sledgehammer("by (metis foo bar)"));
        assert!(replaced_by_sledgehammer("apply (smt (z3) baz)"));
        assert!(replaced_by_sledgehammer("by (meson)"));
        assert!(replaced_by_sledgehammer("by  simp (* done *)"));
        assert!(replaced_by_sledgehammer("by (auto  simp:field_simps)"));
        assert!(!replaced_by_sledgehammer("by (simp add: foo)"));
        assert!(!replaced_by_sledgehammer("by auto simp"));
        assert!(!replaced_by_sledgehammer("using metis by simp")); // `using` step: facts only
        assert!(!replaced_by_sledgehammer("by (rule smt_lemma)"));
        assert!(!replaced_by_sledgehammer("have \"metis\""));
    }
}
