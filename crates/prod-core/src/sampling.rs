//! What to sample: the settings every sampler of proofs shares — the native policy, an
//! inference server, a command line's `--temperature` — with their defaults and ranges in one
//! place. The sampler's own knobs (batch sizes, seeds, weights' precision, a server's URL) stay
//! with the sampler.

use serde::{Deserialize, Serialize};

use crate::range::Range;

/// How one proof is drawn for a prompt `x = c s` (paper §3.1, §4: the last 1,000 context tokens,
/// temperature 0.7).
///
/// Also the sampling flags of every command that samples (`--temperature`, `--top-p`,
/// `--max-new-tokens`, `--context-tokens`; feature `clap`): one declaration for the config key,
/// the flag, its default, its range and its help.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(default, deny_unknown_fields)]
pub struct Sampling {
    /// Sampling temperature (0 = greedy; paper: 0.7).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Sampling::default().temperature,
        value_parser = |s: &str| crate::range::parse::real_in(s, Sampling::TEMPERATURE)))]
    pub temperature: f64,
    /// Nucleus (top-p) threshold in (0, 1]; 1 = off.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Sampling::default().top_p,
        value_parser = |s: &str| crate::range::parse::real_in(s, Sampling::TOP_P)))]
    pub top_p: f64,
    /// Longest generated proof, in tokens.
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Sampling::default().max_new_tokens,
        value_parser = crate::range::parse::positive_usize))]
    pub max_new_tokens: usize,
    /// The context is cut to its last N tokens (paper: 1,000).
    #[cfg_attr(feature = "clap", arg(long, default_value_t = Sampling::default().context_tokens,
        value_parser = crate::range::parse::positive_usize))]
    pub context_tokens: usize,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: crate::PAPER_TEMPERATURE,
            top_p: 1.0,
            max_new_tokens: 256,
            context_tokens: 1000,
        }
    }
}

impl Sampling {
    /// The range of each real-valued setting, as a command line's value parser and a config
    /// file's validation both check it (the token counts are counts: at least 1).
    pub const TEMPERATURE: Range = Range::FiniteNonNegative;
    pub const TOP_P: Range = Range::UnitOpenClosed;

    /// Every setting in its range; the error names the key (`top_p = 0: must be in (0, 1]`).
    pub fn validate(&self) -> Result<(), String> {
        let Sampling {
            temperature,
            top_p,
            max_new_tokens,
            context_tokens,
        } = *self;
        Self::TEMPERATURE.check("temperature", temperature, temperature)?;
        Self::TOP_P.check("top_p", top_p, top_p)?;
        Range::at_least_one("max_new_tokens", max_new_tokens as u64)?;
        Range::at_least_one("context_tokens", context_tokens as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::Sampling;

    #[test]
    fn defaults_are_the_papers_and_each_key_has_its_range() {
        let d = Sampling::default();
        assert_eq!((d.temperature, d.context_tokens), (0.7, 1000));
        assert_eq!(d.validate(), Ok(()));
        let bad = |s: Sampling| s.validate().unwrap_err();
        assert_eq!(
            bad(Sampling {
                temperature: f64::NAN,
                ..d.clone()
            }),
            "temperature = NaN: must be a finite number ≥ 0"
        );
        assert_eq!(
            bad(Sampling {
                top_p: 0.0,
                ..d.clone()
            }),
            "top_p = 0: must be in (0, 1]"
        );
        assert_eq!(
            bad(Sampling {
                max_new_tokens: 0,
                ..d.clone()
            }),
            "max_new_tokens = 0: must be at least 1"
        );
        assert_eq!(
            bad(Sampling {
                context_tokens: 0,
                ..d
            }),
            "context_tokens = 0: must be at least 1"
        );
    }
}
