#!/usr/bin/env python3
"""ProD's GPU run: LoRA ProD-SFT and SFT w/o lemma proposal on the whole SFT data, then the
test trees of Algorithm 1 for every test theorem, in one call of at most 64 MiB in and out.

Subcommands:
  pack    (here) the model folder, the SFT examples and the test prompts into pack folders
          (python/device/pack.py); `scripts/device/prepare.sh` runs it.
  stage   (GPU call A) checks the weight part that call carried and the GPU's Python; the part
          stays in the repository root while the machine is warm.
  run     (GPU call B) rebuilds the model from all parts (SHA-256 checked, bit for bit prod's
          weights), trains a LoRA adapter per SFT set under a time budget, samples the trees,
          writes OUT/<name>/{adapter_config.json, adapter_model.safetensors, trees.jsonl},
          OUT/summary.json.
  lemmas  reads JSON strings on stdin, prints each one's proposed lemmas (or null): prod's
          tests compare it with prod's own parser.

Only torch, numpy, safetensors and tokenizers are needed (no transformers, no peft).
Commands and sizes: docs/models.md ("SFT on the GPU machine").
"""
import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pack  # noqa: E402
import trees  # noqa: E402

T_START = time.time()


def log(msg):
    print(f"[{time.time() - T_START:7.1f}s] {msg}", flush=True)


def cmd_pack(a):
    dirs = a.out
    pack.pack(a.model, a.sft, a.wl, a.prompts, dirs, a.first_part_mib, log=log)
    return 0


def _versions():
    import numpy
    v = {"python": sys.version.split()[0], "numpy": numpy.__version__}
    try:
        import torch
        v["torch"] = torch.__version__
        v["cuda"] = torch.cuda.is_available()
        if v["cuda"]:
            v["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        v["torch"] = None
    for m in ("tokenizers", "safetensors"):
        try:
            v[m] = __import__(m).__version__
        except ImportError:
            v[m] = None
    return v


def cmd_stage(a):
    m = pack.find_manifest(a.parts)
    which = a.folder
    n = pack.check_parts(a.parts, m, which)
    v = _versions()
    log(f"stage: pack folder {which}: {n / 2**20:.1f} MiB of weights present and intact; {json.dumps(v)}")
    missing = [k for k in ("torch", "tokenizers", "safetensors") if not v.get(k)]
    if missing:
        log(f"stage: missing Python packages: {', '.join(missing)} (carry them as wheels)")
        return 2
    if a.require_cuda and not v.get("cuda"):
        log("stage: torch sees no GPU")
        return 2
    import torch

    import llama
    dev = "cuda" if v.get("cuda") else "cpu"
    try:
        log(f"stage: self-test on {dev}, f32: {llama.selftest(dev)}")
        if dev == "cuda":
            log(f"stage: self-test on {dev}, bf16: {llama.selftest(dev, torch.bfloat16)}")
    except AssertionError as e:
        log(f"stage: self-test failed: {e}; run call B with --attention manual")
        return 4
    return 0


def _load_tokenizer(mdir):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(mdir, "tokenizer.json"))
    # prod adds its special tokens when a tokenizer lacks them; the packed folder has them.
    ids = {t: tok.token_to_id(t) for t in trees.SPECIAL_TOKENS}
    missing = [t for t, i in ids.items() if i is None]
    if missing:
        raise pack.PackError(f"tokenizer.json lacks ProD's special tokens {missing}")
    return tok, ids


def _end_id(config, tok):
    e = config.get("eos_token_id")
    if isinstance(e, list):
        e = e[0] if e else None
    if e is None:
        raise pack.PackError("config.json has no eos_token_id (prod writes the end token there)")
    return int(e)


