#!/usr/bin/env python3
"""ProD's reference external trainer: one REINFORCE / SFT update on a round's weighted examples.

`prod rl` writes RUN_DIR/rounds/round-N/examples.jsonl, one example per line:
    {"prompt": str, "completion": str, "weight": float, "prompt_ids": [int], "completion_ids": [int]}
and, with `external_trainer = ["python", "python/train_weighted.py", "--data", "{examples}",
"--model", "{model}", "--out", "{out}"]` in its config, runs this script instead of its native
trainer. The loss is the native one (crates/prod-policy/src/train.rs): the weighted sum of the
completion tokens' negative log-likelihoods, divided by the number of completion tokens in the
macro batch, so weight 0 contributes nothing and the two trainers optimise the same objective.

The exact token ids are used (no re-tokenisation); the prompt is masked out of the loss.
Runs on one device or many with `accelerate launch` (DDP, FSDP or DeepSpeed ZeRO-3: pass the
usual accelerate config); the model is saved in the Hugging Face layout `prod` reads back.
"""
import argparse
import json
import math
import os
import random


def read_examples(path, max_len):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
                p, c, w = list(e["prompt_ids"]), list(e["completion_ids"]), float(e["weight"])
            except (ValueError, KeyError, TypeError) as err:
                raise SystemExit(f"{path}:{n}: not a ProD example ({err})")
            if w <= 0 or not c:
                continue  # no gradient
            ids = (p + c)[-max_len:]
            loss_from = max(1, len(ids) - len(c))
            out.append((ids, loss_from, w))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="examples.jsonl written by prod rl")
    ap.add_argument("--model", required=True, help="previous checkpoint (Hugging Face directory)")
    ap.add_argument("--out", required=True, help="where to write the new checkpoint")
    ap.add_argument("--lr", type=float, default=1e-5, help="paper: 1e-5")
    ap.add_argument("--macro-batch", type=int, default=128, help="examples per optimizer step (paper: 128)")
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()

    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # Accumulation is done by hand below: one optimizer step per macro batch, whatever its size.
    accel = Accelerator(mixed_precision="bf16" if a.bf16 else "no")
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    data = read_examples(a.data, a.max_len)
    if not data:
        raise SystemExit(f"{a.data}: no example with a positive weight")
    model = AutoModelForCausalLM.from_pretrained(a.model)
    tok = AutoTokenizer.from_pretrained(a.model)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    steps_per_epoch = math.ceil(len(data) / a.macro_batch)
    total = steps_per_epoch * a.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / a.warmup_steps) if a.warmup_steps > 0 else 1.0)
    model, opt, sched = accel.prepare(model, opt, sched)
    model.train()

    def batches(examples):
        for i in range(0, len(examples), a.micro_batch):
            chunk = examples[i:i + a.micro_batch]
            t = max(len(ids) for ids, _, _ in chunk)
            ids = torch.full((len(chunk), t), pad, dtype=torch.long)
            att = torch.zeros((len(chunk), t), dtype=torch.long)
            w = torch.zeros((len(chunk), t), dtype=torch.float32)
            for r, (seq, loss_from, weight) in enumerate(chunk):
                ids[r, :len(seq)] = torch.tensor(seq)
                att[r, :len(seq)] = 1
                # Position p predicts token p + 1: positions loss_from-1 .. len-2 carry the loss.
                w[r, loss_from - 1:len(seq) - 1] = weight
            yield ids, att, w

    step = 0
    for epoch in range(a.epochs):
        random.shuffle(data)
        for m in range(0, len(data), a.macro_batch):
            macro = data[m:m + a.macro_batch]
            # Divide by the macro batch's target tokens, as the native trainer does.
            denom = float(sum(len(ids) - lf for ids, lf, _ in macro))
            total_loss = 0.0
            for k, (ids, att, w) in enumerate(batches(macro)):
                # Micro-batches are dealt round-robin to the processes; gradients are averaged
                # across processes, hence the factor below. (Every process needs at least one
                # micro-batch per macro batch: macro_batch >= micro_batch * processes.)
                if k % accel.num_processes != accel.process_index:
                    continue
                ids, att, w = ids.to(accel.device), att.to(accel.device), w.to(accel.device)
                logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
                nll = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1), reduction="none")
                loss = (nll * w[:, :-1].reshape(-1)).sum() / denom
                accel.backward(loss * accel.num_processes)
                total_loss += float(loss)
            if a.clip > 0:
                accel.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            accel.print(json.dumps({"epoch": epoch, "step": step, "of": total, "loss": total_loss}))

    accel.wait_for_everyone()
    os.makedirs(a.out, exist_ok=True)
    unwrapped = accel.unwrap_model(model)
    unwrapped.save_pretrained(a.out, is_main_process=accel.is_main_process,
                              save_function=accel.save, state_dict=accel.get_state_dict(model),
                              safe_serialization=True)
    if accel.is_main_process:
        tok.save_pretrained(a.out)


if __name__ == "__main__":
    main()
