//! The tidy tests themselves. Each failure message says what to change.

use super::*;

/// A function longer than this must say why, in a `//` comment right above it (with the word
/// "long" or "screen"): one screen, as the style guide asks.
const SCREEN: usize = 80;

/// The crates in layers, lowest first: a crate may depend only on crates of lower layers.
/// A new crate must be placed here.
const LAYERS: &[&[&str]] = &[
    &[
        "prod-core",
        "prod-progress",
        "prod-test-support",
        "prod-tidy",
    ],
    &[
        "prod-coq",
        "prod-isar",
        "prod-check",
        "prod-rl",
        "prod-policy",
        "prod-report",
    ],
    &[
        "prod-check-coq",
        "prod-check-isabelle",
        "prod-library",
        "prod-queue",
        "prod-remote",
    ],
    &["prod-prover"],
    &["prod-bench", "prod-run", "prod-serve"],
    &["prod-cli"],
];

fn read(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn functions_fit_on_a_screen_or_say_why() {
    let mut long = vec![];
    for (name, dir) in crates() {
        for f in rust_files(&dir.join("src")) {
            if f.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            for func in functions::functions(&read(&f)) {
                if func.length > SCREEN && !func.says_why {
                    long.push(format!(
                        "{name} {}:{} `{}` is {} lines",
                        f.strip_prefix(&dir).unwrap().display(),
                        func.line,
                        func.name,
                        func.length
                    ));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {SCREEN} lines without a `//` comment above saying why they are long \
         (split them, or say why they stay one):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_module_circles() {
    let mut found = vec![];
    for (name, dir) in crates() {
        for c in modules::circles(&modules::graph(&dir)) {
            found.push((name.clone(), c));
        }
    }
    assert!(
        found.is_empty(),
        "module circles (modules that refer to each other; move the shared items into a module \
         both use, as prod-library's schema.rs does): {found:?}"
    );
}

/// `[dependencies]` of a crate's manifest: the workspace crates it names.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut out = vec![];
    let mut in_deps = false;
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if in_deps && t.starts_with("prod-") {
            out.push(t.split([' ', '=', '.']).next().unwrap_or("").to_string());
        }
    }
    out
}

#[test]
fn crates_depend_only_on_lower_layers() {
    let layer = |c: &str| LAYERS.iter().position(|l| l.contains(&c));
    let mut problems = vec![];
    for (name, dir) in crates() {
        let Some(mine) = layer(&name) else {
            problems.push(format!("{name} is in no layer of LAYERS"));
            continue;
        };
        for dep in workspace_dependencies(&read(&dir.join("Cargo.toml"))) {
            match layer(&dep) {
                Some(l) if l < mine => {}
                _ => problems.push(format!("{name} (layer {mine}) depends on {dep}")),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn prod_core_spawns_nothing_and_reads_nothing() {
    // ARCHITECTURE.md: prod-core never spawns a process, reads a file or opens a socket, and
    // depends on no other ProD crate.
    let dir = workspace().join("crates/prod-core");
    let mut found = vec![];
    for f in rust_files(&dir.join("src")) {
        let code = source::code(&read(&f));
        for word in [
            "std::process",
            "std::fs",
            "std::net",
            "File::open",
            "Command::new",
        ] {
            if code.contains(word) {
                found.push(format!("{}: {word}", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "{found:?}");
    assert!(workspace_dependencies(&read(&dir.join("Cargo.toml"))).is_empty());
}

/// The tree pipeline (solve, assemble, the cold final check) is prod-prover's: the crates above
/// it go through `Forest`, `FinalCheck` and `judge`, so that no two paths judge a tree
/// differently. The only exception is the solver's own benchmark (`prod bench tree`), which
/// times `solve` on synthetic nodes and decides nothing.
#[test]
fn the_tree_pipeline_is_prod_provers() {
    const ABOVE: &[&str] = &["prod-bench", "prod-run", "prod-serve", "prod-cli"];
    const PATHS: &[&str] = &[
        "prod_core::tree::solve",
        "prod_core::assemble",
        "prod_check_coq::AssembledFile",
        "prod_check_coq::final_check",
        "prod_check_isabelle::final_check_assembled",
    ];
    const BENCHMARK: (&str, &str) = ("crates/prod-bench/src/tree.rs", "prod_core::tree::solve");
    // The paths are read with `use` groups expanded, as the benchmark imports `solve`.
    let grouped = modules::paths("use prod_core::tree::{solve, Node};");
    assert!(grouped.iter().any(|p| p == "prod_core::tree::solve"));
    let root = workspace();
    let mut found = vec![];
    for krate in ABOVE {
        for f in rust_files(&root.join("crates").join(krate).join("src")) {
            let rel = f.strip_prefix(&root).unwrap_or(&f).display().to_string();
            for p in modules::paths(&source::code(&read(&f))) {
                let hit = PATHS
                    .iter()
                    .find(|w| p == **w || p.starts_with(&format!("{w}::")));
                if let Some(w) = hit.filter(|w| (rel.as_str(), **w) != BENCHMARK) {
                    found.push(format!("{rel}: {w}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the tree pipeline is called outside prod-prover (use prod_prover::judge, Forest or \
         FinalCheck): {found:?}"
    );
}

#[test]
fn the_architecture_map_names_every_crate_and_only_files_that_exist() {
    let arch = read(&workspace().join("ARCHITECTURE.md"));
    let mut problems = vec![];
    for (name, _) in crates() {
        if !arch.contains(&format!("`crates/{name}`")) {
            problems.push(format!("no section for crates/{name}"));
        }
    }
    // Every `crates/…` path in backquotes exists.
    for part in arch.split('`').skip(1).step_by(2) {
        if let Some(rest) = part.strip_prefix("crates/") {
            let path = rest.split_whitespace().next().unwrap_or("");
            let pattern = path.contains(['*', '<']);
            if !path.is_empty() && !pattern && !workspace().join("crates").join(path).exists() {
                problems.push(format!("`crates/{path}` does not exist"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md: {}",
        problems.join("; ")
    );
}

/// The integration-test binaries of a crate: each `tests/*.rs` file and each `tests/*/main.rs`
/// is one (Cargo's own discovery rules), and each links the whole dependency tree again.
fn test_binaries(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join("tests")) else {
        return vec![];
    };
    let mut out: Vec<String> = entries
        .flatten()
        .map(|e| e.path())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            let binary = if p.is_dir() {
                p.join("main.rs").is_file()
            } else {
                name.ends_with(".rs")
            };
            binary.then_some(name)
        })
        .collect();
    out.sort();
    out
}

/// One integration-test binary per crate (`tests/<name>/main.rs`, each file a module): the
/// suite links each crate's tests once, not once per file.
#[test]
fn one_integration_test_binary_per_crate() {
    let mut problems = vec![];
    for (name, dir) in crates() {
        let binaries = test_binaries(&dir);
        if binaries.len() > 1 {
            problems.push(format!(
                "{name} has {} test binaries ({}): make them modules of one tests/<name>/main.rs",
                binaries.len(),
                binaries.join(", ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The default a flag shows: the text after `default_value_t =`, `default_values_t =`,
/// `default_value =` or `default_value_os_t =` up to the next `,` or `)` at depth zero.
fn flag_defaults(text: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for key in [
            "default_value_t",
            "default_values_t",
            "default_value_os_t",
            "default_value",
        ] {
            let mut rest = line;
            while let Some(at) = rest.find(key) {
                let after = rest[at + key.len()..].trim_start();
                rest = &rest[at + key.len()..];
                let Some(value) = after.strip_prefix('=') else {
                    continue;
                };
                let mut depth = 0i32;
                let end = value
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '(' | '[' | '{' => depth += 1,
                            ')' | ']' | '}' => depth -= 1,
                            _ => {}
                        }
                        depth < 0 || (depth == 0 && c == ',')
                    })
                    .map_or(value.len(), |(j, _)| j);
                out.push((i + 1, value[..end].trim().to_string()));
            }
        }
    }
    out
}

/// A number written as a flag's default is a second copy of a setting's default: every flag
/// default comes from the settings type (or named constant) the library that acts on it owns,
/// so the help, the config file and the library cannot drift apart.
#[test]
fn flag_defaults_are_settings_not_numbers() {
    let numeric = |v: &str| {
        let v = v.trim_start_matches(['[', '"', '-']);
        v.starts_with(|c: char| c.is_ascii_digit())
    };
    let samples = flag_defaults(
        "#[arg(long, default_value_t = 2, value_parser = x)]\n\
         #[arg(long, default_value_t = Sampling::default().top_p, value_parser = |s: &str| f(s, 1))]\n\
         #[arg(long, default_values_t = [1usize, 8])]\n// default_value_t = 9\n\
         #[arg(long, default_value = \"0.5\")]",
    );
    let values: Vec<&str> = samples.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(
        values,
        ["2", "Sampling::default().top_p", "[1usize, 8]", "\"0.5\""]
    );
    assert_eq!(
        values.iter().map(|v| numeric(v)).collect::<Vec<_>>(),
        [true, false, true, true]
    );
    let mut found = vec![];
    // This crate's own samples above are the only numbers it writes as defaults.
    for (name, dir) in crates().into_iter().filter(|(n, _)| n != "prod-tidy") {
        for f in rust_files(&dir.join("src")) {
            for (line, value) in flag_defaults(&read(&f)) {
                if numeric(&value) {
                    let rel = f.strip_prefix(&dir).unwrap_or(&f).display().to_string();
                    found.push(format!("{name} {rel}:{line}: {value}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "flag defaults written as numbers (take them from the settings type or constant of \
         the library that acts on the value, e.g. `DemoJob::default().theorems`):\n{}",
        found.join("\n")
    );
}
