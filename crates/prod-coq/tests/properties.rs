//! Property tests: the lexers never panic and return well-formed ranges; renaming round trips;
//! normalisation ignores layout and names; reference removal removes every reference.

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
}
