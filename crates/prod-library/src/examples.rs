//! Contexts and conditional proofs (paper §2): for theorem `s_i`, the context is the file before
//! it with every peeled pair removed (unpeeled theorems keep their real proofs, so the context
//! compiles); the conditional proof inserts `<invoke> s_j </invoke>` right before the first step
//! that uses each peeled `s_j`, and `t0` is `<use_invoke>` iff it proposes a lemma.
//! Prover-neutral; the prover supplies the step rewriter (hammer replacement).

use prod_core::{ConditionalProof, ProofLanguage, T0};
use serde::Serialize;

use crate::peel::Peeling;
use crate::segment::{SegmentedFile, Step, Theorem};

/// Rewrites step `k` of a proof (e.g. into `hammer.`), or leaves it (`None`).
pub type Rewriter<'a> = dyn Fn(&[Step], usize) -> Option<String> + Sync + 'a;

/// What is built for one theorem of one file (file-level metadata is added by the caller).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TheoremExample {
    /// Index of the theorem in the file.
    pub index: usize,
    /// Context w/o lemmas (our setup): the file prefix minus peeled pairs, which is the prefix
    /// `reduced_source(..)[..context_end]` of the reduced file (kept as an offset: contexts of
    /// all theorems of a file together are quadratic in its size).
    pub context_end: usize,
    /// Context w/ lemmas (the D^{w/ l} variant of §4.2): `source[..context_with_lemmas_end]`.
    pub context_with_lemmas_end: usize,
    pub statement: String,
    /// `t0` + steps with `<invoke>`s, after step rewriting (hammer replacement).
    pub conditional_proof: String,
    /// The same without step rewriting (the human proof with `<invoke>`s).
    pub conditional_proof_original: String,
    /// `<no_invoke>` + the rewritten steps: the ground truth when every lemma is in the context.
    pub plain_proof: String,
    pub proposed_lemmas: Vec<String>,
    /// Names of the proposed lemmas (same order).
    pub proposed_names: Vec<String>,
    pub depth: u32,
    pub in_tree: bool,
    /// Steps the rewriter replaced.
    pub replaced_steps: usize,
}

/// Remove `[start, end)` spans of peeled theorems from `source[..upto]`.
fn context_without(f: &(impl SegmentedFile + ?Sized), peeling: &Peeling, upto: usize) -> String {
    let src = f.source();
    let mut out = String::with_capacity(upto);
    let mut pos = 0;
    for (j, t) in f.theorems().iter().enumerate() {
        if t.start >= upto {
            break;
        }
        if peeling.in_tree(j) && t.end_byte <= upto {
            out.push_str(src.get(pos..t.start).unwrap_or(""));
            pos = t.end_byte;
        }
    }
    out.push_str(src.get(pos..upto).unwrap_or(""));
    out
}

/// Bytes of peeled pairs that end before `upto` (so `upto` maps to `upto - this` in the reduced file).
fn removed_before(f: &(impl SegmentedFile + ?Sized), peeling: &Peeling, upto: usize) -> usize {
    f.theorems()
        .iter()
        .enumerate()
        .filter(|(j, t)| peeling.in_tree(*j) && t.end_byte <= upto && t.start < t.end_byte)
        .map(|(_, t)| t.end_byte - t.start)
        .sum()
}

/// The context (w/o lemmas) of an example, given the file's [`reduced_source`].
pub fn context<'a>(reduced: &'a str, e: &TheoremExample) -> &'a str {
    reduced.get(..e.context_end).unwrap_or(reduced)
}

/// The whole file with every peeled pair removed: what must still compile.
pub fn reduced_source(f: &(impl SegmentedFile + ?Sized), peeling: &Peeling) -> String {
    context_without(f, peeling, f.source().len())
}

/// Apply the step rewriter; returns (rewritten step texts, count replaced).
fn rewrite_steps(t: &Theorem, rewrite: &Rewriter<'_>) -> (Vec<String>, usize) {
    let mut n = 0;
    let steps = t
        .steps
        .iter()
        .enumerate()
        .map(|(k, s)| match rewrite(&t.steps, k) {
            Some(r) => {
                n += 1;
                r
            }
            None => s.text.clone(),
        })
        .collect();
    (steps, n)
}

