"""LoRA SFT with prod's weighted loss, under a time budget.

The loss is prod's (crates/prod-policy/src/train.rs, python/train_weighted.py): the weighted
sum of the completion tokens' negative log-likelihoods divided by the macro batch's completion
tokens; AdamW (0.9, 0.999, eps 1e-8, no weight decay), global-norm clipping at 1.0, linear
warm-up then a constant rate. Only the adapters train (LoRA matrices and the special-token
rows). Each epoch is shuffled; a macro batch is cut into micro-batches of at most
`micro_tokens` padded tokens (its examples sorted by length first, so little is padding); the
head is applied only at the positions that carry loss. Training stops at the end of the last
epoch or when the next step would pass the deadline.
"""
import math
import time

import torch
import torch.nn.functional as F


class Examples:
    """SFT examples from the pack's flat arrays."""

    def __init__(self, arrays, prefix, limit=None):
        ids = arrays[f"{prefix}.ids"]
        lens = arrays[f"{prefix}.lengths"].astype("int64")
        starts = lens.cumsum() - lens
        n = len(lens) if limit is None else min(limit, len(lens))
        self.seqs = [ids[s:s + l].astype("int64") for s, l in zip(starts[:n], lens[:n])]
        self.loss_from = arrays[f"{prefix}.loss_from"][:n].astype("int64").tolist()
        self.weight = arrays[f"{prefix}.weight"][:n].astype("float32").tolist()

    def __len__(self):
        return len(self.seqs)

    def target_tokens(self, i):
        return len(self.seqs[i]) - self.loss_from[i]


def micro_batches(ex, idx, micro_tokens):
    idx = sorted(idx, key=lambda i: len(ex.seqs[i]))
    out, cur, longest = [], [], 0
    for i in idx:
        n = len(ex.seqs[i])
        if cur and max(longest, n) * (len(cur) + 1) > micro_tokens:
            out.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        out.append(cur)
    return out


def batch_loss_sum(model, ex, chunk, device, autocast):
    """Σ w · (−log p) over the chunk's completion tokens (a differentiable scalar)."""
    t = max(len(ex.seqs[i]) for i in chunk)
    ids = torch.zeros(len(chunk), t, dtype=torch.long)
    rows, cols, w = [], [], []
    for r, i in enumerate(chunk):
        s = ex.seqs[i]
        ids[r, :len(s)] = torch.from_numpy(s)
        # Position p predicts token p + 1: positions loss_from-1 .. len-2.
        for p in range(ex.loss_from[i] - 1, len(s) - 1):
            rows.append(r)
            cols.append(p)
        w += [ex.weight[i]] * (len(s) - ex.loss_from[i])
    ids = ids.to(device)
    rows = torch.tensor(rows, device=device)
    cols = torch.tensor(cols, device=device)
    w = torch.tensor(w, device=device)
    with autocast():
        h = model.hidden(ids)  # right-padded: causal attention alone keeps pads out
        logits = model.logits(h[rows, cols])
    nll = F.cross_entropy(logits, ids[rows, cols + 1], reduction="none")
    return (nll * w).sum()


def train(model, ex, *, lr, epochs, macro_batch, micro_tokens, warmup, clip, deadline, device, autocast,
          seed=0, log=print):
    """Trains the model's adapters in place; returns a summary (steps, epochs done, losses,
    tokens per second)."""
    params = model.adapter_parameters()
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    g = torch.Generator()
    g.manual_seed(seed)
    steps_per_epoch = math.ceil(len(ex) / macro_batch)
    total = steps_per_epoch * epochs
    losses, step, tokens, t0 = [], 0, 0, time.time()
    step_time = 0.0
    stopped = "epochs"
    for epoch in range(epochs):
        perm = torch.randperm(len(ex), generator=g).tolist()
        for m in range(0, len(perm), macro_batch):
            if step_time and time.time() + step_time > deadline:
                stopped = "deadline"
                break
            ts = time.time()
            macro = perm[m:m + macro_batch]
            denom = float(sum(ex.target_tokens(i) for i in macro))
            live = [i for i in macro if ex.weight[i] != 0.0 and ex.target_tokens(i) > 0]
            for group in opt.param_groups:
                group["lr"] = lr if warmup == 0 or step >= warmup else lr * (step + 1) / warmup
            opt.zero_grad(set_to_none=True)
            total_loss = 0.0
            for chunk in micro_batches(ex, live, micro_tokens):
                loss = batch_loss_sum(model, ex, chunk, device, autocast) / denom
                loss.backward()
                total_loss += float(loss.detach())
                tokens += sum(len(ex.seqs[i]) for i in chunk)
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            step += 1
            losses.append(total_loss)
            step_time = max(step_time * 0.8 + (time.time() - ts) * 0.2, time.time() - ts) if step > 1 else time.time() - ts
            if step % 10 == 0 or step == 1 or step == total:
                el = time.time() - t0
                log(f"sft: step {step}/{total} (epoch {epoch + 1}), loss {total_loss:.4f}, "
                    f"{tokens / max(el, 1e-9):.0f} tokens/s")
        if stopped == "deadline":
            break
    el = time.time() - t0
    return {"steps": step, "planned_steps": total, "epochs_done": step / steps_per_epoch if steps_per_epoch else 0.0,
            "stopped": stopped, "losses": losses, "seconds": el, "tokens": tokens,
            "tokens_per_s": tokens / el if el > 0 else 0.0}
