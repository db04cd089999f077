"""Algorithm 1 of the paper (test-time proof trees) on a GPU, written as prod's trees JSONL.

For every theorem and each of `samples` independent trees: sample the root from
`x = c s` (the last 1,000 context tokens, then the statement); every lemma a sample proposes
(`<invoke> Lemma … </invoke>`) becomes a node of the next level with the same context, once per
tree and level; at the depth limit `<no_invoke>` is appended to the prompt ids and sampling
continues after it. This mirrors `prod_rl::generate_test_trees`; the lemma extraction is a port
of `prod_core::ConditionalProof::parse_with` with Coq's lexer (markers only outside comments and
strings; prod's tests run both on the same texts). Levels of all theorems and of several trees
are sampled together, a whole group of trees at a time, so a deadline leaves complete trees
only.

The file (schema in docs/models.md, read by `prod eval --trees`): a header line, then one line
per node with its tree, depth, parent, theorem, statement, forced `t0` and completion.
"""
import json
import os

USE_INVOKE, NO_INVOKE = "<use_invoke>", "<no_invoke>"
INVOKE, END_INVOKE = "<invoke>", "</invoke>"
TRUE_TOKEN, FALSE_TOKEN = "<true>", "<false>"
SPECIAL_TOKENS = [USE_INVOKE, NO_INVOKE, INVOKE, END_INVOKE, TRUE_TOKEN, FALSE_TOKEN]
# Rust's `char::is_whitespace` (Unicode White_Space), which `str::trim` strips; Python's
# `str.strip()` would also strip U+001C..U+001F.
RUST_WS = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
           "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
FORMAT = "prod-trees"
VERSION = 1


def coq_literals(text):
    """The comments and string literals of `text` as Coq lexes them: [(start, end, closed)], the
    outermost only. `prod_coq::lexer::literals` step for step: a comment nests and lexes the
    strings inside it, a string ends at a `"` that is not `""`; an unclosed one runs to the end."""
    out = []
    i, n = 0, len(text)

    def string_end(i):
        i += 1
        while i < n:
            if text[i] == '"':
                if text.startswith('"', i + 1):
                    i += 2
                else:
                    return i + 1
            else:
                i += 1
        return None

    def comment_end(i):
        depth = 0
        while i < n:
            if text.startswith("(*", i):
                depth += 1
                i += 2
            elif text.startswith("*)", i):
                depth -= 1
                i += 2
                if depth == 0:
                    return i
            elif text[i] == '"':
                i = string_end(i)
                if i is None:
                    return None
            else:
                i += 1
        return None

    while i < n:
        if text.startswith("(*", i):
            end = comment_end(i)
        elif text[i] == '"':
            end = string_end(i)
        else:
            i += 1
            continue
        out.append((i, n if end is None else end, end is not None))
        i = n if end is None else end
    return out


def parse_lemmas(text):
    """The proposed lemmas (trimmed) of a conditional proof, or None if `text` is not one:
    `prod_core::ConditionalProof::parse_with(text, &CoqLanguage)` step for step (markers only
    outside Coq's comments and strings; a comment or string that never closes is an error)."""
    body = len(text) - len(text.lstrip(RUST_WS))
    rest = text[body:]
    if rest.startswith(USE_INVOKE):
        pos = body + len(USE_INVOKE)
    elif rest.startswith(NO_INVOKE):
        pos = body + len(NO_INVOKE)
    else:
        return None
    literals = coq_literals(text)
    if any(not closed for _, _, closed in literals):
        return None
    lemmas = []
    seg_start = pos
    open_at = None
    k = 0
    while True:
        at = text.find("<", pos)
        if at < 0:
            break
        while k < len(literals) and literals[k][1] <= at:
            k += 1
        if k < len(literals) and literals[k][0] <= at:
            pos = literals[k][1]
            continue
        tok = next((t for t in SPECIAL_TOKENS if text.startswith(t, at)), None)
        if tok in (USE_INVOKE, NO_INVOKE, TRUE_TOKEN, FALSE_TOKEN):
            return None
        if tok == INVOKE:
            if open_at is not None:
                return None
            open_at = at
            pos = at + len(INVOKE)
            seg_start = pos
        elif tok == END_INVOKE:
            if open_at is None:
                return None
            lemma = text[seg_start:at]
            if not lemma.strip(RUST_WS):
                return None
            lemmas.append(lemma.strip(RUST_WS))
            open_at = None
            pos = at + len(END_INVOKE)
            seg_start = pos
        else:
            pos = at + 1
    if open_at is not None:
        return None
    return lemmas


def t0_of(text):
    s = text.lstrip(RUST_WS)
    if s.startswith(USE_INVOKE):
        return "use_invoke"
    if s.startswith(NO_INVOKE):
        return "no_invoke"
    return None


def statement_part(statement):
    """`prod_policy::prompt::prompt_parts`' statement part."""
    return statement.strip(RUST_WS) + "\n"


