//! The dataset card (`README.md`) of a dataset folder: what Hugging Face `datasets` reads to load
//! the folder right with one call, `load_dataset(DIR)`.
//!
//! Without a card, `datasets` guesses splits from file names: it merges `train.jsonl` with
//! `train_wl.jsonl` (two variants of the same theorems), drops `rl`, `sft` and `sources`, and infers
//! column types from the data, so an always-empty list (`flags`, a `w_lemmas` file's
//! `proposed_lemmas`) becomes a list of nulls that cannot be loaded beside a non-empty one. The
//! card's YAML front matter names one config per variant (`configs`, each split with its file)
//! and gives every column its type (`dataset_info.features`). Splits with no lines are left out
//! (`datasets` refuses an empty split), and so is a config with none.

use std::fmt::Write as _;

use crate::schema::{BuildError, Stats};
use crate::schema::{ColumnType as Type, Columns};

/// The card's file name in the dataset folder.
pub const CARD: &str = "README.md";

/// The line that marks a card as this module's (a build only replaces such a `README.md`).
const WRITTEN_BY: &str =
    "# Written by `prod dataset build` (rewritten by every build of this folder).";

/// Is `path` a card this module wrote?
pub fn written_by_prod(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.lines().take(2).any(|l| l == WRITTEN_BY))
}

/// Where a card's data files are: the JSONL folder `prod dataset build` writes (`train.jsonl`,
/// `train_wl.jsonl`, …) or its Parquet form (`default/train.parquet`, `w_lemmas/train.parquet`,
/// …: one folder per config, see [`crate::parquet`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Jsonl,
    Parquet,
}

impl Layout {
    fn path(self, config: &str, split: &str, stem: &str) -> String {
        match self {
            Layout::Jsonl => format!("{stem}.jsonl"),
            Layout::Parquet => format!("{config}/{split}.parquet"),
        }
    }
}

/// Every file of a card's configs that has lines: (config, split, JSONL stem, columns).
pub fn files(stats: &Stats) -> Vec<(&'static str, &'static str, &'static str, &'static Columns)> {
    CONFIGS
        .iter()
        .flat_map(|c| {
            present(c, stats)
                .into_iter()
                .map(move |(split, stem, _)| (c.name, split, stem, c.features))
        })
        .collect()
}

/// A build may write its card into `dir`: there is no `README.md` yet, or it is a card a build
/// wrote. A user's own `README.md` is never overwritten.
pub fn check_replaceable(dir: &std::path::Path) -> Result<(), BuildError> {
    let path = dir.join(CARD);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.lines().take(2).any(|l| l == WRITTEN_BY) => Err(BuildError::Io(
            path,
            std::io::Error::other(
                "a README.md not written by `prod dataset build` is in the way of the dataset card: move it, or build into another --out",
            ),
        )),
        _ => Ok(()),
    }
}

/// A config of the card: its name, what it is, and its splits as (split name, file stem).
struct Config {
    name: &'static str,
    about: &'static str,
    splits: &'static [(&'static str, &'static str)],
    features: &'static Columns,
}

/// The columns of every example file, in [`crate::dataset::Example`]'s order.
const EXAMPLE_FEATURES: &[(&str, Type)] = &[
    ("id", Type::String),
    ("library", Type::String),
    ("package", Type::String),
    ("file", Type::String),
    ("logical_path", Type::String),
    ("line", Type::Int),
    ("position", Type::Int),
    ("scope", Type::Strings),
    ("qualified_name", Type::String),
    ("name", Type::String),
    ("imports", Type::Strings),
    ("flags", Type::Strings),
    ("context", Type::String),
    ("context_start", Type::Int),
    ("context_end", Type::Int),
    ("context_extra", Type::String),
    ("context_axioms", Type::Strings),
    ("statement", Type::String),
    ("conditional_proof", Type::String),
    ("conditional_proof_original", Type::String),
    ("proposed_lemmas", Type::Strings),
    ("proposed_names", Type::Strings),
    ("depth", Type::Int),
    ("in_tree", Type::Bool),
    ("proof_end", Type::String),
    ("replaced_steps", Type::Int),
    ("split", Type::String),
    ("variant", Type::String),
];

/// The columns of `sources.jsonl` ([`crate::dataset::SourceRecord`]; `body_start` is written for
/// Isabelle only and reads as null elsewhere).
const SOURCE_FEATURES: &[(&str, Type)] = &[
    ("logical_path", Type::String),
    ("file", Type::String),
    ("package", Type::String),
    ("flags", Type::Strings),
    ("source", Type::String),
    ("reduced", Type::String),
    ("body_start", Type::Int),
];

/// The columns of `skipped.jsonl` ([`crate::dataset::Skipped`]).
const SKIPPED_FEATURES: &[(&str, Type)] = &[
    ("file", Type::String),
    ("line", Type::Int),
    ("name", Type::String),
    ("reason", Type::String),
];

