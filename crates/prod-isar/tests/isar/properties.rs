//! Property tests: lexing never panics, is lossless, and errors always come with an Error token;
//! a conditional proof is split only outside Isabelle's strings, cartouches and comments.

use prod_core::ProofLanguage;
use prod_isar::{fact_references, lex, segment_theory, IsarLanguage, KeywordTable, TokenKind};
use proptest::prelude::*;

/// Fragments that exercise every lexer path, glued in random order.
fn isar_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("(*".to_string()),
        Just("*)".to_string()),
        Just("\\<open>".to_string()),
        Just("\\<close>".to_string()),
        Just("‹".to_string()),
        Just("›".to_string()),
        Just("\\<comment>".to_string()),
        Just("\\<^marker>".to_string()),
        Just("\\<^sub>".to_string()),
        Just("\\<alpha>".to_string()),
        Just("\\<".to_string()),
        Just("\\".to_string()),
        Just("\"".to_string()),
        Just("`".to_string()),
        Just("{*".to_string()),
        Just("*}".to_string()),
        Just("--".to_string()),
        Just("―".to_string()),
        Just("?".to_string()),
        Just("'".to_string()),
        Just(".".to_string()),
        Just("lemma".to_string()),
        Just("x".to_string()),
        Just("1".to_string()),
        Just(" ".to_string()),
        Just("\n".to_string()),
        "[ -~]{0,4}",
        any::<char>().prop_map(|c| c.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn lexing_is_lossless_on_fragments(parts in proptest::collection::vec(isar_fragment(), 0..40)) {
        check(&parts.concat())?;
    }

    #[test]
    fn lexing_is_lossless_on_any_string(s in any::<String>()) {
        check(&s)?;
    }

    /// The literals the conditional-proof parser skips are the lexer's literal tokens, and
    /// every piece of a parsed conditional proof has only closed ones.
    #[test]
    fn conditional_proofs_never_cut_an_isabelle_literal(
        parts in proptest::collection::vec(prop_oneof![
            isar_fragment(),
            Just("<invoke>".to_string()),
            Just("</invoke>".to_string()),
        ], 0..30),
    ) {
        let text = format!("<use_invoke>{}", parts.concat());
        let lits = prod_isar::lexer::literals(&text);
        let (tokens, _) = lex(&text);
        for l in &lits {
            prop_assert!(tokens.iter().any(|t| t.range == l.range), "{:?} is no token", l);
        }
        prop_assert!(lits.iter().filter(|l| !l.closed).count() <= 1);
        if let Ok(cp) = prod_core::ConditionalProof::parse_with(&text, &IsarLanguage) {
            prop_assert_eq!(cp.to_string(), text.clone());
            prop_assert!(lits.iter().all(|l| l.closed));
            for p in cp.segments().iter().map(String::as_str).chain(cp.lemmas()) {
                let inner = prod_isar::lexer::literals(p);
                prop_assert!(inner.iter().all(|l| l.closed), "{:?}", p);
            }
        }
    }

    #[test]
    fn segmenting_never_panics_and_is_lossless(parts in proptest::collection::vec(command_fragment(), 0..40)) {
        let s = parts.concat();
        check_segmentation(&s)?;
    }

    #[test]
    fn segmenting_any_string_is_lossless(s in any::<String>()) {
        check_segmentation(&s)?;
    }

    /// The language functions never panic, and removal leaves no reference behind in fact lists.
    #[test]
    fn language_functions_never_panic(parts in proptest::collection::vec(command_fragment(), 0..12)) {
        let s = parts.concat();
        let l = IsarLanguage;
        let _ = l.normalize_statement(&s);
        let _ = l.lemma_name(&s);
        let _ = l.rename_statement(&s, "renamed");
        let _ = l.rename_references(&s, &[("a".into(), "z".into())]);
        let removed = l.remove_references(&s, "a");
        prop_assert!(!fact_references(&removed).iter().any(|r| r == "a"), "{:?} -> {:?}", s, removed);
    }

    /// Layout between outer tokens never changes the key of a statement.
    #[test]
    fn statement_key_ignores_layout(
        words in proptest::collection::vec(prop_oneof![
            Just("\"x = y\""), Just("assumes"), Just("shows"), Just("and"), Just("a:"),
            Just("\\<open>P x\\<close>"), Just("fixes"), Just("x"), Just("::"), Just("nat"),
            Just("(* c *)"), Just("[simp]"),
        ], 1..10),
        seps in proptest::collection::vec(prop_oneof![Just(" "), Just("  "), Just("\n  "), Just("\t")], 10),
    ) {
        let l = IsarLanguage;
        let one = format!("lemma foo: {}", words.join(" "));
        let mut other = String::from("lemma bar:\n ");
        for (w, sep) in words.iter().zip(seps.iter().cycle()) {
            other.push_str(sep);
            other.push_str(w);
        }
        prop_assert_eq!(l.normalize_statement(&one), l.normalize_statement(&other));
    }
}

