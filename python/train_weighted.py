#!/usr/bin/env python3
"""ProD's reference external trainer: one REINFORCE / SFT update on a round's weighted examples.

`prod rl` writes RUN_DIR/rounds/round-N/examples.jsonl, one example per line:
    {"prompt": str, "completion": str, "weight": float, "prompt_ids": [int], "completion_ids": [int]}
and, with `external_trainer = ["python", "python/train_weighted.py", "--data", "{examples}",
"--model", "{model}", "--out", "{out}"]` in its config, runs this script instead of its native
trainer. The loss is the native one (crates/prod-policy/src/train.rs): the weighted sum of the
completion tokens' negative log-likelihoods, divided by the number of completion tokens in the
macro batch, so weight 0 contributes nothing and the two trainers optimise the same objective.
The optimizer is the native one too: AdamW (0.9, 0.999, eps 1e-8, no weight decay), global-norm
clipping, linear warm-up then a constant learning rate; examples are used in the file's order
(prod has already shuffled them), one optimizer step per macro batch.

The exact token ids are used (no re-tokenisation); the prompt is masked out of the loss. When the
tokenizer (with ProD's six special tokens, counted if missing: prod adds them) has more ids than the
model's vocabulary, the embedding (and an untied head) grows with rows equal to the mean of the
existing rows, as prod's loader does.

`--eval-only` prints the weighted loss of `--model` on `--data` as one JSON line and writes
nothing: prod's tests compare it with the native `eval_loss`.

Runs on one device or many with `accelerate launch` (every process runs the same number of
forward passes per optimizer step, padding with zero-weight dummies, as FSDP and ZeRO-3 need);
the model is saved in the Hugging Face layout `prod` reads back, with the tokenizer files.
"""
import argparse
import json
import math
import os
import random
import shutil

# prod_core::conditional::SPECIAL_TOKENS, in prod's order (ids are assigned in this order).
SPECIAL_TOKENS = ["<use_invoke>", "<no_invoke>", "<invoke>", "</invoke>", "<true>", "<false>"]
# Tokenizer files copied from --model to --out (the weights and config.json are written fresh).
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json"]


def read_examples(path, max_len):
    """[(ids, loss_from, weight, line)], loss_from the index of the first completion token."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                p, c, w = e["prompt_ids"], e["completion_ids"], float(e["weight"])
                if not (isinstance(p, list) and isinstance(c, list)):
                    raise TypeError("prompt_ids and completion_ids must be lists")
                p, c = [int(x) for x in p], [int(x) for x in c]
            except KeyError as err:
                raise SystemExit(f"{path}:{n}: not a ProD example (no field {err})")
            except (ValueError, TypeError) as err:
                raise SystemExit(f"{path}:{n}: not a ProD example ({err})")
            if not math.isfinite(w):
                raise SystemExit(f"{path}:{n}: weight {w} is not finite")
            if not p:
                raise SystemExit(f"{path}:{n}: empty prompt_ids (the first token cannot be predicted)")
            if any(x < 0 for x in p + c):
                raise SystemExit(f"{path}:{n}: negative token id")
            ids = p + c
            if max_len and len(ids) > max_len:
                # Keep the completion; cut the prompt's head (prod's examples never need this).
                ids = ids[-max_len:]
            loss_from = max(1, len(ids) - len(c))
            out.append((ids, loss_from, w, n))
    return out


def target_tokens(example):
    ids, loss_from, _, _ = example
    return len(ids) - loss_from


def tokenizer_vocab_size(model_dir):
    """The number of ids prod's tokenizer has (prod_policy::ProdTokenizer::vocab_size), read from
    tokenizer.json as plain JSON (the `tokenizers` release transformers pins may not parse files
    written by newer ones), counting ProD's special tokens that prod adds when they are missing."""
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    vocab = (tok.get("model") or {}).get("vocab") or {}
    # BPE / WordPiece / WordLevel: {token: id}; Unigram: [[piece, score], ...] (id = index).
    ids = dict(vocab) if isinstance(vocab, dict) else {v[0]: i for i, v in enumerate(vocab)}
    n_model = len(ids)
    added = {t["content"]: t["id"] for t in tok.get("added_tokens") or []}
    n = max(max(list(ids.values()) + list(added.values()), default=-1) + 1,
            n_model + sum(1 for t in added if t not in ids))
    # tokenizers gives each newly added token the next id.
    return n + sum(1 for t in SPECIAL_TOKENS if t not in ids and t not in added)


