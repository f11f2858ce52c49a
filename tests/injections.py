"""How to make each catalogued mistake in a copy of the step's solution.

step -> {mistake id: (text in solutions/solution_NN.py, what replaces it)};
a pair of tuples makes several replacements. `tests/test_catalogue.py` injects
each one, runs the step's check, and requires the check to fail and to name
exactly this mistake. Every mistake in a step's CATALOGUE has an entry here.
"""

_MASK = "return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)"
_ARANGE_MASK = (
    "q = Tensor.arange(0, sequence_length, dtype=DType.int64, device=device).reshape([-1, 1])\n"
    "    k = Tensor.arange(0, total, dtype=DType.int64, device=device).reshape([1, -1])\n"
    "    return F.where({allowed}, F.broadcast_to(Tensor(0.0, dtype=dtype, device=device), "
    "[sequence_length, total]), mask)"
)
_SOFTMAX = ("        attn_weights = attn_weights + mask  # future positions -> -inf\n\n"
            "        attn_weights = F.softmax(attn_weights, axis=-1)  # each row sums to 1\n")
_ONES_BAND = ("F.band_part(F.broadcast_to(Tensor(1.0, dtype=query.dtype, device=query.device), "
              "[seq_len, seq_len]), num_lower=None, num_upper=0{exclude})")
_SPLIT = "query, key, value = F.split("
_BLOCK = ("hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
          "        return residual_step(hidden_states, self.ln_2, self.mlp)")


def _block(attn_half: str, mlp_half: str) -> str:
    """Step 09's forward written out, each half as `x = ...` in terms of x, ln and f."""
    def half(code: str, ln: str, f: str) -> str:
        return "hidden_states = " + code.replace("ln(", f"self.{ln}(").replace("f(", f"self.{f}(").replace(
            "x", "hidden_states")
    return f"{half(attn_half, 'ln_1', 'attn')}\n        {half(mlp_half, 'ln_2', 'mlp')}\n        return hidden_states"


_WIRINGS = {  # residual_step's body, wired wrongly
    "residual-no-residual": "f(ln(x))",
    "residual-normed-residual": "ln(x) + f(ln(x))",
    "residual-post-norm": "ln(x + f(x))",
    "residual-no-norm": "x + f(x)",
    "residual-norm-on-output": "x + ln(f(x))",
}
_LOAD_SKIP = 'if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":'

