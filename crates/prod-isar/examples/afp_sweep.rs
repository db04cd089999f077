//! Lexes and segments every theory of an unpacked AFP and prints counts and timings.
//!
//! Example: `cargo run --release -p prod-isar --example afp_sweep -- /tmp/afp-2022-12-06`
//! (the directory holding `thys/`). With `--holdout`, only the paper's 36 holdout entries.

use std::time::Instant;

use prod_isar::afp::{Afp, KeywordResolver, HOLDOUT_ENTRIES};
use prod_isar::sledgehammer::replaced_by_sledgehammer;
use prod_isar::{defined_names, fact_references, lex, segment_theory, KeywordTable};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(root) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: afp_sweep AFP_DIR [--holdout]");
        std::process::exit(2);
    };
    let holdout = args.iter().any(|a| a == "--holdout");
    let t0 = Instant::now();
    let afp = match Afp::load(&std::path::Path::new(root).join("thys")) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let load = t0.elapsed();
    let entries: Vec<&str> = if holdout {
        HOLDOUT_ENTRIES.to_vec()
    } else {
        afp.entries.keys().map(String::as_str).collect()
    };
    let files: Vec<_> = entries
        .iter()
        .filter_map(|e| afp.entries.get(*e))
        .flat_map(|e| e.theory_files.iter().cloned())
        .collect();
    let t = Instant::now();
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    let read = t.elapsed();
    let bytes: usize = texts.iter().map(String::len).sum();
    let t = Instant::now();
    let (mut tokens, mut lex_errors) = (0, 0);
    for s in &texts {
        let (tk, er) = lex(s);
        tokens += tk.len();
        lex_errors += er.len();
    }
    let lex_time = t.elapsed();
    let t = Instant::now();
    let mut resolver = KeywordResolver::new(&afp, KeywordTable::hol());
    let tables: Vec<KeywordTable> = files
        .iter()
        .zip(&texts)
        .map(|(f, s)| resolver.table_for(f, s))
        .collect();
    let keywords = t.elapsed();
    let t = Instant::now();
    let (mut commands, mut blocks, mut statements, mut unclosed, mut errors) = (0, 0, 0, 0, 0);
    let (mut steps, mut hammer, mut cheats, mut inferred) = (0, 0, 0, 0);
    let mut segment_only = std::time::Duration::ZERO;
    let mut defined: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut refs: Vec<String> = Vec::new();
    for (s, table) in texts.iter().zip(&tables) {
        let ts = Instant::now();
        let th = segment_theory(s, table);
        segment_only += ts.elapsed();
        commands += th.spans.iter().filter(|s| s.name.is_some()).count();
        blocks += th.blocks.len();
        statements += th
            .blocks
            .iter()
            .filter(|b| {
                matches!(
                    th.spans[b.statement].name.as_deref(),
                    Some("lemma" | "theorem" | "corollary" | "proposition")
                )
            })
            .count();
        unclosed += th.blocks.iter().filter(|b| !b.closed).count();
        defined.extend(defined_names(s, &th).into_iter().map(|d| d.name));
        for b in &th.blocks {
            cheats += usize::from(th.has_cheats(b));
            inferred += usize::from(!b.declared_goal);
            for step in th.step_texts(s, b) {
                steps += 1;
                hammer += usize::from(replaced_by_sledgehammer(step));
                refs.extend(fact_references(step));
            }
        }
        errors += th.errors.len();
    }
    let segment = t.elapsed();
    println!(
        "goal blocks with sorry/oops/\\<proof>: {cheats}; inferred (undeclared) goals: {inferred}"
    );
    println!("proof steps {steps}, of which the sledgehammer rule replaces {hammer}");
    let hits = refs.iter().filter(|r| defined.contains(r.as_str())).count();
    println!(
        "candidate fact references in proof steps {}, of which {hits} are names defined in these theories ({} distinct names defined)",
        refs.len(),
        defined.len()
    );
    println!(
        "entries {} theories {} bytes {} | tokens {} lex_errors {} | commands {} goal_blocks {} statements {} unclosed {} errors {}",
        entries.len(), files.len(), bytes, tokens, lex_errors, commands, blocks, statements, unclosed, errors
    );
    println!(
        "time: load+deps {load:.2?} read {read:.2?} lex {lex_time:.2?} keyword tables {keywords:.2?} lex+segment {segment_only:.2?} (with step analysis {segment:.2?}) total {:.2?}",
        t0.elapsed()
    );
}