/// Command words, headers and proof punctuation, so that goal blocks open and close at random.
fn command_fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("theory T imports Main keywords \"k\" :: thy_goal begin\n".to_string()),
        Just("lemma x[simp]: \"P\"\n".to_string()),
        Just("k ".to_string()),
        Just("proof -\n".to_string()),
        Just("have a: \"Q\" ".to_string()),
        Just("show ?thesis ".to_string()),
        Just("by (simp add: a b[OF c])\n".to_string()),
        Just("apply auto\n".to_string()),
        Just("done\n".to_string()),
        Just("qed\n".to_string()),
        Just("next\n".to_string()),
        Just("{ ".to_string()),
        Just("} ".to_string()),
        Just(". ".to_string()),
        Just(".. ".to_string()),
        Just("oops\n".to_string()),
        Just("sorry\n".to_string()),
        Just("private ".to_string()),
        Just("context c begin\n".to_string()),
        Just("notepad begin\n".to_string()),
        Just("end\n".to_string()),
        Just("definition d where \"d = 0\"\n".to_string()),
        isar_fragment(),
    ]
}

fn check_segmentation(s: &str) -> Result<(), TestCaseError> {
    let th = segment_theory(s, &KeywordTable::hol());
    let mut pos = 0;
    for sp in &th.spans {
        prop_assert_eq!(sp.range.start, pos, "gap or overlap in {:?}", s);
        prop_assert!(sp.range.end > sp.range.start);
        prop_assert!(sp.keyword.start >= sp.range.start && sp.keyword.end <= sp.range.end);
        pos = sp.range.end;
        let _ = fact_references(sp.text(s));
    }
    prop_assert_eq!(pos, s.len());
    for b in &th.blocks {
        prop_assert!(b.statement == b.spans.start && b.spans.end <= th.spans.len());
        prop_assert!(b.spans.end > b.spans.start);
        if !b.closed {
            prop_assert!(
                !th.errors.is_empty(),
                "unclosed block without an error in {:?}",
                s
            );
        }
    }
    Ok(())
}

fn check(s: &str) -> Result<(), TestCaseError> {
    let (toks, errs) = lex(s);
    let mut pos = 0;
    for t in &toks {
        prop_assert_eq!(t.range.start, pos, "gap or overlap in {:?}", s);
        prop_assert!(t.range.end > t.range.start, "empty token in {:?}", s);
        prop_assert!(s.is_char_boundary(t.range.end));
        pos = t.range.end;
    }
    prop_assert_eq!(pos, s.len());
    let n_err_tokens = toks.iter().filter(|t| t.kind == TokenKind::Error).count();
    prop_assert_eq!(
        n_err_tokens,
        errs.len(),
        "one error per Error token in {:?}",
        s
    );
    for e in &errs {
        prop_assert!(toks
            .iter()
            .any(|t| t.kind == TokenKind::Error && t.range.start == e.offset));
    }
    Ok(())
}
