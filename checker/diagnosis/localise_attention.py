"""Where inside step 07's attention the learner's code goes wrong, when no catalogued mistake matches:
probes of the learner's own pieces (checker.diagnosis.localise's way), one line per sub-part.

  attention         the weights _attn gives (read through one-hot values): mask, normalisation, and the
                    softmax they follow (the scale, the scores transposed, a factor per key)
  attention_layers  which of c_attn's thirds forward attends with; then c_attn and c_proj alone, and each bias
  layout            where a reshape-and-transpose puts each value (run on 0, 1, 2, ...)
"""

from __future__ import annotations

import itertools

import numpy as np

from checker.diagnosis.localise import bias_use, close, loaded, probe_out, right_or
from checker.references import attention_np


def _softmax_fit(logw: np.ndarray, scores: np.ndarray, kept: np.ndarray, *, per_key: bool) -> tuple[float, bool]:
    """How the log-weights of each head [N, T, T] follow its scores over its kept entries [N, T, T]: log w = f s +
    c[query] (+ g[key] when per_key), f fitted per head by least squares. Returns f's median over the heads that
    hold more entries than unknowns, and whether each of those fits to 1e-3 (a float32 softmax's weights are
    exact to far less); (nan, False) when none does."""
    T = scores.shape[-1]
    factors, fits = [], True
    for lw, s, k in zip(logw.reshape(-1, T, T), scores.reshape(-1, T, T), kept.reshape(-1, T, T), strict=True):
        qi, kj = np.nonzero(k)
        design = np.column_stack([s[qi, kj], np.eye(T)[qi], *([np.eye(T)[kj][:, 1:]] if per_key else [])])
        if len(qi) <= np.linalg.matrix_rank(design[:, 1:]) + 1:
            continue  # no more entries than unknowns: nothing to read
        solution, *_ = np.linalg.lstsq(design, lw[qi, kj], rcond=None)
        factors.append(solution[0])
        fits &= bool(np.abs(design @ solution - lw[qi, kj]).max() < 1e-3)
    return (float(np.median(factors)), fits) if factors else (float("nan"), False)


def attention(run, attn_fn, q: np.ndarray, k: np.ndarray) -> list[str]:
    """_attn's weights, read by passing one-hot values (weights @ one-hot = the weights), then read against
    softmax of the scaled scores: the scale, or the scores transposed (query and key exchanged), or a factor
    of each key's own (a max or sum over the queries' axis)."""
    B, H, T, D = q.shape
    if D < T:
        return []
    onehot = np.zeros((B, H, T, D))
    onehot[:, :, np.arange(T), np.arange(T)] = 1.0
    try:
        w = probe_out(run, attn_fn, q, k, onehot)[..., :T]
    except Exception:  # noqa: BLE001 - a probe that cannot run says nothing
        return []
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    scores = q @ np.swapaxes(k, -1, -2)
    right = attention_np.softmax(np.where(future, -np.inf, scores / np.sqrt(D)))
    if close(w, right):
        return ["where: the attention weights are right (read through one-hot values); the weighted sum of "
                "the values is not"]
    leak = float(np.abs(w[..., future]).max()) if future.any() else 0.0
    sums = w.sum(-1)
    summed = f"each query weights sum to {sums.min():.3g}..{sums.max():.3g} over the keys (expected 1)"
    lines = [f"mask: {right_or(leak < 1e-6, f'future keys get weight up to {leak:.3g} (expected 0)')}",
             f"normalisation: {right_or(np.allclose(sums, 1, atol=1e-4), summed)}"]
    kept = ~future & (w > 1e-30)  # the past's weights, where they did not underflow
    logw = np.log(np.clip(w, 1e-30, None))
    expected = f"expected x {1 / np.sqrt(D):.4g} = 1/sqrt(head_dim)"
    factor, fits = _softmax_fit(logw, scores, kept, per_key=False)
    if fits:
        followed = f"the weights follow softmax(q.k x {factor:.4g}), {expected}"
        lines.append(f"scale: {right_or(abs(factor * np.sqrt(D) - 1) < 1e-3, followed)}")
    elif (swapped := _softmax_fit(logw, np.swapaxes(scores, -1, -2), kept, per_key=False))[1]:
        lines.append(f"scores: the weights follow softmax(k.q x {swapped[0]:.4g}) ({expected}), the scores "
                     "transposed: query @ key^T is [queries, keys]; key @ query^T swaps the two")
    elif (keyed := _softmax_fit(logw, scores, kept, per_key=True))[1]:
        lines.append(f"softmax: each key's weight is off by a factor of its own, the same for every query (the "
                     f"scores x {keyed[0]:.4g}): what is subtracted or divided inside it is taken over the queries "
                     "(axis -2), not over each query's keys (axis -1)")
    elif not np.isnan(factor):
        lines.append("softmax: the weights are not softmax(q.k x c) for any one c, nor of k.q: within a query "
                     "they are not exp of the scaled scores, normalised")
    return ["where (the weights, read through one-hot values): " + lines[0], *lines[1:]]


THIRDS = ("query", "key", "value")


