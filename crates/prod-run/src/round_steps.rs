//! The building blocks of a ProD-RL round that are not phases themselves: the round's draw of
//! theorems, where its checkpoints go, the §3.2 filters on one proof, stored nodes back as
//! generated ones, the training files and the external commands.
//!
//! They use neither the round's phases (`round`) nor the run over all rounds (`rl`), only the
//! configuration, the run store and the policy, so both of those use them without a circle.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use prod_check::{CheckRequest, Checker};
use prod_core::{ConditionalProof, ProofLanguage};
use prod_policy::prompt::TrainExample;
use prod_rl::filters::without_each_lemma;
use prod_rl::{GeneratedNode, ReplayBuffer};
use rand::SeedableRng;

use crate::eval::Theorem;
use crate::policy::{mix_seed, NativeParams, NativePolicy};
use crate::rl_config::RlConfig;
use crate::store::{RunStore, StoredExample, StoredNode};

pub(crate) fn goal_key(
    lang: &dyn ProofLanguage,
    context: &str,
    statement: &str,
) -> (String, String) {
    (
        crate::store::hash_fields(&[context]),
        lang.normalize_statement(statement),
    )
}

/// The theorems of round `round`: B drawn (seeded by round) from the split.
pub fn round_theorems(all: &[Theorem], batch: usize, seed: u64, round: u32) -> Vec<Theorem> {
    use rand::seq::SliceRandom;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(mix_seed(seed, 1_000_000 + round as u64));
    let mut v: Vec<Theorem> = all.to_vec();
    v.shuffle(&mut rng);
    v.truncate(batch);
    v
}

pub(crate) fn load_policy_from(dir: &Path, params: &NativeParams) -> anyhow::Result<NativePolicy> {
    NativePolicy::load(dir, params.clone()).with_context(|| format!("load model {}", dir.display()))
}

/// Where round `round`'s checkpoint is saved.
pub(crate) fn round_checkpoint(out: &Path, round: u32) -> PathBuf {
    out.join("checkpoints").join(format!("round-{round}"))
}

/// Where round `round`'s separate value model is saved (beside the policy's checkpoint).
pub fn value_checkpoint(out: &Path, round: u32) -> PathBuf {
    out.join("checkpoints").join(format!("round-{round}-value"))
}

pub(crate) fn stored_to_generated(
    store: &RunStore,
    n: &StoredNode,
    completion: &str,
    lang: &dyn ProofLanguage,
) -> anyhow::Result<GeneratedNode> {
    let context = store.context(&n.context_key)?.unwrap_or_default();
    Ok(GeneratedNode {
        context,
        statement: n.statement.clone(),
        depth: n.depth,
        tree: n.tree,
        forced_t0: n.forced_t0,
        origin: n.origin,
        completion: completion.to_string(),
        proof: ConditionalProof::parse_with(completion, lang),
        truncated: n.truncated,
    })
}

/// The loss an external trainer reports in `OUT/trainer_metrics.json` (`{"loss": x}`), if any.
pub(crate) fn trainer_loss(ckpt: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(ckpt.join("trainer_metrics.json")).ok()?;
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()?
        .get("loss")?
        .as_f64()
}

/// One JSON line per training example: `prompt`/`completion` text (special tokens kept),
/// `weight`, and the exact `prompt_ids`/`completion_ids` (loss on the completion only).
pub fn write_examples(
    path: &Path,
    examples: &[TrainExample],
    tok: &prod_policy::ProdTokenizer,
) -> anyhow::Result<()> {
    use std::io::Write;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    let tmp = path.with_extension("jsonl.tmp");
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?,
    );
    for e in examples {
        let (p, c) = e.ids.split_at(e.loss_from.min(e.ids.len()));
        let line = serde_json::json!({
            "prompt": tok.decode(p)?, "completion": tok.decode(c)?, "weight": e.weight,
            "prompt_ids": p, "completion_ids": c,
        });
        writeln!(f, "{line}")?;
    }
    f.flush()?;
    drop(f);
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    Ok(())
}

/// Run a configured command; a failure stops the run (it resumes from the last checkpoint).
pub(crate) fn run_command(what: &str, argv: &[String]) -> anyhow::Result<()> {
    let Some((program, args)) = argv.split_first() else {
        return Ok(());
    };
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("{what}: cannot run {program}"))?;
    if !status.success() {
        anyhow::bail!("{what} `{}` failed ({status})", argv.join(" "));
    }
    Ok(())
}

/// What the filters of Section 3.2 did to one locally correct proof.
#[derive(Clone, Debug, PartialEq)]
pub struct Filtered {
    /// The proof with unnecessary lemmas removed.
    pub proof: ConditionalProof,
    /// A remaining lemma directly implies the theorem: the example is dropped.
    pub trivial: bool,
    pub removed: usize,
    /// Checker calls made (the verification cache answers repeated ones).
    pub checks: usize,
}

/// The filters on one locally correct proof (paper §3.2, Step 2):
/// (b) unnecessary lemmas first — a lemma is removed when the proof, without it and every
/// reference to it, still checks (one check per lemma, repeated until nothing more goes);
/// (a) then the proposal is *trivial* when the theorem closes from one remaining lemma alone
/// by [`RlConfig::trivial_tactic`] (`{lemma}` = its name). An `Infra` verdict never removes anything.
pub fn filter_proposals(
    checker: &dyn Checker,
    lang: &dyn ProofLanguage,
    context: &str,
    statement: &str,
    mut proof: ConditionalProof,
    cfg: &RlConfig,
) -> Filtered {
    let (mut checks, mut removed) = (0, 0);
    let mut again = cfg.unnecessary_lemma_filter;
    while again {
        again = false;
        for (_, candidate) in without_each_lemma(&proof, lang) {
            checks += 1;
            if checker
                .check(&CheckRequest::new(
                    "",
                    context,
                    statement,
                    candidate.clone(),
                ))
                .is_proved()
            {
                proof = candidate;
                removed += 1;
                again = true;
                break;
            }
        }
    }
    let mut trivial = false;
    if !cfg.trivial_tactic().trim().is_empty() {
        for l in proof.lemmas() {
            let Some(name) = lang.lemma_name(l) else {
                continue;
            };
            let tactic = cfg.trivial_tactic().replace("{lemma}", &name);
            let text = format!("<use_invoke> <invoke> {l} </invoke> {tactic}");
            let Ok(p) = ConditionalProof::parse_with(&text, lang) else {
                continue;
            };
            checks += 1;
            if checker
                .check(&CheckRequest::new("", context, statement, p))
                .is_proved()
            {
                trivial = true;
                break;
            }
        }
    }
    Filtered {
        proof,
        trivial,
        removed,
        checks,
    }
}

/// Lemma statements proposed in the replay buffer's targets (for the novel-lemma share).
pub(crate) fn replay_lemma_statements(
    replay: &ReplayBuffer<StoredExample>,
    lang: &dyn ProofLanguage,
) -> Vec<String> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
    replay
        .draw(replay.len(), &mut rng)
        .into_iter()
        .filter(|e| e.weight > 0.0)
        .filter_map(|e| ConditionalProof::parse_with(&e.target, lang).ok())
        .flat_map(|p| p.lemmas().map(str::to_string).collect::<Vec<_>>())
        .collect()
}
