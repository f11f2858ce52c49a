"""Where inside a part the learner's code goes wrong, when no catalogued mistake matches.

Each function probes the learner's own pieces with reference inputs, or with
inputs and weights chosen so that one sub-part alone decides the result, and
returns lines for the report, one per sub-part: "right" or what it does.
They run only after a part has failed unnamed, inside the check's safe call.
Step 07's attention has its own (checker.diagnosis.localise_attention).

  layer_norm      centring, division by the standard deviation, weight, bias
  mlp             c_fc alone, the activation (sampled), c_proj alone, the chaining
  rows            which table rows an embedding's positions hold (the ids of those off)
  residual        the stream passed through, the sub-layer's input, its output added
                  (how many times)
  block           each half alone (the other silenced), what the attention half adds
                  its output to, then the chaining
"""

from __future__ import annotations

import re

import numpy as np

from checker.references import gpt2_np
from checker.reporting.compare import ONE_LAYER, Tolerance, compare
from checker.running.tensors import tensor, to_numpy


def close(got: np.ndarray, want: np.ndarray, tol: Tolerance = ONE_LAYER) -> bool:
    return np.shape(got) == np.shape(want) and compare(got, want, axes=(), mistakes=[], tol=tol).ok


def right_or(ok: bool, wrong: str) -> str:
    return "right" if ok else wrong


def loaded(run, module, state: dict[str, np.ndarray], fn):
    """fn() with `state` loaded into `module` (the rest of its parameters kept), then its own weights back."""
    before = {name: np.from_dlpack(t).copy() for name, t in module.parameters}
    run.call(module.load_state_dict, {**before, **{k: np.ascontiguousarray(v, np.float32) for k, v in state.items()}})
    try:
        return fn()
    finally:
        run.call(module.load_state_dict, before)


def probe_out(run, fn, *arrays) -> np.ndarray:
    return to_numpy(run.call(fn, *(tensor(a) for a in arrays)), "the probe")


def probe_rows(C: int, seed: int = 3) -> np.ndarray:
    """[1, 8, C] rows with means from -3 to 5 and spreads from 0.1 to 10: any formula that is not
    LayerNorm's gives another result on some of them (a row with mean 0 and spread 1, as real
    activations nearly are, cannot tell var from mean(x*x), nor x - mean from x)."""
    z = np.random.default_rng(seed).standard_normal((8, C))
    z = (z - z.mean(-1, keepdims=True)) / z.std(-1, keepdims=True)
    means = np.array([-3.0, 5.0, 0.5, 2.0, -1.0, 4.0, 0.0, 1.5])[:, None]
    spreads = np.array([0.1, 2.0, 10.0, 0.5, 3.0, 1.0, 0.3, 6.0])[:, None]
    return (means + spreads * z)[None]


