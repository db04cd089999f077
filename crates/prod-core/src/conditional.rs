//! Conditional proofs (paper §2 "Conditional proofs", §3.1).
//!
//! The text a policy writes is `t0 t1 <invoke> l1 </invoke> t2 … tk <invoke> lk </invoke> t(k+1)`,
//! where `t0` is `<use_invoke>` or `<no_invoke>`, the `ti` are proof segments in the prover's own
//! syntax and the `li` are proposed lemma statements. Parsing is lossless:
//! `ConditionalProof::parse_with(x, lang)?.to_string() == x` for every `x` that parses.
//!
//! The markers are found as the prover reads the text: outside its string literals and comments,
//! which the [`ProofLanguage`] lexes ([`ProofLanguage::literals`]). So each segment and each lemma
//! starts and ends outside every literal, what the checker runs (`proof_text`) is the text the
//! model wrote minus whole marker blocks, and a string or comment that never closes is a parse
//! error, never a split. Every place that parses a proof must parse it with the same language:
//! two parses of one text that disagreed on its lemmas would let the tree solver see other
//! proposals than the checker admitted. [`ConditionalProof::parse`] (no language) is the
//! conservative common part of all languages' parses, for the callers that do not know theirs.

use std::fmt;

use serde::{Deserialize, Serialize};

use std::ops::Range;

use crate::language::{Literal, LiteralKind, ProofLanguage};

pub const USE_INVOKE: &str = "<use_invoke>";
pub const NO_INVOKE: &str = "<no_invoke>";
pub const INVOKE: &str = "<invoke>";
pub const END_INVOKE: &str = "</invoke>";
/// The value model's two answer tokens (paper §3.2).
pub const TRUE_TOKEN: &str = "<true>";
pub const FALSE_TOKEN: &str = "<false>";

/// Every special token ProD adds to a tokenizer, in a fixed order.
pub const SPECIAL_TOKENS: [&str; 6] = [
    USE_INVOKE,
    NO_INVOKE,
    INVOKE,
    END_INVOKE,
    TRUE_TOKEN,
    FALSE_TOKEN,
];

/// The token that opens a conditional proof: may this proof propose lemmas?
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum T0 {
    UseInvoke,
    NoInvoke,
}

impl T0 {
    /// The `t0` a text opens with (after blanks), if any: the same in every language, since
    /// only blanks may precede it.
    pub fn leading(text: &str) -> Option<T0> {
        let body = text.trim_start();
        [T0::UseInvoke, T0::NoInvoke]
            .into_iter()
            .find(|t| body.starts_with(t.token()))
    }

    pub fn token(self) -> &'static str {
        match self {
            T0::UseInvoke => USE_INVOKE,
            T0::NoInvoke => NO_INVOKE,
        }
    }
}

/// Why a text is not a conditional proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseErrorKind {
    /// The text does not start (after whitespace) with `<use_invoke>` or `<no_invoke>`.
    MissingT0,
    /// A second `<use_invoke>`/`<no_invoke>` appears after the first.
    RepeatedT0,
    /// `<invoke>` without a matching `</invoke>`.
    UnclosedInvoke,
    /// `<invoke>` inside an `<invoke>` segment.
    NestedInvoke,
    /// `<invoke>` … `</invoke>` holding only whitespace.
    EmptyInvoke,
    /// `</invoke>` with no open `<invoke>`.
    StrayEndInvoke,
    /// The value-model tokens `<true>`/`<false>` never belong in a proof.
    StrayValueToken,
    /// A string literal (or Isabelle cartouche) that never closes: where the text's markers
    /// are cannot be told.
    UnclosedString,
    /// A comment that never closes.
    UnclosedComment,
    /// Parsed without a language ([`ConditionalProof::parse`]): the text has markers and a
    /// character that may open a string or a comment, so only its language can tell which
    /// markers are text.
    NeedsLanguage,
}

/// A parse error with the byte offset in the input where it was detected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ParseError {
    pub kind: ParseErrorKind,
    /// Byte offset into the parsed text.
    pub position: usize,
}