def grow_vocab(model, new_vocab):
    """prod_policy's Llama::resize_vocab: new rows are the mean of the existing ones."""
    import torch
    old = model.get_input_embeddings().weight.shape[0]
    if new_vocab <= old:
        return
    tied = model.config.tie_word_embeddings
    emb_mean = model.get_input_embeddings().weight.detach().float().mean(0)
    head = model.get_output_embeddings()
    head_mean = None if tied or head is None else head.weight.detach().float().mean(0)
    model.resize_token_embeddings(new_vocab)
    with torch.no_grad():
        w = model.get_input_embeddings().weight
        w[old:] = emb_mean.to(w.dtype)
        if head_mean is not None:
            h = model.get_output_embeddings().weight
            h[old:] = head_mean.to(h.dtype)
    model.config.vocab_size = new_vocab


def load_model(a, data):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from safetensors import safe_open
    single = os.path.join(a.model, "model.safetensors")
    fmt = "pt"
    if os.path.isfile(single):
        with safe_open(single, framework="pt") as f:
            fmt = (f.metadata() or {}).get("format")
    if fmt is None:
        # prod (candle) writes safetensors without the {"format": "pt"} metadata that
        # transformers' from_pretrained insists on: hand it the tensors instead.
        from safetensors.torch import load_file
        config = AutoConfig.from_pretrained(a.model)
        model = AutoModelForCausalLM.from_pretrained(
            None, config=config, state_dict=load_file(single), torch_dtype=torch.float32)
    else:
        model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32)
    grow_vocab(model, tokenizer_vocab_size(a.model))
    n_vocab = model.get_input_embeddings().weight.shape[0]
    for ids, _, _, line in data:
        if max(ids) >= n_vocab:
            raise SystemExit(f"{a.data}:{line}: token id {max(ids)} is outside the vocabulary ({n_vocab} ids)")
    return model


def micro_batches(examples, micro, pad):
    """Right-padded (ids, attention mask, per-position weight) tensors, `micro` examples each."""
    import torch
    for i in range(0, len(examples), micro):
        chunk = examples[i:i + micro]
        t = max(len(e[0]) for e in chunk)
        ids = torch.full((len(chunk), t), pad, dtype=torch.long)
        att = torch.zeros((len(chunk), t), dtype=torch.long)
        w = torch.zeros((len(chunk), t - 1), dtype=torch.float32)
        for r, (seq, loss_from, weight, _) in enumerate(chunk):
            ids[r, :len(seq)] = torch.tensor(seq)
            att[r, :len(seq)] = 1
            # Position p predicts token p + 1: positions loss_from-1 .. len-2 carry the loss.
            w[r, loss_from - 1:len(seq) - 1] = weight
        yield ids, att, w


def weighted_nll_sum(model, ids, att, w):
    """Σ_rows Σ_positions w · (−log p(next token)), as a differentiable scalar."""
    import torch
    logits = model(input_ids=ids, attention_mask=att, use_cache=False).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), reduction="none")
    return (nll * w.reshape(-1)).sum()


def eval_only(a, data):
    """prod_policy::train::eval_loss: Σ w·nll over all target tokens / number of target tokens."""
    import torch
    model = load_model(a, data)
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        live = [e for e in data if e[2] != 0.0 and target_tokens(e) > 0]
        for ids, att, w in micro_batches(live, a.micro_batch, 0):
            total += float(weighted_nll_sum(model, ids, att, w).double())
        tokens = sum(target_tokens(e) for e in data)
    print(json.dumps({"loss": total / tokens if tokens else 0.0, "examples": len(data),
                      "target_tokens": tokens}), flush=True)