def layer_norm(run, module, x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> list[str]:
    """LayerNorm's sub-parts on probe rows of varied mean and spread, each isolated by loading
    weight 1 / bias 0 where the others would blur it."""
    C = x.shape[-1]
    x = probe_rows(C)
    ones, zeros = np.ones(C), np.zeros(C)
    z = gpt2_np.layer_norm(x, ones, zeros, eps)  # the normalised rows alone

    def out(w, b):
        return loaded(run, module, {"weight": w, "bias": b}, lambda: probe_out(run, module, x))

    plain = out(ones, zeros)
    lines = []
    if close(plain, z):
        lines.append("with weight 1 and bias 0 it normalises each row right (rows of mean -3 to 5, spread 0.1 "
                     "to 10): the centring and the division by the standard deviation are right")
    else:
        mean = np.abs(plain.mean(-1))
        spread = plain.std(-1) / z.std(-1)
        centred = bool(mean.max() < 1e-4)
        average = f"with weight 1 and bias 0 its rows should average 0, they average up to {mean.max():.3g}"
        lines.append(f"centring: {right_or(centred, average)}")
        if np.allclose(spread, 1, atol=1e-4):
            division = "right" if centred else "right (the spread of its rows is right)"
        else:
            shown = ", ".join(f"{v:.3g}x" for v in spread[0, [6, 1, 2]])
            division = (f"with weight 1 and bias 0 its rows spread {shown} as much as they should (rows of mean 0, "
                        f"5, 0.5): the variance, eps, the square root?")
        lines.append(f"division by the standard deviation: {division}")
    # weight and bias against the learner's own normalised rows, so that they are judged on their own
    scale = close(out(weight, zeros), plain * weight)
    shift = close(out(ones, bias), plain + bias)
    if scale and shift and not close(out(weight, bias), plain * weight + bias):
        lines.append("scale by weight, then shift by bias: each alone does what it should, but with both loaded "
                     "the result is not normalised * weight + bias: the shift by bias comes after the scale")
    else:
        lines.append("scale by weight: "
                     f"{right_or(scale, 'with bias 0 the result is not its normalised rows times weight')}")
        lines.append("shift by bias: "
                     f"{right_or(shift, 'with weight 1 the result is not its normalised rows plus bias')}")
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


ACTIVATION_AT = np.linspace(-4.0, 4.0, 17)
KNOWN = {"ReLU": lambda t: np.maximum(t, 0), "the exact (erf) GELU": gpt2_np.gelu_exact,
         "SiLU": lambda t: t / (1 + np.exp(-t)), "no activation": lambda t: t, "tanh": np.tanh,
         "sigmoid": lambda t: 1 / (1 + np.exp(-t))}


def _gelu_family(x: np.ndarray, y: np.ndarray) -> str:
    """What activation y = f(x) is among the forms GELU is written in, with its constants fitted: k x GELU(x),
    x sigmoid(a x) and 0.5 x (1 + tanh(s (x + c x^3))) (both fits linear: logit(y / x) = a x; artanh(2y / x - 1)
    = s x + s c x^3); "" when none fits within 1e-3."""
    gelu = gpt2_np.gelu_tanh(x)
    if (k := _factor(y, gelu)) is not None:
        return f" (that is {k:.3g}x GPT-2's GELU{': is its 0.5 left out?' if abs(k - 2) < 1e-3 else ''})"
    fits = []
    on = np.abs(x) > 1e-6
    ratio = np.where(on, y / np.where(on, x, 1.0), 0.5)  # f(x) / x; both forms give 0.5 at x = 0
    inside = on & (ratio > 1e-6) & (ratio < 1 - 1e-6)  # where the fits' inverses are finite (not saturated)
    if inside.sum() >= 4 and np.all((ratio >= 0) & (ratio <= 1)):
        xs, r = x[inside], ratio[inside]
        a = float(np.linalg.lstsq(xs[:, None], np.log(r / (1 - r)), rcond=None)[0][0])
        quick = " (the 'quick' GELU)" if abs(a - 1.702) < 5e-3 else ""
        fits.append((x / (1 + np.exp(-a * x)), f"x sigmoid({a:.4g} x){quick}"))
        s, sc = np.linalg.lstsq(np.stack([xs, xs ** 3], axis=1), np.arctanh(2 * r - 1), rcond=None)[0]
        fits.append((0.5 * x * (1 + np.tanh(s * x + sc * x ** 3)),
                     f"0.5 x (1 + tanh({s:.4g} (x + {sc / s:.4g} x^3)))"))
    for values, said in fits:
        if np.abs(values - y).max() < 1e-3:
            return f" (that is {said}; GPT-2's is 0.5 x (1 + tanh(0.7979 (x + 0.044715 x^3))))"
    return ""


def _factor(got: np.ndarray, want: np.ndarray) -> float | None:
    """k when got = k * want (least squares, within 1e-4 of want's size), else None."""
    k = float((got * want).sum() / max((want * want).sum(), 1e-30))
    return k if np.abs(got - k * want).max() <= 1e-4 * max(np.abs(want).max(), 1e-30) else None


def bias_use(got: np.ndarray, bias: np.ndarray, name: str) -> str | None:
    """What forward made of `name`'s bias when `got` is k x `bias` for k != 1; None otherwise."""
    if np.allclose(got, bias, atol=1e-5 * np.abs(bias).max()):
        return None
    k = _factor(got, bias)
    if k is not None:
        return (f"{name}'s bias: forward adds {k:.3g}x {name}'s bias (expected once: call the layer, and add nothing "
                "after it)")
    return None  # not a multiple of the bias: what changed is not the bias alone


def mlp(run, module, x: np.ndarray, p: dict[str, np.ndarray]) -> list[str]:
    """c_fc alone, c_proj alone, and the activation read through them: the input a one-hot vector,
    c_fc made to output chosen numbers (through its weight, then through its bias) and c_proj to
    pass its first inputs through; then c_proj's bias alone (every weight 0)."""
    h = x @ p["c_fc_weight"] + p["c_fc_bias"]
    fc = close(probe_out(run, module.c_fc, x), h)
    proj = close(probe_out(run, module.c_proj, gpt2_np.gelu_tanh(h)),
               gpt2_np.gelu_tanh(h) @ p["c_proj_weight"] + p["c_proj_bias"])
    C, I = p["c_proj_weight"].shape[1], p["c_fc_weight"].shape[1]
    points = np.zeros(I)
    points[:len(ACTIVATION_AT)] = ACTIVATION_AT
    through = np.zeros((C, I))
    through[np.arange(C), np.arange(C)] = 1.0  # c_proj's output c = its input c
    e0 = np.zeros((1, 1, C))
    e0[..., 0] = 1.0  # c_fc's output = its weight's first column + its bias

    def read(at: np.ndarray, *, via_bias: bool, proj_bias: np.ndarray | None = None, proj=through) -> np.ndarray:
        w = np.zeros((I, C))
        if not via_bias:
            w[:, 0] = at
        probe = {"c_fc.weight": w, "c_fc.bias": at if via_bias else np.zeros(I), "c_proj.weight": proj,
                 "c_proj.bias": np.zeros(C) if proj_bias is None else proj_bias}
        return loaded(run, module, probe, lambda: probe_out(run, module, e0))[0, 0]

    around = read(np.zeros(I), via_bias=False)  # GELU(0) = 0: anything but 0 comes from around the three pieces
    if np.abs(around).max() > 1e-6:
        return [f"where: c_fc alone {right_or(fc, 'is wrong')}; c_proj alone {right_or(proj, 'is wrong')}; with c_fc "
                f"giving 0 and c_proj passing its input on, forward should return 0 (GELU(0) = 0) but returns up "
                f"to {np.abs(around).max():.3g}: something is added around them"]
    b = np.linspace(-1.0, 1.0, C)
    proj_bias = bias_use(read(np.zeros(I), via_bias=False, proj_bias=b, proj=np.zeros((C, I))), b, "c_proj")
    act = read(points, via_bias=False)[:len(ACTIVATION_AT)]
    gelu = gpt2_np.gelu_tanh(ACTIVATION_AT)
    fc_bias = None
    if np.allclose(act, gelu, atol=1e-4):
        activation = "right (GELU, tanh approximation)"
        through_bias = read(points, via_bias=True)[:len(ACTIVATION_AT)]
        if not np.allclose(through_bias, gelu, atol=1e-4):
            k = min(np.linspace(-3, 3, 61),
                    key=lambda k: np.abs(gpt2_np.gelu_tanh(k * ACTIVATION_AT) - through_bias).max())
            seen = (f" GELU({k:.3g}x its bias)"
                    if np.allclose(gpt2_np.gelu_tanh(k * ACTIVATION_AT), through_bias, atol=1e-3)
                    else " something else")
            fc_bias = (f"c_fc's bias: when c_fc's output comes from its bias, the activation gets{seen}, not "
                       f"GELU(the bias): forward uses c_fc's bias again (call the layer, add nothing after it)")
    else:
        like = min(KNOWN, key=lambda k: np.abs(KNOWN[k](ACTIVATION_AT) - act).max())
        near = np.abs(KNOWN[like](ACTIVATION_AT) - act).max() < 1e-3
        shown = ", ".join(f"{v:.3g}" for v in act[[4, 6, 8, 10, 12]])
        activation = (f"at x = -2, -1, 0, 1, 2 it gives {shown}; GPT-2's GELU gives "
                      f"{', '.join(f'{v:.3g}' for v in gelu[[4, 6, 8, 10, 12]])}"
                      + (f" (that is {like})" if near else _gelu_family(ACTIVATION_AT, act)))
    lines = [fc_bias or f"c_fc alone: {right_or(fc, 'differs from x @ W + b with the checkpoint weights')}",
             f"the activation between them (read through c_fc and c_proj): {activation}",
             proj_bias or f"c_proj alone: {right_or(proj, 'differs from x @ W + b with the checkpoint weights')}"]
    if fc and proj and activation.startswith("right") and not (fc_bias or proj_bias):
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
        if want_rows.ndim == 2:  # [B, T]: is each position another position's right row?
            grid = held.reshape(want_rows.shape)
            for shift in (1, 2, 3, -1, -2, -3):
                moved = grid[:, max(shift, 0):grid.shape[1] + min(shift, 0)]
                source = want_rows[:, max(-shift, 0):want_rows.shape[1] - max(shift, 0)]
                if moved.size and np.array_equal(moved, source):
                    return [f"where: every position holds the row of the token {abs(shift)} position"
                            f"{'s' if abs(shift) > 1 else ''} {'before' if shift > 0 else 'after'} it: "
                            f"the ids were shifted along the sequence"]
        wrong = np.flatnonzero(held != want)
        shown = ", ".join(f"{held[i]} (expected {want[i]})" for i in wrong[:4])
        return [f"where: every position holds a row of {what}, {len(wrong)} of {len(want)} the wrong one: rows {shown}"]
    right = table[want]
    scale = float((flat * right).sum() / (right * right).sum())
    if np.allclose(flat, scale * right, rtol=1e-4, atol=1e-6):
        return [f"where: the right rows of {what}, multiplied by {scale:.4g}"]
    extra = flat - right
    if np.abs(extra - extra[0]).max() <= 1e-6 + 1e-5 * np.abs(extra[0]).max():
        same = np.flatnonzero(np.all(np.abs(table - extra[0]) <= 1e-6, axis=1))
        which = f" (row {same[0]} of {what})" if same.size else ""
        return [f"where: every position holds its right row of {what} plus the same vector{which}: "
                "something is added to the rows"]
    off = ~np.all(np.abs(flat - right) <= 1e-6 + 1e-5 * np.abs(right), axis=1)
    held_zero = " and hold zeros" if np.all(flat[off] == 0) else ""
    return [f"where: {int((~exact).sum())} of {len(want)} positions hold no row of {what} (nor a multiple of the "
            f"right one){_of_ids(off, want)}{held_zero}"]


def _of_ids(off: np.ndarray, ids: np.ndarray) -> str:
    """', exactly the positions of id 50256' when the positions off [N] are those of some ids and no others."""
    wrong = np.unique(ids[off])
    if not off.any() or off.all() or not np.array_equal(off, np.isin(ids, wrong)) or len(wrong) > 3:
        return ""
    return f", exactly the positions of id{'s' if len(wrong) > 1 else ''} {', '.join(map(str, wrong))}"


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
        return probe_out(run, lambda t: fn(t, ln, sublayer), x)

    passed = out(same, zero)
    k = _factor(passed, x)
    kept = "no" if k is None else f"no: it returns {k:.3g}x the stream (the stream added {k:.3g} times?)"
    stream = x if k is None else k * x  # the other two are judged on the stream as this code passes it on
    given = "" if k is None or abs(k - 1) < 1e-3 else " (on top of the stream as it passes)"
    a = _factor(out(same, double) - stream, 2 * x)  # how many times the sub-layer's output is added
    a = 1.0 if a is None or abs(a - 1) < 1e-3 else a
    added = f"no: it adds {a:.3g}x the sub-layer's output (expected once, as it is)" if a != 1 else "no"
    read = right_or(close(out(double, plus_one), stream + a * (2 * x + 1)), "no")
    lines = [f"with a sub-layer that returns 0, the stream passes through: {right_or(close(passed, x), kept)}",
             f"the sub-layer's output is added to the stream (ln passing x on, the sub-layer doubling it): "
             f"{right_or(close(out(same, double), stream + 2 * x), added) + given}",
             f"the sub-layer reads ln(x) (ln doubling x, the sub-layer adding 1: x + (2x + 1)): "
             f"{read + given if a == 1 else read + f' (its output taken {a:.3g}x)'}"]
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


def block(run, module, x: np.ndarray, b) -> list[str]:
    """Each half alone, the other's c_proj silenced (its output is then its bias: 0 here too)."""
    C = x.shape[-1]

    def silenced(prefix: str, inner: int):
        return {f"{prefix}.c_proj.weight": np.zeros((C, inner)), f"{prefix}.c_proj.bias": np.zeros(C)}

    attn_half = loaded(run, module, silenced("mlp", b.p["mlp.c_fc.weight"].shape[1]), lambda: probe_out(run, module, x))
    mlp_half = loaded(run, module, silenced("attn", C), lambda: probe_out(run, module, x))
    a_ok, m_ok = close(attn_half, x + b.attn(b.ln_1(x))), close(mlp_half, x + b.mlp(b.ln_2(x)))
    attn_wrong, mlp_wrong = "is not x + attn(ln_1(x))", "is not x + mlp(ln_2(x))"
    # What the attention half adds its output to, when not x: the MLP half then reads that stream.
    base = next(((name, s) for name, s in (("ln_1(x), the normalised stream", b.ln_1(x)), ("0", 0 * x))
                 if not a_ok and close(attn_half, s + b.attn(b.ln_1(x)))), None)
    if base:
        attn_wrong = (f"is {base[0].split(',')[0]} + attn(ln_1(x)): it adds its output to {base[0]}, not to x as "
                      "it came in")
        if not m_ok and close(mlp_half, base[1] + b.mlp(b.ln_2(base[1]))):
            m_ok, mlp_wrong = True, ""
    lines = [f"the attention half alone (the MLP silenced): {right_or(a_ok, attn_wrong)}",
             f"the MLP half alone (the attention silenced): {right_or(m_ok, mlp_wrong)}"
             + (f" (on the stream the attention half passes on, {base[0].split(',')[0]})" if base and m_ok else "")]
    if a_ok and m_ok:
        lines.append("each half is right alone: how they are chained is not (the MLP half reads the stream after "
                     "the attention half was added)")
    return ["where (each sub-part alone): " + lines[0], *lines[1:]]


def _clauses(lines: list[str]) -> list[str]:
    text = [re.sub(r"^where[^:]*: ", "", line) for line in lines]
    return [re.sub(r"\s*\([^()]*\)$", "", c).strip() for line in text for c in line.split("; ")]


def allright_or(lines: list[str]) -> bool:
    """Every sub-part line says right: the probes found nothing."""
    return bool(lines) and all(c.endswith("right") for c in _clauses(lines))


def describe(got: np.ndarray, want: np.ndarray, x: np.ndarray | None = None) -> str | None:
    """The learner's output against the expected one in words, when it is a simple function of it:
    k x the expected, the expected plus k x the input, or plus one vector at every position."""
    k = _factor(got, want)
    if k is not None:
        return f"your output is {k:.3g}x the expected output"
    d = got - want
    if x is not None and np.shape(x) == np.shape(d) and (k := _factor(d, x)) is not None:
        return (f"your output is the expected output plus {k:.3g}x the input"
                + (": the input (the stream) was added twice" if abs(k - 1) < 1e-3 else ""))
    rows = d.reshape(-1, d.shape[-1])
    if len(rows) > 1 and np.abs(rows - rows[0]).max() <= 1e-3 * max(np.abs(rows[0]).max(), 1e-30):
        return ("your output is the expected output plus the same vector at every position (up to "
                f"{np.abs(rows[0]).max():.3g}): a bias or a row added once too often, or one missing?")
    return None


def unplaced(lines: list[str], got: np.ndarray, want: np.ndarray, x: np.ndarray | None) -> list[str]:
    """When every sub-part probe says right, say that they could not place the fault, and what the
    output is against the expected one when that can be said."""
    if not allright_or(lines):
        return []
    said = describe(got, want, x)
    return ["these probes could not place the fault: each sub-part is right on its own inputs, the whole is not"
            + (f"; {said}" if said else "")]


def mask(got: np.ndarray, T: int, N: int) -> list[str]:
    """A causal mask [T, N + T] read against its rule: query q (absolute position N + q) keeps
    the keys k <= N + q (0) and masks the later ones (-inf)."""
    if got.shape != (T, N + T):
        return []
    q, k = np.arange(T)[:, None] + N, np.arange(N + T)[None, :]
    masked = np.isneginf(got)
    lines = []
    leak = (k > q) & ~masked
    if leak.any():
        ahead = int((k - q)[leak].max())
        lines.append(f"the future: keys up to {ahead} position{'s' if ahead > 1 else ''} after the query are not "
                     f"masked ({int(leak.sum())} entries; every key after the query must hold -inf)")
    hidden = (k < q) & masked
    if hidden.any():
        lines.append(f"the past: {int(hidden.sum())} keys before the query are masked (keys before it, cached "
                     "ones included, must hold 0)")
    if ((k == q) & masked).any():
        lines.append("the query's own key is masked: a token must see itself")
    kept_values = got[(k <= q) & ~masked]
    if kept_values.size and np.any(kept_values != 0):
        lines.append(f"kept entries hold {kept_values[kept_values != 0][0]:.3g}, not 0")
    finite_masked = got[(k > q) & np.isfinite(got) & (got != 0)]
    if finite_masked.size:
        lines.append(f"masked entries hold {finite_masked[0]:.3g}, not -inf (softmax must give them exactly 0)")
    return ["where: " + lines[0], *lines[1:]] if lines else []