/// Interleave `<invoke>`s before the first step using each peeled lemma.
fn conditional(
    f: &(impl SegmentedFile + ?Sized),
    peeling: &Peeling,
    (i, steps): (usize, &[String]),
    lang: &dyn ProofLanguage,
) -> Option<(ConditionalProof, Vec<usize>)> {
    let ths = f.theorems();
    let t = &ths[i];
    let mut segments = vec![String::new()];
    let mut lemmas = Vec::new();
    let mut proposed: Vec<usize> = Vec::new();
    for (k, step) in t.steps.iter().enumerate() {
        for &j in &step.uses {
            if j != i && j < ths.len() && peeling.in_tree(j) && !proposed.contains(&j) {
                proposed.push(j);
                if let Some(last) = segments.last_mut() {
                    if !last.ends_with(char::is_whitespace) {
                        last.push(' ');
                    }
                }
                lemmas.push(format!(" {} ", ths[j].statement.trim()));
                segments.push(String::new());
            }
        }
        if let (Some(last), Some(text)) = (segments.last_mut(), steps.get(k)) {
            last.push_str(text);
        }
    }
    let t0 = if lemmas.is_empty() {
        T0::NoInvoke
    } else {
        T0::UseInvoke
    };
    // Leading space after t0 for readability (the first step carries its own whitespace too).
    ConditionalProof::from_parts(t0, segments, lemmas, lang).map(|cp| (cp, proposed))
}

/// Test support: what every segmenter must give on any text — theorems in order and on char
/// boundaries, examples whose conditional proof round-trips, contexts inside the reduced source.
#[cfg(test)]
pub(crate) fn check_segmented(
    src: &str,
    f: &(impl SegmentedFile + ?Sized),
    rewrite: &Rewriter<'_>,
    lang: &dyn ProofLanguage,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let mut last = 0;
    for t in f.theorems() {
        proptest::prop_assert!(t.start >= last && t.start <= t.end_byte && t.end_byte <= src.len());
        proptest::prop_assert!(src.is_char_boundary(t.start) && src.is_char_boundary(t.end_byte));
        last = t.end_byte;
    }
    let p = crate::peel::peel(f);
    let (ex, _) = build_examples(f, &p, rewrite, lang);
    let reduced = reduced_source(f, &p);
    for e in ex {
        let cp = prod_core::ConditionalProof::parse_with(&e.conditional_proof, lang).unwrap();
        proptest::prop_assert_eq!(cp.to_string(), e.conditional_proof.clone());
        proptest::prop_assert!(
            reduced.is_char_boundary(e.context_end) && e.context_end <= reduced.len()
        );
    }
    Ok(())
}

