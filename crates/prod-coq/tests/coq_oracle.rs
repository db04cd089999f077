//! Cross-check the sentence lexer against Coq itself: `coqc -time FILE` prints one
//! `Chars START - END [...]` line per sentence it executes (byte offsets), so its ranges must be
//! exactly the lexer's ranges. Runs on a handful of stdlib files copied to a temporary
//! directory; skipped with a message when `coqc` or the stdlib sources are missing.

use std::path::Path;
use std::process::Command;

const STDLIB: &str = "/usr/lib/ocaml/coq/theories";
const FILES: &[&str] = &[
    "Lists/List.v",
    "Bool/Bool.v",
    "Arith/PeanoNat.v",
    "Sorting/Permutation.v",
    "Program/Equality.v",
    "Structures/Orders.v",
    "ZArith/Zcomplements.v",
];

fn coq_ranges(dir: &Path, text: &str) -> Option<Vec<(usize, usize)>> {
    let file = dir.join("Oracle.v");
    std::fs::write(&file, text).ok()?;
    let out = Command::new("coqc").args(["-q", "-time", "Oracle.v"]).current_dir(dir).output().ok()?;
    assert!(out.status.success(), "coqc failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut ranges = vec![];
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("Chars ") else { continue };
        let mut it = rest.split_whitespace();
        let a = it.next().and_then(|x| x.parse().ok());
        let _dash = it.next();
        let b = it.next().and_then(|x| x.parse().ok());
        if let (Some(a), Some(b)) = (a, b) {
            ranges.push((a, b));
        }
    }
    Some(ranges)
}

#[test]
fn sentence_ranges_match_coqc_time() {
    let coqc_ok = Command::new("coqc").arg("-v").output().is_ok_and(|o| o.status.success());
    if !coqc_ok || !Path::new(STDLIB).is_dir() {
        println!("SKIPPED: coqc or {STDLIB} not available");
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
        let ours: Vec<(usize, usize)> =
            prod_coq::sentences(&text).sentences.iter().map(|s| (s.range.start, s.range.end)).collect();
        let theirs = coq_ranges(&dir, &text).expect("run coqc");
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
