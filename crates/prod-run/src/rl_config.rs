//! The configuration of a ProD-RL run (`rl.toml`, paper §3.2 and Appendix A.1): the method,
//! the value model, the per-round evaluation (`[eval]`) and the run's numbers, with their
//! defaults (the paper's values) and validation.
//!
//! Kept apart from the run (`rl`) and from one round (`round`) so that both read the same
//! settings and neither needs the other's module for them: the run calls the round, never the
//! other way around.

use std::path::PathBuf;

use prod_rl::{Weighting, GAMMA_PAPER};
use serde::{Deserialize, Serialize};

use crate::policy::NativeParams;
use crate::prover::ProverKind;

/// Which method a run trains (paper §4.3 and Appendix A.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// ProD-RL: REINFORCE weights γ^h·∏V(l) with lemma proposals.
    #[default]
    ProdRl,
    /// Expert iteration: weight 1 iff globally correct (with lemma proposals).
    ExpertIteration,
    /// RL without lemma proposal (Appendix A.2): only `<no_invoke>` samples; ground-truth
    /// proofs join with their lemmas moved into the context.
    NoLemmaProposal,
}

impl Method {
    /// The paper's name for the method (report titles, tables).
    pub fn display_name(self) -> &'static str {
        match self {
            Method::ProdRl => "ProD-RL",
            Method::ExpertIteration => "Expert iteration",
            Method::NoLemmaProposal => "RL w/o lemma proposal",
        }
    }
}

/// Where the value model V(l) of the weights comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ValueModel {
    /// A second model, initialised from the SFT model and trained only on the value examples
    /// (paper Appendix A.1); checkpointed per round in `checkpoints/round-N-value`.
    #[default]
    Separate,
    /// The policy's own `<true>`/`<false>` head, trained in the policy's update.
    Shared,
    /// No value model: every V(l) = 1.
    Off,
}

impl<'de> Deserialize<'de> for ValueModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Bool(bool),
            Name(String),
        }
        match Repr::deserialize(d)? {
            Repr::Bool(true) => Ok(ValueModel::Shared),
            Repr::Bool(false) => Ok(ValueModel::Off),
            Repr::Name(n) => match n.as_str() {
                "separate" => Ok(ValueModel::Separate),
                "shared" => Ok(ValueModel::Shared),
                "off" => Ok(ValueModel::Off),
                _ => Err(serde::de::Error::custom(format!(
                    "unknown value_model {n:?}: expected \"separate\", \"shared\" or \"off\""
                ))),
            },
        }
    }
}

/// `[eval]` of `rl.toml`: the per-round evaluation (Algorithm 1 trees, pass@k with bootstrap
/// CIs) on the first `theorems` theorems of `split`, the same ones and the same sampling seeds
/// every round, so that the rounds' figures form a curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlEvalConfig {
    /// Theorems evaluated (the first N of the split, in file order); 0 = no evaluation.
    pub theorems: usize,
    /// Split file (`{split}.jsonl` of the dataset), held out from the RL split.
    pub split: String,
    /// n: test-time trees per theorem.
    pub samples: u32,
    /// Depth limit of Algorithm 1 (paper: 2).
    pub depth: u32,
    /// pass@k for these k (those > samples are left out).
    pub ks: Vec<usize>,
    /// Evaluate after every `every`-th round (and always after the last).
    pub every: u32,
    pub final_timeout_s: u64,
    pub bootstrap: usize,
}

impl Default for RlEvalConfig {
    fn default() -> Self {
        RlEvalConfig {
            theorems: 0,
            split: "test".into(),
            samples: 4,
            depth: 2,
            ks: vec![1, 2, 4],
            every: 1,
            final_timeout_s: prod_check::TimeLimits::DEFAULT.final_s,
            bootstrap: prod_core::pass_at_k::Bootstrap::DEFAULT_RESAMPLES,
        }
    }
}

impl RlEvalConfig {
    pub(crate) fn enabled(&self) -> bool {
        self.theorems > 0
    }

    /// Whether round `round` (0 = the starting model) of `rounds` is evaluated.
    pub fn due(&self, round: u32, rounds: u32) -> bool {
        self.enabled() && (round == 0 || round == rounds || round.is_multiple_of(self.every.max(1)))
    }
}

