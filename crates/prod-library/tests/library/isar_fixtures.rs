//! Data-driven tests of the Isabelle path: every `tests/data/isar/NAME.thy` (small theories of
//! our own) is segmented by `prod_library::isar::segment_isar`, peeled and turned into examples
//! by the same code as Coq; the dump must equal `NAME.expected`. Refresh with
//! `UPDATE_EXPECT=1 cargo test -p prod-library --test library isar_fixtures::`. The named assertions below
//! pin down the decisions the dumps show (peeling, pins, skips, scopes, `sledgehammer`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prod_core::{ConditionalProof, ProofLanguage};
use prod_isar::{IsarLanguage, KeywordTable};
use prod_library::examples::{build_examples, reduced_source, TheoremExample};
use prod_library::isar::{replace_step, segment_isar};
use prod_library::peel::{peel, Peeling};
use prod_library::source::SegmentedSource;
use prod_library::SkipReason;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/isar");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "thy"))
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

struct Built {
    seg: SegmentedSource,
    peeling: Peeling,
    examples: Vec<TheoremExample>,
    reduced: String,
    dump: String,
}

impl Built {
    fn index(&self, name: &str) -> usize {
        self.seg
            .segments
            .theorems
            .iter()
            .position(|t| t.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no theorem {name}"))
    }
    fn example(&self, name: &str) -> &TheoremExample {
        let i = self.index(name);
        self.examples
            .iter()
            .find(|e| e.index == i)
            .unwrap_or_else(|| panic!("no example for {name}"))
    }
    fn pinned(&self, name: &str) -> bool {
        self.seg.segments.theorems[self.index(name)].pinned
    }
    fn skip(&self, name: &str) -> Option<SkipReason> {
        self.seg.segments.theorems[self.index(name)].skip
    }
    fn peeled(&self, name: &str) -> bool {
        self.peeling.in_tree(self.index(name))
    }
}

fn build(path: &Path) -> Built {
    let source = std::fs::read_to_string(path).unwrap();
    let seg = segment_isar(&source, &KeywordTable::hol());
    let s = &seg.segments;
    let peeling = peel(s);
    let (examples, failed) = build_examples(s, &peeling, &replace_step, &prod_isar::IsarLanguage);
    let mut d = String::new();
    writeln!(
        d,
        "imports: {:?}  body_start: {}  goal_blocks: {}  unclosed: {}",
        seg.imports.iter().map(|i| &i.1).collect::<Vec<_>>(),
        seg.body_start,
        seg.goal_blocks,
        seg.unclosed_blocks
    )
    .unwrap();
    writeln!(d, "issues: {:?}  failed: {:?}", seg.issues, failed).unwrap();
    for (i, t) in s.theorems.iter().enumerate() {
        writeln!(
            d,
            "\n## theorem {i} {:?} line {} end {:?} scope {:?} module_path {:?}\n   peelable {} pinned {} round {:?} depth {} skip {:?}",
            t.name, t.line, t.end, t.scope, t.module_path, t.peelable, t.pinned, peeling.round[i], peeling.depth[i], t.skip
        )
        .unwrap();
        writeln!(d, "   statement: {:?}", t.statement).unwrap();
        for st in &t.steps {
            writeln!(d, "   step {:?} uses {:?}", st.text, st.uses).unwrap();
        }
    }
    for e in &examples {
        writeln!(
            d,
            "\n## example of theorem {} (in_tree {}, depth {}, replaced {})",
            e.index, e.in_tree, e.depth, e.replaced_steps
        )
        .unwrap();
        writeln!(d, "   conditional_proof: {:?}", e.conditional_proof).unwrap();
        if e.conditional_proof_original != e.conditional_proof {
            writeln!(
                d,
                "   original:          {:?}",
                e.conditional_proof_original
            )
            .unwrap();
        }
    }
    let reduced = reduced_source(s, &peeling);
    writeln!(d, "\n## reduced theory\n{reduced}").unwrap();
    Built {
        seg,
        peeling,
        examples,
        reduced,
        dump: d,
    }
}

fn check_expected(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("{} missing: run with UPDATE_EXPECT=1", path.display()));
    assert!(
        expected == actual,
        "{} differs; got:\n{actual}",
        path.display()
    );
}

fn by_name() -> HashMap<String, Built> {
    fixtures()
        .iter()
        .map(|f| {
            (
                f.file_stem().unwrap().to_string_lossy().to_string(),
                build(f),
            )
        })
        .collect()
}

