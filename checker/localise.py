"""Where inside a part the learner's code goes wrong, when no catalogued mistake matches.

Each function probes the learner's own pieces with reference inputs, or with
inputs and weights chosen so that one sub-part alone decides the result, and
returns lines for the report, one per sub-part: "right" or what it does.
They run only after a part has failed unnamed, inside the check's safe call.

  layer_norm      centring, division by the standard deviation, weight, bias
  mlp             c_fc alone, the activation (sampled), c_proj alone, the chaining
  rows            which table rows an embedding's positions hold
  attention       the weights _attn gives (read through one-hot values): mask,
                  normalisation, scale; then c_attn and c_proj alone
  residual        the stream passed through, the sub-layer's input, its output added
  block           each half alone (the other silenced), then the chaining
  model           the embeddings, then each block's input and output in turn, then ln_f
  head            the body's output against the last hidden state
"""

from __future__ import annotations

import numpy as np

from checker import attention_np, gpt2_np
from checker.compare import ONE_LAYER, WHOLE_MODEL, Tolerance, compare
from checker.runner import tensor, to_numpy


def _ok(got: np.ndarray, want: np.ndarray, tol: Tolerance = ONE_LAYER) -> bool:
    return np.shape(got) == np.shape(want) and compare(got, want, axes=(), mistakes=[], tol=tol).ok


def _right(ok: bool, wrong: str) -> str:
    return "right" if ok else wrong


def _loaded(run, module, state: dict[str, np.ndarray], fn):
    """fn() with `state` loaded into `module` (the rest of its parameters kept), then its own weights back."""
    before = {name: np.from_dlpack(t).copy() for name, t in module.parameters}
    run.call(module.load_state_dict, {**before, **{k: np.ascontiguousarray(v, np.float32) for k, v in state.items()}})
    try:
        return fn()
    finally:
        run.call(module.load_state_dict, before)


def _out(run, fn, *arrays) -> np.ndarray:
    return to_numpy(run.call(fn, *(tensor(a) for a in arrays)), "the probe")