/// `rl.toml`. Paper values in comments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlConfig {
    /// Initial model directory (the SFT model).
    pub model: PathBuf,
    /// Dataset directory (`prod dataset build`).
    pub dataset: PathBuf,
    /// Split file the theorems come from (paper: the RL set, `rl.jsonl`).
    pub split: String,
    /// R (paper: 20).
    pub rounds: u32,
    /// B theorems per round (paper: 5,000).
    pub batch: usize,
    /// Depth limit of Algorithm 2 (paper: 3).
    pub depth: u32,
    pub method: Method,
    /// γ (paper: e^-0.0005).
    pub gamma: f64,
    /// The value model V of the weights γ^h·∏V(l), trained each round on global correctness:
    /// `"separate"` (paper: a copy of the SFT model with its own optimizer), `"shared"` (the
    /// policy's own `<true>`/`<false>` head, trained in the policy's update) or `"off"` (V = 1).
    /// `true`/`false` (older configs) read as `"shared"`/`"off"`.
    pub value_model: ValueModel,
    /// Remove unnecessary lemmas (one cached check per lemma).
    pub unnecessary_lemma_filter: bool,
    /// Hammer leaves ([`crate::leaves`]; default on): every distinct lemma a round's trees
    /// propose also gets a `<no_invoke> hammer.` node. It is no training example; a lemma it
    /// proves counts as proved for the node that proposed it (global correctness, and V(l) = 1
    /// in the weight). Coq with the hammer on only. Also the per-round evaluation's.
    pub hammer_leaves: bool,
    /// The prover: `"coq"` (the `[coq]` section) or `"isabelle"` (the `[isabelle]` section: a
    /// running Isabelle server, the keys of `[check.isabelle]` in `prod.toml`).
    #[serde(skip_serializing_if = "ProverKind::is_coq")]
    pub prover: ProverKind,
    /// Drop proposals whose theorem closes from one lemma alone by this tactic (`{lemma}` is
    /// replaced by the lemma's name); empty = only the same-statement test. Default: the
    /// prover's (Coq `intros; eauto using {lemma}.`, Isabelle `using {lemma} by auto`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trivial_tactic: Option<String>,
    pub replay_capacity: usize,
    pub replay_mix: f64,
    /// Optimizer (paper: 1e-5, macro batch 128).
    pub learning_rate: f64,
    pub warmup_steps: usize,
    pub macro_batch: usize,
    pub micro_batch: usize,
    pub max_seq_len: usize,
    /// Passes over each round's batch.
    pub epochs: usize,
    pub sampling: NativeParams,
    pub coq: crate::job::CoqJobConfig,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isabelle: Option<prod_check_isabelle::IsabelleCheckConfig>,
    pub seed: u64,
    /// pass@k on a fixed held-out subset after every `every` rounds, and of the starting model
    /// as round 0 (off while `theorems = 0`).
    pub eval: RlEvalConfig,
    /// Scale-out training: instead of the native trainer, run this command each round (argv;
    /// `{examples}` = the round's `examples.jsonl`, `{model}` = the previous checkpoint (a
    /// Hugging Face model directory), `{out}` = where the new checkpoint must be written, in the
    /// same layout). Empty = the native trainer. Reference trainer: `python/train_weighted.py`.
    pub external_trainer: Vec<String>,
    /// Run after each round's checkpoint is written (same placeholders), e.g. to point a remote
    /// inference server at the new weights (SGLang `/update_weights_from_disk`, or a restart).
    pub after_round: Vec<String>,
    /// Sample (and score `V`, `P(<use_invoke>)`) on a remote inference server instead of the
    /// native model; the model directory of each round then only supplies the tokenizer.
    /// `after_round` must make the server serve `{out}` for the next round.
    pub remote: Option<prod_remote::RemoteConfig>,
    /// Scale-out: the run store and the checks in a PostgreSQL database, drained by
    /// `prod queue work` processes on any machine.
    pub postgres: Option<crate::job::SharedStore>,
}

impl Default for RlConfig {
    fn default() -> Self {
        RlConfig {
            model: PathBuf::new(),
            dataset: PathBuf::new(),
            split: "rl".into(),
            rounds: 20,
            batch: 5000,
            depth: 3,
            method: Method::ProdRl,
            gamma: GAMMA_PAPER,
            value_model: ValueModel::Separate,
            unnecessary_lemma_filter: true,
            hammer_leaves: crate::leaves::DEFAULT,
            prover: ProverKind::Coq,
            trivial_tactic: None,
            replay_capacity: 20_000,
            replay_mix: 0.5,
            learning_rate: 1e-5,
            warmup_steps: 10,
            macro_batch: 128,
            micro_batch: 4,
            max_seq_len: 2048,
            epochs: 1,
            sampling: NativeParams::default(),
            coq: crate::job::CoqJobConfig::default(),
            isabelle: None,
            seed: prod_core::DEFAULT_SEED,
            eval: RlEvalConfig::default(),
            external_trainer: Vec::new(),
            after_round: Vec::new(),
            remote: None,
            postgres: None,
        }
    }
}

