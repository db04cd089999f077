//! The AFP graph, keyword resolution and date split on a small hand-written AFP tree
//! (`tests/data/afp_mini`): five entries, a session-qualified, an `$AFP/` and a `../` import,
//! an entry-level cycle through an examples session, a stale file no session loads, and
//! metadata with and without proper dates.

use std::path::{Path, PathBuf};

use prod_isar::afp::{entries_after, entry_date, Afp, ImportTarget, KeywordResolver};
use prod_isar::{segment_theory, KeywordKind, KeywordTable};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/afp_mini")
}

fn load() -> Afp {
    let afp = Afp::load(&root().join("thys")).expect("fixture AFP loads");
    assert!(afp.errors.is_empty(), "{:?}", afp.errors);
    afp
}

fn set(v: &[&str]) -> std::collections::BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn entry_dependencies_come_from_parents_sessions_and_imports() {
    let afp = load();
    assert_eq!(afp.entries.len(), 5);
    assert_eq!(afp.deps["A"], set(&[]));
    assert_eq!(afp.deps["B"], set(&["A"])); // parent session A, import A.A1
    assert_eq!(afp.deps["C"], set(&["A", "B"])); // sessions clause, $AFP/ and ../ imports
    assert_eq!(afp.deps["D"], set(&["E"])); // the examples session uses E
    assert_eq!(afp.deps["E"], set(&["D"])); // parent D_Main
    assert_eq!(afp.dependents("A"), set(&["B", "C"]));
    assert_eq!(afp.transitive_deps("C"), set(&["A", "B"]));
    let (order, cycles) = afp.topological_order();
    assert_eq!(order, vec!["A", "B", "C", "D", "E"]);
    assert_eq!(cycles, vec![vec!["D".to_string(), "E".to_string()]]);
}

#[test]
fn imports_resolve_to_files() {
    let afp = load();
    let thys = root().join("thys");
    let c1 = thys.join("C/C1.thy");
    assert_eq!(
        afp.resolve_import(&c1, "$AFP/B/B1"),
        ImportTarget::File(thys.join("B/B1.thy"))
    );
    assert_eq!(
        afp.resolve_import(&c1, "../A/A1"),
        ImportTarget::File(thys.join("A/A1.thy"))
    );
    assert_eq!(
        afp.resolve_import(&c1, "C2"),
        ImportTarget::File(thys.join("C/C2.thy"))
    );
    assert_eq!(
        afp.resolve_import(&thys.join("B/B1.thy"), "A.A1"),
        ImportTarget::File(thys.join("A/A1.thy"))
    );
    assert_eq!(
        afp.resolve_import(&c1, "Main"),
        ImportTarget::External("Main".into())
    );
    assert_eq!(
        afp.resolve_import(&c1, "HOL-Library.Multiset"),
        ImportTarget::External("HOL-Library.Multiset".into())
    );
    let checked = afp.session_theory_files("C");
    assert!(checked.contains(&thys.join("C/C1.thy")) && checked.contains(&thys.join("C/C2.thy")));
    assert!(
        !checked.contains(&thys.join("C/Old.thy")),
        "Old.thy is loaded by no session"
    );
    assert!(afp
        .session_theory_files("D")
        .contains(&thys.join("D/ex/Ex.thy")));
}

#[test]
fn keywords_of_imported_theories_apply_transitively_and_only_there() {
    let afp = load();
    let thys = root().join("thys");
    let mut res = KeywordResolver::new(&afp, KeywordTable::hol());
    for (file, expect) in [("B/B1.thy", true), ("C/C1.thy", true), ("C/C2.thy", false)] {
        let path = thys.join(file);
        let text = std::fs::read_to_string(&path).expect("fixture");
        let table = res.table_for(&path, &text);
        assert_eq!(
            table.command_kind("a_goal") == Some(KeywordKind::ThyGoal),
            expect,
            "{file}"
        );
        let th = segment_theory(&text, &table);
        assert!(th.errors.is_empty(), "{file}: {:?}", th.errors);
        assert!(th.blocks.iter().all(|b| b.closed));
    }
    // In B1 `a_goal` opens a goal block and `a_cmd` is a command of its own.
    let path = thys.join("B/B1.thy");
    let text = std::fs::read_to_string(&path).expect("fixture");
    let th = segment_theory(&text, &res.table_for(&path, &text));
    let names: Vec<&str> = th.spans.iter().filter_map(|s| s.name.as_deref()).collect();
    assert_eq!(
        names,
        vec!["theory", "a_cmd", "a_goal", "using", "by", "lemma", "using", "by", "end"]
    );
    assert_eq!(th.blocks.len(), 2);
}

#[test]
fn dates_come_from_the_metadata() {
    let meta = root().join("metadata/entries");
    assert_eq!(entry_date(&meta, "A").unwrap(), "2020-01-01");
    assert_eq!(entry_date(&meta, "B").unwrap(), "2022-07-01"); // not strict TOML
    assert_eq!(entry_date(&meta, "E").unwrap(), "2022-06-02"); // quoted
    let err = entry_date(&meta, "C").unwrap_err(); // `date` only inside a table
    assert!(err.message.contains("no top-level `date`"), "{err}");
    assert!(entry_date(&meta, "Nope").is_err());
    let (after, errs) = entries_after(&meta, ["A", "B", "C", "D", "E"], "2022-06-01").unwrap();
    assert_eq!(after, vec!["B", "E"]); // D is dated exactly 2022-06-01: not after
    assert_eq!(errs.len(), 1);
    assert!(entries_after(&meta, ["A"], "2022-6-1").is_err());
}
