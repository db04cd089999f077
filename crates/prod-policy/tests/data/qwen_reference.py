"""Tiny random Qwen2 and Qwen3 models made by transformers, for
crates/prod-policy/tests/transformers_qwen.rs.

    make OUT SEQS NAME...   writes OUT/NAME (config.json, model.safetensors) for each model
                            below and prints {NAME: {"class": ..., "logits": [seq][pos][vocab]}}
    check DIR SEQS NAME...  loads DIR/NAME with AutoModelForCausalLM and prints the same

SEQS is a JSON list of token-id lists; every sequence is run alone (no padding). Weights are
seeded and far from their initial values: biases non-zero, q/k norm weights away from 1.
"""
import json
import sys

import torch
import transformers

SHAPE = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    rms_norm_eps=1e-6,
    max_position_embeddings=128,
)

# name: (config class, its own fields)
MODELS = {
    # Qwen2: q/k/v biases, a tied head, a large RoPE base.
    "qwen2": ("Qwen2Config", dict(num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1e6)),
    # Qwen3: q/k norms, heads of 12 (4 x 12 = 48, not the hidden size 32), an untied head.
    "qwen3": (
        "Qwen3Config",
        dict(num_key_value_heads=2, head_dim=12, tie_word_embeddings=False, rope_theta=5000.0),
    ),
    # Qwen3 with attention_bias: biases on q, k, v and o; one key/value head.
    "qwen3_bias": (
        "Qwen3Config",
        dict(num_key_value_heads=1, head_dim=8, attention_bias=True, tie_word_embeddings=True),
    ),
}


def randomised(name):
    cls, own = MODELS[name]
    cfg = getattr(transformers, cls)(**SHAPE, **own)
    torch.manual_seed(sorted(MODELS).index(name) + 1)
    model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            noise = torch.randn_like(p)
            if pname.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * noise)
            elif pname.endswith(".bias"):
                p.copy_(0.3 * noise)
            else:
                p.copy_(0.15 * noise)
    return model


def logits(model, seqs):
    with torch.no_grad():
        return [model(torch.tensor([s])).logits[0].tolist() for s in seqs]


def main():
    mode, where, seqs, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]
    out = {}
    for name in names:
        if mode == "make":
            model = randomised(name)
            model.save_pretrained(f"{where}/{name}")
        else:
            model = transformers.AutoModelForCausalLM.from_pretrained(f"{where}/{name}").float().eval()
        out[name] = {"class": type(model).__name__, "logits": logits(model, seqs)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
