//! Property tests: parser round trip, the least fixed point against a naive Kleene iteration,
//! and assembled proofs checked by a tiny independent verifier.

use std::collections::{HashMap, HashSet};

use prod_core::language::tests_support::ToyLanguage;
use prod_core::tree::{solve, GlobalVerdict, LocalVerdict, Node};
use prod_core::{assemble, ConditionalProof, ProofLanguage, T0};
use proptest::prelude::*;

// ---------- conditional proofs ----------

fn parse(s: &str) -> Result<ConditionalProof, prod_core::ParseError> {
    ConditionalProof::parse_with(s, &ToyLanguage)
}

/// A marker, or a near miss of one.
fn marker_like() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("<use_invoke>"),
        Just("<no_invoke>"),
        Just("<invoke>"),
        Just("</invoke>"),
        Just("<true>"),
        Just("<false>"),
        Just("<invok"),
        Just("< invoke>"),
    ]
    .prop_map(String::from)
}

/// A closed string literal or comment of the toy language (Coq's lexical rules), holding
/// markers, escaped quotes (`""`), comment delimiters in strings, nested comments and strings
/// inside comments.
fn literal() -> impl Strategy<Value = String> {
    let words = || {
        prop::collection::vec(prop_oneof!["[a-z .<>/]{0,5}", marker_like()], 0..4)
            .prop_map(|v| v.concat())
    };
    let string = prop::collection::vec(
        prop_oneof![
            words(),
            Just("\"".into()),
            Just("(*".into()),
            Just("*)".into())
        ],
        0..5,
    )
    .prop_map(|v| format!("\"{}\"", v.concat().replace('"', "\"\"")));
    let comment = (
        words(),
        prop::option::of(string.clone()),
        words(),
        any::<bool>(),
    )
        .prop_map(|(a, st, b, nest)| {
            let st = st.unwrap_or_default();
            if nest {
                format!("(* {a} (* {st} *) {b} *)")
            } else {
                format!("(* {a} {st} {b} *)")
            }
        });
    prop_oneof![string, comment]
}

fn text_piece() -> impl Strategy<Value = String> {
    // Text that may contain '<', '>' and near-miss tags, closed strings and comments holding
    // markers, but never a real special token outside a literal.
    prop::collection::vec(
        prop_oneof![
            "[a-z .;:()\n\t]{0,8}".prop_map(|s| s),
            Just("<".to_string()),
            Just("<invok".to_string()),
            Just("< invoke>".to_string()),
            Just("‹α›".to_string()),
            literal().prop_map(|l| format!(" {l} ")),
        ],
        0..6,
    )
    .prop_map(|v| v.concat())
    .prop_filter("no special token", |s| {
        parse(&format!("<no_invoke>{s}")).is_ok()
    })
}

fn lemma_text() -> impl Strategy<Value = String> {
    text_piece().prop_filter("non-empty lemma", |s| !s.trim().is_empty())
}

/// Any mix of markers, literals (closed or cut short) and other text.
fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            marker_like(),
            literal(),
            literal().prop_map(|l| l[..l.len() / 2].to_string()),
            "[a-z <>/.\"()*]{0,6}",
        ],
        0..12,
    )
    .prop_map(|v| v.concat())
}

/// A `t0` (after optional blanks), then [`soup`]: mostly texts whose parse gets past `t0`.
fn proofish() -> impl Strategy<Value = String> {
    (
        "[ \n]{0,1}",
        prop_oneof![Just("<use_invoke>"), Just("<no_invoke>")],
        soup(),
    )
        .prop_map(|(lead, t0, rest)| format!("{lead}{t0}{rest}"))
}

