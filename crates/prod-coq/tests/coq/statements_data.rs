//! Data-driven test of the untrusted statement parser: `tests/data/statements/statements.txt`
//! (one statement per line, `\n` for a newline) against `statements.expected`.
//! Refresh with `UPDATE_EXPECT=1 cargo test -p prod-coq`.

use std::path::Path;

#[test]
fn statements_match_expected() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/statements");
    let input = std::fs::read_to_string(dir.join("statements.txt")).expect("statements.txt");
    let mut got = String::new();
    let (mut ok, mut rejected) = (0, 0);
    for line in input.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let text = line.replace("\\n", "\n");
        let result = match prod_coq::parse_statement(&text) {
            Ok(s) => {
                ok += 1;
                format!("OK {} | {} | {}", s.keyword, s.name, s.binders_and_type)
            }
            Err(e) => {
                rejected += 1;
                format!("REJECTED {e}")
            }
        };
        got.push_str(&format!("{line}\n  => {}\n", result.replace('\n', "\\n")));
    }
    let expected_path = dir.join("statements.expected");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&expected_path, &got).expect("write");
        return;
    }
    let want = std::fs::read_to_string(&expected_path).unwrap_or_default();
    assert_eq!(got, want, "(run with UPDATE_EXPECT=1 to refresh)");
    assert!(
        ok >= 10 && rejected >= 30,
        "{ok} accepted, {rejected} rejected"
    );
}
