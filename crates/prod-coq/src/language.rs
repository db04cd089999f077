//! [`CoqLanguage`]: the Coq implementation of `prod_core::ProofLanguage`.
//!
//! # Statement normalisation (the "same lemma" key)
//!
//! For a statement that is one sentence `Keyword name REST.` (Keyword one of
//! [`THEOREM_KEYWORDS`], no control or attribute before it), the key is `REST` with:
//! 1. every comment preceded by a blank (or starting the text) replaced by one space (such a
//!    comment separates tokens exactly like a space); a comment glued after another character
//!    is kept verbatim (Coq may lex `.(* … *)` as the token `.(` followed by `*`);
//! 2. every run of Coq blanks (space, tab, newline, CR, form feed) OUTSIDE string literals
//!    replaced by one space, and both ends trimmed;
//! 3. the final `.` removed.
//!
//! 3. a blank run between an ASCII letter/digit and one of the delimiters
//!    [`GLUE_SAFE`](crate::layout::GLUE_SAFE) (`( ) [ ] { } , ; : = + * < > | & ~ / ^`), in
//!    either order, is removed, so `n+0` and
//!    `n + 0`, `(n:nat)` and `( n : nat )` get the same key: with Coq's default tokens no token
//!    spans such a boundary.
//!
//! The keyword and the name are dropped (all theorem keywords mean the same thing to ProD, and
//! the name does not matter). Nothing else is touched: no space is removed between two
//! symbols or two words, because Coq's lexer is extensible (notations add tokens such as
//! `.+1`, `'I_`, `->`): `- >` vs `->`, `a . b` vs `a.b`, `x - 1` vs `x-1` keep different keys
//! (a missed merge, never a wrong one). Binders are not moved either: `(n : nat) : P n` and
//! `: forall n : nat, P n` differ. Residual risk of step 3: a notation of the context that
//! declares a token mixing those delimiters with letters (`Notation "x '+n' y"`) could make
//! `a +n b` and `a + n b` differ in meaning yet share a key; goals are compared only within one
//! context, and every assembled proof is re-checked cold by Coq, which catches such a mix-up.
//!
//! Any other text (no keyword, several sentences, attributes, lex errors) gets the key
//! `#raw ` + (steps 1–2 applied to the whole text). `#` cannot start `REST` of a declaration,
//! so a raw key never equals a declaration's key.

use prod_core::ProofLanguage;

use crate::layout::{comments_spaced_when_separate, normalize_layout};
use crate::lexer::{identifiers, is_blank, is_identifier, sentences, skip_string, LexErrorKind};
use crate::statement::{parts, THEOREM_KEYWORDS};

/// Coq for ProD's core. Stateless.
#[derive(Clone, Copy, Debug, Default)]
pub struct CoqLanguage;

/// Bracket nesting depth at the end of `b` (strings and comments skipped).
fn bracket_depth(b: &[u8]) -> i64 {
    let mut depth = 0i64;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = skip_string(b, i).unwrap_or(b.len());
                continue;
            }
            b'(' if b.get(i + 1) == Some(&b'*') => {
                i = crate::lexer::skip_comment(b, i).unwrap_or(b.len());
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    depth
}

/// Where the list element around a name at `name_start` begins, so the modifiers go with the
/// name: (the start of the modifiers and the blanks before them, the element's first
/// non-blank byte).
fn list_element_start(sentence: &str, name_start: usize) -> (usize, usize) {
    let b = sentence.as_bytes();
    // Left: rewrite modifiers and `@` glued before the name (`<- name`, `!name`, `2?name`, `@name`).
    let mut j = name_start;
    loop {
        if j > 0 && (is_blank(b[j - 1]) || b"!?@".contains(&b[j - 1]) || b[j - 1].is_ascii_digit())
        {
            j -= 1;
        } else if j > 1 && (&b[j - 2..j] == b"<-" || &b[j - 2..j] == b"->") {
            j -= 2;
        } else {
            break;
        }
    }
    let element_start = j + sentence[j..name_start].len()
        - sentence[j..name_start]
            .trim_start_matches(|c: char| c.is_ascii() && is_blank(c as u8))
            .len();
    (j, element_start)
}

