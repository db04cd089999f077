"""The compact, lossless form in which a prod model folder and the SFT data travel to a GPU
machine that can receive at most 64 MiB per call.

Why: SmolLM2-135M as prod uses it (`prod model import-gguf` of the Q4_1 GGUF) is 540 MB of f32
weights, and the GGUF itself is 93 MB; a GPU call takes at most 64 MiB. Every f32 weight that
prod imported from a Q4_1 block is `d * q + m` (f16 `d`, `m`, 4-bit `q`, blocks of 32), and
every one from a Q8_0 block (the embedding) `d * q` (8-bit `q`), so the folder's weights are
stored as such blocks again where that reproduces the f32 value bit for bit, and as raw f32
elsewhere (norms, the mean rows of ProD's special tokens). The result (about 5.7
bits per weight) is split into parts that travel in separate calls; the unpacker checks every
part's and every tensor's SHA-256, so the model rebuilt on the GPU is exactly prod's.

Data: SFT examples (prompt and completion token ids from `prod train sft --write-examples`) and
the test theorems' prompts (`prod model prompts`) as flat token arrays, xz-compressed.

Only numpy and the standard library: the same code packs here and unpacks there.
"""
import hashlib
import json
import lzma
import os
import struct

import numpy as np

FORMAT = "prod-device-pack"
VERSION = 1
BLOCK = 32
# Model-folder files that travel beside the weights (text; the tokenizer is the largest).
MODEL_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
               "prompt_template.json"]
_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64}


