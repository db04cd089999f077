//! Filters on lemma proposals (paper §3.2, Step 2): trivial proposals are dropped, unnecessary
//! lemmas are removed.

use prod_core::{ConditionalProof, ProofLanguage};

/// (a) A proposal is *trivial* when a proposed lemma states the theorem itself (same
/// normalised statement): such an example is discarded. The stronger test ("the theorem closes
/// from the lemma alone by one short tactic") needs the checker and lives with it.
pub fn is_trivial_proposal(
    statement: &str,
    proof: &ConditionalProof,
    lang: &dyn ProofLanguage,
) -> bool {
    let key = lang.normalize_statement(statement);
    proof.lemmas().any(|l| lang.normalize_statement(l) == key)
}

/// (b) Candidates for the unnecessary-lemma filter: for each proposed lemma `i`, the proof with
/// lemma `i` and every reference to it removed. The caller checks each candidate; if one is
/// still locally correct, lemma `i` was unnecessary and the candidate replaces the proof.
pub fn without_each_lemma(
    proof: &ConditionalProof,
    lang: &dyn ProofLanguage,
) -> Vec<(usize, ConditionalProof)> {
    (0..proof.lemma_count())
        .filter_map(|i| proof.remove_lemma(i, lang).map(|p| (i, p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prod_core::language::tests_support::ToyLanguage;

    #[test]
    fn trivial_when_a_lemma_restates_the_theorem() {
        let p = ConditionalProof::parse_with(
            "<use_invoke> <invoke> Lemma other :  T. </invoke> apply other.",
            &ToyLanguage,
        )
        .unwrap();
        assert!(is_trivial_proposal("Lemma t : T.", &p, &ToyLanguage));
        assert!(!is_trivial_proposal("Lemma t : U.", &p, &ToyLanguage));
    }

    #[test]
    fn one_candidate_per_lemma() {
        let p = ConditionalProof::parse_with("<use_invoke> <invoke> Lemma a : A. </invoke> x a. <invoke> Lemma b : B. </invoke> y b.", &ToyLanguage).unwrap();
        let c = without_each_lemma(&p, &ToyLanguage);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].1.lemmas().collect::<Vec<_>>(), ["Lemma b : B."]);
        assert!(!c[0].1.proof_text().contains(" a."));
        assert_eq!(c[1].1.lemmas().collect::<Vec<_>>(), ["Lemma a : A."]);
    }
}