/// The first non-blank byte after a name ending at `name_end`, when the list element ends at
/// the name (a separator, the end, `in`/`with`/`using`/`by`, or a `word:` option follows);
/// `None` when the element goes on (`name x`), which is no clean removal.
fn list_element_end(sentence: &str, name_end: usize) -> Option<usize> {
    let b = sentence.as_bytes();
    // Right: the element must end at the name.
    let mut k = name_end;
    while k < b.len() && is_blank(b[k]) {
        k += 1;
    }
    let next_word: String = sentence[k..]
        .chars()
        .take_while(|&c| crate::lexer::is_ident_char(c))
        .collect();
    let ends_here = k >= b.len()
        || b",.;|])".contains(&b[k])
        || ["in", "with", "using", "by"].contains(&next_word.as_str())
        || (!next_word.is_empty() && b.get(k + next_word.len()) == Some(&b':'));
    if !ends_here {
        return None;
    }
    Some(k)
}

/// Where the identifier that ends `s` starts (`s.len()` when `s` does not end in one).
fn trailing_word_start(s: &str) -> usize {
    s.char_indices()
        .rev()
        .take_while(|&(_, c)| crate::lexer::is_ident_char(c))
        .last()
        .map_or(s.len(), |(i, _)| i)
}

/// `sentence` without the list element `element` (its separator or its whole option with it),
/// given the text `before` the element (trailing blanks trimmed) and `k`, the first non-blank
/// byte after it; `None` when the element is not in a list this knows how to shorten.
fn splice_out_element(
    sentence: &str,
    before: &str,
    element: std::ops::Range<usize>,
    k: usize,
) -> Option<String> {
    let b = sentence.as_bytes();
    let prev_word_start = trailing_word_start(before);
    let prev_word = &before[prev_word_start..];
    let splice = |a: usize, z: usize| format!("{}{}", &sentence[..a], &sentence[z..]);
    // `…, name` → drop the comma and the element.
    if before.ends_with(',') {
        return Some(splice(before.len() - 1, element.end));
    }
    const LIST_HEADS: &[&str] = &["rewrite", "erewrite", "setoid_rewrite", "unfold", "using"];
    let after_use =
        before.ends_with("use:") || before.ends_with("unfold:") || before.ends_with("hint:");
    // `head name, …` → drop the element and its comma.
    if k < b.len() && b[k] == b',' && (LIST_HEADS.contains(&prev_word) || after_use) {
        let mut z = k + 1;
        while z < b.len() && is_blank(b[z]) {
            z += 1;
        }
        return Some(splice(element.start, z));
    }
    // `using name` / `use: name` as the only element → drop the whole option.
    if prev_word == "using" {
        return Some(splice(
            before[..prev_word_start].trim_end().len(),
            element.end,
        ));
    }
    if after_use {
        let colon_word_start = trailing_word_start(&before[..before.len() - 1]);
        return Some(splice(
            before[..colon_word_start].trim_end().len(),
            element.end,
        ));
    }
    None
}

impl CoqLanguage {
    /// Proof text with `name` removed from one comma/`using`/`use:` argument list in `sentence`
    /// (already comment-free); `None` when no clean removal exists.
    fn remove_from_list(sentence: &str, occurrence: std::ops::Range<usize>) -> Option<String> {
        let b = sentence.as_bytes();
        // Only top-level argument lists of the sentence's tactic (`rewrite a, name`): inside
        // brackets a comma may be a term's (`(forall x, name)`), so such sentences are dropped.
        if bracket_depth(&b[..occurrence.start]) != 0 {
            return None;
        }
        let (j, element_start) = list_element_start(sentence, occurrence.start);
        let k = list_element_end(sentence, occurrence.end)?;
        // The word before the element.
        let before = sentence[..j].trim_end_matches(|c: char| c.is_ascii() && is_blank(c as u8));
        splice_out_element(sentence, before, element_start..occurrence.end, k)
    }

    /// One sentence with `name` removed, or `None` when the sentence must be dropped.
    fn remove_in_sentence(&self, sentence: &str, name: &str) -> Option<String> {
        if !self.mentions(sentence, name) {
            return Some(sentence.to_string());
        }
        // Only comments that stand apart are removed, so no edit can create a sentence end.
        let mut s = comments_spaced_when_separate(sentence);
        // Each round removes one occurrence, so this terminates.
        loop {
            let Some(r) = identifiers(&s).into_iter().find(|r| &s[r.clone()] == name) else {
                return Some(s);
            };
            s = Self::remove_from_list(&s, r)?;
        }
    }
}

