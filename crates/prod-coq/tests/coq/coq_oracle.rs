//! Cross-check the sentence lexer against Coq itself: `coqc -time FILE` prints one
//! `Chars START - END [...]` line per sentence it executes (byte offsets), so its ranges must be
//! exactly the lexer's ranges. Runs on a handful of stdlib files copied to a temporary
//! directory; skipped with a message when `coqc` or the stdlib sources are missing.

use std::path::Path;
use std::process::Command;

use crate::common;

use common::{coq_ranges, sentence_ranges, v_files, STDLIB};
const FILES: &[&str] = &[
    "Lists/List.v",
    "Bool/Bool.v",
    "Arith/PeanoNat.v",
    "Sorting/Permutation.v",
    "Program/Equality.v",
    "Structures/Orders.v",
    "ZArith/Zcomplements.v",
];

#[test]
fn sentence_ranges_match_coqc_time() {
    let coqc_ok = Command::new("coqc")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success());
    let here = coqc_ok && Path::new(STDLIB).is_dir();
    if !prod_test_support::require(here, &format!("coqc or {STDLIB} is not available")) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("prod-coq-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut compared = 0;
    for f in FILES {
        let Ok(text) = std::fs::read_to_string(Path::new(STDLIB).join(f)) else {
            println!("skipping missing {f}");
            continue;
        };
        let ours = sentence_ranges(&text);
        let theirs = coq_ranges(&dir, &text).expect("coqc compiles this stdlib file");
        let first_diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);
        if let Some(i) = first_diff {
            let (a, b) = ours[i];
            let (c, d) = theirs[i];
            panic!(
                "{f}: sentence {i} differs: lexer {a}-{b} {:?} vs coqc {c}-{d} {:?}",
                &text[a..b],
                text.get(c..d)
            );
        }
        assert_eq!(ours.len(), theirs.len(), "{f}: sentence counts differ");
        println!("{f}: {} sentences identical to coqc -time", ours.len());
        compared += ours.len();
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("total: {compared} sentence ranges identical");
}

/// The same comparison on EVERY stdlib file that compiles as a standalone copy (the `Init`
/// files need `-noinit` and some need their siblings, they are counted as skipped). Slow
/// (minutes): `cargo test -p prod-coq --test coq coq_oracle:: -- --ignored --nocapture`.
#[test]
#[ignore]
fn all_stdlib_sentence_ranges_match_coqc_time() {
    let here = Command::new("coqc")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
        && Path::new(STDLIB).is_dir();
    if !prod_test_support::require(here, &format!("coqc or {STDLIB} is not available")) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("prod-coq-oracle-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut files = vec![];
    v_files(Path::new(STDLIB), &mut files);
    files.sort();
    // `PROD_COQ_ORACLE_FILTER=Field` restricts the run to paths containing that text.
    if let Ok(filter) = std::env::var("PROD_COQ_ORACLE_FILTER") {
        files.retain(|f| f.to_string_lossy().contains(&filter));
    }
    let (mut compared, mut sentences, mut skipped) = (0, 0, 0);
    let mut mismatches = vec![];
    for f in &files {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        let Ok(theirs) = coq_ranges(&dir, &text) else {
            skipped += 1;
            continue;
        };
        let ours = sentence_ranges(&text);
        compared += 1;
        sentences += ours.len();
        if ours != theirs {
            let i = ours
                .iter()
                .zip(&theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(theirs.len()));
            mismatches.push(format!(
                "{}: first difference at sentence {i}: {:?} vs {:?}",
                f.display(),
                ours.get(i),
                theirs.get(i)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{compared} files compared ({sentences} sentences), {skipped} skipped (do not compile standalone)");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
