//! Data-driven tests: every `tests/data/theories/*.thy` is segmented with the HOL keyword table
//! and rendered (spans, goal blocks, fact references, errors) next to it as `*.expected`; every
//! `tests/data/roots/*.ROOT` is parsed and rendered as `*.expected` JSON.
//! Refresh the expected files with `UPDATE_EXPECT=1 cargo test -p prod-isar --test isar fixtures::`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prod_isar::lexer::line_col;
use prod_isar::{defined_names, fact_references, parse_root, segment_theory, KeywordTable};

fn data_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(sub)
}

fn files(sub: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir(sub))
        .expect("tests/data exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in tests/data/{sub}");
    v
}

fn short(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(60).collect();
    if out.len() < s.trim_end().len() {
        out.push('…');
    }
    out
}

fn render_theory(src: &str) -> String {
    let th = segment_theory(src, &KeywordTable::hol());
    let mut out = String::new();
    // Lossless: the spans concatenate to the input.
    let joined: String = th.spans.iter().map(|s| s.text(src)).collect();
    assert_eq!(joined, src, "spans must cover the text exactly");
    if let Some(h) = &th.header {
        let kw: Vec<String> = h
            .keywords
            .iter()
            .map(|d| format!("{}:{}", d.name, d.kind.map(|k| k.name()).unwrap_or("minor")))
            .collect();
        writeln!(
            out,
            "header {} imports {:?} keywords {:?}",
            h.name, h.imports, kw
        )
        .unwrap();
    }
    for (i, s) in th.spans.iter().enumerate() {
        let (l, c) = line_col(src, s.range.start);
        writeln!(
            out,
            "span {i:>2} {l}:{c} {} [{}] {}",
            s.name.as_deref().unwrap_or("-"),
            s.kind.map(|k| k.name()).unwrap_or("-"),
            short(s.text_trimmed(src, &th.tokens))
        )
        .unwrap();
    }
    for b in &th.blocks {
        writeln!(
            out,
            "block {}..{} {} name={} target={} closed={} declared_goal={} steps={} depth={}",
            b.spans.start,
            b.spans.end,
            th.spans[b.statement].name.as_deref().unwrap_or("?"),
            b.name.as_deref().unwrap_or("-"),
            b.target.as_deref().unwrap_or("-"),
            b.closed,
            b.declared_goal,
            b.proof_steps().len(),
            b.context_depth
        )
        .unwrap();
        for i in b.spans.clone() {
            let r = fact_references(th.spans[i].text_trimmed(src, &th.tokens));
            if !r.is_empty() {
                writeln!(out, "  refs {i}: {}", r.join(" ")).unwrap();
            }
        }
    }
    let defs: Vec<String> = defined_names(src, &th)
        .into_iter()
        .map(|d| d.name)
        .collect();
    writeln!(out, "defines {}", defs.join(" ")).unwrap();
    for e in &th.errors {
        writeln!(out, "error {}", e.message).unwrap();
    }
    out
}

fn render_root(src: &str) -> String {
    let (sessions, errors) = parse_root(src);
    let mut out = serde_json::to_string_pretty(&sessions).expect("serialisable");
    out.push('\n');
    for e in errors {
        writeln!(out, "error {}", e.message).unwrap();
    }
    out
}

fn check(path: &Path, actual: &str) -> Option<String> {
    let expected_path = path.with_extension(format!(
        "{}.expected",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, actual).expect("write expected");
        return None;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    (expected != actual).then(|| {
        format!(
            "{} differs from {}:\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display(),
            expected_path.display()
        )
    })
}

#[test]
fn theory_fixtures() {
    let failures: Vec<String> = files("theories", "thy")
        .iter()
        .filter_map(|p| {
            let src = std::fs::read_to_string(p).expect("fixture readable");
            check(p, &render_theory(&src))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{}\n(run with UPDATE_EXPECT=1 to refresh)",
        failures.join("\n")
    );
}

#[test]
fn root_fixtures() {
    let failures: Vec<String> = files("roots", "ROOT")
        .iter()
        .filter_map(|p| {
            let src = std::fs::read_to_string(p).expect("fixture readable");
            check(p, &render_root(&src))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{}\n(run with UPDATE_EXPECT=1 to refresh)",
        failures.join("\n")
    );
}