def train(a, data):
    import torch
    from accelerate import Accelerator

    # Each process runs exactly `per_proc` micro-batches per macro batch (see below), so the
    # gradient-accumulation boundary is the same for DDP, FSDP and DeepSpeed.
    procs = int(os.environ.get("WORLD_SIZE", "1"))
    per_proc = max(1, math.ceil(math.ceil(min(a.macro_batch, len(data)) / a.micro_batch) / procs))
    accel = Accelerator(mixed_precision="bf16" if a.bf16 else "no", gradient_accumulation_steps=per_proc)
    if accel.num_processes != procs:
        raise SystemExit(f"WORLD_SIZE says {procs} processes, accelerate runs {accel.num_processes}")
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    model = load_model(a, data)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    # The learning rate is set by hand each step (accelerate's scheduler wrapper would advance a
    # LambdaLR once per process).
    model, opt = accel.prepare(model, opt)
    model.train()

    def lr_at(step):  # prod_policy::train::Trainer::lr_at
        w = a.warmup_steps
        return a.lr if w == 0 or step >= w else a.lr * (step + 1) / w

    steps_per_epoch = math.ceil(len(data) / a.macro_batch)
    total = steps_per_epoch * a.epochs
    step = 0
    step_losses = []
    for epoch in range(a.epochs):
        if a.shuffle:
            random.shuffle(data)
        for m in range(0, len(data), a.macro_batch):
            macro = data[m:m + a.macro_batch]
            # Divide by the macro batch's target tokens, as the native trainer does (weight-0
            # examples count there too; they need no forward pass).
            denom = float(sum(target_tokens(e) for e in macro))
            live = [e for e in macro if e[2] != 0.0 and target_tokens(e) > 0]
            mine = list(micro_batches(live, a.micro_batch, 0))[accel.process_index::procs]
            if len(mine) > per_proc:
                raise SystemExit("internal error: more micro-batches than planned")
            # Dummies keep every process's forward count equal (FSDP / ZeRO-3 gather parameters
            # collectively): two tokens, weight 0, no gradient contribution.
            dummy = (torch.zeros((1, 2), dtype=torch.long), torch.ones((1, 2), dtype=torch.long),
                     torch.zeros((1, 1)))
            mine += [dummy] * (per_proc - len(mine))
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            local = 0.0
            for ids, att, w in mine:
                with accel.accumulate(model):
                    ids, att, w = ids.to(accel.device), att.to(accel.device), w.to(accel.device)
                    loss = weighted_nll_sum(model, ids, att, w) / denom
                    local += float(loss)
                    # accelerate divides by the accumulation steps and DDP/FSDP/ZeRO average over
                    # processes: undo both, so the step's gradient is that of the macro loss.
                    accel.backward(loss * per_proc * procs)
                    if accel.sync_gradients and a.clip > 0:
                        accel.clip_grad_norm_(model.parameters(), a.clip)
                    opt.step()
                    opt.zero_grad()
            macro_loss = float(accel.reduce(torch.tensor([local], device=accel.device), reduction="sum")[0])
            step += 1
            step_losses.append(macro_loss)
            accel.print(json.dumps({"epoch": epoch, "step": step, "of": total, "loss": macro_loss}), flush=True)

    accel.wait_for_everyone()
    unwrapped = accel.unwrap_model(model)
    if accel.is_main_process:
        os.makedirs(a.out, exist_ok=True)
    unwrapped.save_pretrained(a.out, is_main_process=accel.is_main_process,
                              save_function=accel.save, state_dict=accel.get_state_dict(model),
                              safe_serialization=True)
    if accel.is_main_process:
        # The tokenizer prod reads (tokenizer.json), byte for byte (prod adds any missing ProD
        # special token again, with the same ids); the other files are for inference servers.
        for name in TOKENIZER_FILES:
            src = os.path.join(a.model, name)
            if os.path.isfile(src) and os.path.abspath(src) != os.path.abspath(os.path.join(a.out, name)):
                shutil.copyfile(src, os.path.join(a.out, name))
        # The round's loss as prod reports it for its native trainer (mean macro-batch loss);
        # prod reads it when the served model is too large to evaluate locally.
        with open(os.path.join(a.out, "trainer_metrics.json"), "w") as f:
            json.dump({"loss": sum(step_losses) / len(step_losses) if step_losses else None,
                       "steps": step}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="examples.jsonl written by prod rl")
    ap.add_argument("--model", required=True, help="previous checkpoint (Hugging Face directory)")
    ap.add_argument("--out", help="where to write the new checkpoint (required unless --eval-only)")
    ap.add_argument("--eval-only", action="store_true",
                    help="print {\"loss\", \"examples\", \"target_tokens\"} of --model on --data; train nothing")
    ap.add_argument("--lr", type=float, default=1e-5, help="paper: 1e-5")
    ap.add_argument("--macro-batch", type=int, default=128, help="examples per optimizer step (paper: 128)")
    ap.add_argument("--micro-batch", type=int, default=4, help="examples per forward pass")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=0,
                    help="cut longer examples' prompts from the left (0: never; prod's examples fit)")
    ap.add_argument("--clip", type=float, default=1.0, help="global gradient-norm clipping (0: off)")
    ap.add_argument("--shuffle", action="store_true", help="shuffle each epoch (prod has already shuffled)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (weights stay f32)")
    a = ap.parse_args()
    if a.macro_batch < 1 or a.micro_batch < 1 or a.epochs < 1:
        raise SystemExit("--macro-batch, --micro-batch and --epochs must be at least 1")
    if not a.eval_only and not a.out:
        raise SystemExit("--out is required (or --eval-only)")
    data = read_examples(a.data, a.max_len)
    if a.eval_only:
        return eval_only(a, data)
    if not any(e[2] != 0.0 and target_tokens(e) > 0 for e in data):
        raise SystemExit(f"{a.data}: no example with a non-zero weight and a completion")
    train(a, data)


if __name__ == "__main__":
    main()
