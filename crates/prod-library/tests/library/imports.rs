//! Data-driven tests of the `Require` qualification (`prod_library::imports`): every
//! `tests/data/imports/NAME.v` is rewritten with the resolutions of `resolve.txt`; the rewritten
//! text and the names left alone must equal `NAME.expected`. Refresh with
//! `UPDATE_EXPECT=1 cargo test -p prod-library --test library imports::`.
//!
//! With Flocq installed (`libcoq-flocq`), the rewritten `flocq.v` is compiled by real `coqc`
//! without any `-R`: the qualified imports load from the installed root alone.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use prod_library::imports::{parse_require, qualify_requires, Parsed, Target};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/imports")
}

fn table() -> HashMap<String, String> {
    std::fs::read_to_string(data_dir().join("resolve.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(" = "))
        .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
        .collect()
}

fn rewrite(source: &str) -> String {
    let table = table();
    let rw = qualify_requires(source, &|_, name| match table.get(name) {
        Some(l) => Ok(Target::of(name, l)),
        None => Err("unknown".into()),
    });
    let mut out = rw.text.clone();
    writeln!(out, "(* ---- left alone ---- *)").unwrap();
    for (at, msg) in &rw.unresolved {
        let line = source[..*at].matches('\n').count() + 1;
        writeln!(out, "(* line {line}: {msg} *)").unwrap();
    }
    out
}

#[test]
fn fixtures_match_expected() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "v"))
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty());
    for path in inputs {
        let source = std::fs::read_to_string(&path).unwrap();
        let got = rewrite(&source);
        // Line numbers survive: the rewritten text has as many lines as the input.
        let body = got.split("(* ---- left alone").next().unwrap();
        assert_eq!(
            body.lines().count(),
            source.lines().count(),
            "{}",
            path.display()
        );
        let expected_path = path.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        assert_eq!(
            got,
            expected,
            "{} (UPDATE_EXPECT=1 to refresh)",
            path.display()
        );
    }
}

#[test]
fn sentence_classification() {
    let req = |s: &str| match parse_require(s) {
        Parsed::Require(r) => r.names.iter().map(|n| s[n.clone()].to_string()).collect(),
        other => vec![format!("{other:?}")],
    };
    assert_eq!(req("Require Import A B.C."), ["A", "B.C"]);
    assert_eq!(req("Require Export A."), ["A"]);
    assert_eq!(req("Require A (* B *)."), ["A"]);
    assert_eq!(req("From Coq Require Import A."), ["NotRequire"]);
    assert_eq!(req("Import A."), ["NotRequire"]);
    assert_eq!(req("Export A."), ["NotRequire"]);
    assert_eq!(
        req("Require Import (notations) A."),
        ["Unsupported(\"unexpected tokens\")"]
    );
    assert_eq!(
        req("#[export] Require A."),
        ["Unsupported(\"controls or attributes\")"]
    );
}

/// The rewritten Flocq imports load in a Coq that has Flocq only as an installed root.
#[test]
fn rewritten_flocq_imports_compile() {
    let coqlib = Path::new(prod_library::discovery::DEFAULT_COQLIB);
    let here = coqlib.join("user-contrib/Flocq/Core/Zaux.vo").is_file();
    if !prod_test_support::require(
        here,
        "Flocq is not installed (apt-get install libcoq-flocq)",
    ) {
        return;
    }
    let source = "Require Import Zaux Raux Defs.\nRequire Import Reals Core Relative Plus_error.\nCheck Zaux.Zfast_pow_pos.\n";
    let table = table();
    let rw = qualify_requires(source, &|_, n| Ok(Target::of(n, &table[n])));
    assert_eq!(
        rw.text,
        "From Flocq Require Import Core.Zaux Core.Raux Core.Defs.\nRequire Import Reals. From Flocq Require Import Core.Core. From Flocq.Prop Require Import Relative Plus_error.\nCheck Zaux.Zfast_pow_pos.\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("T.v");
    std::fs::write(&file, &rw.text).unwrap();
    let out = std::process::Command::new("coqc")
        .arg(&file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