class PackError(Exception):
    """Input that cannot be packed or a pack that cannot be read: the message says what."""


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read_safetensors(path):
    """{name: f32 array} of a safetensors file (F32/F16/BF16/F64), read without the safetensors
    package."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise PackError(f"{path}: not a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise PackError(f"{path}: bad safetensors header ({e})")
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, shape, (a, b) = info["dtype"], info["shape"], info["data_offsets"]
        buf = raw[base + a:base + b]
        if dt == "BF16":
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        elif dt in _DTYPES:
            arr = np.frombuffer(buf, dtype=_DTYPES[dt]).astype(np.float32)
        else:
            raise PackError(f"{path}: tensor {name} has dtype {dt} (float tensors only)")
        out[name] = arr.reshape(shape)
    return out


def _q4_blocks(x):
    """For a [nb, 32] f32 array: (mask, d16, m16, q) where mask says which blocks are exactly
    `f32(d16) * q + f32(m16)` (f32 arithmetic, one rounding per operation, as prod's import
    computed them), with q in 0..15."""
    nb = x.shape[0]
    bits = x.view(np.uint32)
    m = x.min(axis=1)
    m16 = m.astype(np.float16)
    ok_m = m16.astype(np.float32).view(np.uint32) == m.view(np.uint32)
    span = (x.max(axis=1) - m) / np.float32(15)
    d0 = span.astype(np.float16)
    found = np.zeros(nb, dtype=bool)
    best_d = np.zeros(nb, dtype=np.float16)
    best_q = np.zeros((nb, BLOCK), dtype=np.uint8)
    # The f16 d of the block is the rounded span/15 or one of its neighbours.
    up, down = d0, d0
    cands = [d0]
    for _ in range(3):
        up = np.nextafter(up, np.float16(np.inf))
        down = np.nextafter(down, np.float16(-np.inf))
        cands += [up, down]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for d16 in cands:
            todo = ~found & ok_m & np.isfinite(d16)
            if not todo.any():
                break
            idx = np.nonzero(todo)[0]
            df = d16[idx].astype(np.float32)[:, None]
            mm = m[idx][:, None]
            q = np.rint((x[idx] - mm) / df)
            q = np.where(df == 0, 0, q)
            q = np.clip(np.nan_to_num(q, nan=0.0), 0, 15).astype(np.uint8)
            rec = q.astype(np.float32) * df + mm
            good = (rec.view(np.uint32) == bits[idx]).all(axis=1)
            gi = idx[good]
            found[gi] = True
            best_d[gi] = d16[gi]
            best_q[gi] = q[good]
    return found, best_d, m16, best_q


def _q8_blocks(x):
    """For a [nb, 32] f32 array: (mask, d16, q) where mask says which blocks are exactly
    `f32(d16) * q` with q in -128..127 (llama.cpp's Q8_0, as prod's import computed it)."""
    nb = x.shape[0]
    bits = x.view(np.uint32)
    d0 = (np.abs(x).max(axis=1) / np.float32(127)).astype(np.float16)
    found = np.zeros(nb, dtype=bool)
    best_d = np.zeros(nb, dtype=np.float16)
    best_q = np.zeros((nb, BLOCK), dtype=np.int8)
    up, down = d0, d0
    cands = [d0]
    for _ in range(3):
        up = np.nextafter(up, np.float16(np.inf))
        down = np.nextafter(down, np.float16(-np.inf))
        cands += [up, down]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for d16 in cands:
            todo = ~found & np.isfinite(d16)
            if not todo.any():
                break
            idx = np.nonzero(todo)[0]
            df = d16[idx].astype(np.float32)[:, None]
            q = np.rint(x[idx] / df)
            q = np.where(df == 0, 0, q)
            q = np.clip(np.nan_to_num(q, nan=0.0), -128, 127).astype(np.int8)
            rec = q.astype(np.float32) * df
            good = (rec.view(np.uint32) == bits[idx]).all(axis=1)
            gi = idx[good]
            found[gi] = True
            best_d[gi] = d16[gi]
            best_q[gi] = q[good]
    return found, best_d, best_q


def encode_tensor(t):
    """(bytes, info) of one f32 tensor: each block of 32 as Q4_1 or Q8_0 where that gives the
    f32 values back bit for bit, raw f32 otherwise."""
    t = np.ascontiguousarray(t, dtype=np.float32)
    info = {"shape": list(t.shape), "sha256": sha256(t.tobytes())}
    if t.ndim != 2 or t.shape[1] % BLOCK != 0 or t.size == 0:
        info.update(encoding="f32", q4_blocks=0, q8_blocks=0, raw_blocks=0)
        return t.tobytes(), info
    x = t.reshape(-1, BLOCK)
    m4, d4, mn4, q4 = _q4_blocks(x)
    rest = np.nonzero(~m4)[0]
    m8 = np.zeros(x.shape[0], dtype=bool)
    d8 = np.zeros(0, dtype=np.float16)
    q8 = np.zeros((0, BLOCK), dtype=np.int8)
    if rest.size:
        f8, dd, qq = _q8_blocks(x[rest])
        m8[rest[f8]] = True
        d8, q8 = dd[f8], qq[f8]
    raw = ~(m4 | m8)
    nibbles = (q4[m4][:, 0::2] | (q4[m4][:, 1::2] << 4)).astype(np.uint8)
    parts = [np.packbits(m4).tobytes(), np.packbits(m8).tobytes(), d4[m4].tobytes(), mn4[m4].tobytes(),
             nibbles.tobytes(), d8.tobytes(), q8.tobytes(), x[raw].tobytes()]
    info.update(encoding="blocks", q4_blocks=int(m4.sum()), q8_blocks=int(m8.sum()), raw_blocks=int(raw.sum()))
    return b"".join(parts), info


def decode_tensor(buf, info):
    """The f32 array `encode_tensor` encoded, checked against its SHA-256."""
    shape = info["shape"]
    n = int(np.prod(shape)) if shape else 1
    if info["encoding"] == "f32":
        t = np.frombuffer(buf, dtype=np.float32, count=n).copy()
    elif info["encoding"] == "blocks":
        nb = n // BLOCK
        mb = (nb + 7) // 8
        m4 = np.unpackbits(np.frombuffer(buf, dtype=np.uint8, count=mb))[:nb].astype(bool)
        m8 = np.unpackbits(np.frombuffer(buf, dtype=np.uint8, count=mb, offset=mb))[:nb].astype(bool)
        n4, n8 = int(m4.sum()), int(m8.sum())
        if (n4, n8) != (info["q4_blocks"], info["q8_blocks"]) or (m4 & m8).any():
            raise PackError(f"tensor {info['name']}: block masks disagree with the index")
        o = 2 * mb

        def take(dtype, count):
            nonlocal o
            a = np.frombuffer(buf, dtype=dtype, count=count, offset=o)
            o += a.nbytes
            return a

        d4 = take(np.float16, n4).astype(np.float32)
        mn4 = take(np.float16, n4).astype(np.float32)
        nib = take(np.uint8, n4 * BLOCK // 2).reshape(n4, BLOCK // 2)
        d8 = take(np.float16, n8).astype(np.float32)
        q8 = take(np.int8, n8 * BLOCK).reshape(n8, BLOCK)
        raw = take(np.float32, (nb - n4 - n8) * BLOCK).reshape(-1, BLOCK)
        q = np.empty((n4, BLOCK), dtype=np.float32)
        q[:, 0::2] = nib & 15
        q[:, 1::2] = nib >> 4
        x = np.empty((nb, BLOCK), dtype=np.float32)
        x[m4] = q * d4[:, None] + mn4[:, None]
        x[m8] = q8.astype(np.float32) * d8[:, None]
        x[~(m4 | m8)] = raw
        t = x.reshape(-1)
    else:
        raise PackError(f"tensor {info['name']}: unknown encoding {info['encoding']!r}")
    t = t.reshape(shape)
    if sha256(t.tobytes()) != info["sha256"]:
        raise PackError(f"tensor {info['name']}: rebuilt weights differ from the packed model (SHA-256)")
    return t


def _read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except ValueError as e:
                    raise PackError(f"{path}:{n}: not JSON ({e})")


def _ids(path, n, obj, key):
    v = obj.get(key)
    if not isinstance(v, list) or not all(isinstance(x, int) and x >= 0 for x in v):
        raise PackError(f"{path}:{n}: {key} must be a list of token ids")
    return v


def examples_arrays(path, vocab):
    """SFT examples (`prod train sft --write-examples` lines) as flat arrays: every id, each
    example's length and first loss position, and its weight."""
    ids, lens, loss_from, weights = [], [], [], []
    for n, e in _read_jsonl(path):
        p, c = _ids(path, n, e, "prompt_ids"), _ids(path, n, e, "completion_ids")
        if not p or not c:
            raise PackError(f"{path}:{n}: empty prompt_ids or completion_ids")
        if max(p + c) >= vocab:
            raise PackError(f"{path}:{n}: token id {max(p + c)} outside the model's vocabulary ({vocab})")
        ids.extend(p)
        ids.extend(c)
        lens.append(len(p) + len(c))
        loss_from.append(len(p))
        weights.append(float(e.get("weight", 1.0)))
    if not lens:
        raise PackError(f"{path}: no examples")
    return {"ids": np.asarray(ids, dtype=np.uint32), "lengths": np.asarray(lens, dtype=np.uint32),
            "loss_from": np.asarray(loss_from, dtype=np.uint32),
            "weight": np.asarray(weights, dtype=np.float32)}