proptest! {
    #[test]
    fn any_parseable_text_round_trips(s in prop_oneof![soup(), proofish()]) {
        if let Ok(cp) = parse(&s) {
            prop_assert_eq!(cp.to_string(), s);
            prop_assert_eq!(cp.segments().len(), cp.lemma_count() + 1);
        }
    }

    /// Every segment and every lemma starts and ends outside the literals: lexed alone, each
    /// has only closed literals, and the literals of the whole text are those of its pieces.
    #[test]
    fn pieces_never_cut_a_literal(s in proofish()) {
        if let Ok(cp) = parse(&s) {
            let pieces: Vec<&str> = cp.segments().iter().map(String::as_str)
                .chain(cp.lemmas()).collect();
            for p in pieces {
                prop_assert!(ToyLanguage.literals(p).iter().all(|l| l.closed), "{:?}", p);
            }
            let whole: usize = ToyLanguage.literals(&s).len();
            let parts: usize = cp.segments().iter().map(|p| ToyLanguage.literals(p).len()).sum::<usize>()
                + cp.lemmas().map(|l| ToyLanguage.literals(l).len()).sum::<usize>();
            prop_assert_eq!(whole, parts);
        }
    }

    /// A text with a literal that never closes never parses.
    #[test]
    fn an_unclosed_literal_is_an_error(s in proofish()) {
        if ToyLanguage.literals(&s).iter().any(|l| !l.closed) {
            prop_assert!(parse(&s).is_err());
        }
    }

    /// The language-less parse never disagrees with a language's: what it parses, the
    /// language parses the same, or refuses for a literal that never closes.
    #[test]
    fn the_neutral_parse_is_a_safe_subset(s in proofish()) {
        if let Ok(cp) = ConditionalProof::parse(&s) {
            match parse(&s) {
                Ok(q) => prop_assert_eq!(q, cp),
                Err(e) => prop_assert!(matches!(
                    e.kind,
                    prod_core::ParseErrorKind::UnclosedString | prod_core::ParseErrorKind::UnclosedComment
                ), "{}", e),
            }
        }
    }

    #[test]
    fn parser_never_panics(s in any::<String>()) {
        let _ = parse(&s);
        let _ = ConditionalProof::parse(&s);
    }

    #[test]
    fn built_proofs_parse_back(
        lead in "[ \n]{0,2}",
        use_invoke in any::<bool>(),
        parts in prop::collection::vec((text_piece(), lemma_text()), 0..5),
        last in text_piece(),
    ) {
        let t0 = if use_invoke { "<use_invoke>" } else { "<no_invoke>" };
        let mut s = format!("{lead}{t0}");
        for (seg, lem) in &parts {
            s.push_str(seg);
            s.push_str("<invoke>");
            s.push_str(lem);
            s.push_str("</invoke>");
        }
        s.push_str(&last);
        let cp = parse(&s).unwrap();
        prop_assert_eq!(cp.to_string(), s.clone());
        prop_assert_eq!(cp.t0(), if use_invoke { T0::UseInvoke } else { T0::NoInvoke });
        let lemmas: Vec<&str> = cp.lemmas().collect();
        let want: Vec<&str> = parts.iter().map(|(_, l)| l.trim()).collect();
        prop_assert_eq!(lemmas, want);
        let proof: String = parts.iter().map(|(s, _)| s.as_str()).chain([last.as_str()]).collect();
        prop_assert_eq!(cp.proof_text(), proof);
        let segments: Vec<String> = parts.iter().map(|(s, _)| s.clone()).chain([last.clone()]).collect();
        let rebuilt = ConditionalProof::from_parts(
            cp.t0(),
            segments,
            parts.iter().map(|(_, l)| l.clone()).collect(),
            &ToyLanguage,
        );
        prop_assert_eq!(rebuilt.map(|r| r.to_string()), Some(s.trim_start().to_string()));
    }
}

// ---------- proof forests ----------

/// A random forest over `atoms` statements: node = (statement atom, proposed atoms, local verdict).
fn forest() -> impl Strategy<Value = Vec<(u8, Vec<u8>, Option<bool>)>> {
    (1u8..8).prop_flat_map(|atoms| {
        prop::collection::vec(
            (
                0..atoms,
                prop::collection::vec(0..atoms, 0..3),
                prop_oneof![3 => Just(Some(true)), 1 => Just(Some(false)), 1 => Just(None)],
            ),
            1..14,
        )
    })
}

fn build(spec: &[(u8, Vec<u8>, Option<bool>)]) -> Vec<Node> {
    spec.iter()
        .enumerate()
        .map(|(i, (atom, lemmas, local))| {
            // Names differ per node on purpose: only statements identify goals.
            let mut proof = String::from(if lemmas.is_empty() {
                "<no_invoke>"
            } else {
                "<use_invoke>"
            });
            for (j, l) in lemmas.iter().enumerate() {
                proof.push_str(&format!(
                    " <invoke> Lemma n{i}_{j} : A{l}. </invoke> use n{i}_{j} A{l}."
                ));
            }
            proof.push_str(" done.");
            Node {
                id: format!("node{i}"),
                context: "c".into(),
                statement: format!("Lemma t{i} :  A{atom}."),
                proof: parse(&proof).unwrap(),
                local: (*local).into(),
            }
        })
        .collect()
}

/// Kleene iteration from the empty set: the least fixed point by definition (quadratic, fine here).
fn naive(spec: &[(u8, Vec<u8>, Option<bool>)], accept: impl Fn(Option<bool>) -> bool) -> Vec<bool> {
    let mut correct = vec![false; spec.len()];
    loop {
        let proved: HashSet<u8> = spec
            .iter()
            .zip(&correct)
            .filter(|(_, &c)| c)
            .map(|((a, _, _), _)| *a)
            .collect();
        let next: Vec<bool> = spec
            .iter()
            .map(|(_, ls, v)| accept(*v) && ls.iter().all(|l| proved.contains(l)))
            .collect();
        if next == correct {
            return correct;
        }
        correct = next;
    }
}