const CONFIGS: &[Config] = &[
    Config {
        name: "default",
        about: "lemmas removed from the context and proposed in the proof (`wo_lemmas`, the paper's setup)",
        splits: &[("train", "train"), ("validation", "val"), ("test", "test")],
        features: EXAMPLE_FEATURES,
    },
    Config {
        name: "w_lemmas",
        about: "the same theorems with every human lemma kept in the context; proofs propose nothing (paper §4.2)",
        splits: &[
            ("train", "train_wl"),
            ("validation", "val_wl"),
            ("test", "test_wl"),
        ],
        features: EXAMPLE_FEATURES,
    },
    Config {
        name: "sft",
        about: "the training split plus, for each example that proposes lemmas, its augmented copy (lemmas admitted in the context)",
        splits: &[("train", "sft")],
        features: EXAMPLE_FEATURES,
    },
    Config {
        name: "rl",
        about: "the training examples whose theorem is in T_tree (the RL set)",
        splits: &[("train", "rl")],
        features: EXAMPLE_FEATURES,
    },
    Config {
        name: "sources",
        about: "one row per source file: the texts every context is a slice of",
        splits: &[("train", "sources")],
        features: SOURCE_FEATURES,
    },
    Config {
        name: "skipped",
        about: "every block without an example, with the reason",
        splits: &[("train", "skipped")],
        features: SKIPPED_FEATURES,
    },
];

/// A split that has lines: its name, its file's stem, its rows.
type Present = (&'static str, &'static str, usize);

/// The splits of `c` that have lines, per `stats.files_written`.
fn present(c: &'static Config, stats: &Stats) -> Vec<Present> {
    c.splits
        .iter()
        .filter_map(|&(split, stem)| {
            let n = stats.files_written.get(stem).copied().unwrap_or(0);
            (n > 0).then_some((split, stem, n))
        })
        .collect()
}

/// The size of the data file at `rel` (a path as the card writes it) under `dir`: its
/// `NAME.tmp` while a build has not renamed it into place yet (the file at `rel` may then be
/// the previous build's), else the file; 0 when neither is there.
pub fn file_size(dir: &std::path::Path, rel: &str) -> u64 {
    let path = dir.join(rel);
    std::fs::metadata(crate::output::tmp_path(&path))
        .or_else(|_| std::fs::metadata(&path))
        .map_or(0, |m| m.len())
}