def thirds_taken(got: np.ndarray, refs: dict, H: int) -> str | None:
    """Which of c_attn's thirds forward took as query, key and value, when its output is the attention of another
    choice of them (one may be taken twice) through c_proj: a line saying so, else None."""
    heads = [attention_np.split_heads(t, H) for t in np.split(refs["qkv"].astype(np.float64), 3, axis=-1)]
    for pick in itertools.product(range(3), repeat=3):
        out = attention_np.merge_heads(attention_np.attend(*(heads[i] for i in pick)))
        if pick != (0, 1, 2) and close(got, out @ refs["c_proj_weight"] + refs["c_proj_bias"]):
            taken = ", ".join(f"its {THIRDS[i]} third as the {role}" for i, role in zip(pick, THIRDS, strict=True)
                              if THIRDS[i] != role)
            return (f"where: forward's output is the attention of c_attn's thirds taken as "
                    f"({', '.join(THIRDS[i] for i in pick)}) for (query, key, value): it passes {taken}")
    return None


def _moved(split: tuple[int, ...], names: str, order: tuple[int, ...], want: tuple[int, ...]) -> str:
    """'x.reshape([2, 12, 10, 64]).permute([0, 2, 1, 3]).reshape([2, 10, 768]) (axes B, T, H, D)'"""
    return (f"x.reshape({list(split)}).permute({list(order)}).reshape({list(want)}) "
            f"(axes {', '.join(names[i] for i in order)})")


def layout(run, fn, shape: tuple[int, ...], args: tuple, splits: list[tuple[tuple[int, ...], str]],
           want: tuple[int, ...], order: tuple[int, ...]) -> list[str]:
    """Where a function that only moves values (a reshape, a transpose) puts each: it is run on 0, 1, 2, ...
    laid out as `shape`, then read as x.reshape(split).permute(o).reshape(want) for each view (split, the axes'
    names) in `splits` and every order o of its axes; the first view with `order` is the expected one. Else
    the first output position that holds another input position's value."""
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    try:
        got = probe_out(run, fn, x, *args)
    except Exception:  # noqa: BLE001 - a probe that cannot run says nothing
        return []
    if got.shape != want or not np.array_equal(np.sort(got, axis=None), x.ravel()):
        return []  # not a rearrangement of its input
    expected = _moved(*splits[0], order, want)
    for split, names in splits:
        for o in itertools.permutations(range(len(split))):
            if np.array_equal(x.reshape(split).transpose(o).reshape(want), got):
                return [f"where: your output holds the input's values as {_moved(split, names, o, want)} would; "
                        f"expected {expected}"]
    wanted = x.reshape(splits[0][0]).transpose(order).reshape(want)
    if np.array_equal(got, wanted):
        return []
    at = np.unravel_index(int(np.flatnonzero(got != wanted)[0]), want)
    return [f"where: your output at {list(map(int, at))} holds the input's value at "
            f"{list(map(int, np.unravel_index(int(got[at]), shape)))}, expected the one at "
            f"{list(map(int, np.unravel_index(int(wanted[at]), shape)))}: {expected}"]


def attention_layers(run, module, refs: dict, got: np.ndarray, H: int) -> list[str]:
    """Which thirds of c_attn's output forward attends with, when another choice computes its output; else c_attn
    and c_proj alone, on their reference inputs; then each bias alone through forward (every weight 0: q = k = 0
    weighs the values evenly, so each position's output is v's bias)."""
    if line := thirds_taken(got, refs, H):
        return [line]
    C = refs["ln_1"].shape[-1]
    params = {k: refs[k].astype(np.float64) for k in ("c_attn_weight", "c_attn_bias", "c_proj_weight", "c_proj_bias")}
    c_attn = close(probe_out(run, module.c_attn, refs["ln_1"]),
                   refs["ln_1"] @ params["c_attn_weight"] + params["c_attn_bias"])
    c_proj = close(probe_out(run, module.c_proj, refs["merged"]), refs["attn"])
    x = refs["ln_1"][:1]
    b = np.linspace(-1.0, 1.0, C)

    def forward_with(attn_bias: np.ndarray, proj_weight: np.ndarray, proj_bias: np.ndarray) -> np.ndarray:
        probe = {"c_attn.weight": np.zeros((3 * C, C)), "c_attn.bias": attn_bias,
                 "c_proj.weight": proj_weight, "c_proj.bias": proj_bias}
        return loaded(run, module, probe, lambda: probe_out(run, module, x))

    attn_bias = bias_use(forward_with(np.concatenate([np.zeros(2 * C), b]), np.eye(C), np.zeros(C)), b + 0 * x,
                          "c_attn")
    proj_bias = bias_use(forward_with(np.zeros(3 * C), np.zeros((C, C)), b), b + 0 * x, "c_proj")
    if attn_bias or proj_bias:
        return ["where: " + "; ".join(line for line in (
            attn_bias or f"c_attn alone {right_or(c_attn, 'is wrong')}",
            proj_bias or f"c_proj alone {right_or(c_proj, 'is wrong')}"))]
    lines = [f"where: c_attn alone {right_or(c_attn, 'is wrong')}; c_proj alone {right_or(c_proj, 'is wrong')}"]
    if c_attn and c_proj:
        lines.append(f"c_attn's output has q, k, v as {C}-wide thirds, in that order: with the parts above right, "
                     "look at how forward splits and passes them")
    return lines
