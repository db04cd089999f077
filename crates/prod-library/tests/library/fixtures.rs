//! Data-driven tests: every `tests/data/segment/NAME.v` (small files of our own) is segmented,
//! peeled and turned into examples; the dump must equal `NAME.expected` (textual references)
//! and `NAME.glob.expected` (references from a `.glob` that real `coqc -dump-glob` writes).
//! Refresh with `UPDATE_EXPECT=1 cargo test -p prod-library --test library fixtures::`.
//!
//! With `coqc` installed, every reduced file and every example (context + admitted proposed
//! lemmas + statement + proof) is compiled by real Coq.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use prod_core::ConditionalProof;
use prod_library::coq::segment;
use prod_library::examples::{build_examples, reduced_source, TheoremExample};
use prod_library::glob;
use prod_library::peel::peel;
use prod_library::ProofEnd;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/segment")
}

fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "v"))
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

fn coqc_available() -> bool {
    Command::new("coqc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

struct Built {
    source: String,
    reduced: String,
    examples: Vec<TheoremExample>,
    ends: Vec<ProofEnd>,
    scopes: Vec<Vec<String>>,
    dump: String,
}

fn build(path: &Path, glob: Option<&glob::Glob>) -> Built {
    let source = std::fs::read_to_string(path).unwrap();
    let cf = segment(&source, glob);
    let seg = &cf.segments;
    let p = peel(seg);
    let (examples, failed) = build_examples(
        seg,
        &p,
        &prod_library::hammer::replace_step,
        &prod_coq::CoqLanguage,
    );
    let mut d = String::new();
    writeln!(
        d,
        "used_glob: {}  lex_errors: {:?}",
        cf.used_glob, cf.lex_errors
    )
    .unwrap();
    writeln!(
        d,
        "imports: {:?}",
        cf.imports.iter().map(|i| &i.1).collect::<Vec<_>>()
    )
    .unwrap();
    writeln!(
        d,
        "other_skipped: {:?}  failed: {:?}",
        seg.other_skipped, failed
    )
    .unwrap();
    for (i, t) in seg.theorems.iter().enumerate() {
        writeln!(
            d,
            "\n## theorem {i} {:?} line {} end {:?} scope {:?}\n   peelable {} pinned {} round {:?} depth {} skip {:?}",
            t.name, t.line, t.end, t.scope, t.peelable, t.pinned, p.round[i], p.depth[i], t.skip
        )
        .unwrap();
        writeln!(d, "   statement: {:?}", t.statement).unwrap();
        writeln!(d, "   header: {:?}", t.header).unwrap();
        for s in &t.steps {
            writeln!(d, "   step {:?} uses {:?}", s.text, s.uses).unwrap();
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
        writeln!(
            d,
            "   context bytes {} (w/ lemmas {})",
            e.context_end, e.context_with_lemmas_end
        )
        .unwrap();
    }
    let reduced = reduced_source(seg, &p);
    writeln!(d, "\n## reduced file\n{reduced}").unwrap();
    Built {
        source,
        reduced,
        examples,
        ends: seg.theorems.iter().map(|t| t.end).collect(),
        scopes: seg.theorems.iter().map(|t| t.scope.clone()).collect(),
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

#[test]
fn segmentation_matches_expected() {
    for f in fixtures() {
        let b = build(&f, None);
        check_expected(&f.with_extension("expected"), &b.dump);
        for e in &b.examples {
            let cp =
                ConditionalProof::parse_with(&e.conditional_proof, &prod_coq::CoqLanguage).unwrap();
            assert_eq!(cp.to_string(), e.conditional_proof);
            assert!(cp.t0_consistent());
            assert!(b.source.is_char_boundary(e.context_with_lemmas_end));
            assert!(b.reduced.is_char_boundary(e.context_end));
        }
    }
}

/// Compile `text` as `dir/NAME.v`; the error text on failure.
fn coqc(dir: &Path, name: &str, text: &str, glob: bool) -> Result<(), String> {
    let path = dir.join(format!("{name}.v"));
    std::fs::write(&path, text).unwrap();
    let mut cmd = Command::new("coqc");
    cmd.arg("-q").arg("-Q").arg(dir).arg("Fixture");
    if !glob {
        cmd.arg("-no-glob");
    }
    let out = cmd.arg(&path).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}\n{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn glob_references_match_expected() {
    if !prod_test_support::require(coqc_available(), "coqc is not installed") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for f in fixtures() {
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let source = std::fs::read_to_string(&f).unwrap();
        if coqc(tmp.path(), &name, &source, true).is_err() {
            continue; // e.g. the lexer-error fixture: no glob, nothing to compare
        }
        let text = std::fs::read_to_string(tmp.path().join(format!("{name}.glob"))).unwrap();
        let (g, _) = glob::parse(&text);
        let b = build(&f, Some(&g));
        assert!(
            b.dump.starts_with("used_glob: true"),
            "{name}: glob not used"
        );
        check_expected(&f.with_extension("glob.expected"), &b.dump);
    }
}

#[test]
fn reduced_files_and_examples_compile_with_real_coq() {
    if !prod_test_support::require(coqc_available(), "coqc is not installed") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for f in fixtures() {
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        let b = build(&f, None);
        if coqc(tmp.path(), &format!("{name}_orig"), &b.source, false).is_err() {
            continue;
        }
        coqc(tmp.path(), &format!("{name}_reduced"), &b.reduced, false)
            .unwrap_or_else(|e| panic!("{name}: reduced file fails:\n{e}"));
        for e in &b.examples {
            let cp =
                ConditionalProof::parse_with(&e.conditional_proof_original, &prod_coq::CoqLanguage)
                    .unwrap();
            let mut text = prod_library::examples::context(&b.reduced, e).to_string();
            for l in cp.lemmas() {
                writeln!(text, "\n{l}\nAdmitted.").unwrap();
            }
            let end = if b.ends[e.index] == ProofEnd::Defined {
                "Defined."
            } else {
                "Qed."
            };
            write!(
                text,
                "\n{}\nProof.{}\n{end}\n",
                e.statement,
                cp.proof_text()
            )
            .unwrap();
            // The context may end inside Sections/Modules: close them, innermost first.
            for sc in b.scopes[e.index].iter().rev() {
                writeln!(text, "End {sc}.").unwrap();
            }
            coqc(tmp.path(), &format!("{name}_ex{}", e.index), &text, false)
                .unwrap_or_else(|err| panic!("{name} example {}:\n{err}", e.index));
        }
    }
}
