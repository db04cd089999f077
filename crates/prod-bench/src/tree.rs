//! `prod bench tree`: the global-correctness solver (`prod_core::tree::solve`) timed on
//! synthetic proof forests of a hundredth, a tenth and all of N nodes, side by side; linear
//! time gives a ratio of about 10 per step. It times the solver and decides nothing.

use prod_core::tree::{solve, GlobalVerdict, LocalVerdict, Node};
use prod_core::{ConditionalProof, ProofLanguage};

/// The forest sizes and repetitions (also `prod bench tree`'s flags, feature `clap`).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct TreeSettings {
    /// Largest forest size (nodes); the bench also runs a tenth and a hundredth of it, side by side.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TreeSettings::default().nodes,
        value_parser = prod_core::range::parse::positive_usize))]
    pub nodes: usize,
    /// Repetitions per size (the median is reported).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = TreeSettings::default().repeat,
        value_parser = prod_core::range::parse::positive_usize))]
    pub repeat: usize,
}

impl Default for TreeSettings {
    /// 100,000 nodes (and 10,000 and 1,000), the median of 5.
    fn default() -> Self {
        TreeSettings {
            nodes: 100_000,
            repeat: 5,
        }
    }
}

/// One forest size's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeSize {
    pub nodes: usize,
    /// Proposed lemmas (edges) in the forest.
    pub lemmas: usize,
    pub globally_correct: usize,
    /// The solver's median time, ms.
    pub median_ms: f64,
    /// The statement keys alone (the language's lexer), ms: to separate them from the fixed point.
    pub statement_keys_ms: f64,
}

impl TreeSize {
    /// The median per node, µs.
    pub fn us_per_node(&self) -> f64 {
        self.median_ms * 1e3 / self.nodes.max(1) as f64
    }

    /// The text line for this size.
    pub fn text(&self) -> String {
        format!(
            "{:>9} nodes {:>9} lemmas  {:>8} globally correct  median {:9.2} ms  ({:.2} µs/node; statement keys alone {:.2} ms)",
            self.nodes, self.lemmas, self.globally_correct, self.median_ms, self.us_per_node(), self.statement_keys_ms
        )
    }

    /// `--json`'s line for this size.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"nodes": self.nodes, "lemmas": self.lemmas, "globally_correct": self.globally_correct, "median_ms": self.median_ms, "statement_keys_ms": self.statement_keys_ms, "us_per_node": self.us_per_node()})
    }
}

/// Every size's figures and the time ratios between successive sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeReport {
    pub sizes: Vec<TreeSize>,
    /// Median time of each size over the one before (10x the nodes).
    pub ratios: Vec<f64>,
}

impl TreeReport {
    /// The closing line: the time ratio per 10x nodes.
    pub fn text(&self) -> String {
        let shown: Vec<String> = self.ratios.iter().map(|r| format!("{r:.2}")).collect();
        format!(
            "time ratio per 10x nodes: {} (linear: ~10)",
            shown.join(", ")
        )
    }

    /// `--json`'s closing line.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({"ratios_per_10x": self.ratios})
    }
}

/// Times the solver at each size; `on_size` gets each size's figures as soon as they are in.
pub fn bench_tree(s: TreeSettings, on_size: &dyn Fn(&TreeSize)) -> TreeReport {
    let lang = prod_coq::CoqLanguage;
    let mut sizes = Vec::new();
    for n in [s.nodes / 100, s.nodes / 10, s.nodes] {
        let size = measure(n, s.repeat, &lang);
        on_size(&size);
        sizes.push(size);
    }
    // Linear time: each 10x step in size costs ~10x (more when the working set leaves the caches).
    let ratios = sizes
        .windows(2)
        .map(|w| w[1].median_ms / w[0].median_ms.max(1e-9))
        .collect();
    TreeReport { sizes, ratios }
}

/// One size: the solver `repeat` times on a forest of `n` nodes, and the statement keys alone.
fn measure(n: usize, repeat: usize, lang: &dyn ProofLanguage) -> TreeSize {
    let nodes = synthetic_forest(n, 42);
    let lemmas: usize = nodes.iter().map(|x| x.proof.lemma_count()).sum();
    let mut times: Vec<f64> = (0..repeat.max(1))
        .map(|_| {
            let t = std::time::Instant::now();
            let s = solve(&nodes, lang);
            std::hint::black_box(s.goal_count());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let median_ms = times[times.len() / 2];
    let globally_correct = solve(&nodes, lang)
        .verdicts()
        .iter()
        .filter(|v| **v == GlobalVerdict::Correct)
        .count();
    let t = std::time::Instant::now();
    let keys: Vec<String> = nodes
        .iter()
        .flat_map(|x| std::iter::once(x.statement.as_str()).chain(x.proof.lemmas()))
        .map(|s| lang.normalize_statement(s))
        .collect();
    std::hint::black_box(&keys);
    drop(keys);
    TreeSize {
        nodes: n,
        lemmas,
        globally_correct,
        median_ms,
        statement_keys_ms: t.elapsed().as_secs_f64() * 1e3,
    }
}

/// A synthetic forest of `n` nodes: chains of random depth, cycles, duplicate samples and
/// incorrect nodes, with about two proposed lemmas per node.
fn synthetic_forest(n: usize, seed: u64) -> Vec<Node> {
    let mut state = seed | 1;
    let mut rnd = move |m: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % m.max(1) as u64) as usize
    };
    let statements = (n / 2).max(1);
    (0..n)
        .map(|i| {
            let own = rnd(statements);
            let k = rnd(4);
            let mut proof = String::from(if k == 0 {
                "<no_invoke>"
            } else {
                "<use_invoke>"
            });
            for j in 0..k {
                let l = rnd(statements);
                proof.push_str(&format!(
                    " <invoke> Lemma l{i}_{j} : P{l} = P{l}. </invoke> apply l{i}_{j}."
                ));
            }
            Node {
                id: i.to_string(),
                context: format!("ctx{}", own % 3),
                statement: format!("Lemma t{i} : P{own} = P{own}."),
                proof: ConditionalProof::parse(&proof).expect("well-formed by construction"),
                local: if rnd(5) == 0 {
                    LocalVerdict::Incorrect
                } else {
                    LocalVerdict::Correct
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_forest_has_the_size_asked_and_is_seeded() {
        let a = synthetic_forest(200, 42);
        assert_eq!(a.len(), 200);
        let b = synthetic_forest(200, 42);
        let texts = |f: &[Node]| -> Vec<String> { f.iter().map(|n| n.statement.clone()).collect() };
        assert_eq!(texts(&a), texts(&b));
        assert_ne!(texts(&a), texts(&synthetic_forest(200, 7)));
        assert!(a.iter().any(|n| n.local == LocalVerdict::Incorrect));
        assert!(a.iter().any(|n| n.proof.lemma_count() > 0));
    }

    #[test]
    fn the_bench_reports_three_sizes_and_two_ratios() {
        let seen = std::cell::RefCell::new(vec![]);
        let r = bench_tree(
            TreeSettings {
                nodes: 1000,
                repeat: 1,
            },
            &|s| seen.borrow_mut().push(s.nodes),
        );
        assert_eq!(*seen.borrow(), [10, 100, 1000]);
        assert_eq!(r.sizes.len(), 3);
        assert_eq!(r.ratios.len(), 2);
        let big = &r.sizes[2];
        assert!(big.globally_correct > 0 && big.globally_correct < big.nodes);
        assert!(big.lemmas > 0);
        assert_eq!(big.json()["nodes"], 1000);
    }
}
