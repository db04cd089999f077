"""A Llama in plain PyTorch with LoRA adapters and ProD's trainable special-token rows, for SFT
and batched sampling on a GPU (and on a CPU in prod's tests).

Why not `transformers`: the GPU machine has transformers 5.x and the CPU test machine 4.44;
their APIs (configs, caches, generation) differ, and a run on the GPU cannot be repeated if it
breaks. This model is the same computation as prod's native Llama and transformers'
LlamaForCausalLM (RMSNorm in f32, half-split RoPE, grouped-query attention, SwiGLU, tied or
untied head); prod's tests compare its logits with prod's. It needs only `torch` (1.13 or 2.x):
`scaled_dot_product_attention` where torch has it, the same attention written out otherwise.

LoRA (Hu et al., 2021) as PEFT defines it: `W x + (alpha / r) B A x` on the chosen projections,
A initialised Kaiming-uniform and B zero. The rows of ProD's six special tokens, which prod
appended to the pretrained vocabulary as mean rows, are trainable too (PEFT's
`trainable_token_indices`): with a tied head, six identical rows would give the six tokens the
same logit forever, and the model could never choose `<use_invoke>` over `<no_invoke>`. An
untied head gets a LoRA pair of its own instead (PEFT's trainable tokens cover embeddings only).
`save_adapter` writes PEFT's layout, which `prod model merge-lora` and `peft` both read.
"""
import json
import math
import os

import torch
import torch.nn.functional as F

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
_HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def use_sdpa(on):
    """Attention through torch's fused `scaled_dot_product_attention` (where torch has it) or
    written out (`on=False`): the same numbers, the written-out one slower."""
    global _HAS_SDPA
    _HAS_SDPA = bool(on) and hasattr(F, "scaled_dot_product_attention")