def cmd_run(a):
    import numpy as np
    import torch

    import llama
    import sft

    deadline = T_START + a.budget_s
    try:
        m = pack.find_manifest(a.parts)
        pack.check_parts(a.parts, m)
    except pack.PackError as e:
        log(f"run: {e}")
        log("run: the weights travel in several calls; if the machine went back between them, "
            "run call A again and call B at once")
        return 3
    dev = "cuda" if (a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())) else "cpu"
    llama.use_sdpa(a.attention == "auto")
    torch.manual_seed(a.seed)
    weights = pack.load_weights(a.parts, m)
    log(f"run: weights rebuilt and checked ({len(weights)} tensors); device {dev}; {json.dumps(_versions())}")
    arrays = pack.load_data(a.parts, m)
    mdir = pack.model_dir(a.parts, m)
    tok, special = _load_tokenizer(mdir)
    config = m["config"]
    end_id = _end_id(config, tok)
    model = llama.Llama(config, weights, device=dev)
    del weights
    if dev == "cuda" and a.dtype == "bf16":
        model.act_dtype = torch.bfloat16

    def autocast():
        if dev == "cuda" and a.dtype == "bf16":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return torch.autocast("cpu", enabled=False)

    # The prompts: prod's context ids, and the statement ids checked against this tokenizer.
    thms = m["data"]["theorems"]
    ctx_len = arrays["prompts.context_lengths"].astype("int64")
    ctx = arrays["prompts.context_ids"]
    st_len = arrays["prompts.statement_lengths"].astype("int64")
    st = arrays["prompts.statement_ids"]
    cs, ss = ctx_len.cumsum() - ctx_len, st_len.cumsum() - st_len
    context_ids = [ctx[s:s + n].astype("int64").tolist() for s, n in zip(cs, ctx_len)]
    encode = lambda text: tok.encode(text, add_special_tokens=False).ids  # noqa: E731
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    bad = [th["theorem"] for th, s, n in zip(thms, ss, st_len)
           if encode(trees.statement_part(th["statement"])) != st[s:s + n].astype("int64").tolist()]
    if bad:
        log(f"run: this tokenizer ({json.dumps(_versions())}) encodes {len(bad)} statements unlike prod "
            f"(first: {bad[0]}); refusing to sample with prompts prod would not build")
        return 2
    if a.limit_theorems:
        thms, context_ids = thms[:a.limit_theorems], context_ids[:a.limit_theorems]

    models = [x for x in a.models.split(",") if x]
    names = {"prod-sft": ("sft", "ProD-SFT"), "sft-wl": ("wl", "SFT w/o lemma proposal")}
    for x in models:
        if x not in names or f"{names[x][0]}.ids" not in arrays:
            log(f"run: no SFT set for model {x!r} in the pack (known: prod-sft, sft-wl)")
            return 2
    os.makedirs(a.out, exist_ok=True)
    args = {k: v for k, v in vars(a).items() if not callable(v)}
    summary = {"versions": _versions(), "device": dev, "args": args, "pack": m["data"]["sets"],
               "theorems": len(thms), "models": {}}
    special_ids = sorted(special.values())
    gen = torch.Generator(device=dev)
    for k, name in enumerate(models):
        prefix, label = names[name]
        left = len(models) - k
        now = time.time()
        # This model's share of what is left; sampling keeps `sample_share` of it.
        share = (deadline - now) / left
        train_deadline = now + share * (1 - a.sample_share)
        ex = sft.Examples(arrays, prefix, a.limit_examples)
        saved_adapter = os.path.join(a.from_state, name) if a.from_state else None
        if saved_adapter:
            # A later call on the warm machine: the adapter trained before, sampled again.
            model.load_adapter(saved_adapter)
            tr = {"steps": 0, "from": saved_adapter}
            share = (deadline - now) / left
            log(f"run: {label}: adapter from {saved_adapter}, no training")
        else:
            log(f"run: {label}: {len(ex)} examples, training until +{train_deadline - T_START:.0f}s")
            model.add_adapters(a.rank, a.alpha, special_ids, seed=a.seed + k)
            model.train()
            tr = sft.train(model, ex, lr=a.lr, epochs=a.epochs, macro_batch=a.macro_batch,
                           micro_tokens=a.micro_tokens, warmup=a.warmup, clip=1.0, deadline=train_deadline,
                           device=dev, autocast=autocast, seed=a.seed + k, log=log)
            log(f"run: {label}: {tr['steps']} steps ({tr['epochs_done']:.2f} epochs, stopped: {tr['stopped']}), "
                f"{tr['tokens_per_s']:.0f} tokens/s")
        model.eval()
        adapter_dtype = torch.bfloat16 if a.adapter_dtype == "bf16" else torch.float32
        if not saved_adapter:
            model.round_adapters(adapter_dtype)
        out = os.path.join(a.out, name)
        if saved_adapter:
            os.makedirs(out, exist_ok=True)
            for f in ("adapter_config.json", "adapter_model.safetensors"):
                shutil.copyfile(os.path.join(saved_adapter, f), os.path.join(out, f))
        else:
            model.save_adapter(out, dtype=adapter_dtype, base_name=a.base_name)
        if a.state and not saved_adapter:
            model.save_adapter(os.path.join(a.state, name), dtype=adapter_dtype, base_name=a.base_name)
        # A probe: f32 logits of the trained model on the first example's first tokens, which
        # `prod model merge-lora`'s result must reproduce.
        probe_ids = ex.seqs[0][:a.probe_tokens].tolist()
        with torch.no_grad():
            saved = model.act_dtype
            model.act_dtype = None
            logits = model.full_logits(torch.tensor([probe_ids], device=dev))[0]
            model.act_dtype = saved
        probe = {"ids": probe_ids, "logits": logits.cpu().tolist() if a.probe_full else None,
                 "last": logits[-1].cpu().tolist(),
                 "argmax": logits.argmax(-1).cpu().tolist()}
        gen.manual_seed(trees.stream(a.seed, a.first_tree))
        sample_deadline = now + share

        def sampler(prompts, forced):
            t0 = None if forced or a.first_token == "free" else [special["<use_invoke>"], special["<no_invoke>"]]
            with autocast():
                return llama.sample(model, prompts, end_id=end_id, temperature=a.temperature, top_p=a.top_p,
                                    max_new_tokens=a.max_new_tokens, first_allowed=t0, generator=gen,
                                    rows=a.rows, deadline=sample_deadline, clock=time.time)
        ts = time.time()
        nodes, done = trees.generate(thms, context_ids, encode, decode, sampler, samples=a.samples,
                                     depth=a.depth, group=a.tree_group, first=a.first_tree,
                                     ids={"use_invoke": special["<use_invoke>"], "no_invoke": special["<no_invoke>"]},
                                     log=log)
        kept = max(0, done - a.first_tree)
        with open(os.path.join(out, "adapter_model.safetensors"), "rb") as f:
            adapter_sha256 = pack.sha256(f.read())
        header = {"model": label, "adapter": f"{name}/adapter_model.safetensors",
                  "adapter_sha256": adapter_sha256, "split": a.split,
                  "theorems": len(thms), "samples": kept, "first_tree": a.first_tree, "depth": a.depth, "temperature": a.temperature,
                  "top_p": a.top_p, "max_new_tokens": a.max_new_tokens, "first_token": a.first_token,
                  "seed": a.seed, "pack_sha256": m["weights"]["sha256"], "data_sha256": m["data"]["sha256"],
                  "sampler": f"python/device/prod_device.py on {dev} (torch {torch.__version__})"}
        trees.write(os.path.join(out, "trees.jsonl"), header, nodes)
        gen_tokens = sum(n["tokens"] for n in nodes)
        el = time.time() - ts
        log(f"run: {label}: {kept} trees per theorem (from tree {a.first_tree}), {len(nodes)} nodes, {gen_tokens} tokens in {el:.0f}s")
        summary["models"][name] = {"label": label, "train": tr, "probe": probe, "trees": kept, "nodes": len(nodes),
                                   "sample_seconds": el, "generated_tokens": gen_tokens,
                                   "use_invoke_roots": sum(1 for n in nodes if n["depth"] == 0 and n["t0"] == "use_invoke"),
                                   "roots": sum(1 for n in nodes if n["depth"] == 0)}
        model.drop_adapters()
        summary["seconds"] = time.time() - T_START
        with open(os.path.join(a.out, "summary.json.tmp"), "w") as f:
            json.dump(summary, f)
        os.replace(os.path.join(a.out, "summary.json.tmp"), os.path.join(a.out, "summary.json"))
    log(f"run: done in {time.time() - T_START:.0f}s")
    return 0


