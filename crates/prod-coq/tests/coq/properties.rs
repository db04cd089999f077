//! Property tests: the lexers never panic and return well-formed ranges; renaming round trips;
//! normalisation ignores layout and names; reference removal removes every reference; a
//! conditional proof is split only outside Coq's strings and comments, so a marker written
//! inside one changes nothing about the sentences Coq and the checker read.

use prod_coq::{
    comments_stripped, identifiers, parse_statement, sentences, CoqLanguage, SentenceKind,
};
use prod_core::ProofLanguage;
use proptest::prelude::*;

/// Text that looks like Coq often enough to exercise every branch of the lexer.
fn coqish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("(*".to_string()),
        Just("*)".to_string()),
        Just("\"".to_string()),
        Just(". ".to_string()),
        Just(".".to_string()),
        Just("..".to_string()),
        Just("... ".to_string()),
        Just("\n".to_string()),
        Just("- ".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("{|".to_string()),
        Just("2: ".to_string()),
        Just("[x]:".to_string()),
        Just("#[local]".to_string()),
        Just("Lemma".to_string()),
        Just(":".to_string()),
        Just(",".to_string()),
        Just("%nat".to_string()),
        "[a-zA-Z_][a-zA-Z0-9_'.]{0,6}",
        "[ \t]{1,3}",
        "[αβé∀→⊕ℕ]",
        "[-+*(){}\\[\\]|<>=:;,.!?@'`0-9]{1,3}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

/// Coq-like text with closed strings and comments in it (and `coqish` text, which may open more).
fn with_literals() -> impl Strategy<Value = String> {
    let plain =
        || coqish().prop_map(|t| t.replace('"', "").replace("(*", "( *").replace("*)", "* )"));
    let literal = prop_oneof![
        plain().prop_map(|t| format!(" \"{}\" ", t.replace('"', "\"\""))),
        plain().prop_map(|t| format!(" (* {t} *) ")),
        (plain(), plain()).prop_map(|(a, b)| format!(" (* {a} \"*)\" (* {b} *) *) ")),
    ];
    prop::collection::vec((plain(), literal), 1..4)
        .prop_map(|v| v.into_iter().map(|(a, b)| a + &b).collect())
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![coqish(), any::<String>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
    ))]

    #[test]
    fn sentences_are_well_formed(text in any_text()) {
        let lexed = sentences(&text);
        let mut prev_end = 0;
        for s in &lexed.sentences {
            prop_assert!(prev_end <= s.range.start && s.range.start < s.range.end && s.range.end <= text.len());
            prop_assert!(text.is_char_boundary(s.range.start) && text.is_char_boundary(s.range.end));
            let t = s.text(&text);
            match s.kind {
                SentenceKind::Command => prop_assert!(t.ends_with('.')),
                SentenceKind::Bullet => prop_assert!(t.chars().all(|c| c == t.chars().next().unwrap_or('-'))),
                SentenceKind::BraceOpen => prop_assert!(t.ends_with('{'), "brace {:?}", t),
                SentenceKind::BraceClose => prop_assert_eq!(t, "}"),
            }
            // Only blanks and comments between sentences.
            prop_assert!(comments_stripped(&text[prev_end..s.range.start]).trim().is_empty());
            prev_end = s.range.end;
        }
        prop_assert!(lexed.errors.len() <= 1);
        if lexed.errors.is_empty() {
            prop_assert!(comments_stripped(&text[prev_end..]).trim().is_empty());
        } else {
            prop_assert!(lexed.errors[0].pos >= prev_end && lexed.errors[0].pos <= text.len());
        }
    }

    #[test]
    fn identifiers_are_well_formed(text in any_text()) {
        let mut prev_end = 0;
        for r in identifiers(&text) {
            prop_assert!(prev_end <= r.start && r.start < r.end && r.end <= text.len());
            prop_assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
            for part in text[r.clone()].split('.') {
                prop_assert!(prod_coq::is_identifier(part) || part == "_", "{:?}", part);
            }
            prev_end = r.end;
        }
    }

    #[test]
    fn head_and_statement_never_panic(text in any_text()) {
        let _ = prod_coq::sentence_head(&text);
        let _ = prod_coq::first_word(&text);
        if let Ok(st) = parse_statement(&text) {
            // A parsed statement re-renders to one sentence that parses to itself.
            let again = parse_statement(&st.to_sentence());
            prop_assert_eq!(again, Ok(st));
        }
        let l = CoqLanguage;
        let _ = l.normalize_statement(&text);
        let _ = l.lemma_name(&text);
        let _ = l.rename_statement(&text, "fresh");
        for name in ["a", "l", "x", "Lemma"] {
            let out = l.remove_references(&text, name);
            // Only identifiers outside comments count, and every one of them is removed.
            prop_assert!(!l.mentions(&out, name), "{:?} -> {:?}", text, out);
        }
    }

    #[test]
    fn parsed_statements_render_as_one_sentence(body in coqish(), kw in prop_oneof![Just("Lemma"), Just("Theorem")]) {
        let text = format!("{kw} x : {body}.");
        if let Ok(st) = parse_statement(&text) {
            let rendered = st.to_sentence();
            let lexed = sentences(&rendered);
            prop_assert!(lexed.errors.is_empty() && lexed.sentences.len() == 1, "{:?} -> {:?}", text, rendered);
            prop_assert_eq!(parse_statement(&rendered), Ok(st));
        }
    }

    #[test]
    fn rename_round_trips(text in any_text(), old in "[a-z][a-z0-9_']{0,3}") {
        let fresh = "zq_fresh";
        prop_assume!(!text.contains(fresh) && old != fresh);
        let l = CoqLanguage;
        let there = l.rename_references(&text, &[(old.clone(), fresh.to_string())]);
        prop_assert!(!l.mentions(&there, &old));
        prop_assert_eq!(l.mentions(&there, fresh), l.mentions(&text, &old));
        let back = l.rename_references(&there, &[(fresh.to_string(), old.clone())]);
        prop_assert_eq!(back, text);
    }

    #[test]
    fn remove_references_removes_every_reference(
        steps in prop::collection::vec(prop_oneof![
            Just("rewrite a, l, b."), Just("rewrite <- l."), Just("rewrite !l, ?b in H."),
            Just("auto using l."), Just("eauto using a, l with arith."), Just("hauto use: l, a."),
            Just("unfold l."), Just("unfold l, a."), Just("apply l."), Just("exact (l 1)."),
            Just("intros."), Just("- "), Just("{ "), Just("} "), Just("(* l *)"), Just("apply M.l."),
            Just("rewrite a,l."), Just("simpl; rewrite l; auto."),
        ], 0..12),
        sep in prop_oneof![Just(" "), Just("\n  ")],
        unfinished in prop_oneof![Just(""), Just(" exact l"), Just(" (* l")],
    ) {
        // An unfinished last sentence (no final dot, unclosed comment) is handled too.
        let text = steps.join(sep) + unfinished;
        let l = CoqLanguage;
        let out = l.remove_references(&text, "l");
        prop_assert!(!l.mentions(&out, "l"), "{:?} -> {:?}", text, out);
        // What did not mention `l` is still there.
        prop_assert_eq!(out.matches("intros.").count(), text.matches("intros.").count());
        prop_assert_eq!(out.matches("M.l").count(), text.matches("M.l").count());
    }

    #[test]
    fn normalisation_ignores_layout_and_name(
        tokens in prop::collection::vec("[a-z]{1,3}|[-+=<>*]{1,2}|\\(|\\)|\"a  b\"", 1..12),
        seps in prop::collection::vec(prop_oneof![Just(" "), Just("\n\t "), Just(" (* c. *) ")], 12..13),
        name in "[a-z][a-z0-9_]{0,4}",
    ) {
        prop_assume!(!["as","at","end","for","fun","if","in","let","mod","then","with","fix"].contains(&name.as_str()));
        let l = CoqLanguage;
        let plain = format!("Lemma {name} : {} .", tokens.join(" "));
        let mut spaced = format!("Theorem other{}:", seps[0]);
        for (i, t) in tokens.iter().enumerate() {
            spaced.push_str(seps[(i + 1) % seps.len()]);
            spaced.push_str(t);
        }
        spaced.push_str(" .");
        prop_assume!(sentences(&plain).sentences.len() == 1 && sentences(&plain).errors.is_empty());
        prop_assert_eq!(l.normalize_statement(&plain), l.normalize_statement(&spaced));
        prop_assert_eq!(l.normalize_statement(&plain), l.normalize_statement(&l.rename_statement(&plain, "zz")));
        // Gluing two tokens changes the key unless the boundary is word/delimiter (step 3).
        let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        let delim = |c: Option<char>| c.is_some_and(|c| prod_coq::GLUE_SAFE.contains(c));
        let safe = |a: &str, b: &str| {
            let (p, n) = (a.chars().next_back(), b.chars().next());
            (word(p) && delim(n)) || (delim(p) && word(n))
        };
        if tokens.len() >= 2 {
            let glued = format!("Lemma {name} : {}{} {} .", tokens[0], tokens[1], tokens[2..].join(" "));
            if safe(&tokens[0], &tokens[1]) {
                prop_assert_eq!(l.normalize_statement(&plain), l.normalize_statement(&glued));
            } else {
                prop_assert_ne!(l.normalize_statement(&plain), l.normalize_statement(&glued));
            }
        }
    }

    /// The literals the conditional-proof parser skips are the comments and strings every
    /// other function of the lexer sees.
    #[test]
    fn literals_are_the_lexers_comments_and_strings(text in any_text()) {
        let lits = prod_coq::literals(&text);
        let comments: Vec<_> = lits.iter().filter(|l| l.kind == prod_core::LiteralKind::Comment).map(|l| l.range.clone()).collect();
        let strings: Vec<_> = lits.iter().filter(|l| l.kind == prod_core::LiteralKind::String).map(|l| l.range.clone()).collect();
        prop_assert_eq!(comments, prod_coq::comments(&text));
        prop_assert_eq!(strings, prod_coq::string_literals(&text));
        // Only the last can be open, and an open one is what the sentence lexer calls unclosed.
        let open = lits.iter().filter(|l| !l.closed).count();
        prop_assert!(open <= 1 && lits.last().is_none_or(|l| l.closed || l.range.end == text.len()));
    }

    /// Every piece of a parsed conditional proof is closed under Coq's lexer, and no literal
    /// of the whole text crosses a marker.
    #[test]
    fn conditional_proofs_never_cut_a_coq_literal(
        pieces in prop::collection::vec(prop_oneof![
            coqish(),
            Just("<invoke>".to_string()),
            Just("</invoke>".to_string()),
            Just("<use_invoke>".to_string()),
        ], 0..8),
    ) {
        let text = format!("<use_invoke>{}", pieces.concat());
        if let Ok(cp) = prod_core::ConditionalProof::parse_with(&text, &CoqLanguage) {
            prop_assert_eq!(cp.to_string(), text.clone());
            let mut n = 0;
            for p in cp.segments().iter().map(String::as_str).chain(cp.lemmas()) {
                let lits = prod_coq::literals(p);
                prop_assert!(lits.iter().all(|l| l.closed), "{:?}", p);
                n += lits.len();
            }
            prop_assert_eq!(n, prod_coq::literals(&text).len());
        }
    }

    /// A marker written inside a string or comment of a proof is text: the proof keeps one
    /// segment, the checker runs the text as written, and its sentences are the sentences of
    /// the text without the marker, shifted (the marker holds no quote and no comment delimiter).
    #[test]
    fn a_marker_inside_a_literal_changes_no_sentence(
        body in with_literals(),
        marker in prop_oneof![Just("<invoke>"), Just("</invoke>"), Just("<use_invoke>"), Just("<true>")],
        at in any::<prop::sample::Index>(),
    ) {
        let lits: Vec<_> = prod_coq::literals(&body).into_iter().filter(|l| l.closed && l.range.len() >= 2).collect();
        prop_assume!(!lits.is_empty() && prod_core::ConditionalProof::parse_with(&format!("<no_invoke>{body}"), &CoqLanguage).is_ok());
        let l = &lits[at.index(lits.len())];
        // Just after the literal's opening delimiter: inside it, on a char boundary.
        let pos = l.range.start + if body[l.range.start..].starts_with('"') { 1 } else { 2 };
        let with = format!("{}{marker}{}", &body[..pos], &body[pos..]);
        let cp = prod_core::ConditionalProof::parse_with(&format!("<no_invoke>{with}"), &CoqLanguage).unwrap();
        prop_assert_eq!(cp.lemma_count(), 0);
        prop_assert_eq!(cp.proof_text(), with.clone());
        let shift = |r: std::ops::Range<usize>| {
            let d = marker.len();
            (if r.start > pos { r.start - d } else { r.start })..(if r.end > pos { r.end - d } else { r.end })
        };
        let before: Vec<_> = sentences(&body).sentences.into_iter().map(|s| (s.range, s.kind)).collect();
        let after: Vec<_> = sentences(&with).sentences.into_iter().map(|s| (shift(s.range), s.kind)).collect();
        prop_assert_eq!(before, after);
    }
}