impl ParseError {
    fn describe(&self) -> String {
        let what = match self.kind {
            ParseErrorKind::MissingT0 => {
                "conditional proof must start with <use_invoke> or <no_invoke>"
            }
            ParseErrorKind::RepeatedT0 => "repeated <use_invoke>/<no_invoke> token",
            ParseErrorKind::UnclosedInvoke => "<invoke> is never closed by </invoke>",
            ParseErrorKind::NestedInvoke => "<invoke> inside another <invoke>",
            ParseErrorKind::EmptyInvoke => "empty <invoke> </invoke>: no lemma statement",
            ParseErrorKind::StrayEndInvoke => "</invoke> without an open <invoke>",
            ParseErrorKind::StrayValueToken => {
                "<true>/<false> are value-model tokens, not proof text"
            }
            ParseErrorKind::UnclosedString => "string literal is never closed",
            ParseErrorKind::UnclosedComment => "comment is never closed",
            ParseErrorKind::NeedsLanguage => {
                "markers beside a string or comment delimiter: parse with the proof's language"
            }
        };
        format!("{what} (byte {})", self.position)
    }
}

/// A parsed conditional proof. Invariant: `segments.len() == lemmas.len() + 1`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConditionalProof {
    /// Whitespace before `t0` (kept so that printing is lossless).
    leading: String,
    t0: T0,
    /// `t1 … t(k+1)`, verbatim (may be empty strings).
    segments: Vec<String>,
    /// The raw text between `<invoke>` and `</invoke>`, verbatim (whitespace included).
    lemmas: Vec<String>,
}

/// Which special token starts at `pos`, if any.
fn token_at(text: &str, pos: usize) -> Option<&'static str> {
    let rest = &text[pos..];
    [
        USE_INVOKE,
        NO_INVOKE,
        INVOKE,
        END_INVOKE,
        TRUE_TOKEN,
        FALSE_TOKEN,
    ]
    .into_iter()
    .find(|t| rest.starts_with(t))
}

/// The characters that open a string, a comment or a cartouche in Coq or Isabelle: where
/// [`ConditionalProof::parse`] cannot find markers without knowing the language.
pub const LITERAL_OPENERS: [&str; 7] = ["\"", "`", "(*", "{*", "\\", "\u{2039}", "\u{2015}"];

/// The literals of a text as sorted, disjoint byte ranges, for skipping them.
struct Skips(Vec<Range<usize>>);

impl Skips {
    /// Clamp every range into `0..len`, sort, and keep each range that starts after the last
    /// kept one ends (a well-behaved lexer reports only such).
    fn new(len: usize, literals: &[Literal]) -> Self {
        let mut ranges: Vec<Range<usize>> = literals
            .iter()
            .map(|l| {
                let start = l.range.start.min(len);
                start..l.range.end.clamp(start, len)
            })
            .filter(|r| !r.is_empty())
            .collect();
        ranges.sort_by_key(|r| r.start);
        let mut kept: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            if kept.last().is_none_or(|k| k.end <= r.start) {
                kept.push(r);
            }
        }
        Skips(kept)
    }

    /// The end of the literal that holds byte `at`, if one does.
    fn end_of_literal_at(&self, at: usize) -> Option<usize> {
        let i = self.0.partition_point(|r| r.end <= at);
        self.0.get(i).filter(|r| r.start <= at).map(|r| r.end)
    }
}

/// The first char boundary of `text` at or after `pos` (the end of the text at most).
fn char_boundary_from(text: &str, mut pos: usize) -> usize {
    while pos < text.len() && !text.is_char_boundary(pos) {
        pos += 1;
    }
    pos.min(text.len())
}

impl ConditionalProof {
    /// A conditional proof with no proposed lemmas.
    pub fn plain(t0: T0, proof: &str) -> Self {
        ConditionalProof {
            leading: String::new(),
            t0,
            segments: vec![proof.to_string()],
            lemmas: vec![],
        }
    }

    /// Build from parts: `segments.len()` must be `lemmas.len() + 1`; lemma texts are put between
    /// the tags verbatim. Returns `None` if the parts would not print to a proof that `lang`
    /// parses back to the same parts.
    pub fn from_parts(
        t0: T0,
        segments: Vec<String>,
        lemmas: Vec<String>,
        lang: &dyn ProofLanguage,
    ) -> Option<Self> {
        if segments.len() != lemmas.len() + 1 {
            return None;
        }
        let cp = ConditionalProof {
            leading: String::new(),
            t0,
            segments,
            lemmas,
        };
        // Round-trip guard: a segment must not smuggle in tags of its own, nor open a string or
        // a comment that would swallow the tags after it.
        (Self::parse_with(&cp.to_string(), lang).ok()? == cp).then_some(cp)
    }