impl ProofLanguage for CoqLanguage {
    fn name(&self) -> &'static str {
        "coq"
    }

    fn literals(&self, text: &str) -> Vec<prod_core::Literal> {
        crate::lexer::literals(text)
    }

    fn lemma_name(&self, statement: &str) -> Option<String> {
        parts(statement).map(|p| statement[p.name].to_string())
    }

    fn normalize_statement(&self, statement: &str) -> String {
        match parts(statement) {
            Some(p) => normalize_layout(&statement[p.rest_start..p.rest_end]),
            None => format!("#raw {}", normalize_layout(statement)),
        }
    }

    /// Not self-contained: a tactic-in-term quotation (`ltac:(…)`, `constr:(…)`, …), or an
    /// identifier that names a proposal in scope (its last component, so `Top.x` counts).
    fn statement_is_self_contained(&self, statement: &str, in_scope: &[String]) -> bool {
        if crate::lexer::term_quotation(statement).is_some() {
            return false;
        }
        let body = match parts(statement) {
            Some(p) => &statement[p.rest_start..p.rest_end],
            None => statement,
        };
        identifiers(body).into_iter().all(|r| {
            let w = &body[r];
            let last = w.rsplit('.').next().unwrap_or(w);
            !in_scope.iter().any(|s| s == last)
        })
    }

    fn rename_statement(&self, statement: &str, new_name: &str) -> String {
        match parts(statement) {
            Some(p) => format!(
                "{}{}{}",
                &statement[..p.name.start],
                new_name,
                &statement[p.name.end..]
            ),
            None => statement.to_string(),
        }
    }

    fn mentions(&self, proof_text: &str, name: &str) -> bool {
        identifiers(proof_text)
            .into_iter()
            .any(|r| &proof_text[r] == name)
    }

    fn rename_references(&self, proof_text: &str, renames: &[(String, String)]) -> String {
        let mut out = String::with_capacity(proof_text.len());
        let mut last = 0;
        for r in identifiers(proof_text) {
            if let Some((_, new)) = renames
                .iter()
                .find(|(old, _)| old == &proof_text[r.clone()])
            {
                out.push_str(&proof_text[last..r.start]);
                out.push_str(new);
                last = r.end;
            }
        }
        out.push_str(&proof_text[last..]);
        out
    }

    /// Removes `name` from `rewrite a, name, b`, `auto using a, name`, `hauto use: name`,
    /// `unfold a, name` (with any rewrite modifiers `<-`, `!`, `?`, `@`); a sentence that still
    /// mentions `name` after that (`apply name.`, `rewrite name.`, `unfold name.`) is dropped
    /// with its line if it stood alone. Bullets and braces are kept: the result is re-checked.
    fn remove_references(&self, proof_text: &str, name: &str) -> String {
        if !self.mentions(proof_text, name) {
            return proof_text.to_string();
        }
        let lexed = sentences(proof_text);
        let mut chunks: Vec<std::ops::Range<usize>> =
            lexed.sentences.iter().map(|s| s.range.clone()).collect();
        // Text the lexer could not close (no final dot, unclosed comment/string) is one more chunk.
        if let Some(e) = lexed.errors.first() {
            let start = match e.kind {
                LexErrorKind::MissingFinalDot => e.pos,
                _ => chunks.last().map_or(0, |r| r.end),
            };
            chunks.push(start..proof_text.len());
        }
        let b = proof_text.as_bytes();
        let mut out = String::with_capacity(proof_text.len());
        let mut last = 0;
        for r in chunks {
            // Dropping a sentence also drops the blanks after it, which may begin the next chunk.
            let r = r.start.max(last)..r.end.max(last);
            let text = &proof_text[r.clone()];
            match self.remove_in_sentence(text, name) {
                Some(new) if new == text => {}
                Some(new) => {
                    out.push_str(&proof_text[last..r.start]);
                    out.push_str(&new);
                    last = r.end;
                }
                None => {
                    // Drop the sentence; if it was alone on its line, drop the line too.
                    let line_start = proof_text[..r.start].rfind('\n').map_or(0, |i| i + 1);
                    let mut end = r.end;
                    while end < b.len() && matches!(b[end], b' ' | b'\t') {
                        end += 1;
                    }
                    let alone_before =
                        proof_text[line_start..r.start].trim().is_empty() && line_start >= last;
                    let (start, end) = if alone_before && (end == b.len() || b[end] == b'\n') {
                        (line_start, (end + 1).min(b.len()))
                    } else {
                        (r.start, end)
                    };
                    out.push_str(&proof_text[last..start]);
                    last = end;
                }
            }
        }
        out.push_str(&proof_text[last..]);
        out
    }

    fn render_admitted(&self, statement: &str) -> String {
        format!("{}\nAdmitted.", statement.trim_end())
    }

    fn render_proved(&self, statement: &str, proof_text: &str) -> String {
        format!(
            "{}\nProof.\n{}\nQed.",
            statement.trim_end(),
            proof_text.trim()
        )
    }

    fn is_identifier(&self, name: &str) -> bool {
        is_identifier(name) && !crate::statement::RESERVED.contains(&name)
    }

    /// The conservative ASCII words ([`crate::ascii_words`]) and the identifiers' parts: a
    /// name with non-ASCII letters is taken whole too.
    fn words(&self, text: &str) -> Vec<String> {
        let mut out: Vec<String> = crate::ascii_words(text)
            .into_iter()
            .map(|r| text[r].to_string())
            .collect();
        for r in crate::identifiers(text) {
            out.extend(text[r].split('.').map(str::to_string));
        }
        out
    }
}