INJECTIONS: dict[str, dict[str, tuple]] = {
    "01": {
        **{f"vocab_size-{v}": ("vocab_size: int = 50257", f"vocab_size: int = {v}") for v in (50256, 50000, 50304)},
        **{f"n_positions-{v}": ("n_positions: int = 1024", f"n_positions: int = {v}") for v in (2048, 512)},
        **{f"n_embd-{v}": ("n_embd: int = 768", f"n_embd: int = {v}") for v in (1024, 64)},
        "n_layer-24": ("n_layer: int = 12", "n_layer: int = 24"),
        **{f"n_head-{v}": ("n_head: int = 12", f"n_head: int = {v}") for v in (64, 16)},
        "n_inner-768": ("n_inner: int = 3072", "n_inner: int = 768"),
        "n_inner-None": ("n_inner: int = 3072", "n_inner: int | None = None"),
        **{f"layer_norm_epsilon-{v}": ("layer_norm_epsilon: float = 1e-5", f"layer_norm_epsilon: float = {v}")
           for v in ("1e-12", "1e-06")},
    },
    "02": {
        "mask-lower": (_MASK, _MASK.replace("num_lower=None, num_upper=num_tokens", "num_lower=0, num_upper=None")),
        "mask-diagonal": (_MASK, _ARANGE_MASK.format(allowed="k < q + num_tokens")),
        "mask-none": (_MASK, _MASK.replace("num_upper=num_tokens", "num_upper=None")),
        "mask-inverted": (_MASK, _MASK.replace("exclude=True", "exclude=False")),
        "mask-zero-one": ('Tensor(float("-inf"),', "Tensor(1.0,"),
        "mask-positive-inf": ('Tensor(float("-inf"),', 'Tensor(float("inf"),'),
        "mask-ignores-cache": (_MASK, _MASK.replace("num_upper=num_tokens", "num_upper=0")),
        "mask-square": (("total = Dim(sequence_length) + num_tokens", _MASK),
                        ("total = Dim(sequence_length)", _MASK.replace("num_upper=num_tokens", "num_upper=0"))),
        # Right op by op: key and query positions from arange, compared with <= (MAX miscompiles it).
        "compiled-mask-lost": (_MASK, _ARANGE_MASK.format(allowed="k <= q + num_tokens")),
    },
    "03": {
        "ln-unbiased-variance": ("var = (centered * centered).mean(axis=-1)",
                                 "var = (centered * centered).sum(axis=-1) / (int(x.shape[-1]) - 1)"),
        "ln-eps-outside-sqrt": ("F.sqrt(var + self.eps)", "(F.sqrt(var) + self.eps)"),
        "ln-no-eps": ("F.sqrt(var + self.eps)", "F.sqrt(var)"),
        "ln-no-affine": (" * self.weight + self.bias\n", "\n"),
        "ln-swapped-affine": (" * self.weight + self.bias\n", " * self.bias + self.weight\n"),
        "ln-wrong-axis": (("mean = x.mean(axis=-1)", "var = (centered * centered).mean(axis=-1)"),
                          ("mean = x.mean(axis=-2)", "var = (centered * centered).mean(axis=-2)")),
    },
    "04": {
        "gelu-exact": ('approximate="tanh"', 'approximate="none"'),
        "relu": ('F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)"),
        "no-activation": ('F.gelu(hidden_states, approximate="tanh")', "hidden_states"),
        "mlp-no-c-proj": ("return self.c_proj(hidden_states)  # [B, T, C]", "return hidden_states"),
        "mlp-no-fc-bias": ("hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]",
                           "hidden_states = hidden_states @ self.c_fc.weight.T"),
        "mlp-no-proj-bias": ("return self.c_proj(hidden_states)  # [B, T, C]",
                             "return hidden_states @ self.c_proj.weight.T"),
    },
    "05": {
        "embedding-scaled": ("return F.gather(self.weight, input_ids, axis=0)",
                             "return F.gather(self.weight, input_ids, axis=0) * (768 ** 0.5)"),
        "embedding-off-by-one": ("F.gather(self.weight, input_ids, axis=0)",
                                 "F.gather(self.weight, input_ids + 1, axis=0)"),
        "embedding-flattened": ("F.gather(self.weight, input_ids, axis=0)",
                                "F.gather(self.weight, input_ids.reshape([-1]), axis=0)"),
        "embedding-first-sequence": ("F.gather(self.weight, input_ids, axis=0)",
                                     "F.gather(self.weight, input_ids[0], axis=0)"),
    },
    "06": {
        "positions-ignore-past": ("Tensor.arange(past_length, past_length + seq_len,", "Tensor.arange(0, seq_len,"),
        "positions-off-by-one": ("Tensor.arange(past_length, past_length + seq_len,",
                                 "Tensor.arange(past_length + 1, past_length + seq_len + 1,"),
        "positions-end-is-seq-len": ("Tensor.arange(past_length, past_length + seq_len,",
                                     "Tensor.arange(past_length, seq_len,"),
        "positions-whole-table": ("return F.gather(self.weight, positions, axis=0)", "return self.weight"),
        "positions-batch-axis": ("return F.gather(self.weight, positions, axis=0)",
                                 "return F.gather(self.weight, positions, axis=0).reshape([1, seq_len, -1])"),
        "embedding-scaled": ("return F.gather(self.weight, positions, axis=0)",
                             "return F.gather(self.weight, positions, axis=0) * (768 ** 0.5)"),
    },
    "07": {
        "split-no-transpose": ("return tensor.transpose(-3, -2)  # [B, H, T, D]", "return tensor"),
        "split-heads-last": (
            "[num_heads, attn_head_size]\n        tensor = tensor.reshape(new_shape)  # [B, T, H, D]\n"
            "        return tensor.transpose(-3, -2)  # [B, H, T, D]",
            "[attn_head_size, num_heads]\n        return tensor.reshape(new_shape).permute([0, 3, 1, 2])"),
        "split-heads-last-shape": (
            "[num_heads, attn_head_size]\n        tensor = tensor.reshape(new_shape)  # [B, T, H, D]",
            "[attn_head_size, num_heads]\n        tensor = tensor.reshape(new_shape)"),
        "split-reshape-only": (
            "tensor = tensor.reshape(new_shape)  # [B, T, H, D]\n        return tensor.transpose(-3, -2)  # [B, H, T, D]",
            "return tensor.reshape([tensor.shape[0], num_heads, tensor.shape[1], attn_head_size])"),
        "split-batch-axis": ("return tensor.transpose(-3, -2)  # [B, H, T, D]", "return tensor.transpose(-4, -2)"),
        "merge-no-transpose": (
            "tensor = tensor.transpose(-3, -2)  # [B, T, H, D]\n        new_shape = list(tensor.shape[:-2])",
            "new_shape = [tensor.shape[0], tensor.shape[2]]"),
        "merge-wrong-order": ("tensor = tensor.transpose(-3, -2)  # [B, T, H, D]",
                              "tensor = tensor.permute([0, 2, 3, 1])"),
        "merge-no-reshape": ("return tensor.reshape(new_shape)  # [B, T, C]", "return tensor"),
        "no-causal-mask": ("attn_weights = attn_weights + mask  # future positions -> -inf", "pass"),
        "scale-sqrt-n-embd": ("math.sqrt(int(value.shape[-1]))", "math.sqrt(self.embed_dim)"),
        "no-scale": ("attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))", "pass"),
        "scale-head-dim": ("math.sqrt(int(value.shape[-1]))", "int(value.shape[-1])"),
        "softmax-wrong-axis": ("F.softmax(attn_weights, axis=-1)", "F.softmax(attn_weights, axis=-2)"),
        "mask-after-softmax": (_SOFTMAX, "        attn_weights = F.softmax(attn_weights, axis=-1)\n"
                               f"        attn_weights = attn_weights * {_ONES_BAND.format(exclude='')}\n"),
        "mask-added-after-softmax": (_SOFTMAX, "        attn_weights = F.softmax(attn_weights, axis=-1)\n"
                                     "        attn_weights = attn_weights + mask\n"),
        "mask-zero-one": ("attn_weights = attn_weights + mask  # future positions -> -inf",
                          f"attn_weights = attn_weights + {_ONES_BAND.format(exclude=', exclude=True')}"),
        "mask-multiplied": ("attn_weights = attn_weights + mask  # future positions -> -inf",
                            f"attn_weights = attn_weights * {_ONES_BAND.format(exclude='')}"),
        **{f"split-order-{o}": (_SPLIT, ", ".join({"q": "query", "k": "key", "v": "value"}[c] for c in o)
                                + " = F.split(") for o in ("qvk", "kqv", "kvq", "vqk", "vkq")},
        "no-c-proj": ("return self.c_proj(attn_output)  # [B, T, C]", "return attn_output"),
        "c-proj-untransposed": ("return self.c_proj(attn_output)  # [B, T, C]",
                                "return attn_output @ self.c_proj.weight + self.c_proj.bias"),
        "c-attn-no-bias": ("self.c_attn(hidden_states), [self.split_size]",
                           "hidden_states @ self.c_attn.weight.T, [self.split_size]"),
        "c-proj-no-bias": ("return self.c_proj(attn_output)  # [B, T, C]", "return attn_output @ self.c_proj.weight.T"),
    },
    "08": {
        mistake: ("return residual + sublayer(ln(hidden_states))",
                  "return " + code.replace("f(", "sublayer(").replace("x", "hidden_states"))
        for mistake, code in _WIRINGS.items()
    },
    "09": {
        **{mistake: (_BLOCK, _block(code, code)) for mistake, code in _WIRINGS.items()},
        "block-ln-swapped": (_BLOCK, _block("x + f(ln(x))", "x + f(ln(x))").replace("ln_1", "LN").replace(
            "ln_2", "ln_1").replace("LN", "ln_2")),
        "block-ln-1-twice": ("residual_step(hidden_states, self.ln_2, self.mlp)",
                             "residual_step(hidden_states, self.ln_1, self.mlp)"),
        "block-mlp-first": (_BLOCK, "hidden_states = residual_step(hidden_states, self.ln_2, self.mlp)\n"
                            "        return residual_step(hidden_states, self.ln_1, self.attn)"),
        "block-no-mlp": ("return residual_step(hidden_states, self.ln_2, self.mlp)", "return hidden_states"),
        "block-parallel": (_BLOCK, "return residual_step(hidden_states, self.ln_1, self.attn) + "
                           "self.mlp(self.ln_2(hidden_states))"),
    },
    "10": {
        "model-no-ln-f": ("return self.ln_f(hidden_states)", "return hidden_states"),
        "model-ln-f-every-block": (("hidden_states = block(hidden_states)", "return self.ln_f(hidden_states)"),
                                   ("hidden_states = self.ln_f(block(hidden_states))", "return hidden_states")),
        "model-no-positions": ("self.wte(input_ids) + self.wpe(seq_len)", "self.wte(input_ids)"),
        "model-embeddings-scaled": ("self.wte(input_ids) + ", "self.wte(input_ids) * 768 ** 0.5 + "),
        "model-blocks-reversed": ("for block in self.h:", "for block in reversed(list(self.h)):"),
        "model-one-block": ("for block in self.h:", "for block in list(self.h)[:1]:"),
        "model-last-block-only": (("hidden_states = self.wte(", "hidden_states = block(hidden_states)"),
                                  ("embeddings = hidden_states = self.wte(", "hidden_states = block(embeddings)")),
    },
    "11": {
        "load-conv1d-not-transposed": ('if layer in CONV1D_LAYERS and name.endswith(".weight"):', "if False:"),
        "load-conv1d-partly-transposed": ('CONV1D_LAYERS = ("c_attn", "c_proj", "c_fc")', 'CONV1D_LAYERS = ("c_attn", "c_fc")'),
        "load-buffers-kept": (_LOAD_SKIP, 'if name == "lm_head.weight":'),
        "load-lm-head-kept": (_LOAD_SKIP, 'if name.endswith((".attn.bias", ".attn.masked_bias")):'),
        "load-prefix-assumed": ('if not name.startswith("transformer."):', "if False:"),
        "logits-softmax": (("from max.experimental.nn import Module",
                            "return hidden_states @ self.transformer.wte.weight.T"),
                           ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
                            "return F.softmax(hidden_states @ self.transformer.wte.weight.T)")),
        "logits-log-softmax": (("from max.experimental.nn import Module",
                                "return hidden_states @ self.transformer.wte.weight.T"),
                               ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
                                "return F.logsoftmax(hidden_states @ self.transformer.wte.weight.T)")),
        "logits-before-ln-f": ("hidden_states = self.transformer(input_ids)  # [B, T, C]",
                               "t = self.transformer\n"
                               "        hidden_states = t.wte(input_ids) + t.wpe(input_ids.shape[-1])\n"
                               "        for block in t.h:\n"
                               "            hidden_states = block(hidden_states)"),
    },
    "12": {
        "encode-returns-encoding": ("return tokenizer.encode(text).ids", "return tokenizer.encode(text)"),
        "decode-raw-tokens": ("return tokenizer.decode(ids)",
                              'return "".join(tokenizer.id_to_token(i) for i in ids)'),
        "greedy-first-position": ("next_token(np.from_dlpack(logits)[0, -1]", "next_token(np.from_dlpack(logits)[0, 0]"),
        "greedy-argmin": ("return int(np.argmax(logits))", "return int(np.argmin(logits))"),
        "greedy-not-fed-back": ("        ids.append(token)\n", ""),
        "top-k-ignored": ("    if top_k is not None:\n        kth", "    if False:\n        kth"),
        "temperature-multiplied": ("logits = logits.astype(np.float64) / temperature",
                                   "logits = logits.astype(np.float64) * temperature"),
        "temperature-ignored": ("logits = logits.astype(np.float64) / temperature",
                                "logits = logits.astype(np.float64)"),
        "seed-ignored": ("rng = np.random.default_rng(seed)\n    ids", "rng = np.random.default_rng()\n    ids"),
        "seed-fixed": ("rng = np.random.default_rng(seed)\n    ids", "rng = np.random.default_rng(0)\n    ids"),
        "seed-per-token": ("    for _ in range(max_new_tokens):\n",
                           "    for _ in range(max_new_tokens):\n        rng = np.random.default_rng(seed)\n"),
        "eos-ignored": ("        yield token\n        if token == eos_token_id:\n            return", "        yield token"),
        "eos-not-yielded": ("        yield token\n        if token == eos_token_id:\n            return",
                            "        if token == eos_token_id:\n            return\n        yield token"),
        "top-k-plus-one": ("kth = np.sort(logits)[-top_k]", "kth = np.sort(logits)[-top_k - 1]"),
        "top-k-minus-one": ("np.where(logits < kth", "np.where(logits <= kth"),
        "top-k-reversed": ("kth = np.sort(logits)[-top_k]\n        logits = np.where(logits < kth",
                           "kth = np.sort(logits)[top_k - 1]\n        logits = np.where(logits > kth"),
    },
    "13": {
        "cache-shared-across-batch": ("np.zeros((batch_size,", "np.zeros((1,"),
        "cache-not-appended": ("    return output, key, value", "    return output, key[:, :, int(past):], value[:, :, int(past):]"),
        "cache-after-new": (("F.concat([past_key, key], axis=-2)", "F.concat([past_value, value], axis=-2)"),
                            ("F.concat([key, past_key], axis=-2)", "F.concat([value, past_value], axis=-2)")),
        "cache-keys-values-swapped": ("    return output, key, value", "    return output, value, key"),
        "mask-hides-cache": ("seen = F.broadcast_to(Tensor(0.0,", "seen = F.broadcast_to(Tensor(float('-inf'),"),
        "mask-not-causal": ("[seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)]",
                            "[seen, F.broadcast_to(Tensor(0.0, dtype=query.dtype, device=query.device), "
                            "[seq_len, seq_len])]"),
        "mask-cache-last": ("[seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)]",
                            "[causal_mask(seq_len, 0, dtype=query.dtype, device=query.device), seen]"),
        "mask-needs-int-past": ("    mask = F.concat([seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)], axis=-1)",
                                "    mask = causal_mask(seq_len, past, dtype=query.dtype, device=query.device)"),
        "positions-not-offset": ("t.wpe(seq_len, past)", "t.wpe(seq_len)"),
        "cache-ignored": ("cache[2 * i], cache[2 * i + 1])", "cache[2 * i][:, :, :0], cache[2 * i + 1][:, :, :0])"),
        "prompt-one-by-one": ("    ids = np.array([input_ids], dtype=np.int64)  # [1, T]: the whole prompt, once\n",
                              "    for t in input_ids[:-1]:\n"
                              "        _, *cache = model(Tensor.from_dlpack(np.array([[t]], dtype=np.int64)), *cache)\n"
                              "    ids = np.array([input_ids[-1:]], dtype=np.int64)\n"),
        "generate-recomputes": ("        ids = np.array([[token]], dtype=np.int64)",
                                "        ids = np.concatenate([ids, [[token]]], axis=1)\n"
                                "        cache = empty_cache(config, 1)\n        ids = ids"),
        "cache-not-passed-back": ("        logits, *cache = model(", "        logits, *_ = model("),
    },
    "14": {
        "positions-not-offset": ("    return rows - first_row + cached", "    return rows - first_row"),
        "positions-batch-rows": ("    return rows - first_row + cached", "    return rows + cached"),
        "last-rows-first": ("return F.cast(input_row_offsets[1:], DType.int64) - 1",
                            "return F.cast(input_row_offsets[:-1], DType.int64)"),
        "last-rows-past": ("return F.cast(input_row_offsets[1:], DType.int64) - 1",
                           "return F.cast(input_row_offsets[1:], DType.int64)"),
        "attention-unscaled": ("scale=1 / math.sqrt(attn.head_dim)", "scale=1.0"),
        "probabilities-not-logits": ("return t.ln_f(x) @ t.wte.weight.T", "return F.softmax(t.ln_f(x) @ t.wte.weight.T)"),
    },
}

