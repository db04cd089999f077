//! The native policy behind `prod_rl::Policy`: seeded by request sequence number, replayed
//! from the run store's sample log without touching the model.

use prod_core::T0;
use prod_policy::model::Llama;
use prod_policy::{LlamaConfig, ProdTokenizer};
use prod_rl::{Completion, Policy, SampleRequest};
use prod_run::{LoggedPolicy, NativeParams, NativePolicy, Phase, RunStore, SeqPolicy};

fn tiny() -> NativePolicy {
    let texts = [
        "Lemma a : forall n : nat, n + 0 = n. intros n. lia.",
        "Definition double n := n + n.",
    ];
    let tok = ProdTokenizer::train_bpe(texts.iter(), 200, 1).unwrap();
    let model = Llama::random(
        &LlamaConfig::tiny(tok.vocab_size()),
        3,
        &prod_policy::candle_core::Device::Cpu,
    )
    .unwrap();
    NativePolicy::new(
        model,
        tok,
        NativeParams {
            sampling: prod_core::Sampling {
                max_new_tokens: 10,
                ..prod_core::Sampling::default()
            },
            ..NativeParams::default()
        },
    )
}

fn reqs() -> Vec<SampleRequest<'static>> {
    vec![
        SampleRequest {
            context: "Definition double n := n + n.",
            statement: "Lemma a : double 0 = 0.",
            forced_t0: None,
        },
        SampleRequest {
            context: "Definition double n := n + n.",
            statement: "Lemma a : double 0 = 0.",
            forced_t0: None,
        },
        SampleRequest {
            context: "",
            statement: "Lemma b : True.",
            forced_t0: Some(T0::NoInvoke),
        },
        // An empty statement cannot be prompted: an empty completion, not an error.
        SampleRequest {
            context: "",
            statement: "  ",
            forced_t0: None,
        },
    ]
}

#[test]
fn sampling_is_addressed_by_sequence_number() {
    let mut p = tiny();
    let a = p.sample_at(&reqs(), 100).unwrap();
    let b = p.sample_at(&reqs(), 100).unwrap();
    assert_eq!(a, b);
    // The fourth prompt leaves no room: an empty completion, which no limit cut.
    assert_eq!(a[3], Completion::ended(""));
    // A random model rarely ends within 10 tokens: the token limit cut the sample, and the
    // completion says so.
    assert!(a[..3].iter().any(|c| c.truncated), "{a:?}");
    // Skipping the first request (a resume) leaves the others' draws unchanged when they are
    // sampled alone at their own sequence numbers.
    let c = p.sample_at(&reqs()[2..3], 102).unwrap();
    assert_eq!(c[0], a[2]);
    // So does a request whose prompt a skipped request shared, and a smaller batch.
    let d = p.sample_at(&reqs()[1..2], 101).unwrap();
    assert_eq!(d[0], a[1]);
    p.params.batch_rows = 1;
    assert_eq!(p.sample_at(&reqs(), 100).unwrap(), a);
    let p_use = SeqPolicy::p_use_invoke(&mut p, &[("", "Lemma b : True."), ("", "")]).unwrap();
    assert!(p_use[0] > 0.0 && p_use[0] < 1.0);
    assert_eq!(p_use[1], 0.0);
    let v = p.values(&[("", "Lemma b : True.")]).unwrap();
    assert!(v[0] > 0.0 && v[0] < 1.0);
}

#[test]
fn logged_policy_replays_without_the_model() {
    let store = RunStore::in_memory().unwrap();
    let mut p = tiny();
    let first = {
        let mut l = LoggedPolicy::new(&mut p, &store, 0, Phase::Eval);
        let a = l.sample(&reqs()).unwrap();
        let u = l.p_use_invoke(&[("", "Lemma b : True.")]).unwrap();
        assert_eq!((l.fresh, l.replayed), (4, 0));
        (a, u)
    };
    let mut l = LoggedPolicy::new(&mut p, &store, 0, Phase::Eval);
    let again = (
        l.sample(&reqs()).unwrap(),
        l.p_use_invoke(&[("", "Lemma b : True.")]).unwrap(),
    );
    assert_eq!((l.fresh, l.replayed), (0, 4));
    assert_eq!(again, first);
    // A different request at a logged position is refused (the run's config changed).
    let mut l = LoggedPolicy::new(&mut p, &store, 0, Phase::Eval);
    let other = [SampleRequest {
        context: "",
        statement: "Lemma z : False.",
        forced_t0: None,
    }];
    assert!(l.sample(&other).is_err());
}

/// `first_token = t0`: every unforced sample begins with a `t0` drawn from the two-token
/// distribution (a random model rarely puts one first by itself), and the choice is addressed by sequence number like the rest of the sample.
#[test]
fn first_token_t0_starts_every_sample_as_a_conditional_proof() {
    let mut p = tiny();
    p.params.first_token = prod_run::FirstToken::T0;
    let a = p.sample_at(&reqs(), 7).unwrap();
    for s in &a[..2] {
        assert!(
            s.text.starts_with("<use_invoke>") || s.text.starts_with("<no_invoke>"),
            "{s:?}"
        );
    }
    assert_eq!(a[3], Completion::ended(""));
    assert_eq!(p.sample_at(&reqs()[1..2], 8).unwrap()[0], a[1]);
}