/// Build the examples of every non-skipped theorem of a file, its proofs lexed by `lang`.
/// Returns the examples and the indices of theorems whose conditional proof could not be built
/// (a step holds a special token outside strings and comments, for instance), which the caller
/// reports as skipped.
pub fn build_examples(
    f: &(impl SegmentedFile + ?Sized),
    peeling: &Peeling,
    rewrite: &Rewriter<'_>,
    lang: &dyn ProofLanguage,
) -> (Vec<TheoremExample>, Vec<usize>) {
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for (i, t) in f.theorems().iter().enumerate() {
        if t.skip.is_some() {
            continue;
        }
        let (rewritten, replaced) = rewrite_steps(t, rewrite);
        let original: Vec<String> = t.steps.iter().map(|s| s.text.clone()).collect();
        let (Some((cp, proposed)), Some((cp_orig, _))) = (
            conditional(f, peeling, (i, &rewritten), lang),
            conditional(f, peeling, (i, &original), lang),
        ) else {
            failed.push(i);
            continue;
        };
        let Some(plain) =
            ConditionalProof::from_parts(T0::NoInvoke, vec![rewritten.concat()], vec![], lang)
        else {
            failed.push(i);
            continue;
        };
        let ths = f.theorems();
        out.push(TheoremExample {
            index: i,
            context_end: t.start - removed_before(f, peeling, t.start),
            context_with_lemmas_end: t.start,
            statement: t.statement.trim().to_string(),
            conditional_proof: cp.to_string(),
            conditional_proof_original: cp_orig.to_string(),
            plain_proof: plain.to_string(),
            proposed_lemmas: cp.lemmas().map(str::to_string).collect(),
            proposed_names: proposed
                .iter()
                .map(|&j| ths[j].name.clone().unwrap_or_default())
                .collect(),
            depth: peeling.depth.get(i).copied().unwrap_or(0),
            in_tree: peeling.in_tree(i),
            replaced_steps: replaced,
        });
    }
    (out, failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peel::peel;
    use crate::segment::{ProofEnd, Segments, Step, Theorem};

    /// Build a file from (name, [(step text, uses)]) with real spans.
    #[allow(clippy::type_complexity)]
    fn file(parts: &[(&str, &str, &[(&str, &[usize])])]) -> Segments {
        let mut src = String::new();
        let mut ths = Vec::new();
        for (content, name, steps) in parts {
            src.push_str(content);
            let start = src.len();
            let statement = format!("Lemma {name} : True.");
            src.push_str(&statement);
            src.push_str("\nProof.");
            let mut st = Vec::new();
            for (text, uses) in steps.iter() {
                src.push_str(text);
                st.push(Step {
                    text: text.to_string(),
                    uses: uses.to_vec(),
                });
            }
            src.push_str(" Qed.");
            ths.push(Theorem {
                name: Some(name.to_string()),
                statement,
                header: Some("Proof.".into()),
                steps: st,
                end_text: " Qed.".into(),
                end: ProofEnd::Qed,
                start,
                end_byte: src.len(),
                line: 1,
                peelable: true,
                pinned: false,
                skip: None,
                scope: vec![],
                module_path: vec![],
            });
        }
        Segments {
            source: src,
            theorems: ths,
            ..Default::default()
        }
    }

    #[test]
    fn contexts_and_invokes() {
        let f = file(&[
            ("Require A.\n", "a", &[(" exact I.", &[])]),
            (
                "\nDefinition k := 0.\n",
                "b",
                &[(" intros.", &[]), (" apply a.", &[0]), (" lia.", &[])],
            ),
            ("\n", "c", &[(" apply b.", &[1]), (" apply a.", &[0])]),
        ]);
        let p = peel(&f);
        let rw =
            |s: &[Step], k: usize| (s[k].text.trim() == "lia.").then(|| " hammer.".to_string());
        let (ex, failed) = build_examples(&f, &p, &rw, &prod_coq::CoqLanguage);
        assert!(failed.is_empty());
        assert_eq!(ex.len(), 3);
        // Every peeled pair is gone from the context; content stays.
        let reduced = reduced_source(&f, &p);
        assert_eq!(
            context(&reduced, &ex[2]),
            "Require A.\n\nDefinition k := 0.\n\n"
        );
        for e in &ex {
            assert_eq!(
                context(&reduced, e),
                context_without(&f, &p, f.theorems[e.index].start)
            );
        }
        assert_eq!(
            ex[1].conditional_proof,
            "<use_invoke> intros. <invoke> Lemma a : True. </invoke> apply a. hammer."
        );
        assert_eq!(
            ex[1].conditional_proof_original,
            "<use_invoke> intros. <invoke> Lemma a : True. </invoke> apply a. lia."
        );
        assert_eq!(ex[1].replaced_steps, 1);
        // c proposes b before its first use and a before its (later) first use.
        assert_eq!(ex[2].proposed_names, ["b", "a"]);
        assert_eq!(ex[2].depth, 2);
        assert_eq!(ex[0].conditional_proof, "<no_invoke> exact I.");
        assert!(f.source[..ex[2].context_with_lemmas_end].contains("Lemma b"));
        for e in &ex {
            let cp =
                ConditionalProof::parse_with(&e.conditional_proof, &prod_coq::CoqLanguage).unwrap();
            assert_eq!(cp.to_string(), e.conditional_proof);
            assert!(cp.t0_consistent());
        }
    }

    #[test]
    fn skipped_and_smuggled_tokens() {
        let mut f = file(&[
            ("", "a", &[(" exact <invoke>.", &[])]),
            ("", "b", &[(" auto.", &[])]),
            (
                "",
                "c",
                &[(" idtac \"<invoke>\". (* </invoke> *) auto.", &[])],
            ),
        ]);
        f.theorems[1].skip = Some(crate::segment::SkipReason::Admitted);
        let none = |_: &[Step], _: usize| None;
        let (ex, failed) = build_examples(&f, &peel(&f), &none, &prod_coq::CoqLanguage);
        assert_eq!(failed, vec![0]);
        // A marker inside a string or a comment is the step's text.
        let [c] = ex.as_slice() else { panic!("{ex:?}") };
        assert_eq!(
            c.conditional_proof,
            "<no_invoke> idtac \"<invoke>\". (* </invoke> *) auto."
        );
    }
}