def layer_norm(run, module, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> list[str]:
    """LayerNorm's sub-parts, each isolated by loading weight 1 / bias 0 where the others would blur it."""
    C = x.shape[-1]
    ones, zeros = np.ones(C), np.zeros(C)
    z = gpt2_np.layer_norm(x, ones, zeros, eps)  # the normalised rows alone

    def out(w, b):
        return _loaded(run, module, {"weight": w, "bias": b}, lambda: _out(run, module, x))

    plain = out(ones, zeros)
    lines = []
    if _ok(plain, z):
        lines.append("with weight 1 and bias 0 it normalises each row right: the centring and the division by "
                     "the standard deviation are right")
    else:
        mean = float(np.abs(plain.mean(-1)).max())
        spread = float(np.median(plain.std(-1) / z.std(-1)))
        lines.append(f"centring: {_right(mean < 1e-3, f'with weight 1 and bias 0 its rows should average 0, they average up to {mean:.3g}')}")
        lines.append(f"division by the standard deviation: "
                     f"{_right(abs(spread - 1) < 1e-3, f'with weight 1 and bias 0 its rows spread {spread:.3g}x as much as they should (the variance, eps, the square root?)')}")
    # weight and bias against the learner's own normalised rows, so that they are judged on their own
    lines.append(f"scale by weight: {_right(_ok(out(weight, zeros), plain * weight), 'with bias 0 the result is not its normalised rows times weight')}")
    lines.append(f"shift by bias: {_right(_ok(out(ones, bias), plain + bias), 'with weight 1 the result is not its normalised rows plus bias')}")
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


ACTIVATION_AT = np.linspace(-4.0, 4.0, 17)
KNOWN = {"ReLU": lambda t: np.maximum(t, 0), "the exact (erf) GELU": gpt2_np.gelu_exact,
         "SiLU": lambda t: t / (1 + np.exp(-t)), "no activation": lambda t: t, "tanh": np.tanh,
         "sigmoid": lambda t: 1 / (1 + np.exp(-t))}


def mlp(run, module, x: np.ndarray, p: dict[str, np.ndarray]) -> list[str]:
    """c_fc alone, c_proj alone, and the activation read through them: c_fc made to output chosen
    numbers (weight 0, bias = the points) and c_proj to pass its first inputs through."""
    h = x @ p["c_fc_weight"] + p["c_fc_bias"]
    fc = _ok(_out(run, module.c_fc, x), h)
    proj = _ok(_out(run, module.c_proj, gpt2_np.gelu_tanh(h)), gpt2_np.gelu_tanh(h) @ p["c_proj_weight"] + p["c_proj_bias"])
    C, I = p["c_proj_weight"].shape[1], p["c_fc_weight"].shape[1]
    points = np.zeros(I)
    points[:len(ACTIVATION_AT)] = ACTIVATION_AT
    through = np.zeros((C, I))
    through[np.arange(C), np.arange(C)] = 1.0  # c_proj's output c = its input c

    def read(at: np.ndarray) -> np.ndarray:  # forward with c_fc giving `at` and c_proj passing it through
        probe = {"c_fc.weight": np.zeros((I, C)), "c_fc.bias": at, "c_proj.weight": through, "c_proj.bias": np.zeros(C)}
        return _loaded(run, module, probe, lambda: _out(run, module, x))

    around = read(np.zeros(I))  # GELU(0) = 0: anything but 0 comes from around the three pieces
    if np.abs(around).max() > 1e-6:
        return [f"where: c_fc alone {_right(fc, 'is wrong')}; c_proj alone {_right(proj, 'is wrong')}; with c_fc "
                f"giving 0 and c_proj passing its input on, forward should return 0 (GELU(0) = 0) but returns up "
                f"to {np.abs(around).max():.3g}: something is added around them"]
    act = read(points)[0, 0, :len(ACTIVATION_AT)]
    gelu = gpt2_np.gelu_tanh(ACTIVATION_AT)
    if np.allclose(act, gelu, atol=1e-4):
        activation = "right (GELU, tanh approximation)"
    else:
        like = min(KNOWN, key=lambda k: np.abs(KNOWN[k](ACTIVATION_AT) - act).max())
        near = np.abs(KNOWN[like](ACTIVATION_AT) - act).max() < 1e-3
        shown = ", ".join(f"{v:.3g}" for v in act[[4, 6, 8, 10, 12]])
        activation = (f"at x = -2, -1, 0, 1, 2 it gives {shown}; GPT-2's GELU gives "
                      f"{', '.join(f'{v:.3g}' for v in gelu[[4, 6, 8, 10, 12]])}" + (f" (that is {like})" if near else ""))
    lines = [f"c_fc alone: {_right(fc, 'differs from x @ W + b with the checkpoint weights')}",
             f"the activation between them (read through c_fc and c_proj): {activation}",
             f"c_proj alone: {_right(proj, 'differs from x @ W + b with the checkpoint weights')}"]
    if fc and proj and activation.startswith("right"):
        lines.append("each piece is right alone: what forward does around them is not (their order, an extra term?)")
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


def rows(got: np.ndarray, table: np.ndarray, want_rows: np.ndarray, what: str) -> list[str]:
    """Which rows of `table` the vectors of `got` [..., C] are; `want_rows` are the right ones."""
    flat = got.reshape(-1, got.shape[-1])
    if flat.shape[0] != want_rows.size:
        return []
    table = table.astype(np.float64)
    distance = (flat**2).sum(1)[:, None] - 2 * flat @ table.T + (table**2).sum(1)[None, :]
    held = distance.argmin(1)
    exact = np.array([np.allclose(flat[i], table[held[i]], atol=1e-6) for i in range(len(flat))])
    want = want_rows.reshape(-1)
    if exact.all():
        offsets = set((held - want).tolist())
        if len(offsets) == 1:
            return [f"where: every position holds a row of {what}, each {offsets.pop():+d} from the right one"]
        wrong = np.flatnonzero(held != want)
        shown = ", ".join(f"{held[i]} (expected {want[i]})" for i in wrong[:4])
        return [f"where: every position holds a row of {what}, {len(wrong)} of {len(want)} the wrong one: rows {shown}"]
    right = table[want]
    scale = float((flat * right).sum() / (right * right).sum())
    if np.allclose(flat, scale * right, rtol=1e-4, atol=1e-6):
        return [f"where: the right rows of {what}, multiplied by {scale:.4g}"]
    return [f"where: {int((~exact).sum())} of {len(want)} positions hold no row of {what} (nor a multiple of the right one)"]


def attention(run, attn_fn, q: np.ndarray, k: np.ndarray) -> list[str]:
    """_attn's weights, read by passing one-hot values (weights @ one-hot = the weights)."""
    B, H, T, D = q.shape
    if D < T:
        return []
    onehot = np.zeros((B, H, T, D))
    onehot[:, :, np.arange(T), np.arange(T)] = 1.0
    try:
        w = _out(run, attn_fn, q, k, onehot)[..., :T]
    except Exception:  # noqa: BLE001 - a probe that cannot run says nothing
        return []
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    scores = q @ np.swapaxes(k, -1, -2)
    right = attention_np.softmax(np.where(future, -np.inf, scores / np.sqrt(D)))
    if _ok(w, right):
        return ["where: the attention weights are right (read through one-hot values); the weighted sum of "
                "the values is not"]
    leak = float(np.abs(w[..., future]).max()) if future.any() else 0.0
    sums = w.sum(-1)
    lines = [f"mask: {_right(leak < 1e-6, f'future keys get weight up to {leak:.3g} (expected 0)')}",
             f"normalisation: {_right(np.allclose(sums, 1, atol=1e-4), f'each query weights sum to {sums.min():.3g}..{sums.max():.3g} over the keys (expected 1)')}"]
    allowed = ~future & (np.tril(np.ones((T, T), dtype=bool), -1) | np.eye(T, dtype=bool))
    logw = np.log(np.clip(w, 1e-30, None))
    s, lw = scores[..., allowed], logw[..., allowed]
    s, lw = s - s.mean(-1, keepdims=True), lw - lw.mean(-1, keepdims=True)
    factor = float((s * lw).sum() / (s * s).sum())  # log w = factor * (q.k) + a constant per row
    lines.append(f"scale: {_right(abs(factor * np.sqrt(D) - 1) < 1e-3, f'the weights follow softmax(q.k x {factor:.4g}), expected x {1 / np.sqrt(D):.4g} = 1/sqrt(head_dim)')}")
    return ["where (the weights, read through one-hot values): " + lines[0], *lines[1:]]


def attention_layers(run, module, refs: dict) -> list[str]:
    """c_attn and c_proj alone, on their reference inputs."""
    C = refs["ln_1"].shape[-1]
    params = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    c_attn = _ok(_out(run, module.c_attn, refs["ln_1"]), refs["ln_1"] @ params["c_attn_weight"] + params["c_attn_bias"])
    c_proj = _ok(_out(run, module.c_proj, refs["merged"]), refs["attn"])
    lines = [f"where: c_attn alone {_right(c_attn, 'is wrong')}; c_proj alone {_right(c_proj, 'is wrong')}"]
    if c_attn and c_proj:
        lines.append(f"c_attn's output has q, k, v as {C}-wide thirds, in that order: with the parts above right, "
                     "look at how forward splits and passes them")
    return lines


def residual(run, fn, x: np.ndarray) -> list[str]:
    """residual_step with stand-in ln and sub-layers that make each sub-part visible."""
    def same(t):
        return t

    def zero(t):
        return t * 0.0

    def double(t):
        return t * 2.0

    def plus_one(t):
        return t + 1.0

    def out(ln, sublayer):
        return _out(run, lambda t: fn(t, ln, sublayer), x)

    lines = [f"with a sub-layer that returns 0, the stream passes through: {_right(_ok(out(same, zero), x), 'no')}",
             f"the sub-layer's output is added to the stream (ln passing x on, the sub-layer doubling it): "
             f"{_right(_ok(out(same, double), 3 * x), 'no')}",
             f"the sub-layer reads ln(x) (ln doubling x, the sub-layer adding 1: x + (2x + 1)): "
             f"{_right(_ok(out(double, plus_one), 3 * x + 1), 'no')}"]
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


def block(run, module, x: np.ndarray, b) -> list[str]:
    """Each half alone, the other's c_proj silenced (its output is then its bias: 0 here too)."""
    C = x.shape[-1]

    def silenced(prefix: str, inner: int):
        return {f"{prefix}.c_proj.weight": np.zeros((C, inner)), f"{prefix}.c_proj.bias": np.zeros(C)}

    attn_half = _loaded(run, module, silenced("mlp", b.p["mlp.c_fc.weight"].shape[1]), lambda: _out(run, module, x))
    mlp_half = _loaded(run, module, silenced("attn", C), lambda: _out(run, module, x))
    a_ok, m_ok = _ok(attn_half, x + b.attn(b.ln_1(x))), _ok(mlp_half, x + b.mlp(b.ln_2(x)))
    lines = [f"the attention half alone (the MLP silenced): {_right(a_ok, 'is not x + attn(ln_1(x))')}",
             f"the MLP half alone (the attention silenced): {_right(m_ok, 'is not x + mlp(ln_2(x))')}"]
    if a_ok and m_ok:
        lines.append("each half is right alone: how they are chained is not (the MLP half reads the stream after "
                     "the attention half was added)")
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


def model(run, module, ids: np.ndarray, refs: dict) -> list[str]:
    """The stream as it goes through the learner's model: every block's input and output recorded."""
    from checker.runner import int_tensor

    blocks = list(getattr(module, "h", []))
    seen: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i, blk in enumerate(blocks):
        forward = blk.forward

        def recording(x, *args, i=i, forward=forward, **kwargs):
            y = forward(x, *args, **kwargs)
            seen.append((i, np.from_dlpack(x).astype(np.float64), np.from_dlpack(y).astype(np.float64)))
            return y

        object.__setattr__(blk, "forward", recording)
    try:
        run.call(module, int_tensor(ids))
    finally:
        for blk in blocks:
            object.__delattr__(blk, "forward")
    if not seen:
        return []
    hidden, n = refs["hidden"], len(blocks)
    wants = [*hidden[1:n], refs["last_block_out"]]  # each block's right output
    order = [i for i, _, _ in seen]
    if order != list(range(n)):
        return [f"where: the blocks ran in the order {', '.join(f'h.{i}' for i in order[:14])}"
                f"{', ...' if len(order) > 14 else ''} (expected h.0 to h.{n - 1}, once each)"]
    if not _ok(seen[0][1], hidden[0]):
        return ["where: the input of h.0 is not wte(ids) + wpe(positions): the embeddings"]
    for (i, x, y), want in zip(seen, wants):
        if i and not _ok(x, seen[i - 1][2], WHOLE_MODEL):
            return [f"where: h.0 to h.{i - 1} are right, but h.{i}'s input is not h.{i - 1}'s output"]
        if not _ok(y, want, WHOLE_MODEL):
            return [f"where: the stream is right up to h.{i}'s input; h.{i}'s output is not"]
    return [f"where: every block's input and output are right; what follows h.{n - 1} is not (ln_f?)"]


def head(run, module, ids: np.ndarray, refs: dict) -> list[str]:
    """The body's output (model.transformer) against the last hidden state."""
    from checker.runner import int_tensor

    body = getattr(module, "transformer", None)
    if body is None:
        return []
    hidden = to_numpy(run.call(body, int_tensor(ids)), "transformer")
    if _ok(hidden, refs["last_hidden"], WHOLE_MODEL):
        return ["where: the body (self.transformer) gives the right last hidden state; the head after it "
                "(hidden_states @ wte.weight.T) is not"]
    return ["where: the body (self.transformer) already differs from the last hidden state: run step 10's check"]