    /// Parse a conditional proof as `lang` lexes it. Never panics; errors carry the byte
    /// position. The markers (`<invoke>`, `</invoke>`, `t0`, the value tokens) are found only
    /// outside the language's string literals and comments ([`ProofLanguage::literals`]), as
    /// the prover reads the text: `idtac "<invoke>"` proposes nothing, and a comment may
    /// mention `</invoke>`. A string or comment that never closes is an error
    /// ([`ParseErrorKind::UnclosedString`], [`ParseErrorKind::UnclosedComment`]), never a
    /// split. Every segment and every lemma therefore starts and ends outside any literal.
    pub fn parse_with(text: &str, lang: &dyn ProofLanguage) -> Result<Self, ParseError> {
        Self::parse_outside(text, &lang.literals(text))
    }

    /// Parse without a language, for the callers that do not know theirs. Sound beside
    /// [`ConditionalProof::parse_with`]: whatever this parses, every language parses the same
    /// way (or refuses a string or comment that never closes). A text without markers after
    /// `t0` has one segment in every language; a text with markers parses as if nothing were a
    /// literal only when it holds no character that opens one in Coq or Isabelle
    /// ([`LITERAL_OPENERS`]), and is refused otherwise ([`ParseErrorKind::NeedsLanguage`]).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let raw = Self::parse_outside(text, &[]);
        let has_markers = match &raw {
            Ok(cp) => cp.lemma_count() > 0,
            Err(e) => e.kind != ParseErrorKind::MissingT0,
        };
        let opener = LITERAL_OPENERS.iter().filter_map(|o| text.find(o)).min();
        match opener {
            Some(position) if has_markers => Err(ParseError {
                kind: ParseErrorKind::NeedsLanguage,
                position,
            }),
            _ => raw,
        }
    }

    /// The parse itself: markers are looked for outside `literals` (in any order; ranges that
    /// do not fit the text are clamped), and a literal that never closes is an error.
    fn parse_outside(text: &str, literals: &[Literal]) -> Result<Self, ParseError> {
        let err = |kind, position| Err(ParseError { kind, position });
        let skip = Skips::new(text.len(), literals);
        let body_start = text.len() - text.trim_start().len();
        let leading = text[..body_start].to_string();
        let t0 = match token_at(text, body_start) {
            Some(USE_INVOKE) if skip.end_of_literal_at(body_start).is_none() => T0::UseInvoke,
            Some(NO_INVOKE) if skip.end_of_literal_at(body_start).is_none() => T0::NoInvoke,
            _ => return err(ParseErrorKind::MissingT0, body_start),
        };
        if let Some(open) = literals
            .iter()
            .filter(|l| !l.closed)
            .min_by_key(|l| l.range.start)
        {
            let kind = match open.kind {
                LiteralKind::String => ParseErrorKind::UnclosedString,
                LiteralKind::Comment => ParseErrorKind::UnclosedComment,
            };
            return err(kind, open.range.start.min(text.len()));
        }
        let mut pos = body_start + t0.token().len();
        let mut segments = Vec::new();
        let mut lemmas = Vec::new();
        let mut seg_start = pos;
        let mut open: Option<usize> = None; // byte offset of the open <invoke>
                                            // Every marker starts with `<` (ASCII, so `at` is a char boundary).
        while let Some(off) = text.get(pos..).and_then(|rest| rest.find('<')) {
            let at = pos + off;
            if let Some(end) = skip.end_of_literal_at(at) {
                pos = char_boundary_from(text, end.max(at + 1));
                continue;
            }
            match token_at(text, at) {
                Some(USE_INVOKE) | Some(NO_INVOKE) => return err(ParseErrorKind::RepeatedT0, at),
                Some(TRUE_TOKEN) | Some(FALSE_TOKEN) => {
                    return err(ParseErrorKind::StrayValueToken, at)
                }
                Some(INVOKE) => {
                    if open.is_some() {
                        return err(ParseErrorKind::NestedInvoke, at);
                    }
                    segments.push(text[seg_start..at].to_string());
                    open = Some(at);
                    pos = at + INVOKE.len();
                    seg_start = pos;
                }
                Some(END_INVOKE) => {
                    let Some(open_at) = open.take() else {
                        return err(ParseErrorKind::StrayEndInvoke, at);
                    };
                    let lemma = &text[seg_start..at];
                    if lemma.trim().is_empty() {
                        return err(ParseErrorKind::EmptyInvoke, open_at);
                    }
                    lemmas.push(lemma.to_string());
                    pos = at + END_INVOKE.len();
                    seg_start = pos;
                }
                _ => pos = at + 1,
            }
        }
        if let Some(open_at) = open {
            return err(ParseErrorKind::UnclosedInvoke, open_at);
        }
        segments.push(text[seg_start..].to_string());
        Ok(ConditionalProof {
            leading,
            t0,
            segments,
            lemmas,
        })
    }

    pub fn t0(&self) -> T0 {
        self.t0
    }

    /// Does `t0` agree with the body? (`<no_invoke>` proofs should propose nothing.)
    pub fn t0_consistent(&self) -> bool {
        match self.t0 {
            T0::UseInvoke => !self.lemmas.is_empty(),
            T0::NoInvoke => self.lemmas.is_empty(),
        }
    }

    /// The proposed lemma statements `l1 … lk`, trimmed.
    pub fn lemmas(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.lemmas.iter().map(|l| l.trim())
    }

    /// Number of proposed lemmas `k`.
    pub fn lemma_count(&self) -> usize {
        self.lemmas.len()
    }

    /// The proof segments `t1 … t(k+1)`, verbatim.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// `t1 t2 … t(k+1)`: the proof with every lemma proposal removed. This is what the prover
    /// runs after admitting the lemmas, and what assembly prints.
    pub fn proof_text(&self) -> String {
        self.segments.concat()
    }

    /// The same proof with `t0` replaced.
    pub fn with_t0(&self, t0: T0) -> Self {
        ConditionalProof { t0, ..self.clone() }
    }

    /// The "augmented example" (paper §2 end, §3.2): the proposed lemmas move into the context
    /// (admitted, in proposal order) and the proof proposes nothing. Returns (context, proof).
    pub fn move_lemmas_to_context(
        &self,
        context: &str,
        lang: &dyn ProofLanguage,
    ) -> (String, ConditionalProof) {
        let mut ctx = context.to_string();
        for lemma in self.lemmas() {
            if !ctx.is_empty() && !ctx.ends_with('\n') {
                ctx.push('\n');
            }
            ctx.push_str(&lang.render_admitted(lemma));
            ctx.push('\n');
        }
        (
            ctx,
            ConditionalProof::plain(T0::NoInvoke, &self.proof_text()),
        )
    }

    /// Remove proposed lemma `index` and every reference to its name in the proof segments (the
    /// "unnecessary lemma" filter, paper §3.2). `t0` becomes `<no_invoke>` when no lemma is left.
    /// Returns `None` if `index` is out of range.
    pub fn remove_lemma(&self, index: usize, lang: &dyn ProofLanguage) -> Option<ConditionalProof> {
        if index >= self.lemmas.len() {
            return None;
        }
        let name = lang.lemma_name(&self.lemmas[index]);
        let mut segments = self.segments.clone();
        // Segment `index` and `index + 1` touch the removed proposal: join them.
        let after = segments.remove(index + 1);
        segments[index].push_str(&after);
        let mut lemmas = self.lemmas.clone();
        lemmas.remove(index);
        // Another proposal of the same name keeps its references.
        let still_declared = name
            .as_deref()
            .map(|n| {
                lemmas
                    .iter()
                    .any(|l| lang.lemma_name(l).as_deref() == Some(n))
            })
            .unwrap_or(true);
        if let (Some(name), false) = (name, still_declared) {
            for s in &mut segments {
                *s = lang.remove_references(s, &name);
            }
        }
        let t0 = if lemmas.is_empty() {
            T0::NoInvoke
        } else {
            self.t0
        };
        Some(ConditionalProof {
            leading: self.leading.clone(),
            t0,
            segments,
            lemmas,
        })
    }
}