def cmd_merge(a):
    """Joins trees files of one adapter sampled in several calls (`run --first-tree`) into one
    file with trees 0..n-1, refusing files that differ in anything but their seed or that leave a
    gap or an overlap."""
    try:
        merged = trees.merge([trees.read(p) for p in a.files])
    except trees.TreesError as e:
        log(f"merge: {e}")
        return 2
    header, nodes = merged
    trees.write(a.out, header, nodes)
    log(f"merge: {len(a.files)} files, {header['samples']} trees per theorem, {len(nodes)} nodes → {a.out}")
    return 0


def cmd_lemmas(_a):
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(trees.parse_lemmas(json.loads(line))))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="pack a model folder and data (here)")
    p.add_argument("--model", required=True, help="prod model folder (config.json, model.safetensors, tokenizer.json)")
    p.add_argument("--sft", help="`prod train sft --write-examples` file of sft.jsonl (ProD-SFT)")
    p.add_argument("--wl", help="the same of train_wl.jsonl (SFT w/o lemma proposal)")
    p.add_argument("--prompts", help="`prod model prompts` file of the test split")
    p.add_argument("--first-part-mib", type=float, default=52.0,
                   help="MiB of weights in each pack folder but the last (each folder travels in its own call)")
    p.add_argument("--out", nargs="+", required=True, help="pack folders, in call order")
    p.set_defaults(fn=cmd_pack)
    p = sub.add_parser("stage", help="check one call's pack folder (call A)")
    p.add_argument("--parts", nargs="+", required=True)
    p.add_argument("--folder", type=int, default=0, help="which pack folder this call carried")
    p.add_argument("--require-cuda", action="store_true")
    p.set_defaults(fn=cmd_stage)
    p = sub.add_parser("run", help="train and sample (call B)")
    p.add_argument("--parts", nargs="+", required=True, help="every pack folder (earlier calls' too)")
    p.add_argument("--out", required=True)
    p.add_argument("--state", help="also keep the adapters here (a later call on the warm machine)")
    p.add_argument("--from-state", help="sample with the adapters an earlier call kept here (--state); no training")
    p.add_argument("--budget-s", type=float, default=480.0, help="seconds for the whole run (from its start)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--dtype", choices=["bf16", "f32"], default="bf16", help="compute dtype on a GPU")
    p.add_argument("--attention", choices=["auto", "manual"], default="auto",
                   help="manual: never torch's fused attention (if call A's self-test failed)")
    p.add_argument("--models", default="prod-sft,sft-wl")
    p.add_argument("--epochs", type=int, default=2, help="paper: 2")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--macro-batch", type=int, default=64)
    p.add_argument("--micro-tokens", type=int, default=32768, help="padded tokens per forward pass")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--alpha", type=float, default=32.0)
    p.add_argument("--adapter-dtype", choices=["bf16", "f32"], default="bf16",
                   help="saved (and sampled) adapter precision; bf16 keeps r=16 on SmolLM2 under 10 MB")
    p.add_argument("--sample-share", type=float, default=0.3, help="share of each model's time kept for sampling")
    p.add_argument("--samples", type=int, default=8, help="n: trees per theorem")
    p.add_argument("--first-tree", type=int, default=0,
                   help="sample trees first-tree..samples-1 only (a later call adds trees; `merge` joins the files)")
    p.add_argument("--depth", type=int, default=2, help="paper: 2")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--first-token", choices=["free", "t0"], default="free",
                   help="as prod eval's --first-token")
    p.add_argument("--rows", type=int, default=512, help="samples decoded together")
    p.add_argument("--tree-group", type=int, default=4, help="trees sampled together (a deadline keeps whole groups)")
    p.add_argument("--split", default="test")
    p.add_argument("--base-name", default="smollm2-135m")
    p.add_argument("--limit-theorems", type=int)
    p.add_argument("--limit-examples", type=int)
    p.add_argument("--probe-tokens", type=int, default=48)
    p.add_argument("--probe-full", action="store_true", help="every position's logits in the probe")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("merge", help="join trees files of one adapter sampled in several calls (here)")
    p.add_argument("files", nargs="+", help="trees.jsonl files, in tree order")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_merge)
    p = sub.add_parser("lemmas", help="proposed lemmas of JSON strings on stdin")
    p.set_defaults(fn=cmd_lemmas)
    a = ap.parse_args()
    try:
        sys.exit(a.fn(a))
    except pack.PackError as e:
        log(f"{a.cmd}: {e}")
        sys.exit(2)


if __name__ == "__main__":
    main()