/// Is `keyword` one of the theorem keywords ProD treats as equivalent?
pub fn is_theorem_keyword(keyword: &str) -> bool {
    THEOREM_KEYWORDS.contains(&keyword)
}

#[cfg(test)]
mod tests {
    use super::*;
    const L: CoqLanguage = CoqLanguage;

    /// Conditional proofs as Coq lexes them: markers in strings and comments are text.
    #[test]
    fn conditional_proofs_are_parsed_as_coq_lexes_them() {
        use prod_core::{ConditionalProof, ParseErrorKind};
        let parse = |t: &str| ConditionalProof::parse_with(t, &L);
        // (text, lemmas, proof text)
        let table: &[(&str, &[&str], &str)] = &[
            (
                r#"<no_invoke> idtac "(*". exact I."#,
                &[],
                r#" idtac "(*". exact I."#,
            ),
            (
                r#"<no_invoke> idtac "<invoke>". exact I."#,
                &[],
                r#" idtac "<invoke>". exact I."#,
            ),
            (
                "<no_invoke> (* not </invoke> *) exact I.",
                &[],
                " (* not </invoke> *) exact I.",
            ),
            (
                r#"<no_invoke> (* "*)" <invoke> *) exact I."#,
                &[],
                r#" (* "*)" <invoke> *) exact I."#,
            ),
            (
                r#"<no_invoke> idtac """<invoke>""". exact I."#,
                &[],
                r#" idtac """<invoke>""". exact I."#,
            ),
            (
                r#"<use_invoke> idtac "(*". <invoke> Lemma a : True. </invoke> exact a."#,
                &["Lemma a : True."],
                r#" idtac "(*".  exact a."#,
            ),
        ];
        for &(text, lemmas, proof) in table {
            let cp = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(cp.lemmas().collect::<Vec<_>>(), lemmas, "{text}");
            assert_eq!(
                (cp.proof_text(), cp.to_string()),
                (proof.into(), text.into())
            );
        }
        let kind = |t: &str| parse(t).unwrap_err().kind;
        assert_eq!(
            kind(r#"<no_invoke> idtac "x. exact I."#),
            ParseErrorKind::UnclosedString
        );
        assert_eq!(
            kind("<no_invoke> (* x. exact I."),
            ParseErrorKind::UnclosedComment
        );
        assert_eq!(
            kind(r#"<no_invoke> (* " *) exact I."#),
            ParseErrorKind::UnclosedComment
        );
        // What the checker runs is lexed by the same lexer: the sentences of a proof text are
        // the ones Coq reads, whatever markers its strings hold.
        let cp = parse(r#"<no_invoke> idtac "<invoke>. </invoke>". exact I."#).unwrap();
        let text = cp.proof_text();
        let lexed = crate::sentences(&text);
        assert!(lexed.errors.is_empty());
        assert_eq!(lexed.sentences.len(), 2);
    }

    #[test]
    fn normalize() {
        let a = L.normalize_statement("Lemma foo (n : nat) :\n  n + 0 = n.");
        let b = L.normalize_statement("Theorem bar  (n : nat) : (* why *) n + 0   = n .");
        assert_eq!(a, "(n:nat) :n+0=n");
        assert_eq!(L.normalize_statement("Lemma c ( n:nat ) :n+0 = n."), a);
        assert_ne!(
            L.normalize_statement("Lemma a : x - 1 = y."),
            L.normalize_statement("Lemma a : x-1 = y.")
        );
        assert_ne!(
            L.normalize_statement("Lemma a : f ?x = y."),
            L.normalize_statement("Lemma a : f?x = y.")
        );
        assert_eq!(a, b);
        assert_ne!(
            L.normalize_statement("Lemma a : x - > y."),
            L.normalize_statement("Lemma a : x -> y.")
        );
        assert_ne!(
            L.normalize_statement("Lemma a : f a . b = c."),
            L.normalize_statement("Lemma a : f a.b = c.")
        );
        assert_ne!(
            L.normalize_statement("Lemma a : s = \"x  y\"."),
            L.normalize_statement("Lemma a : s = \"x y\".")
        );
        assert_eq!(
            L.normalize_statement("Lemma a : s = \"x  y\"."),
            ":s= \"x  y\""
        );
        assert_eq!(
            L.normalize_statement("Lemma a : True. Lemma b : True."),
            "#raw Lemma a:True. Lemma b:True."
        );
        assert_eq!(
            L.lemma_name("(* c *) Corollary c' : True."),
            Some("c'".into())
        );
        assert_eq!(L.lemma_name("Local Lemma c : True."), None);
    }

    #[test]
    fn rename() {
        assert_eq!(
            L.rename_statement("Lemma foo: foo = 1.", "bar"),
            "Lemma bar: foo = 1."
        );
        let t = "rewrite foo, M.foo. (* foo *) apply foo'. exact (foo \"foo\").";
        let r = L.rename_references(t, &[("foo".into(), "bar".into())]);
        assert_eq!(
            r,
            "rewrite bar, M.foo. (* foo *) apply foo'. exact (bar \"foo\")."
        );
        assert!(L.mentions(t, "foo"));
        assert!(!L.mentions("apply M.foo. (* foo *)", "foo"));
    }

    #[test]
    fn remove() {
        let rm = |t: &str| L.remove_references(t, "l");
        assert_eq!(rm("rewrite a, l, b."), "rewrite a, b.");
        assert_eq!(rm("rewrite a, <- l."), "rewrite a.");
        assert_eq!(rm("rewrite <- l, b in H."), "rewrite b in H.");
        assert_eq!(rm("rewrite !l, ?b."), "rewrite ?b.");
        assert_eq!(rm("auto using l."), "auto.");
        assert_eq!(
            rm("eauto using a, l with arith."),
            "eauto using a with arith."
        );
        assert_eq!(rm("eauto using l with arith."), "eauto with arith.");
        assert_eq!(rm("hauto use: l."), "hauto.");
        assert_eq!(rm("hauto use: l, b unfold: c."), "hauto use: b unfold: c.");
        assert_eq!(rm("unfold l, b."), "unfold b.");
        assert_eq!(rm("intros.\n  apply l.\n  auto."), "intros.\n  auto.");
        assert_eq!(rm("intros. apply (l 1). auto."), "intros. auto.");
        assert_eq!(
            rm("- apply l.\n- unfold l.\n- auto using l."),
            "- \n- \n- auto."
        );
        assert_eq!(rm("rewrite a, (l x)."), "");
        assert_eq!(rm("assert (forall x, l)."), "");
        assert_eq!(rm("first [rewrite a, l | auto]."), "");
        assert_eq!(rm("rewrite -> l, m."), "rewrite m.");
        assert_eq!(rm("hauto lq: on use: l, m."), "hauto lq: on use: m.");
        assert_eq!(rm("sauto use: m, l."), "sauto use: m.");
        assert_eq!(
            rm("rewrite Nat.add_comm, l in H."),
            "rewrite Nat.add_comm in H."
        );
        assert_eq!(rm("now rewrite l."), "");
        assert_eq!(rm("rewrite l at 2, m."), "");
        assert_eq!(rm("apply M.l. (* l *)"), "apply M.l. (* l *)");
        assert_eq!(rm("intros. exact l"), "intros. ");
    }

    #[test]
    fn render() {
        assert_eq!(
            L.render_admitted("Lemma a : True.\n"),
            "Lemma a : True.\nAdmitted."
        );
        assert_eq!(
            L.render_proved("Lemma a : True.", " exact I. "),
            "Lemma a : True.\nProof.\nexact I.\nQed."
        );
    }
}
