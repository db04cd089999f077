//! Data-driven lexer tests: every `tests/data/lexer/*.v` beside its `*.expected` (one sentence
//! per line: kind, byte range, text with newlines shown as `\n`; then errors with line:column).
//! Refresh with `UPDATE_EXPECT=1 cargo test -p prod-coq`. Fixtures whose name does not start
//! with `err_` are valid Coq; when `coqc` is installed their ranges are also compared with
//! `coqc -time` (Coq's own sentence splitting).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

use common::{coq_ranges, sentence_ranges};

fn render(text: &str) -> String {
    let lexed = prod_coq::sentences(text);
    let mut out = String::new();
    for s in &lexed.sentences {
        let shown = s.text(text).replace('\\', "\\\\").replace('\n', "\\n");
        out.push_str(&format!(
            "{:<10} {}-{} {}\n",
            format!("{:?}", s.kind),
            s.range.start,
            s.range.end,
            shown
        ));
    }
    for e in &lexed.errors {
        out.push_str(&format!("ERROR {:?}: {}\n", e.kind, e.message(text)));
    }
    out
}

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lexer");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/data/lexer")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "v"))
        .collect();
    v.sort();
    v
}

#[test]
fn lexer_fixtures_match_expected() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut failures = vec![];
    let files = fixtures();
    assert!(files.len() >= 8);
    for path in files {
        let text = std::fs::read_to_string(&path).expect("fixture");
        let got = render(&text);
        let expected_path = path.with_extension("expected");
        if update {
            std::fs::write(&expected_path, &got).expect("write expected");
            continue;
        }
        let want = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != want {
            failures.push(format!(
                "{}:\n--- expected\n{want}--- got\n{got}",
                path.display()
            ));
        }
        let is_err = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("err_"));
        assert_eq!(
            is_err,
            !prod_coq::sentences(&text).errors.is_empty(),
            "{}: err_ prefix ⇔ errors",
            path.display()
        );
    }
    assert!(
        failures.is_empty(),
        "{}\n(run with UPDATE_EXPECT=1 to refresh)",
        failures.join("\n")
    );
}

#[test]
fn valid_fixtures_match_coqc_time() {
    let coqc_ok = Command::new("coqc")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    if !prod_test_support::require(coqc_ok, "coqc is not available") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("prod-coq-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for path in fixtures() {
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("err_"))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("fixture");
        let theirs = coq_ranges(&dir, &text)
            .unwrap_or_else(|e| panic!("{} does not compile: {e}", path.display()));
        let ours = sentence_ranges(&text);
        assert_eq!(ours, theirs, "{}: lexer vs coqc -time", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