impl RlConfig {
    /// `rl.toml` read, checked and its relative paths taken from its folder; every error is
    /// bad input naming the file (and the line of a TOML error).
    pub fn load(path: &std::path::Path) -> Result<RlConfig, crate::BadInput> {
        use crate::BadInput;
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{shown}: {e}")))?;
        let mut cfg: RlConfig = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let at = line.map(|l| format!(":{l}")).unwrap_or_default();
            BadInput(format!("{shown}{at}: {}", e.message()))
        })?;
        cfg.validate()
            .map_err(|e| BadInput(format!("{shown}: {e}")))?;
        let base = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        for p in [&mut cfg.model, &mut cfg.dataset] {
            if p.is_relative() && !p.as_os_str().is_empty() {
                *p = base.join(&*p);
            }
        }
        if cfg.model.as_os_str().is_empty() || cfg.dataset.as_os_str().is_empty() {
            return Err(BadInput(format!(
                "{shown}: `model` and `dataset` are required"
            )));
        }
        Ok(cfg)
    }

    /// Every number in its range; the error names the key (`sampling.top_p = 0: …`).
    pub fn validate(&self) -> Result<(), String> {
        use crate::ranges::*;
        at_least_one("rounds", self.rounds)?;
        at_least_one("batch", self.batch)?;
        open_closed_unit("gamma", self.gamma)?;
        finite_non_negative("replay_mix", self.replay_mix)?;
        finite_positive("learning_rate", self.learning_rate)?;
        at_least_one("macro_batch", self.macro_batch)?;
        at_least_one("micro_batch", self.micro_batch)?;
        if self.micro_batch > self.macro_batch {
            return Err(format!(
                "micro_batch = {} must not exceed macro_batch = {}",
                self.micro_batch, self.macro_batch
            ));
        }
        at_least_one("max_seq_len", self.max_seq_len)?;
        at_least_one("epochs", self.epochs)?;
        self.sampling
            .validate()
            .map_err(|e| format!("sampling.{e}"))?;
        self.coq.validate().map_err(|e| format!("coq.{e}"))?;
        if self.eval.enabled() {
            at_least_one("eval.samples", self.eval.samples)?;
            at_least_one("eval.every", self.eval.every)?;
            at_least_one("eval.bootstrap", self.eval.bootstrap)?;
            if let Some(k) = self.eval.ks.iter().find(|&&k| k == 0) {
                return Err(format!("eval.ks contains {k}: every k must be at least 1"));
            }
        }
        if let Some(r) = &self.remote {
            crate::policy::validate_remote(r).map_err(|e| format!("remote.{e}"))?;
        }
        match &self.postgres {
            Some(p) => p.validate().map_err(|e| format!("postgres.{e}")),
            None => Ok(()),
        }
    }

    /// The trivial-proposal tactic: the configured one, else the prover's.
    pub fn trivial_tactic(&self) -> &str {
        self.trivial_tactic
            .as_deref()
            .unwrap_or(self.prover.trivial_tactic())
    }

    /// The prover settings.
    pub fn prover_choice(&self) -> crate::job::ProverChoice<'_> {
        crate::job::ProverChoice {
            kind: self.prover,
            coq: &self.coq,
            isabelle: self.isabelle.as_ref(),
        }
    }

    pub(crate) fn weighting(&self) -> Weighting {
        match self.method {
            Method::ExpertIteration => Weighting::ExpertIteration,
            _ => Weighting::Reinforce { gamma: self.gamma },
        }
    }

    /// The configuration as the run store keeps it: what the run is, not where it runs
    /// (workers, Isabelle server address, PostgreSQL store left out), with the trivial tactic
    /// in effect written out (as stores from before the prover's default kept it).
    pub(crate) fn identity(&self) -> RlConfig {
        let mut fixed = self.clone();
        crate::job::leave_out_where(&mut fixed.coq, &mut fixed.isabelle, &mut fixed.postgres);
        fixed.trivial_tactic = Some(self.trivial_tactic().to_string());
        fixed.hammer_leaves = self.hammer_leaves_in_effect();
        fixed
    }

    /// Whether the rounds and their evaluations add hammer leaves: asked for, and the prover
    /// has a hammer.
    pub(crate) fn hammer_leaves_in_effect(&self) -> bool {
        crate::leaves::in_effect(self.hammer_leaves, self.prover, self.coq.hammer)
    }

    /// The evaluation settings of the fixed subset (`[eval]`), under `name`: the per-round
    /// evaluation and the round's canaries sample alike.
    pub(crate) fn eval_options(&self, name: String) -> crate::eval::EvalOptions {
        crate::eval::EvalOptions {
            name,
            split: self.eval.split.clone(),
            ks: self.eval.ks.clone(),
            samples: self.eval.samples,
            depth: self.eval.depth,
            final_timeout_s: self.eval.final_timeout_s,
            bootstrap: self.eval.bootstrap,
            seed: self.seed,
            temperature: self.sampling.sampling.temperature,
            hammer_leaves: self.hammer_leaves_in_effect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_sections_default_and_reject_unknown_keys() {
        let cfg: RlConfig = toml::from_str("model = \"m\"\ndataset = \"d\"\nrounds = 2\n[sampling]\nmax_new_tokens = 9\n[coq]\nworkers = 1\n").unwrap();
        assert_eq!(
            (
                cfg.rounds,
                cfg.sampling.sampling.max_new_tokens,
                cfg.sampling.sampling.temperature
            ),
            (2, 9, 0.7)
        );
        assert_eq!((cfg.coq.workers, cfg.coq.hammer), (1, true));
        assert_eq!(cfg.method, Method::ProdRl);
        assert!(toml::from_str::<RlConfig>("roundz = 2\n").is_err());
        assert!(toml::from_str::<RlConfig>("[coq]\nworkerz = 2\n").is_err());
        let m: RlConfig = toml::from_str("method = \"no_lemma_proposal\"\n").unwrap();
        assert_eq!(m.method, Method::NoLemmaProposal);
        assert_eq!(cfg.sampling.decode_weights, prod_policy::DecodeWeights::F32);
        let q: RlConfig = toml::from_str("[sampling]\ndecode_weights = \"q8\"\n").unwrap();
        assert_eq!(q.sampling.decode_weights, prod_policy::DecodeWeights::Q8);
        assert!(toml::from_str::<RlConfig>("[sampling]\ndecode_weights = \"q3\"\n").is_err());
    }

    #[test]
    fn validate_names_the_key_out_of_range() {
        let example = include_str!("../examples/rl-small.toml");
        assert_eq!(
            toml::from_str::<RlConfig>(example).unwrap().validate(),
            Ok(())
        );
        assert_eq!(RlConfig::default().validate(), Ok(()));
        let err = |text: &str| {
            toml::from_str::<RlConfig>(text)
                .unwrap()
                .validate()
                .unwrap_err()
        };
        assert_eq!(err("rounds = 0"), "rounds = 0: must be at least 1");
        assert!(err("learning_rate = 0.0").starts_with("learning_rate = 0: "));
        assert!(err("learning_rate = nan").starts_with("learning_rate = NaN: "));
        assert!(err("gamma = 1.5").starts_with("gamma"));
        assert!(err("micro_batch = 8\nmacro_batch = 4").contains("macro_batch = 4"));
        assert!(err("[sampling]\ntemperature = -1.0").starts_with("sampling.temperature = -1"));
        assert!(err("[sampling]\ntop_p = 0.0").starts_with("sampling.top_p = 0"));
        assert!(err("[coq]\nstep_timeout_s = 0").starts_with("coq.step_timeout_s = 0"));
        assert!(err("[remote]\nmax_concurrency = 0").starts_with("remote.max_concurrency = 0"));
        // One place for what to sample: [sampling]; [remote] holds the server alone.
        for key in [
            "temperature = 0.5",
            "top_p = 0.9",
            "max_tokens = 9",
            "context_tokens = 64",
        ] {
            let e = toml::from_str::<RlConfig>(&format!("[remote]\n{key}")).unwrap_err();
            assert!(e.to_string().contains("unknown field"), "{key}: {e}");
        }
        let e = toml::from_str::<RlConfig>("[sampling]\ntemperatur = 0.5").unwrap_err();
        assert!(e.to_string().contains("unknown field `temperatur`"), "{e}");
        let ok: RlConfig = toml::from_str("[sampling]\ncontext_tokens = 64\nmax_new_tokens = 9\n[remote]\nbase_url = \"http://x\"").unwrap();
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            (
                ok.sampling.sampling.context_tokens,
                ok.sampling.sampling.max_new_tokens
            ),
            (64, 9)
        );
        assert!(err("[postgres]\nlease_s = -5.0").starts_with("postgres.lease_s = -5"));
        // Greedy sampling and a depth of 0 (no lemma proposals) are fine.
        let ok: RlConfig = toml::from_str("depth = 0\n[sampling]\ntemperature = 0.0").unwrap();
        assert_eq!(ok.validate(), Ok(()));
    }
}