impl fmt::Display for ConditionalProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.leading)?;
        f.write_str(self.t0.token())?;
        for (i, seg) in self.segments.iter().enumerate() {
            f.write_str(seg)?;
            if let Some(l) = self.lemmas.get(i) {
                write!(f, "{INVOKE}{l}{END_INVOKE}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::tests_support::ToyLanguage;

    fn parse(s: &str) -> Result<ConditionalProof, ParseError> {
        ConditionalProof::parse_with(s, &ToyLanguage)
    }

    fn kind(s: &str) -> (ParseErrorKind, usize) {
        let e = parse(s).unwrap_err();
        (e.kind, e.position)
    }

    #[test]
    fn parses_segments_and_lemmas() {
        let s = "<use_invoke> intros. <invoke> Lemma a : True. </invoke> apply a. <invoke>Lemma b : P.</invoke>";
        let cp = parse(s).unwrap();
        assert_eq!(cp.t0(), T0::UseInvoke);
        assert_eq!(
            cp.lemmas().collect::<Vec<_>>(),
            ["Lemma a : True.", "Lemma b : P."]
        );
        assert_eq!(cp.segments(), [" intros. ", " apply a. ", ""]);
        assert_eq!(cp.proof_text(), " intros.  apply a. ");
        assert_eq!(cp.to_string(), s);
        assert!(cp.t0_consistent());
    }

    #[test]
    fn leading_whitespace_round_trips() {
        let s = "\n  <no_invoke>auto.";
        assert_eq!(parse(s).unwrap().to_string(), s);
    }

    #[test]
    fn malformed_inputs_report_positions() {
        assert_eq!(kind("intros."), (ParseErrorKind::MissingT0, 0));
        assert_eq!(kind("  x <no_invoke>"), (ParseErrorKind::MissingT0, 2));
        assert_eq!(kind(""), (ParseErrorKind::MissingT0, 0));
        assert_eq!(
            kind("<no_invoke> a <no_invoke>"),
            (ParseErrorKind::RepeatedT0, 14)
        );
        assert_eq!(
            kind("<use_invoke> <invoke> x"),
            (ParseErrorKind::UnclosedInvoke, 13)
        );
        assert_eq!(
            kind("<use_invoke> <invoke> <invoke> x </invoke>"),
            (ParseErrorKind::NestedInvoke, 22)
        );
        assert_eq!(
            kind("<use_invoke> <invoke> \n </invoke>"),
            (ParseErrorKind::EmptyInvoke, 13)
        );
        assert_eq!(
            kind("<use_invoke> a </invoke>"),
            (ParseErrorKind::StrayEndInvoke, 15)
        );
        assert_eq!(
            kind("<use_invoke> a <true>"),
            (ParseErrorKind::StrayValueToken, 15)
        );
        assert_eq!(
            kind("<use_invoke> <invoke> <use_invoke> </invoke>"),
            (ParseErrorKind::RepeatedT0, 22)
        );
    }

    #[test]
    fn unicode_and_angle_brackets_are_text() {
        let s = "<no_invoke> rewrite (x < y) ‹ok› <invok <invoke_x>";
        let cp = parse(s).unwrap();
        assert_eq!(cp.to_string(), s);
        assert_eq!(cp.lemma_count(), 0);
    }

    #[test]
    fn from_parts_rejects_smuggled_tags() {
        assert!(ConditionalProof::from_parts(
            T0::NoInvoke,
            vec!["a <invoke> b".into()],
            vec![],
            &ToyLanguage
        )
        .is_none());
        assert!(ConditionalProof::from_parts(
            T0::UseInvoke,
            vec!["a ".into(), " b".into()],
            vec![" L x. ".into()],
            &ToyLanguage
        )
        .is_some());
        assert!(ConditionalProof::from_parts(
            T0::UseInvoke,
            vec!["a".into()],
            vec!["L".into()],
            &ToyLanguage
        )
        .is_none());
    }

    #[test]
    fn move_lemmas_to_context_builds_augmented_example() {
        let cp = parse("<use_invoke> <invoke> Lemma a : T. </invoke> apply a.").unwrap();
        let (ctx, proof) = cp.move_lemmas_to_context("Require Import X.", &ToyLanguage);
        assert_eq!(ctx, "Require Import X.\nLemma a : T. Admitted.\n");
        assert_eq!(proof.to_string(), "<no_invoke>  apply a.");
    }

    #[test]
    fn remove_lemma_drops_references() {
        let cp = parse(
            "<use_invoke> intros. <invoke> Lemma a : T. </invoke> apply a. <invoke> Lemma b : U. </invoke> apply b.",
        )
        .unwrap();
        let r = cp.remove_lemma(0, &ToyLanguage).unwrap();
        assert_eq!(
            r.to_string(),
            "<use_invoke> intros. <invoke> Lemma b : U. </invoke> apply b."
        );
        let r2 = r.remove_lemma(0, &ToyLanguage).unwrap();
        assert_eq!(r2.t0(), T0::NoInvoke);
        assert_eq!(r2.lemma_count(), 0);
        assert!(cp.remove_lemma(2, &ToyLanguage).is_none());
    }

    /// (text, lemmas, proof text): markers inside strings and comments are text of the proof.
    #[test]
    fn markers_inside_strings_and_comments_are_text() {
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
                r#"<no_invoke> idtac "</invoke> <use_invoke> <true>"."#,
                &[],
                r#" idtac "</invoke> <use_invoke> <true>"."#,
            ),
            (
                "<no_invoke> (* see </invoke> *) exact I.",
                &[],
                " (* see </invoke> *) exact I.",
            ),
            (
                "<no_invoke> (* (* <invoke> *) *) auto.",
                &[],
                " (* (* <invoke> *) *) auto.",
            ),
            // A string inside a comment is lexed: its `*)` does not close the comment.
            (
                r#"<no_invoke> (* "*)" <invoke> *) auto."#,
                &[],
                r#" (* "*)" <invoke> *) auto."#,
            ),
            // `""` is a quote inside a string, not its end.
            (
                r#"<no_invoke> idtac "a""<invoke>". auto."#,
                &[],
                r#" idtac "a""<invoke>". auto."#,
            ),
            // A string opener in one lemma proposal does not reach past its `</invoke>`...
            (
                r#"<use_invoke> idtac "(*". <invoke> Lemma a : "x" = "x". </invoke> apply a."#,
                &[r#"Lemma a : "x" = "x"."#],
                r#" idtac "(*".  apply a."#,
            ),
            // ... and a lemma may itself hold a marker in a string.
            (
                r#"<use_invoke> <invoke> Lemma a : "</invoke>" = "". </invoke> apply a."#,
                &[r#"Lemma a : "</invoke>" = ""."#],
                "  apply a.",
            ),
            // Outside literals, angle brackets and near misses stay text.
            (
                "<no_invoke> rewrite (x < y) <invok *) <invoke_x>",
                &[],
                " rewrite (x < y) <invok *) <invoke_x>",
            ),
        ];
        for &(text, lemmas, proof) in table {
            let cp = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(cp.to_string(), text);
            assert_eq!(cp.lemmas().collect::<Vec<_>>(), lemmas, "{text}");
            assert_eq!(cp.proof_text(), proof, "{text}");
        }
    }

    #[test]
    fn unclosed_strings_and_comments_are_errors_not_splits() {
        assert_eq!(
            kind(r#"<no_invoke> idtac "abc"#),
            (ParseErrorKind::UnclosedString, 18)
        );
        assert_eq!(
            kind("<no_invoke> (* abc"),
            (ParseErrorKind::UnclosedComment, 12)
        );
        // A string that swallows `</invoke>` is named, not the `<invoke>` it left open.
        assert_eq!(
            kind(r#"<use_invoke> <invoke> Lemma a : "x. </invoke> apply a."#),
            (ParseErrorKind::UnclosedString, 32)
        );
        // A comment that opens in a string never opens.
        assert!(parse(r#"<no_invoke> idtac "(*" ; idtac "*)"."#).is_ok());
        // Without `t0` the text is no conditional proof, whatever it holds.
        assert_eq!(kind(r#"auto. "x"#), (ParseErrorKind::MissingT0, 0));
        // An unclosed string inside a comment leaves the comment unclosed.
        assert_eq!(
            kind(r#"<no_invoke> (* " *) auto."#),
            (ParseErrorKind::UnclosedComment, 12)
        );
        for e in [
            ParseErrorKind::UnclosedString,
            ParseErrorKind::UnclosedComment,
            ParseErrorKind::NeedsLanguage,
        ] {
            let msg = ParseError {
                kind: e,
                position: 3,
            }
            .to_string();
            assert!(msg.ends_with("(byte 3)") && msg.len() > 20, "{msg}");
        }
    }

    #[test]
    fn without_a_language_only_unambiguous_texts_parse() {
        let neutral = ConditionalProof::parse;
        // No marker after t0: one segment whatever the language.
        for text in [
            r#"<no_invoke> idtac "x". (* y *) exact I."#,
            r"<no_invoke> by (simp add: \<open>a\<close>)",
        ] {
            let cp = neutral(text).unwrap();
            assert_eq!((cp.lemma_count(), cp.to_string()), (0, text.to_string()));
        }
        // Markers without any literal opener: as every language parses them.
        let text = "<use_invoke> intros. <invoke> Lemma a : True. </invoke> apply a.";
        assert_eq!(neutral(text).unwrap(), parse(text).unwrap());
        // Markers beside a literal opener: only the language can tell.
        for text in [
            r#"<use_invoke> idtac "(*". <invoke> Lemma a : True. </invoke> apply a."#,
            r#"<use_invoke> idtac "<invoke>". exact I."#,
            r"<use_invoke> (* x *) <invoke> lemma a: \<open>x\<close> </invoke> by simp",
        ] {
            assert_eq!(
                neutral(text).unwrap_err().kind,
                ParseErrorKind::NeedsLanguage,
                "{text}"
            );
        }
        assert_eq!(
            neutral("auto.").unwrap_err().kind,
            ParseErrorKind::MissingT0
        );
    }

    #[test]
    fn from_parts_refuses_a_segment_that_opens_a_literal() {
        let parts = |seg: &str| {
            ConditionalProof::from_parts(
                T0::UseInvoke,
                vec![seg.into(), " apply a.".into()],
                vec![" Lemma a : True. ".into()],
                &ToyLanguage,
            )
        };
        assert!(parts(r#"idtac "x"."#).is_some());
        assert!(parts(r#"idtac "x."#).is_none());
        assert!(parts("(* x").is_none());
    }

    /// A language whose lexer reports ranges out of order, overlapping or past the end must
    /// not make the parser panic.
    #[test]
    fn a_careless_lexer_cannot_make_the_parser_panic() {
        struct Careless;
        impl ProofLanguage for Careless {
            fn name(&self) -> &'static str {
                "careless"
            }
            fn literals(&self, text: &str) -> Vec<Literal> {
                let n = text.len();
                [(n + 5, n + 9), (3, 1), (14, 200), (13, 15), (0, 0)]
                    .into_iter()
                    .map(|(a, b)| Literal {
                        range: a..b,
                        kind: LiteralKind::String,
                        closed: true,
                    })
                    .collect()
            }
            fn lemma_name(&self, _: &str) -> Option<String> {
                None
            }
            fn normalize_statement(&self, s: &str) -> String {
                s.into()
            }
            fn rename_statement(&self, s: &str, _: &str) -> String {
                s.into()
            }
            fn mentions(&self, _: &str, _: &str) -> bool {
                false
            }
            fn rename_references(&self, s: &str, _: &[(String, String)]) -> String {
                s.into()
            }
            fn remove_references(&self, s: &str, _: &str) -> String {
                s.into()
            }
            fn render_admitted(&self, s: &str) -> String {
                s.into()
            }
            fn render_proved(&self, s: &str, _: &str) -> String {
                s.into()
            }
        }
        for text in [
            "<use_invoke> αβγ <invoke> x </invoke> é",
            "<no_invoke>",
            "  <no_invoke> <",
        ] {
            if let Ok(cp) = ConditionalProof::parse_with(text, &Careless) {
                assert_eq!(cp.to_string(), text);
            }
        }
    }
}
