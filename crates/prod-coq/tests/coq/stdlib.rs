//! Lex every `.v` file of the installed Coq standard library: Coq compiles all of them, so the
//! lexer must report no error on any. Prints totals. Skipped (with a message) when absent.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::common;

use common::{v_files, STDLIB};

#[test]
fn stdlib_lexes_without_errors() {
    let missing = format!("{STDLIB} not found (install the `coq` Debian package)");
    if !prod_test_support::require(Path::new(STDLIB).is_dir(), &missing) {
        return;
    }
    let mut files = vec![];
    v_files(Path::new(STDLIB), &mut files);
    files.sort();
    let texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter_map(|p| {
            std::fs::read(&p)
                .ok()
                .map(|b| (p, String::from_utf8_lossy(&b).into_owned()))
        })
        .collect();
    let bytes: usize = texts.iter().map(|(_, t)| t.len()).sum();
    let start = Instant::now();
    let mut total = 0;
    let mut failures = vec![];
    for (path, text) in &texts {
        let lexed = prod_coq::sentences(text);
        total += lexed.sentences.len();
        for e in &lexed.errors {
            failures.push(format!("{}: {}", path.display(), e.message(text)));
        }
    }
    let elapsed = start.elapsed();
    println!(
        "stdlib: {} files, {} bytes, {} sentences, lexed in {:.1} ms",
        texts.len(),
        bytes,
        total,
        elapsed.as_secs_f64() * 1e3
    );
    assert!(texts.len() > 100, "expected hundreds of stdlib files");
    assert!(failures.is_empty(), "lex errors:\n{}", failures.join("\n"));
}