def prompts_arrays(path, vocab):
    """The theorems of `prod model prompts`: their ids, statements and context keys (JSON) and
    the context and statement token ids (flat arrays)."""
    meta, ctx, ctx_len, st, st_len = [], [], [], [], []
    for n, p in _read_jsonl(path):
        for k in ("theorem", "statement", "context_key"):
            if not isinstance(p.get(k), str):
                raise PackError(f"{path}:{n}: {k} must be a string")
        c, s = _ids(path, n, p, "context_ids"), _ids(path, n, p, "statement_ids")
        if max(c + s, default=0) >= vocab:
            raise PackError(f"{path}:{n}: token id outside the model's vocabulary ({vocab})")
        meta.append({"theorem": p["theorem"], "statement": p["statement"], "context_key": p["context_key"]})
        ctx.extend(c)
        ctx_len.append(len(c))
        st.extend(s)
        st_len.append(len(s))
    if not meta:
        raise PackError(f"{path}: no theorems")
    return meta, {"context_ids": np.asarray(ctx, dtype=np.uint32), "context_lengths": np.asarray(ctx_len, dtype=np.uint32),
                  "statement_ids": np.asarray(st, dtype=np.uint32), "statement_lengths": np.asarray(st_len, dtype=np.uint32)}


def _narrow(arrays, vocab):
    """Token ids as uint16 where the vocabulary allows (half the bytes)."""
    out = {}
    for k, a in arrays.items():
        if a.dtype == np.uint32 and k.endswith("ids") and vocab <= 65536:
            a = a.astype(np.uint16)
        out[k] = a
    return out


