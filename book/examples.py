"""The book's worked examples: small enough to follow by hand, computed when the book is built.

`<!-- example NN -->` in a step's page becomes `example(NN)`: the numbers are
printed by numpy from the same formulas the checks use (checker/references/*_np.py), so
a page can never show numbers that its code would not give.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from checker.references import attention_np, gpt2_np
from checker.references.attention_np import causal_mask
from runtime.bandwidth import int8_bytes_per_token, read_bandwidth, weight_bytes_per_token
from runtime.quantize import BLOCK, dequantize, quantize

# The solutions are imported inside the functions that use them: they import MAX, which takes seconds.


def _matrix(a: np.ndarray, digits: int = 2, rows: list[str] | None = None, cols: list[str] | None = None) -> str:
    """A 2-D array as a fixed-width text block, with optional row and column labels."""
    a = np.atleast_2d(a)
    cells = [["-inf" if v == -np.inf else f"{v:.{digits}f}" for v in row] for row in a]
    width = max(len(c) for row in cells for c in row + (cols or []))
    head = max((len(r) for r in rows or []), default=0)
    lines = []
    if cols:
        lines.append(" " * (head + 2) + " ".join(c.rjust(width) for c in cols))
    for i, row in enumerate(cells):
        label = (rows[i].ljust(head) + "  ") if rows else ""
        lines.append(label + " ".join(c.rjust(width) for c in row))
    return "\n".join(lines)


def _block(*parts: str) -> str:
    return "```text\n" + "\n".join(parts) + "\n```"


def parameter_counts() -> dict[str, int]:
    """GPT-2 small's parameters by component, from the course's config."""
    from solutions.solution_01 import GPT2Config

    c = GPT2Config()
    C, I = c.n_embd, c.n_inner
    attn = C * 3 * C + 3 * C + C * C + C
    mlp = C * I + I + I * C + C
    return {"wte (tokens)": c.vocab_size * C, "wpe (positions)": c.n_positions * C,
            "attention, 12 blocks": c.n_layer * attn, "MLP, 12 blocks": c.n_layer * mlp,
            "LayerNorms (ln_1, ln_2 x 12, ln_f)": (2 * c.n_layer + 1) * 2 * C}


def example_01() -> str:
    counts = parameter_counts()
    width = max(map(len, counts))
    lines = [f"{name.ljust(width)}  {n:>12,}" for name, n in counts.items()]
    lines += ["-" * (width + 14), f"{'total'.ljust(width)}  {sum(counts.values()):>12,}"]
    return ("Every number of the checkpoint follows from the config. With GPT-2 small's values "
            "(the head has none: it is tied to wte):\n\n" + _block(*lines))


def example_02() -> str:
    T, N = 3, 2
    m = causal_mask(T, N)
    cols = [f"c{j}" for j in range(N)] + [str(j) for j in range(T)]
    return (f"`causal_mask({T}, {N})`: 3 new tokens after 2 cached ones (c0, c1). Row i is query i; it sees "
            "the cached keys and the new keys up to itself:\n\n"
            + _block(_matrix(m, 0, rows=[f"q{i}" for i in range(T)], cols=cols))
            + "\n\nAdded to scores s, then softmax: exp(s - inf) = 0, so the -inf keys get no weight at all.")


def example_03() -> str:
    x = np.array([1.0, 2.0, 3.0, 6.0])
    w, b = np.array([1.0, 2.0, 1.0, 0.5]), np.array([0.0, 0.0, 1.0, 0.0])
    mean, var = x.mean(), x.var()
    z = (x - mean) / np.sqrt(var + 1e-5)
    y = gpt2_np.layer_norm(x, w, b, 1e-5)
    return ("One token with C = 4 channels (GPT-2 has 768):\n\n" + _block(
        f"x                       = {_matrix(x)}",
        f"mean                    = {mean:.2f}",
        f"var  (divide by C = 4)  = {var:.2f}",
        f"(x - mean) / sqrt(var + 1e-5) = {_matrix(z)}",
        f"weight                  = {_matrix(w)}",
        f"bias                    = {_matrix(b)}",
        f"y = normalised * weight + bias = {_matrix(y)}",
    ) + f"\n\nThe normalised row has mean {z.mean():.2f} and variance {z.var():.2f}; weight and bias then "
        "give each channel back a size and an offset of its own.")


def example_04() -> str:
    t = np.array([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])
    rows = {"x": t, "GELU, tanh (GPT-2)": gpt2_np.gelu_tanh(t), "GELU, exact (erf)": gpt2_np.gelu_exact(t),
            "ReLU": np.maximum(t, 0)}
    width = max(map(len, rows))
    diff = np.abs(gpt2_np.gelu_tanh(t) - gpt2_np.gelu_exact(t)).max()
    return ("The non-linearity between c_fc and c_proj, at a few points:\n\n"
            + _block(*(f"{name.ljust(width)}  {_matrix(v, 4)}" for name, v in rows.items()))
            + f"\n\nThe two GELUs differ by up to {diff:.1e} here: small, but more than the check allows on "
            "GPT-2's MLP output, so only the approximation GPT-2 was trained with matches.")


def example_05() -> str:
    table = np.arange(15, dtype=float).reshape(5, 3) / 10
    ids = np.array([[2, 0], [4, 2]])
    return ("A table for a vocabulary of 5 tokens, 3 channels (GPT-2: 50257 x 768), and a batch of 2 "
            "sequences of 2 tokens:\n\n"
            + _block("weight [5, 3]:", _matrix(table, 1, rows=[f"row {i}" for i in range(5)]), "",
                     f"input_ids [2, 2] = {ids.tolist()}", "",
                     "output [2, 2, 3]:", *(f"  sequence {b}: {table[ids[b]].tolist()}" for b in range(2)))
            + "\n\nEach id picks its row; token 2 gets the same row wherever it stands.")


def example_06() -> str:
    table = np.arange(18, dtype=float).reshape(6, 3) / 10
    T, past = 3, 2
    return (f"A table of 6 positions (GPT-2: 1024), {T} new tokens after {past} cached ones:\n\n"
            + _block(f"positions = {list(range(past, past + T))}   (start {past}, stop {past + T}: the stop "
                     "is not included)",
                     f"forward({T}, {past}) = rows {list(range(past, past + T))} = {table[past:past + T].tolist()}")
            + "\n\nThe [T, C] result is added to the token embeddings [B, T, C]: every sequence of the batch "
            "gets the same positions.")


def attention_example() -> dict[str, np.ndarray]:
    """4 tokens, 8 channels, 2 heads of 4: q, k, v and what attention makes of them (head 0)."""
    rng = np.random.default_rng(7)
    q, k, v = (np.round(rng.normal(size=(4, 8)), 1) for _ in range(3))
    heads = [attention_np.split_heads(t[None], 2)[0] for t in (q, k, v)]  # [2, 4, 4] each
    scores = heads[0][0] @ heads[1][0].T / np.sqrt(4)
    out = attention_np.attend(*(h[None] for h in heads))  # [1, 2, 4, 4]: the output per head
    masked = np.where(np.triu(np.ones((4, 4), bool), 1), -np.inf, scores)
    return {"q": q, "k": k, "v": v, "q0": heads[0][0], "k0": heads[1][0], "v0": heads[2][0], "scores": scores,
            "masked": masked, "weights": attention_np.softmax(masked), "out0": out[0, 0],
            "merged": attention_np.merge_heads(out)[0]}


def example_07() -> str:
    e = attention_example()
    tok = [f"t{i}" for i in range(4)]
    return ("T = 4 tokens, C = 8 channels, H = 2 heads of D = 4. The query (from c_attn's first third):\n\n"
            + _block(_matrix(e["q"], 1, rows=tok))
            + "\n\n_split_heads gives head 0 channels 0-3 and head 1 channels 4-7. Head 0's query and key:\n\n"
            + _block("q, head 0:", _matrix(e["q0"], 1, rows=tok), "k, head 0:", _matrix(e["k0"], 1, rows=tok))
            + "\n\nScores q k^T / sqrt(4), masked, then softmax over each row (the keys):\n\n"
            + _block("scores:", _matrix(e["scores"], 2, rows=tok, cols=tok), "", "masked:",
                     _matrix(e["masked"], 2, rows=tok, cols=tok), "", "weights (each row sums to 1):",
                     _matrix(e["weights"], 2, rows=tok, cols=tok))
            + "\n\nHead 0's output is weights @ v (head 0's values); _merge_heads puts the two heads' outputs "
            "side by side again, [4, 8]:\n\n"
            + _block("weights @ v, head 0:", _matrix(e["out0"], 2, rows=tok), "merged:",
                     _matrix(e["merged"], 2, rows=tok))
            + "\n\nToken t0 can only look at itself: its weight row is [1, 0, 0, 0] and its output is its own value.")


def example_08() -> str:
    x = np.array([1.0, 2.0, 3.0, 6.0])
    ln = lambda t: gpt2_np.layer_norm(t, np.ones(4), np.zeros(4), 1e-5)  # noqa: E731
    sublayer = lambda t: t * t  # noqa: E731  (a sub-layer that squares its input, for the example)
    pre, post = x + sublayer(ln(x)), ln(x + sublayer(x))
    return ("One token, 4 channels, a LayerNorm with weight 1 and bias 0, and a sub-layer that squares "
            "its input:\n\n" + _block(
                f"the stream x                  = {_matrix(x)}",
                f"its normalised copy ln(x)     = {_matrix(ln(x))}",
                f"the sub-layer on that copy    = {_matrix(sublayer(ln(x)))}",
                "",
                f"residual_step returns (GPT-2) = {_matrix(pre)}",
                f"post-norm would return        = {_matrix(post)}")
            + "\n\nWork out which of the rows above make GPT-2's: your `residual_step` must return it for these "
            "inputs. GPT-2's keeps the stream's size (its last channel goes from 6 to "
            f"{pre[-1]:.2f}); post-norm's output has mean {abs(post.mean()):.2f} and variance {post.var():.2f}, "
            "whatever the stream held.")


def example_09() -> str:
    x = np.array([1.0, 2.0, 3.0, 6.0])
    ln = lambda t: gpt2_np.layer_norm(t, np.ones(4), np.zeros(4), 1e-5)  # noqa: E731
    attn, mlp = (lambda t: t * t), (lambda t: -np.maximum(t, 0))  # noqa: E731
    after = x + attn(ln(x))
    out = after + mlp(ln(after))
    parallel = x + attn(ln(x)) + mlp(ln(x))
    return ("Step 08's example again, with an \"attention\" that squares its input and an \"MLP\" that "
            "negates its positive entries and zeroes the rest (LayerNorms with weight 1 and bias 0):\n\n" + _block(
                f"x, the block's input                = {_matrix(x)}",
                f"the stream after the attention half = {_matrix(after)}",
                f"the block's output                  = {_matrix(out)}",
                "",
                f"both halves reading x (wrong)       = {_matrix(parallel)}")
            + "\n\nWhich stream did the MLP half read to give the block's output? Your `GPT2Block` with these "
            "sub-layers gives the same numbers.")


def example_10() -> str:
    counts = parameter_counts()
    T, C = 4, 768
    return (f"Token ids [1, {T}] through the body (GPT-2 small):\n\n" + _block(
        f"input_ids            [1, {T}]",
        f"wte(input_ids)       [1, {T}, {C}]",
        f"wpe({T})               [{T}, {C}]       broadcast over the batch",
        f"sum                  [1, {T}, {C}]",
        f"h.0 ... h.11         [1, {T}, {C}]       each block keeps the shape",
        f"ln_f                 [1, {T}, {C}]")
        + f"\n\n{counts['attention, 12 blocks'] + counts['MLP, 12 blocks']:,} of the model's parameters are "
        "in the 12 blocks; the loop runs the same code 12 times with 12 sets of weights.")


def example_11() -> str:
    wte = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 0.5]])
    h = np.array([0.5, -1.0, 2.0])
    conv = np.arange(6, dtype=float).reshape(3, 2)
    return ("A vocabulary of 4 tokens, 3 channels: the head scores a final hidden state against every row "
            "of wte.\n\n" + _block(
                "wte.weight [4, 3]:", _matrix(wte, 1, rows=[f"token {i}" for i in range(4)]),
                f"hidden state [3]   = {_matrix(h, 1)}",
                f"logits, h · each row = {_matrix(h @ wte.T, 2)}   (token 0 scores highest)")
            + "\n\nConv1D stores a 3 -> 2 layer as [in, out] = [3, 2]; Linear(3, 2) holds [out, in] = [2, 3], "
            "the transpose:\n\n" + _block("Conv1D weight [3, 2]:", _matrix(conv, 0), "Linear weight [2, 3]:",
                                          _matrix(conv.T, 0)))


def example_12() -> str:
    z = np.array([2.0, 1.0, 0.5, -1.0])
    rows = {"softmax(z)": attention_np.softmax(z), "softmax(z / 0.5)": attention_np.softmax(z / 0.5),
            "softmax(z / 2)": attention_np.softmax(z / 2),
            "top_k=2, T=1": attention_np.softmax(np.where(z < np.sort(z)[-2], -np.inf, z))}
    width = max(map(len, rows))
    return ("Logits for a 4-token vocabulary, z = [2.0, 1.0, 0.5, -1.0]. Greedy picks token 0. Sampling "
            "draws from:\n\n" + _block(*(f"{name.ljust(width)}  {_matrix(p, 3)}" for name, p in rows.items()))
            + "\n\nA low temperature sharpens the distribution toward greedy, a high one flattens it; top_k=2 "
            "keeps exactly the two best and renormalises them.")


def positions_processed(prompt: int, new: int) -> tuple[list[int], list[int]]:
    """Positions the model runs for each generated token: without a cache (step 12), with one (step 13)."""
    return [prompt + i for i in range(new)], [prompt] + [1] * (new - 1)


def example_13() -> str:
    e = attention_example()  # step 07's 4 tokens, 8 channels, 2 heads of 4
    q, k, v = (attention_np.split_heads(e[n][None], 2)[0] for n in "qkv")  # [H, T, D] = [2, 4, 4] each
    full = attention_np.merge_heads(attention_np.attend(q[None], k[None], v[None]))[0, 3]  # t3's output, [8]
    past_key, past_value = k[:, :3], v[:, :3]  # the cache after t0..t2: [H, P, D] = [2, 3, 4]
    key = np.concatenate([past_key, k[:, 3:]], axis=-2)  # cached first, then t3's own: [2, 4, 4]
    value = np.concatenate([past_value, v[:, 3:]], axis=-2)
    mask = causal_mask(1, 3)  # [T, P+T] = [1, 4]: t3 sees every key
    scores = q[:, 3:] @ np.swapaxes(key, -1, -2) / np.sqrt(4) + mask  # [H, 1, 4]
    weights = attention_np.softmax(scores)
    cached = attention_np.merge_heads((weights @ value)[None])[0, 0]  # [8]
    tok = [f"t{i}" for i in range(4)]
    T, P = 2, 3
    cols = [f"c{j}" for j in range(P)] + [f"n{j}" for j in range(T)]
    rows = [f"q{i}" for i in range(T)]
    without, with_cache = positions_processed(10, 20)
    return ("Step 07's example again: T = 4 tokens, C = 8 channels, H = 2 heads of D = 4. Without a cache, "
            "predicting after t3 runs all four tokens and keeps t3's row. With a cache, t0..t2's keys and "
            "values were kept from the earlier calls ([H, P, D] = [2, 3, 4]) and only t3 runs: its query "
            "[2, 1, 4] meets the 3 cached keys and its own.\n\n"
            + _block("head 0's weights, t3's row of the full [4, 4] attention:",
                     _matrix(e["weights"][3], 4, rows=["t3"], cols=tok),
                     "head 0's weights, t3's query over [cached t0, t1, t2, new t3], mask [1, 4] all 0:",
                     _matrix(weights[0, 0], 4, rows=["t3"], cols=tok), "",
                     f"t3's output without cache  = {_matrix(full, 3)}",
                     f"t3's output with the cache = {_matrix(cached, 3)}",
                     f"max|diff| = {np.abs(full - cached).max():.1e}")
            + "\n\nThe same numbers: the cached keys and values are the ones the full run would compute again, "
            f"since t0..t2 never see t3. With T = {T} new tokens after P = {P} cached ones, the mask must hold "
            f"step 02's causal_mask({T}, {P}), [T, P+T] = [{T}, {P + T}]; its columns follow the keys, cached "
            "(c) first, then new (n):\n\n"
            + _block(_matrix(causal_mask(T, P), 0, rows=rows, cols=cols))
            + f"\n\nThe cost, for a 10-token prompt and 20 new tokens: {sum(without)} positions without a "
            f"cache (10 + 11 + ... + 29), {sum(with_cache)} with one (10, then 1 per token; the last token is "
            "never fed back).")


def example(step: str) -> str:
    return globals()[f"example_{step}"]()


def decode_limit() -> dict:
    """Step 15's numbers, measured now on this machine: GPT-2 small's weight bytes per decode step, the
    read bandwidth (runtime.bandwidth) and float32 matmul speed (numpy), and what they allow."""

    config = SimpleNamespace(n_embd=768, n_inner=3072, n_layer=12, vocab_size=50257)
    a = np.ones((1024, 1024), np.float32)
    a @ a  # warm
    started = time.perf_counter()
    for _ in range(4):
        a @ a
    flops = 4 * 2 * 1024**3 / (time.perf_counter() - started)
    return {"bytes": weight_bytes_per_token(config), "bandwidth": read_bandwidth(256 * 2**20, passes=3),
            "flops": flops}


def example_15() -> str:
    d = decode_limit()
    per_token, bw, flops = d["bytes"], d["bandwidth"], d["flops"]
    lines = [f"weights read per decode step   {per_token / 1e6:8.0f} MB   (124 M floats of 4 bytes; the head is wte)",
             f"flops per decode step          {per_token / 2 / 1e6:8.0f} M    (2 per weight: a multiply and an add)",
             f"read bandwidth, measured now   {bw / 1e9:8.1f} GB/s",
             f"float32 matmul, measured now   {flops / 1e9:8.1f} GFLOP/s",
             f"time to read the weights       {per_token / bw * 1e3:8.1f} ms  -> at most {bw / per_token:.0f} tokens/s",
             f"time to do the flops           {per_token / 2 / flops * 1e3:8.1f} ms  -> "
             f"{flops / (per_token / 2):.0f} tokens/s"]
    return ("GPT-2 small at batch 1, on the machine that built this page:\n\n"
            + _block(*lines)
            + f"\n\nReading takes {flops / (per_token / 2) / (bw / per_token):.0f}x as long as computing: decode waits "
            "for memory, and the fastest a decode step can be is the time to read every weight once.")


def example_16() -> str:


    w = np.random.default_rng(16).normal(0, 0.02, (1, BLOCK)).astype(np.float32)  # one block of a row
    w[0, 5] = 0.09  # one outlier sets the block's scale
    q, scales = quantize(w)
    back = dequantize(q, scales)
    d = decode_limit()
    config = SimpleNamespace(n_embd=768, n_inner=3072, n_layer=12, vocab_size=50257)
    int8 = int8_bytes_per_token(config)
    return (f"One block of {BLOCK} weights (the first 8 shown), its scale max |w| / 127 = {scales[0, 0]:.6f}:\n\n"
            + _block(_matrix(w[:, :8], digits=4, rows=["w                  "]),
                     "q = rint(w / scale)  " + " ".join(f"{v:7d}" for v in q[0, :8]),
                     _matrix(back[:, :8], digits=4, rows=["q * scale          "]),
                     f"largest error in the block: {np.abs(back - w).max():.6f} (at most scale / 2 = "
                     f"{scales[0, 0] / 2:.6f})")
            + "\n\nGPT-2 small at batch 1, on the machine that built this page:\n\n"
            + _block(f"float32 weights read per decode step  {d['bytes'] / 1e6:6.0f} MB  -> at most "
                     f"{d['bandwidth'] / d['bytes']:.0f} tokens/s",
                     f"int8 + a scale per {BLOCK}               {int8 / 1e6:6.0f} MB  -> at most "
                     f"{d['bandwidth'] / int8:.0f} tokens/s",
                     f"read bandwidth, measured now          {d['bandwidth'] / 1e9:6.1f} GB/s"))


# Step 17's row: one query's scores against 7 keys, one value number per key (D = 1, to follow by hand).
ONLINE_SCORES = np.array([0.5, 2.0, -1.0, 1.5, 3.0, 0.0, 2.5])
ONLINE_VALUES = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
ONLINE_TILE = 3


def online_softmax(scores: np.ndarray, values: np.ndarray, tile: int) -> list[dict]:
    """The online softmax over one row, tile by tile: after each tile, its keys, its largest score, the
    factor exp(m - m') the sums so far are rescaled by, and the running m, l, a."""
    m, l, a, rows = -np.inf, 0.0, 0.0, []
    for start in range(0, len(scores), tile):
        s, v = scores[start:start + tile], values[start:start + tile]
        new = max(m, s.max())
        factor = np.exp(m - new)  # exp(-inf) = 0 at the first tile: nothing summed yet
        w = np.exp(s - new)
        l, a, m = l * factor + w.sum(), a * factor + w @ v, new
        rows.append({"keys": (start, start + len(s) - 1), "tile max": s.max(), "factor": factor, "m": m, "l": l,
                     "a": a})
    return rows


def combined(parts: list[tuple[float, float, float]]) -> float:
    """Parts of a row's keys done apart, (m, l, a) each, combined exactly: with m = max m_s,
    out = sum a_s exp(m_s - m) / sum l_s exp(m_s - m)."""
    top = max(m for m, _, _ in parts)
    return sum(a * np.exp(m - top) for m, _, a in parts) / sum(l * np.exp(m - top) for m, l, _ in parts)


def example_17() -> str:
    s, v = ONLINE_SCORES, ONLINE_VALUES
    rows = online_softmax(s, v, ONLINE_TILE)
    exact = float(np.exp(s - s.max()) @ v / np.exp(s - s.max()).sum())
    table = ["keys   tile max   exp(m - m')      m        l        a",
             *(f"{r['keys'][0]}..{r['keys'][1]}   {r['tile max']:8.2f}   {r['factor']:11.4f}   {r['m']:6.2f}   "
               f"{r['l']:6.4f}   {r['a']:7.4f}" for r in rows)]
    half = len(s) // 2 + 1
    parts = [online_softmax(s[:half], v[:half], ONLINE_TILE)[-1], online_softmax(s[half:], v[half:], ONLINE_TILE)[-1]]
    wrong = sum(p["a"] for p in parts) / sum(p["l"] for p in parts)
    return (f"One query's scores against {len(s)} keys, and one number per value (D = 1, to follow by hand), in "
            f"tiles of {ONLINE_TILE}:\n\n"
            + _block(f"scores  {' '.join(f'{x:5.1f}' for x in s)}", f"values  {' '.join(f'{x:5.1f}' for x in v)}",
                     "", *table, "",
                     f"a / l                         = {rows[-1]['a'] / rows[-1]['l']:.6f}",
                     f"softmax(scores) . values      = {exact:.6f}  (all scores at once)")
            + f"\n\nThe second tile raises the maximum from {rows[0]['m']:.1f} to {rows[1]['m']:.1f}: what the first "
            f"tile summed is multiplied by exp({rows[0]['m']:.1f} - {rows[1]['m']:.1f}) = {rows[1]['factor']:.4f}. "
            f"Split the keys in two at key {half} (flash-decoding's split), each half done alone, then combined:\n\n"
            + _block(*(f"keys {a}..{b}: m = {p['m']:.2f}, l = {p['l']:.4f}, a = {p['a']:.4f}"
                       for (a, b), p in zip(((0, half - 1), (half, len(s) - 1)), parts)),
                     f"combined with their maxima  = {combined([(p['m'], p['l'], p['a']) for p in parts]):.6f}",
                     f"sum a / sum l, maxima ignored = {wrong:.6f}  (wrong)"))
