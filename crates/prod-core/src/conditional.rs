//! Conditional proofs (paper §2 "Conditional proofs", §3.1).
//!
//! The text a policy writes is `t0 t1 <invoke> l1 </invoke> t2 … tk <invoke> lk </invoke> t(k+1)`,
//! where `t0` is `<use_invoke>` or `<no_invoke>`, the `ti` are proof segments in the prover's own
//! syntax and the `li` are proposed lemma statements. Parsing is lossless:
//! `ConditionalProof::parse(x)?.to_string() == x` for every `x` that parses.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::language::ProofLanguage;

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
#[serde(rename_all = "snake_case")]
pub enum T0 {
    UseInvoke,
    NoInvoke,
}

impl T0 {
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
    /// the tags verbatim. Returns `None` if the parts would not print to a parseable proof.
    pub fn from_parts(t0: T0, segments: Vec<String>, lemmas: Vec<String>) -> Option<Self> {
        if segments.len() != lemmas.len() + 1 {
            return None;
        }
        let cp = ConditionalProof {
            leading: String::new(),
            t0,
            segments,
            lemmas,
        };
        // Round-trip guard: a segment must not smuggle in tags of its own.
        (Self::parse(&cp.to_string()).ok()? == cp).then_some(cp)
    }

    /// Parse a conditional proof. Never panics; errors carry the byte position. The special
    /// tokens inside a `(* … *)` comment are part of the comment, not of the structure.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let err = |kind, position| Err(ParseError { kind, position });
        let body_start = text.len() - text.trim_start().len();
        let leading = text[..body_start].to_string();
        let t0 = match token_at(text, body_start) {
            Some(USE_INVOKE) => T0::UseInvoke,
            Some(NO_INVOKE) => T0::NoInvoke,
            _ => return err(ParseErrorKind::MissingT0, body_start),
        };
        let mut pos = body_start + t0.token().len();
        let mut segments = Vec::new();
        let mut lemmas = Vec::new();
        let mut seg_start = pos;
        let mut open: Option<usize> = None; // byte offset of the open <invoke>
        let bytes = text.as_bytes();
        // A token inside a comment `(* … *)` (nested, as Coq, Isabelle and ML nest them) is text
        // of that comment: an honest proof may mention `<invoke>` in one. All tokens start with
        // `<` and comments with `(`, so the scan stops only on ASCII bytes (char boundaries).
        let mut depth = 0usize;
        while let Some(off) = text[pos..].find(['<', '(', '*']) {
            let at = pos + off;
            let next = bytes.get(at + 1).copied();
            if bytes[at] == b'(' && next == Some(b'*') {
                depth += 1;
                pos = at + 2;
                continue;
            }
            if bytes[at] == b'*' && next == Some(b')') && depth > 0 {
                depth -= 1;
                pos = at + 2;
                continue;
            }
            if bytes[at] != b'<' || depth > 0 {
                pos = at + 1;
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

impl std::str::FromStr for ConditionalProof {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::tests_support::ToyLanguage;

    fn kind(s: &str) -> (ParseErrorKind, usize) {
        let e = ConditionalProof::parse(s).unwrap_err();
        (e.kind, e.position)
    }

    #[test]
    fn parses_segments_and_lemmas() {
        let s = "<use_invoke> intros. <invoke> Lemma a : True. </invoke> apply a. <invoke>Lemma b : P.</invoke>";
        let cp = ConditionalProof::parse(s).unwrap();
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
        assert_eq!(ConditionalProof::parse(s).unwrap().to_string(), s);
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
        let cp = ConditionalProof::parse(s).unwrap();
        assert_eq!(cp.to_string(), s);
        assert_eq!(cp.lemma_count(), 0);
    }

    #[test]
    fn from_parts_rejects_smuggled_tags() {
        assert!(
            ConditionalProof::from_parts(T0::NoInvoke, vec!["a <invoke> b".into()], vec![])
                .is_none()
        );
        assert!(ConditionalProof::from_parts(
            T0::UseInvoke,
            vec!["a ".into(), " b".into()],
            vec![" L x. ".into()]
        )
        .is_some());
        assert!(
            ConditionalProof::from_parts(T0::UseInvoke, vec!["a".into()], vec!["L".into()])
                .is_none()
        );
    }

    #[test]
    fn move_lemmas_to_context_builds_augmented_example() {
        let cp = ConditionalProof::parse("<use_invoke> <invoke> Lemma a : T. </invoke> apply a.")
            .unwrap();
        let (ctx, proof) = cp.move_lemmas_to_context("Require Import X.", &ToyLanguage);
        assert_eq!(ctx, "Require Import X.\nLemma a : T. Admitted.\n");
        assert_eq!(proof.to_string(), "<no_invoke>  apply a.");
    }

    #[test]
    fn remove_lemma_drops_references() {
        let cp = ConditionalProof::parse(
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
}