/// The card for a dataset folder with these stats, its files laid out as `layout` says;
/// `num_bytes(path)` is the size of the data file at `path` (each split's `num_bytes`, which
/// `datasets` requires of a card's splits: without it every load warns that they are
/// malformed).
pub fn render(stats: &Stats, layout: Layout, num_bytes: &dyn Fn(&str) -> u64) -> String {
    let configs: Vec<(&'static Config, Vec<Present>)> = CONFIGS
        .iter()
        .map(|c| (c, present(c, stats)))
        .filter(|(_, s)| !s.is_empty())
        .collect();
    let mut o = String::from("---\n");
    o.push_str(WRITTEN_BY);
    o.push('\n');
    o.push_str("configs:\n");
    for (c, splits) in &configs {
        let _ = writeln!(o, "- config_name: {}", c.name);
        if c.name == "default" {
            o.push_str("  default: true\n");
        }
        o.push_str("  data_files:\n");
        for (split, stem, _) in splits {
            let path = layout.path(c.name, split, stem);
            let _ = writeln!(o, "  - split: {split}\n    path: {path}");
        }
    }
    o.push_str("dataset_info:\n");
    for (c, splits) in &configs {
        let _ = writeln!(o, "- config_name: {}\n  features:", c.name);
        for (name, t) in c.features {
            let ty = match t {
                Type::String => "dtype: string",
                Type::Int => "dtype: int64",
                Type::Float => "dtype: float64",
                Type::Bool => "dtype: bool",
                Type::Strings => "sequence: string",
            };
            let _ = writeln!(o, "  - name: {name}\n    {ty}");
        }
        o.push_str("  splits:\n");
        for (split, stem, n) in splits {
            let bytes = num_bytes(&layout.path(c.name, split, stem));
            let _ = writeln!(
                o,
                "  - name: {split}\n    num_bytes: {bytes}\n    num_examples: {n}"
            );
        }
    }
    o.push_str("---\n\n");
    let _ = writeln!(
        o,
        "# ProD dataset: `{}` ({})\n",
        stats.library,
        if stats.prover.is_empty() {
            "coq"
        } else {
            &stats.prover
        }
    );
    o.push_str(
        "Conditional proofs for training and evaluating hierarchical theorem provers, built by \
         `prod dataset build` (ProD, Proof Decomposer). The full schema of every file and how it \
         is built: `docs/dataset.md` in ProD's repository; the build's statistics: `stats.json`.\n\n",
    );
    o.push_str("```python\nimport datasets\nd = datasets.load_dataset(\"path/to/this/folder\")            # train / validation / test\nwl = datasets.load_dataset(\"path/to/this/folder\", \"w_lemmas\")\n```\n\n");
    o.push_str("| config | what | splits (rows) |\n|---|---|---|\n");
    for (c, splits) in &configs {
        let s: Vec<String> = splits
            .iter()
            .map(|(split, stem, n)| {
                format!("{split} = `{}` ({n})", layout.path(c.name, split, stem))
            })
            .collect();
        let _ = writeln!(o, "| `{}` | {} | {} |", c.name, c.about, s.join(", "));
    }
    o.push_str(
        "\nThe `context` column holds at most the last `--context-bytes` of each context; the full \
         context is `base[:context_end] + context_extra`, with `base` the `reduced` (or, for \
         `w_lemmas`, the `source`) text of the row of the `sources` config whose `logical_path` \
         is the example's. The offsets count UTF-8 bytes, not characters: in Python, \
         `base.encode()[:context_end].decode() + context_extra`. `prod dataset export` writes \
         the full contexts for RL frameworks.\n",
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<T: serde::Serialize>(v: &T) -> Vec<String> {
        // serde_json keeps insertion order only with `preserve_order`; compare as sets + count.
        let mut k: Vec<String> = serde_json::to_value(v)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    }

    fn names(f: &[(&str, Type)]) -> Vec<String> {
        let mut k: Vec<String> = f.iter().map(|(n, _)| n.to_string()).collect();
        k.sort();
        k
    }

    #[test]
    fn the_features_name_every_field_the_builder_writes() {
        let e: crate::dataset::Example = serde_json::from_value(serde_json::json!({
            "id": "", "library": "", "package": "", "file": "", "logical_path": "", "line": 0,
            "position": 0, "scope": [], "qualified_name": "", "name": "", "imports": [],
            "flags": [], "context": "", "context_start": 0, "context_end": 0,
            "context_extra": "", "context_axioms": [], "statement": "", "conditional_proof": "",
            "conditional_proof_original": "", "proposed_lemmas": [], "proposed_names": [],
            "depth": 0, "in_tree": false, "proof_end": "", "replaced_steps": 0, "split": "",
            "variant": ""
        }))
        .unwrap();
        assert_eq!(keys(&e), names(EXAMPLE_FEATURES));
        let s = crate::dataset::SourceRecord {
            logical_path: String::new(),
            file: String::new(),
            package: String::new(),
            flags: vec![],
            source: String::new(),
            reduced: String::new(),
            body_start: 1,
        };
        assert_eq!(keys(&s), names(SOURCE_FEATURES));
        let k = crate::dataset::Skipped {
            file: String::new(),
            line: 0,
            name: String::new(),
            reason: String::new(),
        };
        assert_eq!(keys(&k), names(SKIPPED_FEATURES));
    }

    #[test]
    fn empty_splits_and_configs_are_left_out() {
        let mut stats = Stats::default();
        for (f, n) in [("train", 3), ("val", 0), ("test", 2), ("train_wl", 3)] {
            stats.files_written.insert(f.into(), n);
        }
        let card = render(&stats, Layout::Jsonl, &|p| p.len() as u64);
        let yaml = card.split("---\n").nth(1).unwrap();
        assert!(yaml.contains("- config_name: default\n  default: true\n  data_files:\n  - split: train\n    path: train.jsonl\n  - split: test\n    path: test.jsonl\n"), "{yaml}");
        assert!(!yaml.contains("val.jsonl"), "{yaml}");
        assert!(yaml.contains("path: train_wl.jsonl"), "{yaml}");
        assert!(!yaml.contains("config_name: rl"), "{yaml}");
        assert!(
            yaml.contains("  - name: flags\n    sequence: string\n"),
            "{yaml}"
        );
        assert!(
            yaml.contains("  - name: train\n    num_bytes: 11\n    num_examples: 3\n"),
            "{yaml}"
        );
        // The Parquet form: the same configs, each in its own folder.
        let card = render(&stats, Layout::Parquet, &|_| 0);
        assert!(card.contains("  - split: train\n    path: default/train.parquet\n  - split: test\n    path: default/test.parquet\n"), "{card}");
        assert!(card.contains("path: w_lemmas/train.parquet"), "{card}");
        let f = files(&stats);
        assert_eq!(
            f.iter()
                .map(|(c, s, stem, _)| (*c, *s, *stem))
                .collect::<Vec<_>>(),
            [
                ("default", "train", "train"),
                ("default", "test", "test"),
                ("w_lemmas", "train", "train_wl")
            ]
        );
    }
}