class Config:
    def __init__(self, c):
        self.vocab = int(c["vocab_size"])
        self.d = int(c["hidden_size"])
        self.ff = int(c["intermediate_size"])
        self.layers = int(c["num_hidden_layers"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        self.hd = self.d // self.heads
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.theta = float(c.get("rope_theta", 10000.0))
        self.max_pos = int(c.get("max_position_embeddings", 2048))
        self.tied = bool(c.get("tie_word_embeddings", False))
        if c.get("rope_scaling") or c.get("attention_bias") or c.get("mlp_bias"):
            raise ValueError("config.json: rope_scaling and biases are not supported (nor by prod)")


class LoraLinear(torch.nn.Module):
    """`x Wᵀ (+ scale · x Aᵀ Bᵀ)`; W frozen."""

    def __init__(self, weight):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.lora_A = None
        self.lora_B = None
        self.scale = 0.0

    def add_lora(self, r, alpha, generator=None):
        out_f, in_f = self.weight.shape
        a = torch.empty(r, in_f, device=self.weight.device, dtype=torch.float32)
        # PEFT's default: kaiming_uniform_(a=sqrt(5)) on A, zeros on B.
        bound = 1.0 / math.sqrt(in_f)
        a.uniform_(-bound, bound, generator=generator)
        self.lora_A = torch.nn.Parameter(a)
        self.lora_B = torch.nn.Parameter(torch.zeros(out_f, r, device=self.weight.device))
        self.scale = alpha / r

    def drop_lora(self):
        self.lora_A = self.lora_B = None
        self.scale = 0.0

    def forward(self, x):
        y = F.linear(x, self.weight.to(x.dtype) if x.dtype != self.weight.dtype else self.weight)
        if self.lora_A is not None:
            y = y + F.linear(F.linear(x, self.lora_A.to(x.dtype)), self.lora_B.to(x.dtype)) * self.scale
        return y


def rms_norm(x, w, eps):
    dt = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return w * x.to(dt) if w.dtype == dt else (w.float() * x).to(dt)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Llama(torch.nn.Module):
    def __init__(self, config, tensors, device="cpu"):
        """`tensors`: {Hugging Face name: f32 array or tensor} (a model folder's weights)."""
        super().__init__()
        c = self.cfg = Config(config)
        t = {k: torch.as_tensor(v, dtype=torch.float32).to(device) for k, v in tensors.items()}

        def take(name):
            if name not in t:
                raise ValueError(f"missing parameter {name}")
            return t.pop(name)

        self.embed = torch.nn.Parameter(take("model.embed_tokens.weight"), requires_grad=False)
        if self.embed.shape[0] != c.vocab:
            c.vocab = self.embed.shape[0]
        self.layers = torch.nn.ModuleList()
        for i in range(c.layers):
            p = f"model.layers.{i}."
            layer = torch.nn.Module()
            layer.ln1 = torch.nn.Parameter(take(p + "input_layernorm.weight"), requires_grad=False)
            layer.ln2 = torch.nn.Parameter(take(p + "post_attention_layernorm.weight"), requires_grad=False)
            for n in ["q_proj", "k_proj", "v_proj", "o_proj"]:
                setattr(layer, n, LoraLinear(take(p + "self_attn." + n + ".weight")))
            for n in ["gate_proj", "up_proj", "down_proj"]:
                setattr(layer, n, LoraLinear(take(p + "mlp." + n + ".weight")))
            self.layers.append(layer)
        self.norm = torch.nn.Parameter(take("model.norm.weight"), requires_grad=False)
        self.lm_head = None if c.tied else LoraLinear(take("lm_head.weight"))
        inv = 1.0 / (c.theta ** (torch.arange(0, c.hd, 2, dtype=torch.int64).float() / c.hd))
        self.register_buffer("inv_freq", inv.to(device), persistent=False)
        self.special_ids = None
        self.special_rows = None
        # Attention inputs and the KV cache in this dtype (bf16 on a GPU); None: f32.
        self.act_dtype = None

    # --- adapters -------------------------------------------------------------------------
    def add_adapters(self, r, alpha, special_ids, seed=0):
        g = torch.Generator(device=self.embed.device)
        g.manual_seed(seed)
        self.lora = {"r": r, "alpha": alpha}
        for layer in self.layers:
            for n in TARGETS:
                getattr(layer, n).add_lora(r, alpha, g)
        if self.lm_head is not None:
            self.lm_head.add_lora(r, alpha, g)
        ids = torch.tensor(sorted(special_ids), dtype=torch.long, device=self.embed.device)
        self.special_ids = ids
        self.special_rows = torch.nn.Parameter(self.embed.detach()[ids].clone())

    def drop_adapters(self):
        for layer in self.layers:
            for n in TARGETS:
                getattr(layer, n).drop_lora()
        if self.lm_head is not None:
            self.lm_head.drop_lora()
        self.special_ids = self.special_rows = None

    def adapter_parameters(self):
        ps = []
        for m in self._lora_modules():
            if m.lora_A is not None:
                ps += [m.lora_A, m.lora_B]
        if self.special_rows is not None:
            ps.append(self.special_rows)
        return ps

    def _lora_modules(self):
        for layer in self.layers:
            for n in TARGETS:
                yield getattr(layer, n)
        if self.lm_head is not None:
            yield self.lm_head

    def round_adapters(self, dtype):
        """Rounds every adapter weight to `dtype` (kept in f32): what is sampled with is then
        exactly what is saved."""
        with torch.no_grad():
            for p in self.adapter_parameters():
                p.copy_(p.to(dtype).float())

    def load_adapter(self, adapter_dir):
        """Puts an adapter written by `save_adapter` (PEFT's layout) into the model's adapter
        slots (`add_adapters` with its r, alpha and token ids first)."""
        from safetensors.torch import load_file
        with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
            cfg = json.load(f)
        t = load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
        ids = cfg["trainable_token_indices"]["embed_tokens"]
        self.add_adapters(int(cfg["r"]), float(cfg["lora_alpha"]), ids)
        with torch.no_grad():
            for i, layer in enumerate(self.layers):
                for n in TARGETS:
                    kind = "self_attn" if n in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
                    p = f"base_model.model.model.layers.{i}.{kind}.{n}"
                    m = getattr(layer, n)
                    m.lora_A.copy_(t[p + ".lora_A.weight"].float())
                    m.lora_B.copy_(t[p + ".lora_B.weight"].float())
            if self.lm_head is not None:
                self.lm_head.lora_A.copy_(t["base_model.model.lm_head.lora_A.weight"].float())
                self.lm_head.lora_B.copy_(t["base_model.model.lm_head.lora_B.weight"].float())
            self.special_rows.copy_(t["base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta"].float())

    def embedding(self):
        if self.special_rows is None:
            return self.embed
        return self.embed.index_copy(0, self.special_ids, self.special_rows)


    def save_adapter(self, out_dir, dtype=torch.bfloat16, base_name=""):
        """PEFT's adapter layout: adapter_config.json + adapter_model.safetensors."""
        from safetensors.torch import save_file
        tensors = {}
        for i, layer in enumerate(self.layers):
            for n in TARGETS:
                m = getattr(layer, n)
                if m.lora_A is None:
                    continue
                kind = "self_attn" if n in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
                p = f"base_model.model.model.layers.{i}.{kind}.{n}"
                tensors[p + ".lora_A.weight"] = m.lora_A.detach().to(dtype).cpu().contiguous()
                tensors[p + ".lora_B.weight"] = m.lora_B.detach().to(dtype).cpu().contiguous()
        targets = list(TARGETS)
        if self.lm_head is not None and self.lm_head.lora_A is not None:
            tensors["base_model.model.lm_head.lora_A.weight"] = self.lm_head.lora_A.detach().to(dtype).cpu().contiguous()
            tensors["base_model.model.lm_head.lora_B.weight"] = self.lm_head.lora_B.detach().to(dtype).cpu().contiguous()
            targets.append("lm_head")
        tti = {"embed_tokens": [int(x) for x in self.special_ids.tolist()]}
        tensors["base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta"] = \
            self.special_rows.detach().to(dtype).cpu().contiguous()
        config = {
            "peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_name,
            "r": self.lora["r"], "lora_alpha": self.lora["alpha"], "lora_dropout": 0.0,
            "target_modules": targets, "bias": "none", "fan_in_fan_out": False, "use_rslora": False,
            "use_dora": False, "modules_to_save": None, "init_lora_weights": True,
            "inference_mode": True, "layers_to_transform": None, "layers_pattern": None,
            "rank_pattern": {}, "alpha_pattern": {}, "trainable_token_indices": tti,
        }
        os.makedirs(out_dir, exist_ok=True)
        tmp = os.path.join(out_dir, "adapter_model.safetensors.tmp")
        save_file(tensors, tmp, metadata={"format": "pt"})
        os.replace(tmp, os.path.join(out_dir, "adapter_model.safetensors"))
        tmp = os.path.join(out_dir, "adapter_config.json.tmp")
        with open(tmp, "w") as f:
            json.dump(config, f, indent=2)
        os.replace(tmp, os.path.join(out_dir, "adapter_config.json"))

    # --- forward ----------------------------------------------------------------------------
    def _rope(self, pos):
        """cos, sin for positions `pos` [B, L] → [B, 1, L, hd] (f32)."""
        f = pos.float()[..., None] * self.inv_freq
        emb = torch.cat((f, f), dim=-1)
        return emb.cos()[:, None], emb.sin()[:, None]

    def _attend(self, q, k, v, mask, causal):
        """q [B, H, Lq, hd], k/v [B, KV, Lk, hd]; mask bool [B, 1, Lq, Lk] (True: attend) or
        None with `causal` (right-padded training batches need no more)."""
        c = self.cfg
        g = c.heads // c.kv_heads
        if g > 1:
            k = k.repeat_interleave(g, dim=1)
            v = v.repeat_interleave(g, dim=1)
        if _HAS_SDPA:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
        s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(c.hd)
        if mask is None and causal:
            lq, lk = s.shape[-2], s.shape[-1]
            mask = torch.ones(lq, lk, dtype=torch.bool, device=s.device).tril(lk - lq)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return (s.softmax(-1) @ v.float()).to(q.dtype)

    def _layer(self, layer, x, cos, sin, mask, causal, cache=None, at=None):
        c = self.cfg
        b, l, _ = x.shape
        h = rms_norm(x, layer.ln1, c.eps)
        q = layer.q_proj(h).view(b, l, c.heads, c.hd).transpose(1, 2)
        k = layer.k_proj(h).view(b, l, c.kv_heads, c.hd).transpose(1, 2)
        v = layer.v_proj(h).view(b, l, c.kv_heads, c.hd).transpose(1, 2)
        dt = self.act_dtype or torch.float32
        q = (q.float() * cos + rotate_half(q.float()) * sin).to(dt)
        k = (k.float() * cos + rotate_half(k.float()) * sin).to(dt)
        v = v.to(dt)
        if cache is not None:
            kc, vc = cache
            kc[:, :, at:at + l] = k
            vc[:, :, at:at + l] = v
            k, v = kc[:, :, :at + l], vc[:, :, :at + l]
        if cache is not None and l == 1:
            # Decoding: the query heads of one key/value head attend together, no copies.
            g = c.heads // c.kv_heads
            qg = q.reshape(b, c.kv_heads, g, c.hd)
            if _HAS_SDPA:
                o = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask)
            else:
                s = (qg.float() @ k.float().transpose(-1, -2)) / math.sqrt(c.hd)
                s = s.masked_fill(~mask, float("-inf"))
                o = (s.softmax(-1) @ v.float()).to(dt)
            o = o.reshape(b, c.heads, 1, c.hd)
        else:
            o = self._attend(q, k, v, mask, causal)
        x = x + layer.o_proj(o.transpose(1, 2).reshape(b, l, c.d))
        h = rms_norm(x, layer.ln2, c.eps)
        return x + layer.down_proj(F.silu(layer.gate_proj(h)) * layer.up_proj(h))

    def hidden(self, ids, pos=None, mask=None, causal=True, caches=None, at=0, dtype=None):
        """Final-norm hidden states [B, L, d]."""
        emb = self.embedding()
        x = F.embedding(ids, emb)
        if dtype is not None:
            x = x.to(dtype)
        if pos is None:
            pos = torch.arange(ids.shape[1], device=ids.device)[None].expand(ids.shape[0], -1)
        cos, sin = self._rope(pos)
        for i, layer in enumerate(self.layers):
            x = self._layer(layer, x, cos, sin, mask, causal, None if caches is None else caches[i], at)
        return rms_norm(x, self.norm, self.cfg.eps)

    def logits(self, h):
        if self.lm_head is not None:
            return self.lm_head(h).float()
        w = self.embedding()
        return F.linear(h, w.to(h.dtype)).float()

    def full_logits(self, ids):
        """[B, L, vocab] f32 logits of right-padded `ids` (tests and probes)."""
        return self.logits(self.hidden(ids))


@torch.no_grad()
def sample(model, prompts, *, end_id, temperature, top_p=1.0, max_new_tokens=256, first_allowed=None,
           generator=None, rows=256, deadline=None, clock=None):
    """One sample per prompt (lists of token ids): the generated ids without the end token, and
    why each stopped ("end" or "length"). Prompts are decoded `rows` at a time, left-padded, with
    a KV cache; finished rows leave the batch. `first_allowed`: the first token is drawn only
    among these ids (their probabilities renormalised at the temperature). Returns None if
    `clock()` passes `deadline` first."""
    dev = model.embed.device
    c = model.cfg
    out = [None] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    for s in range(0, len(order), rows):
        if deadline is not None and clock() > deadline:
            return None
        chunk = order[s:s + rows]
        ps = [prompts[i] for i in chunk]
        res = _sample_batch(model, ps, end_id, temperature, top_p, max_new_tokens, first_allowed, generator,
                            deadline, clock)
        if res is None:
            return None
        for i, r in zip(chunk, res):
            out[i] = r
    return out


def _draw(logits, temperature, top_p, generator, allowed=None):
    if allowed is not None:
        keep = torch.full_like(logits, float("-inf"))
        keep[:, allowed] = 0.0
        logits = logits + keep
    if temperature <= 0:
        return logits.argmax(-1)
    p = (logits / temperature).softmax(-1)
    if top_p < 1.0:
        sp, si = p.sort(-1, descending=True)
        cut = sp.cumsum(-1) - sp > top_p
        sp = sp.masked_fill(cut, 0.0)
        p = torch.zeros_like(p).scatter(-1, si, sp)
    return torch.multinomial(p, 1, generator=generator).squeeze(-1)


def _sample_batch(model, prompts, end_id, temperature, top_p, max_new, first_allowed, generator, deadline, clock):
    dev = model.embed.device
    c = model.cfg
    b = len(prompts)
    lens = torch.tensor([len(p) for p in prompts], device=dev)
    L = int(lens.max())
    new = min(max_new, c.max_pos - L)
    if new <= 0:
        return [([], "length")] * b
    ids = torch.zeros(b, L, dtype=torch.long, device=dev)
    for r, p in enumerate(prompts):
        ids[r, L - len(p):] = torch.tensor(p, dtype=torch.long, device=dev)
    pad = L - lens
    ar = torch.arange(L, device=dev)
    valid = ar[None] >= pad[:, None]  # [b, L]
    pos = (ar[None] - pad[:, None]).clamp(min=0)
    causal = torch.ones(L, L, dtype=torch.bool, device=dev).tril()
    # Each query sees the valid keys before it, and itself (a pad row then attends to itself
    # alone, so no row is all masked).
    mask = (causal[None] & valid[:, None, :]) | torch.eye(L, dtype=torch.bool, device=dev)[None]
    dt = model.act_dtype or torch.float32
    T = L + new
    caches = [(torch.zeros(b, c.kv_heads, T, c.hd, dtype=dt, device=dev),
               torch.zeros(b, c.kv_heads, T, c.hd, dtype=dt, device=dev)) for _ in range(c.layers)]
    h = model.hidden(ids, pos=pos, mask=mask[:, None], causal=False, caches=caches, at=0)
    logits = model.logits(h[:, -1])
    allowed = None if first_allowed is None else torch.tensor(first_allowed, device=dev)
    tok = _draw(logits, temperature, top_p, generator, allowed)
    keyvalid = torch.cat([valid, torch.ones(b, new, dtype=torch.bool, device=dev)], 1)
    rows = torch.arange(b, device=dev)  # original row of each batch row
    alive = [True] * b
    gen = [[] for _ in range(b)]
    stop = ["length"] * b
    live_pos = lens.clone()
    for step in range(new):
        t_host = tok.tolist()
        rows_host = rows.tolist()
        for j, (r, t) in enumerate(zip(rows_host, t_host)):
            if not alive[j]:
                continue
            if t == end_id:
                stop[r] = "end"
                alive[j] = False
            else:
                gen[r].append(t)
        n_alive = sum(alive)
        if n_alive == 0 or step == new - 1:
            break
        if deadline is not None and clock() > deadline:
            return None
        if len(alive) - n_alive >= max(1, len(alive) // 4):
            # Finished rows leave the batch (copying the caches costs less than decoding them).
            k = torch.tensor([j for j, a in enumerate(alive) if a], device=dev)
            rows, tok, live_pos, keyvalid = rows[k], tok[k], live_pos[k], keyvalid[k]
            caches = [(kc[k], vc[k]) for kc, vc in caches]
            alive = [True] * len(k)
        at = L + step
        m = keyvalid[:, None, None, :at + 1]
        h = model.hidden(tok[:, None], pos=live_pos[:, None], mask=m, causal=False, caches=caches, at=at)
        live_pos = live_pos + 1
        tok = _draw(model.logits(h[:, -1]), temperature, top_p, generator)
    return [(g, s) for g, s in zip(gen, stop)]


@torch.no_grad()
def selftest(device, dtype=None):
    """A tiny random model on `device`: fused attention (if any) against the written-out one
    (training's causal path, prefill with padding, and cached decoding), and sampling with the
    cache against recomputing every prefix. Returns {"check": max difference / ok}; raises
    AssertionError when the paths disagree. Meant for a GPU machine before the real run."""
    global _HAS_SDPA
    g = torch.Generator()
    g.manual_seed(0)
    cfg = {"vocab_size": 96, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "max_position_embeddings": 256, "tie_word_embeddings": True}
    names = {"model.embed_tokens.weight": (96, 64), "model.norm.weight": (64,)}
    for i in range(2):
        p = f"model.layers.{i}."
        names.update({p + "input_layernorm.weight": (64,), p + "post_attention_layernorm.weight": (64,),
                      p + "self_attn.q_proj.weight": (64, 64), p + "self_attn.k_proj.weight": (32, 64),
                      p + "self_attn.v_proj.weight": (32, 64), p + "self_attn.o_proj.weight": (64, 64),
                      p + "mlp.gate_proj.weight": (96, 64), p + "mlp.up_proj.weight": (96, 64),
                      p + "mlp.down_proj.weight": (64, 96)})
    t = {k: (torch.ones(s) if len(s) == 1 else torch.randn(*s, generator=g) * 0.2) for k, s in names.items()}
    m = Llama(cfg, t, device=device)
    m.act_dtype = dtype
    ids = torch.randint(0, 96, (3, 40), generator=g).to(device)
    saved = _HAS_SDPA
    out = {}
    try:
        _HAS_SDPA = False
        ref = m.full_logits(ids)
        _HAS_SDPA = saved
        got = m.full_logits(ids)
        tol = 5e-2 if dtype is not None else 1e-4
        d = float((got - ref).abs().max())
        out["causal"] = d
        assert d < tol, f"fused causal attention differs by {d}"
        prompts = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]]
        res = {}
        for flag in (False, saved):
            _HAS_SDPA = flag
            res[flag] = sample(m, prompts, end_id=0, temperature=0.0, max_new_tokens=8, rows=4)
        _HAS_SDPA = saved
        recomputed = []
        for p in prompts:
            s, gen = list(p), []
            for _ in range(8):
                nxt = int(m.full_logits(torch.tensor([s], device=device))[0, -1].argmax())
                if nxt == 0:
                    break
                gen.append(nxt)
                s.append(nxt)
            recomputed.append(gen)
        if dtype is None:
            assert [r[0] for r in res[False]] == recomputed, "cached sampling differs from recomputing"
            assert [r[0] for r in res[saved]] == recomputed, "fused cached sampling differs from recomputing"
        out["sampling"] = "ok"
    finally:
        _HAS_SDPA = saved
    return out