/// An independent verifier of the toy assembled text: lemmas in order, names unique, every
/// `use NAME ATOM.` refers to an earlier lemma stating exactly ATOM.
fn toy_verify(text: &str) -> Result<(), String> {
    let mut stated: HashMap<String, String> = HashMap::new();
    for block in text.split("\n\n") {
        let (stmt, proof) = block.split_once("\nProof. ").ok_or("no proof")?;
        let stmt = stmt.trim().strip_prefix("Lemma ").ok_or("not a lemma")?;
        let (name, atom) = stmt.split_once(':').ok_or("no colon")?;
        let atom = atom.trim().trim_end_matches('.').trim().to_string();
        for step in proof.split('.') {
            let words: Vec<&str> = step.split_whitespace().collect();
            if let ["use", n, a] = words[..] {
                match stated.get(n) {
                    Some(s) if s == a => {}
                    other => return Err(format!("`use {n} {a}` but {n} is {other:?}")),
                }
            }
        }
        if stated.insert(name.trim().to_string(), atom).is_some() {
            return Err(format!("duplicate name {name}"));
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn fixed_point_is_the_least_one(spec in forest()) {
        let nodes = build(&spec);
        let s = solve(&nodes, &ToyLanguage);
        let definite = naive(&spec, |v| v == Some(true));
        let possible = naive(&spec, |v| v != Some(false));
        for i in 0..spec.len() {
            let want = match (definite[i], possible[i]) {
                (true, _) => GlobalVerdict::Correct,
                (false, false) => GlobalVerdict::Incorrect,
                (false, true) => GlobalVerdict::Undetermined,
            };
            prop_assert_eq!(s.verdict(i), want, "node {}", i);
        }
    }

    #[test]
    fn assembled_proofs_verify(spec in forest()) {
        let nodes = build(&spec);
        let s = solve(&nodes, &ToyLanguage);
        for root in 0..nodes.len() {
            match assemble(&nodes, &s, root, &ToyLanguage) {
                Ok(p) => {
                    prop_assert_eq!(s.verdict(root), GlobalVerdict::Correct);
                    prop_assert!(toy_verify(&p.text).is_ok(), "{:?}\n{}", toy_verify(&p.text), p.text);
                    // Only locally correct nodes are used, each goal once, the root last.
                    for l in &p.lemmas {
                        prop_assert_eq!(nodes[l.node].local, LocalVerdict::Correct);
                    }
                    // Each lemma once (the root may restate one of them: it is not a lemma).
                    let lemmas = &p.lemmas[..p.lemmas.len() - 1];
                    let goals: HashSet<_> = lemmas.iter().map(|l| ToyLanguage.normalize_statement(&l.statement)).collect();
                    prop_assert_eq!(goals.len(), lemmas.len());
                    prop_assert_eq!(p.root().node, root);
                    prop_assert!(p.lemmas.len() as u32 > s.height(root).unwrap());
                }
                Err(_) => prop_assert_ne!(s.verdict(root), GlobalVerdict::Correct),
            }
        }
    }
}

// ---------- scale ----------

/// 10^5 nodes: a chain of depth 50,000 (each node proposes the next statement), a 25,000-node
/// cycle with no way out, and 25,000 random extra samples. The naive iteration would need
/// ~10^10 steps here; the linear algorithm does it in milliseconds (see `prod bench tree`).
#[test]
fn hundred_thousand_nodes() {
    let chain = 50_000usize;
    let cycle = 25_000usize;
    let mut proofs = Vec::new();
    for i in 0..chain {
        let p = if i + 1 < chain {
            format!(
                "<use_invoke> <invoke> Lemma c{} : C{}. </invoke> x.",
                i + 1,
                i + 1
            )
        } else {
            "<no_invoke> x.".into()
        };
        proofs.push((format!("Lemma c{i} : C{i}."), p, true));
    }
    for i in 0..cycle {
        let j = (i + 1) % cycle;
        proofs.push((
            format!("Lemma d{i} : D{i}."),
            format!("<use_invoke> <invoke> Lemma d{j} : D{j}. </invoke> x."),
            true,
        ));
    }
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut rnd = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for _ in 0..25_000 {
        // Extra samples for chain statements, half of them incorrect: they never change verdicts.
        let i = rnd(chain);
        proofs.push((
            format!("Lemma e : C{i}."),
            "<no_invoke> y.".into(),
            rnd(2) == 0,
        ));
    }
    let nodes: Vec<Node> = proofs
        .into_iter()
        .enumerate()
        .map(|(k, (statement, proof, ok))| Node {
            id: k.to_string(),
            context: "ctx".into(),
            statement,
            proof: parse(&proof).unwrap(),
            local: if ok {
                LocalVerdict::Correct
            } else {
                LocalVerdict::Incorrect
            },
        })
        .collect();
    assert_eq!(nodes.len(), 100_000);
    let t = std::time::Instant::now();
    let s = solve(&nodes, &ToyLanguage);
    eprintln!("solve(10^5 nodes): {:?}", t.elapsed());
    assert!((0..chain).all(|i| s.verdict(i) == GlobalVerdict::Correct));
    assert!((chain..chain + cycle).all(|i| s.verdict(i) == GlobalVerdict::Incorrect));
    assert!(s.height(0).unwrap() <= (chain - 1) as u32);
    let p = assemble(&nodes, &s, 0, &ToyLanguage).unwrap();
    assert_eq!(p.root().node, 0);
    assert!(toy_verify(&p.text.replace(" x.", " ")).is_ok());
}