# Step 15's mistakes are in its Mojo kernel: the text is in solutions/solution_15_kernel/matvec.mojo.
_TAIL = "s += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j]"
_STORE = "yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]"
INJECTIONS["15"] = {
    "tail-dropped": (_TAIL, "pass"),
    "bias-twice": (_STORE, _STORE + " + bp[unsafe_offset=m + r]"),
    "bias-missing": (_STORE, "yp[unsafe_offset=n * M + m + r] = s"),
    "x-row-stride": (("xp.unsafe_load[width=WIDTH](n * K + k)", "xp[unsafe_offset=n * K + j]"),
                     ("xp.unsafe_load[width=WIDTH](k)", "xp[unsafe_offset=j]")),
    "w-transposed": (("while k + WIDTH <= K:", "wp[unsafe_offset=(m + r) * K + j]"),
                     ("while k + WIDTH <= K and False:", "wp[unsafe_offset=j * M + m + r]")),
    # every task takes every row and adds its share into y: tasks add into the same outputs at once
    "race": (("var end = min((task + 1) * per_task, M)\n            var m = task * per_task", _STORE),
             ("var end = M\n            var m = 0",
              "yp[unsafe_offset=n * M + m + r] += (s + bp[unsafe_offset=m + r]) / TASKS")),
}