#[test]
fn segmentation_matches_expected() {
    for f in fixtures() {
        let b = build(&f);
        check_expected(&f.with_extension("expected"), &b.dump);
        let src = &b.seg.segments.source;
        // Blocks are disjoint, in order, and statement + steps are the block's text.
        let mut last = 0;
        for t in &b.seg.segments.theorems {
            assert!(t.start >= last && t.end_byte <= src.len(), "{t:?}");
            last = t.end_byte;
            let body: String = t.steps.iter().map(|s| s.text.as_str()).collect();
            assert!(
                src[t.start..t.end_byte].ends_with(&format!("{}{body}", t.statement)),
                "{:?}",
                t.name
            );
        }
        for e in &b.examples {
            let cp = ConditionalProof::parse_with(&e.conditional_proof, &prod_isar::IsarLanguage)
                .unwrap();
            assert_eq!(cp.to_string(), e.conditional_proof);
            assert!(cp.t0_consistent());
            assert!(b.reduced.is_char_boundary(e.context_end));
            // Proposed lemmas are `lemma name: …` statements the language can name.
            for l in cp.lemmas() {
                assert!(IsarLanguage.lemma_name(l).is_some(), "{l}");
                assert!(
                    l.trim_start().starts_with("lemma") || l.trim_start().starts_with("theorem"),
                    "{l}"
                );
            }
        }
    }
}

#[test]
fn peeling_proposes_lemmas_like_coq() {
    let all = by_name();
    let b = &all["Basic"];
    // top uses double_sum, which uses double_0: three rounds, depth 2 at the root.
    assert_eq!(b.peeling.round[b.index("top")], Some(1));
    assert_eq!(b.peeling.round[b.index("double_sum")], Some(2));
    assert_eq!(b.peeling.round[b.index("double_0")], Some(3));
    let top = b.example("top");
    assert_eq!(top.depth, 2);
    assert_eq!(top.proposed_names, ["double_sum"]);
    assert_eq!(
        top.proposed_lemmas,
        [r#"lemma double_sum: "double (a + b) = double a + double b""#]
    );
    // The reduced theory has neither peeled pair, and keeps the definition and the header.
    assert!(!b.reduced.contains("lemma double_sum") && !b.reduced.contains("lemma double_0"));
    assert!(b.reduced.starts_with("theory Basic") && b.reduced.contains("definition double"));
    // `private` is dropped from the statement; `[rule_format]` does not pin.
    assert!(b.peeled("unused_helper"));
    assert_eq!(
        b.example("unused_helper").statement,
        "lemma unused_helper [rule_format]: \"\\<forall>x::nat. x + 0 = x\""
    );
    // `by (metis …)` and `by blast` become `sledgehammer`; `apply (rule …)` and `.` stay.
    assert_eq!(b.example("double_sum").conditional_proof, "<use_invoke> <invoke> lemma double_0: \"double 0 = 0\" </invoke>\n  using double_0\n  sledgehammer");
    assert!(b
        .example("top")
        .conditional_proof
        .contains("using double_sum sledgehammer\n  then show ?thesis ."));
    assert!(b
        .example("unnamed_user")
        .conditional_proof
        .contains("apply (rule unused_helper)"));
}

#[test]
fn pins_and_skips() {
    let all = by_name();
    let p = &all["Pins"];
    for pinned in [
        "simp_rule",
        "declared_later",
        "in_lemmas",
        "ml_used",
        "doc_used",
        "then_this",
    ] {
        assert!(
            p.pinned(pinned) || !p.seg.segments.theorems[p.index(pinned)].peelable,
            "{pinned} must stay in the context"
        );
        assert!(!p.peeled(pinned), "{pinned} was peeled");
    }
    assert!(
        !p.seg.segments.theorems[p.index("simp_rule")].peelable,
        "[simp] declares the fact"
    );
    assert_eq!(p.skip("mutual_a"), Some(SkipReason::Mutual));
    assert_eq!(p.skip("sch"), Some(SkipReason::Schematic));
    assert_eq!(p.skip("abandoned"), Some(SkipReason::Aborted));
    assert_eq!(p.skip("cheat"), Some(SkipReason::Admitted));
    // Facts of skipped blocks are never proposed: they stay in the context.
    assert!(p.example("uses_mutual").proposed_lemmas.is_empty());
    assert!(p.example("after_cheat").proposed_lemmas.is_empty());
    // `fun` + its proof obligations are content; `f_zero` is a theorem (a root).
    assert!(p.peeled("f_zero"));
    assert_eq!(p.seg.goal_blocks, p.seg.segments.theorems.len());
}

#[test]
fn scopes_and_targets() {
    let all = by_name();
    let s = &all["Scopes"];
    // z_ne is used inside its locale block (a use) and by `lemma (in loc)` outside it (a pin).
    assert!(s.pinned("z_ne"));
    assert!(s.example("z_ge").proposed_lemmas.is_empty());
    assert_eq!(s.seg.segments.theorems[s.index("z_ne")].scope, ["loc"]);
    assert_eq!(
        s.seg.segments.theorems[s.index("z_ge_outside")].module_path,
        ["loc"]
    );
    // Inside one unnamed context block: peeled and proposed, `private` dropped.
    assert!(s.peeled("y_refl"));
    assert_eq!(
        s.example("y_user").proposed_lemmas,
        [r#"lemma y_refl: "y = y""#]
    );
    // A top-level lemma used inside a `context fixes w begin`: its meaning could change there.
    assert!(s.pinned("outer"));
    assert_eq!(
        s.seg.body_start,
        s.seg.segments.source.find("begin").unwrap() + "begin".len()
    );
}
