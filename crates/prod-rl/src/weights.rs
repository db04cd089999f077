//! Example weights (paper §3.2, Step 3): `w = γ^h · ∏ V(l_i)` for a locally correct node with
//! proof length `h` (tokens) and proposed lemmas `l_i`, `0` otherwise; expert iteration uses
//! `w = 1` iff the node is globally correct.

use serde::{Deserialize, Serialize};

/// The paper's discount, `γ = e^-0.0005` (Appendix A.3).
pub const GAMMA_PAPER: f64 = 0.999_500_124_979_169_3;

/// How a node's reward becomes a training weight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Weighting {
    /// ProD-RL: REINFORCE with the value model as baseline-free variance reduction.
    Reinforce { gamma: f64 },
    /// Expert iteration: weight 1 iff globally correct.
    ExpertIteration,
}

impl Default for Weighting {
    fn default() -> Self {
        Weighting::Reinforce { gamma: GAMMA_PAPER }
    }
}

/// The weight of one generated node. `values` are `V(l_i)` for its proposed lemmas, each in
/// [0, 1] (out-of-range values are clamped: a value model never makes a weight negative or
/// larger than the length penalty). `globally_correct` is only used by expert iteration;
/// `None` (undetermined: infra failures below) gives weight 0 and must be retried upstream.
pub fn example_weight(
    weighting: Weighting,
    locally_correct: bool,
    globally_correct: Option<bool>,
    proof_tokens: usize,
    values: &[f64],
) -> f64 {
    match weighting {
        Weighting::ExpertIteration => f64::from(u8::from(globally_correct == Some(true))),
        Weighting::Reinforce { gamma } => {
            if !locally_correct {
                return 0.0;
            }
            let v: f64 = values
                .iter()
                .map(|v| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) })
                .product();
            gamma.powf(proof_tokens as f64) * v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_is_the_papers() {
        assert!((GAMMA_PAPER - (-0.0005f64).exp()).abs() < 1e-15);
    }

    #[test]
    fn reinforce_weight() {
        let w = example_weight(Weighting::default(), true, None, 100, &[0.5, 0.8]);
        assert!((w - GAMMA_PAPER.powi(100) * 0.4).abs() < 1e-12);
        assert_eq!(
            example_weight(Weighting::default(), false, Some(true), 10, &[]),
            0.0
        );
        assert_eq!(
            example_weight(Weighting::default(), true, None, 0, &[]),
            1.0
        );
        assert_eq!(
            example_weight(Weighting::default(), true, None, 0, &[1.7, f64::NAN]),
            0.0
        );
    }

    #[test]
    fn expert_iteration_weight() {
        assert_eq!(
            example_weight(Weighting::ExpertIteration, true, Some(true), 50, &[0.1]),
            1.0
        );
        assert_eq!(
            example_weight(Weighting::ExpertIteration, true, Some(false), 50, &[]),
            0.0
        );
        assert_eq!(
            example_weight(Weighting::ExpertIteration, true, None, 50, &[]),
            0.0
        );
    }
}