# Step 16's mistakes: quantize and dequantize in solutions/solution_16.py, the kernel's in
# solutions/solution_16_kernel/matvec_q8.mojo (tests/test_catalogue.py mutates the file that holds the text).
_SCALES = "scales = np.abs(grouped).max(axis=-1) / np.float32(127)  # [M, KB]"
_ROUND = "q = np.clip(np.rint(grouped / safe), -127, 127).astype(np.int8)"
_BLOCK_SUM = "acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)"
_TAIL_SCALE = "s += tail * sp[unsafe_offset=m * KB + whole]"
_STORE_Q8 = "yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]"
# a loop over whole blocks only, as a learner who writes range(K // BLOCK) does: the last K % 32 columns get none
_WHOLE_BLOCKS_ONLY = '''    m, k = weight.shape
    whole = k // BLOCK
    q = np.zeros((m, k), dtype=np.int8)
    scales = np.zeros((m, whole), dtype=np.float32)
    for j in range(whole):
        block = weight[:, j * BLOCK:(j + 1) * BLOCK]
        scales[:, j] = np.abs(block).max(axis=1) / np.float32(127)
        safe = np.where(scales[:, j] == 0, np.float32(1), scales[:, j])[:, None]
        q[:, j * BLOCK:(j + 1) * BLOCK] = np.clip(np.rint(block / safe), -127, 127).astype(np.int8)
    return q, scales
'''
INJECTIONS["16"] = {
    "one-scale-per-tensor": (_SCALES, "scales = np.broadcast_to(np.abs(grouped).max() / np.float32(127), (m, blocks))"),
    "one-scale-per-row": (_SCALES, "scales = np.repeat(np.abs(grouped).max(axis=(1, 2))[:, None] / np.float32(127), "
                                   "blocks, axis=1)"),
    "truncated": (_ROUND, _ROUND.replace("np.rint", "np.trunc")),
    "floored": (_ROUND, _ROUND.replace("np.rint", "np.floor")),
    "scale-over-128": (_SCALES, _SCALES.replace("127)", "128)")),
    "scale-over-255": (_SCALES, _SCALES.replace("127)", "255)")),
    "last-block-dropped": ('''    m, k = weight.shape
    blocks = -(-k // BLOCK)
''', _WHOLE_BLOCKS_ONLY + '''    blocks = -(-k // BLOCK)
'''),
    "scales-tiled": ("np.repeat(scales, BLOCK, axis=-1)", "np.tile(scales, BLOCK)"),
    "dequantize-unscaled": ("return q.astype(np.float32) * per_column", "return q.astype(np.float32)"),
    "scales-not-applied": ((_BLOCK_SUM, _TAIL_SCALE), ("acc += block", "s += tail")),
    "unsigned-q": (("qp.unsafe_load[width=WIDTH](row + k).cast", "qp.unsafe_load[width=WIDTH](row + k + WIDTH).cast",
                    "qp[unsafe_offset=row + k].cast"),
                   ("qp.unsafe_load[width=WIDTH](row + k).cast[DType.uint8]().cast",
                    "qp.unsafe_load[width=WIDTH](row + k + WIDTH).cast[DType.uint8]().cast",
                    "qp[unsafe_offset=row + k].cast[DType.uint8]().cast")),
    "tail-block-scale": (_TAIL_SCALE, "s += tail"),
    "scales-row-stride": ((_BLOCK_SUM, _TAIL_SCALE),
                          (_BLOCK_SUM.replace("m * KB + j", "m * whole + j"), _TAIL_SCALE.replace("m * KB + whole", "m * whole + whole"))),
    "bias-twice": (_STORE_Q8, _STORE_Q8 + " + bp[unsafe_offset=m]"),
    "bias-missing": (_STORE_Q8, "yp[unsafe_offset=n * M + m] = s"),
    # every task takes every output and adds its share into y: tasks add into the same outputs at once
    "race": (("for i in range(task * per_task, min((task + 1) * per_task, N * M)):", _STORE_Q8),
             ("for i in range(N * M):", "yp[unsafe_offset=n * M + m] += (s + bp[unsafe_offset=m]) / TASKS")),
}