def write_blob(arrays):
    """(xz bytes, index) of named arrays."""
    index, chunks, off = [], [], 0
    for name, a in arrays.items():
        b = np.ascontiguousarray(a).tobytes()
        index.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": off, "bytes": len(b)})
        chunks.append(b)
        off += len(b)
    return lzma.compress(b"".join(chunks), preset=6), index


def read_blob(data, index):
    raw = lzma.decompress(data)
    out = {}
    for e in index:
        out[e["name"]] = np.frombuffer(raw, dtype=np.dtype(e["dtype"]), count=int(np.prod(e["shape"])),
                                       offset=e["offset"]).reshape(e["shape"])
    return out


def _atomic_write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def pack(model_dir, sft, wl, prompts, out_dirs, first_part_mib, log=print):
    """Writes the pack into `out_dirs` (the first gets the first `first_part_mib` MiB of the
    weights, the last the rest, the data and the model files; dirs in between take further
    weight parts of the same size). Returns the manifest."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    tensors = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    vocab = int(config["vocab_size"])
    emb = tensors.get("model.embed_tokens.weight")
    if emb is not None:
        vocab = max(vocab, emb.shape[0])
    infos, chunks, off = [], [], 0
    q4 = q8 = raw = 0
    for name in sorted(tensors):
        b, info = encode_tensor(tensors[name])
        info.update(name=name, offset=off, bytes=len(b))
        infos.append(info)
        chunks.append(b)
        off += len(b)
        q4 += info["q4_blocks"]
        q8 += info["q8_blocks"]
        raw += info["raw_blocks"]
    weights = b"".join(chunks)
    n_params = sum(int(np.prod(t.shape)) for t in tensors.values())
    log(f"pack: {len(tensors)} tensors, {n_params} weights: {q4} Q4_1 blocks, {q8} Q8_0 blocks, {raw} raw blocks, "
        f"{len(weights) / 2**20:.1f} MiB ({8 * len(weights) / max(n_params, 1):.2f} bits per weight)")
    data_arrays, data_meta = {}, {}
    for key, path in (("sft", sft), ("wl", wl)):
        if path:
            a = examples_arrays(path, vocab)
            data_meta[key] = {"examples": int(a["lengths"].size), "tokens": int(a["ids"].size),
                              "target_tokens": int((a["lengths"] - a["loss_from"]).sum()), "source": os.path.basename(path)}
            data_arrays.update({f"{key}.{k}": v for k, v in a.items()})
    theorems = []
    if prompts:
        theorems, a = prompts_arrays(prompts, vocab)
        data_arrays.update({f"prompts.{k}": v for k, v in a.items()})
    data, data_index = write_blob(_narrow(data_arrays, vocab))
    model_files = {}
    for name in MODEL_FILES:
        p = os.path.join(model_dir, name)
        if os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                model_files[name] = f.read()
    # Weight parts: the first `first_part_mib` MiB, then parts of the same size, the last part
    # whatever is left.
    size = max(1, int(first_part_mib * 2**20))
    parts = [weights[i:i + size] for i in range(0, len(weights), size)] or [b""]
    if len(parts) > len(out_dirs):
        raise PackError(f"the weights need {len(parts)} parts of {first_part_mib} MiB, "
                        f"but {len(out_dirs)} folders were given")
    manifest = {
        "format": FORMAT, "version": VERSION, "config": config, "vocab": vocab,
        "weights": {"sha256": sha256(weights), "bytes": len(weights), "tensors": infos,
                    "parts": [{"file": f"weights.part{i}", "dir": i, "bytes": len(p), "sha256": sha256(p)}
                              for i, p in enumerate(parts)]},
        "data": {"file": "data.bin.xz", "dir": len(out_dirs) - 1, "sha256": sha256(data), "bytes": len(data),
                 "index": data_index, "sets": data_meta, "theorems": theorems},
        "model_files": sorted(model_files),
    }
    for d in out_dirs:
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            os.remove(os.path.join(d, name))
    for i, p in enumerate(parts):
        _atomic_write(os.path.join(out_dirs[i], f"weights.part{i}"), p)
    last = out_dirs[-1]
    _atomic_write(os.path.join(last, "data.bin.xz"), data)
    os.makedirs(os.path.join(last, "model"), exist_ok=True)
    for name, text in model_files.items():
        _atomic_write(os.path.join(last, "model", name), text.encode("utf-8"))
    text = json.dumps(manifest, indent=1).encode("utf-8")
    for d in out_dirs:
        _atomic_write(os.path.join(d, "pack.json"), text)
    for d in out_dirs:
        total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)
        log(f"pack: {d}: {total / 2**20:.1f} MiB")
    return manifest


def find_manifest(dirs):
    for d in dirs:
        p = os.path.join(d, "pack.json")
        if os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                m = json.load(f)
            if m.get("format") != FORMAT or m.get("version") != VERSION:
                raise PackError(f"{p}: not a {FORMAT} version {VERSION} manifest")
            return m
    raise PackError(f"no pack.json in {', '.join(dirs)}")


def _part_path(dirs, manifest, name, where):
    """The file `name` of pack folder number `where`: looked up in every given folder (a call
    may receive its part under any of them)."""
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    raise PackError(f"{name} (pack folder {where}) is missing from {', '.join(dirs)}")


def check_parts(dirs, manifest, which=None):
    """Checks the SHA-256 of the weight parts present (all, or those of folder `which`)."""
    seen = 0
    for part in manifest["weights"]["parts"]:
        if which is not None and part["dir"] != which:
            continue
        p = _part_path(dirs, manifest, part["file"], part["dir"])
        with open(p, "rb") as f:
            if sha256(f.read()) != part["sha256"]:
                raise PackError(f"{p}: SHA-256 differs from pack.json (a broken transfer?)")
        seen += part["bytes"]
    return seen


def load_weights(dirs, manifest):
    """{name: f32 array} of the packed model, each tensor checked against its SHA-256."""
    chunks = []
    for part in manifest["weights"]["parts"]:
        with open(_part_path(dirs, manifest, part["file"], part["dir"]), "rb") as f:
            chunks.append(f.read())
    weights = b"".join(chunks)
    if sha256(weights) != manifest["weights"]["sha256"]:
        raise PackError("the weight parts put together differ from pack.json (SHA-256): "
                        "parts of different packs?")
    out = {}
    for info in manifest["weights"]["tensors"]:
        buf = weights[info["offset"]:info["offset"] + info["bytes"]]
        out[info["name"]] = decode_tensor(buf, info)
    return out


def load_data(dirs, manifest):
    d = manifest["data"]
    p = _part_path(dirs, manifest, d["file"], d["dir"])
    with open(p, "rb") as f:
        data = f.read()
    if sha256(data) != d["sha256"]:
        raise PackError(f"{p}: SHA-256 differs from pack.json")
    return read_blob(data, d["index"])


def model_dir(dirs, manifest):
    """The folder with the packed model files (config.json, tokenizer.json, …)."""
    for d in dirs:
        p = os.path.join(d, "model")
        if all(os.path.isfile(os.path.join(p, n)) for n in manifest["model_files"]):
            return p
    raise PackError(f"model files ({', '.join(manifest['model_files'])}) are missing from {', '.join(dirs)}")