def generate(theorems, context_ids, encode, decode, sampler, *, samples, depth, group, ids, log=print, first=0):
    """Algorithm 1 for every theorem. `theorems`: [{theorem, statement, context_key}];
    `context_ids[i]`: the prompt's context part; `encode(text)` / `decode(ids)`: the model's
    tokenizer; `sampler(prompts, first_token_free)` → [(ids, stop)] or None at the deadline;
    `ids`: {"use_invoke", "no_invoke"} token ids; trees `first`..`samples`-1 are sampled.
    Returns (nodes, the first tree not sampled)."""
    nodes = []
    st_cache = {}

    def st_ids(s):
        if s not in st_cache:
            st_cache[s] = encode(statement_part(s))
        return st_cache[s]

    done = first
    while done < samples:
        trees = list(range(done, min(samples, done + group)))
        level = [{"tree": t, "th": i, "statement": th["statement"], "parent": None}
                 for t in trees for i, th in enumerate(theorems)]
        new_nodes = []
        ok = True
        for d in range(depth + 1):
            if not level:
                break
            forced = d == depth
            prompts = []
            for g in level:
                p = list(context_ids[g["th"]]) + st_ids(g["statement"])
                if forced:
                    p.append(ids["no_invoke"])
                prompts.append(p)
            res = sampler(prompts, forced)
            if res is None:
                ok = False
                break
            nxt, seen = [], set()
            for g, (gen, stop) in zip(level, res):
                text = decode(gen)
                if forced:
                    text = NO_INVOKE + text
                node = {"node": len(nodes) + len(new_nodes), "tree": g["tree"], "depth": d,
                        "parent": g["parent"], "theorem": theorems[g["th"]]["theorem"],
                        "statement": g["statement"], "forced_t0": "no_invoke" if forced else None,
                        "t0": t0_of(text), "completion": text, "tokens": len(gen), "stop": stop}
                new_nodes.append(node)
                for lemma in parse_lemmas(text) or []:
                    key = (g["tree"], theorems[g["th"]]["context_key"], lemma)
                    if key not in seen:
                        seen.add(key)
                        nxt.append({"tree": g["tree"], "th": g["th"], "statement": lemma, "parent": node["node"]})
            log(f"trees {trees[0]}..{trees[-1]}: depth {d}: {len(level)} nodes, {len(nxt)} lemmas proposed")
            level = nxt
        if not ok:
            log(f"trees {trees[0]}..{trees[-1]}: deadline reached, left out")
            break
        nodes += new_nodes
        done = trees[-1] + 1
    return nodes, done


def write(path, header, nodes):
    header = dict(header, format=FORMAT, version=VERSION)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n")
        for n in nodes:
            f.write(json.dumps(n, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


class TreesError(Exception):
    pass


def read(path):
    """(header, nodes) of a trees file."""
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("format") != FORMAT or lines[0].get("version") != VERSION:
        raise TreesError(f"{path}: not a {FORMAT} version {VERSION} file")
    return lines[0], lines[1:]


# Header fields that differ between the calls that sampled one adapter's trees.
_PER_CALL = {"seed", "first_tree", "samples", "sampler"}


def stream(seed, first_tree):
    """The random stream a call sampling trees `first_tree`.. draws from: a later call that adds
    trees with the same adapter must not repeat the first ones."""
    return seed + 7919 * first_tree


def merge(files):
    """One (header, nodes) of several [(header, nodes)] of the same adapter and settings whose
    trees follow each other (`first_tree` of each = the end of the one before, from 0). Nodes
    are renumbered in file order, parents with them."""
    if not files:
        raise TreesError("nothing to merge")
    h0 = files[0][0]
    if h0.get("adapter_sha256") is None:
        raise TreesError("the first file's header has no adapter_sha256: cannot tell it is one adapter")
    nxt, out, streams, seeds = 0, [], set(), []
    for k, (h, nodes) in enumerate(files):
        same = {key for key in set(h0) | set(h) if key not in _PER_CALL and h0.get(key) != h.get(key)}
        if same:
            raise TreesError(f"file {k + 1} differs from the first in {sorted(same)}")
        if h.get("first_tree", 0) != nxt:
            raise TreesError(f"file {k + 1} starts at tree {h.get('first_tree', 0)}, expected {nxt}")
        s = stream(h.get("seed", 0), nxt)
        if s in streams:
            raise TreesError(f"file {k + 1} repeats the random stream of an earlier file (seed {h.get('seed')})")
        streams.add(s)
        seeds.append(h.get("seed"))
        base = len(out)
        for i, n in enumerate(nodes):
            if n["node"] != i:
                raise TreesError(f"file {k + 1}: line {i + 2} is node {n['node']}, expected {i}")
            t = n["tree"]
            if not nxt <= t < nxt + h["samples"]:
                raise TreesError(f"file {k + 1}: node {n['node']} is in tree {t}, outside {nxt}..{nxt + h['samples'] - 1}")
            m = dict(n, node=base + n["node"], parent=None if n["parent"] is None else base + n["parent"])
            out.append(m)
        nxt += h["samples"]
    header = {key: v for key, v in h0.items() if key not in _PER_CALL}
    header.update(samples=nxt, first_tree=0, seeds=seeds,
                  sampler=h0.get("sampler"), seed=h0.get("seed"))
    return header, out
