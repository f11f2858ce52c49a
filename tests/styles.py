"""Correct implementations in other styles, written as edits of each solution.

step -> {name: (text in solutions/solution_NN.py, what replaces it)}; a pair of
tuples makes several replacements. Each must pass its step's check, like the
whole-file variants in tests/variants/: the checks compare numbers, so any
correct style passes.
"""

_CONFIG_FIELDS = ("vocab_size: int = 50257", "n_positions: int = 1024", "n_embd: int = 768", "n_layer: int = 12",
                  "n_head: int = 12", "n_inner: int = 3072", "layer_norm_epsilon: float = 1e-5")
_MASK = "return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)"
_SOFTMAX = "attn_weights = F.softmax(attn_weights, axis=-1)  # each row sums to 1"

STYLES: dict[str, dict[str, tuple]] = {
    "01": {
        "plain class with __init__": (
            ("@dataclass\nclass GPT2Config:\n", *_CONFIG_FIELDS),
            ("class GPT2Config:\n    def __init__(self, vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12,\n"
             "                 n_head=12, n_inner=None, layer_norm_epsilon=1e-5):\n"
             "        self.vocab_size, self.n_positions, self.n_embd = vocab_size, n_positions, n_embd\n"
             "        self.n_layer, self.n_head, self.layer_norm_epsilon = n_layer, n_head, layer_norm_epsilon\n"
             "        self.n_inner = 4 * n_embd if n_inner is None else n_inner\n", *[""] * 7)),
        "class attributes, no dataclass": ("@dataclass\nclass GPT2Config:", "class GPT2Config:"),
        "n_inner from __post_init__": (
            ("n_inner: int = 3072", "layer_norm_epsilon: float = 1e-5\n"),
            ("n_inner: int | None = None", "layer_norm_epsilon: float = 0.00001\n\n    def __post_init__(self):\n"
             "        if self.n_inner is None:\n            self.n_inner = 4 * self.n_embd\n")),
    },
    "02": {
        "a band of ones, then where": (_MASK, (
            "ones = F.broadcast_to(Tensor(1.0, dtype=dtype, device=device), [sequence_length, total])\n"
            "    band = F.band_part(ones, num_lower=None, num_upper=num_tokens)  # 1 where allowed, 0 elsewhere\n"
            "    zeros = F.broadcast_to(Tensor(0.0, dtype=dtype, device=device), [sequence_length, total])\n"
            "    return F.where(band == 1.0, zeros, mask)")),
        "log of a band of ones": (('Tensor(float("-inf"),', _MASK),
                                  ("Tensor(1.0,",
                                   "return F.log(F.band_part(mask, num_lower=None, num_upper=num_tokens))")),
        "the future as ones minus the band": (_MASK, (
            "ones = F.broadcast_to(Tensor(1.0, dtype=dtype, device=device), [sequence_length, total])\n"
            "    future = ones - F.band_part(ones, num_lower=None, num_upper=num_tokens)  # 1 after the band\n"
            "    return F.where(future > 0.5, mask, future)")),
    },
    "03": {
        "mean as a sum over the width": (("mean = x.mean(axis=-1)", "var = (centered * centered).mean(axis=-1)"),
                                         ("mean = x.sum(axis=-1) / int(x.shape[-1])",
                                          "var = (centered * centered).sum(axis=-1) / int(x.shape[-1])")),
    },
    "04": {
        "one expression": (
            ("hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]\n"
             "        hidden_states = F.gelu(hidden_states, approximate=\"tanh\")\n"
             "        return self.c_proj(hidden_states)  # [B, T, C]"),
            'return self.c_proj(F.gelu(self.c_fc(hidden_states), approximate="tanh"))'),
        "weights by hand": (
            ("hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]",
             "return self.c_proj(hidden_states)  # [B, T, C]"),
            ("hidden_states = hidden_states @ self.c_fc.weight.T + self.c_fc.bias",
             "return hidden_states @ self.c_proj.weight.T + self.c_proj.bias")),
    },
    "05": {
        "flatten, gather, reshape back": (
            "return F.gather(self.weight, input_ids, axis=0)",
            "flat = F.gather(self.weight, input_ids.reshape([-1]), axis=0)  # [B*T, C]\n"
            "        return flat.reshape([input_ids.shape[0], input_ids.shape[1], -1])"),
        "one-hot matmul": (
            "return F.gather(self.weight, input_ids, axis=0)",
            "vocab = Tensor.arange(0, self.weight.shape[0], dtype=input_ids.dtype, device=input_ids.device)\n"
            "        one_hot = F.cast(F.equal(input_ids.reshape([*input_ids.shape, 1]), vocab), self.weight.dtype)\n"
            "        return one_hot @ self.weight  # [B, T, V] @ [V, C]"),
    },
    "06": {
        "arange from 0, shifted": ("Tensor.arange(past_length, past_length + seq_len, dtype=DType.int64,",
                                   "past_length + Tensor.arange(0, seq_len, dtype=DType.int64,"),
        "rows of the transposed table": ("return F.gather(self.weight, positions, axis=0)",
                                         "return F.gather(self.weight.T, positions, axis=1).T"),
    },
    "07": {
        "softmax by hand": (_SOFTMAX, "attn_weights = F.exp(attn_weights - attn_weights.max(axis=-1))\n"
                            "        attn_weights = attn_weights / attn_weights.sum(axis=-1)"),
    },
    "08": {
        "named steps": ("return residual + sublayer(ln(hidden_states))",
                        "normed = ln(hidden_states)\n    update = sublayer(normed)\n    return residual + update"),
        "F.add": (("from max.experimental.nn import Module", "return residual + sublayer(ln(hidden_states))"),
                  ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
                   "return F.add(residual, sublayer(ln(hidden_states)))")),
    },
    "09": {
        "loop over the two halves": (
            ("hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
             "        return residual_step(hidden_states, self.ln_2, self.mlp)"),
            ("for ln, sublayer in ((self.ln_1, self.attn), (self.ln_2, self.mlp)):\n"
             "            hidden_states = residual_step(hidden_states, ln, sublayer)\n"
             "        return hidden_states")),
        "Hugging Face's variable names": (
            ("hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
             "        return residual_step(hidden_states, self.ln_2, self.mlp)"),
            ("residual = hidden_states\n        attn_output = self.attn(self.ln_1(hidden_states))\n"
             "        hidden_states = attn_output + residual\n        residual = hidden_states\n"
             "        feed_forward_hidden_states = self.mlp(self.ln_2(hidden_states))\n"
             "        return residual + feed_forward_hidden_states")),
    },
    "10": {
        "functools.reduce over the blocks": (
            ("from max.experimental.nn import Module, ModuleList",
             "for block in self.h:\n            hidden_states = block(hidden_states)"),
            ("from functools import reduce\n\nfrom max.experimental.nn import Module, ModuleList",
             "hidden_states = reduce(lambda h, block: block(h), self.h, hidden_states)")),
        "blocks by index": ("for block in self.h:\n            hidden_states = block(hidden_states)",
                            "for i in range(len(self.h)):\n            hidden_states = self.h[i](hidden_states)"),
    },
    "11": {
        "F.matmul, and a loader that renames first": (
            ("from max.experimental.nn import Module", "return hidden_states @ self.transformer.wte.weight.T",
             "if not name.startswith(\"transformer.\"):\n            name = \"transformer.\" + name"),
            ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
             "return F.matmul(hidden_states, F.transpose(self.transformer.wte.weight, 0, 1))",
             "name = \"transformer.\" + name.removeprefix(\"transformer.\")")),
        "loader that collects the names to skip": (
            'if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":',
            'if name in {"lm_head.weight"} | {n for n in hf_tensors if n.split(".")[-2:] in (["attn", "bias"], '
            '["attn", "masked_bias"])}:'),
    },
    "12": {
        "Gumbel-max sampling": (
            ("probs = np.exp(logits - logits.max())\n    probs /= probs.sum()\n"
             "    return int(rng.choice(len(probs), p=probs))"),
            "return int(np.argmax(logits + rng.gumbel(size=len(logits))))  # argmax of noisy logits ~ softmax"),
        "a while loop that stops itself": (
            "    for _ in range(max_new_tokens):\n",
            "    while len(ids) < len(input_ids) + max_new_tokens:\n"),
    },
    "13": {
        "one empty tensor, repeated": (
            "    return [Tensor.from_dlpack(empty) for _ in range(2 * config.n_layer)]",
            "    return [Tensor.from_dlpack(empty)] * (2 * config.n_layer)"),
        "ln_f on every position, then the last": (
            "last = t.ln_f(x[:, -1, :])", "last = t.ln_f(x)[:, -1]"),
        "generate that keeps the cache in a dict by call": (
            ("    cache = empty_cache(config, 1)\n",
             "        logits, *cache = model(Tensor.from_dlpack(ids), *cache)\n"),
            ("    state = {\"cache\": empty_cache(config, 1)}\n",
             "        logits, *rest = model(Tensor.from_dlpack(ids), *state[\"cache\"])\n"
             "        state[\"cache\"] = rest\n")),
    },
    "14": {
        "where a row's request starts, from a one-hot of its owner": (
            "    first_row = F.gather(starts, request, axis=0)  # [T]: where the row's request starts\n",
            "    owns = F.cast(request[:, None] == Tensor.arange(starts.shape[0], dtype=DType.int64, "
            "device=offsets.device)[None, :], DType.int64)  # [T, B]\n"
            "    first_row = F.sum(owns * starts[None, :], axis=-1).reshape([-1])\n"),
        "scale as head_dim ** -0.5": ("scale=1 / math.sqrt(attn.head_dim)", "scale=attn.head_dim ** -0.5"),
        "the head as a matmul with the weight transposed first": (
            "return t.ln_f(x) @ t.wte.weight.T", "return F.matmul(t.ln_f(x), F.transpose(t.wte.weight, 0, 1))"),
        "last rows as the next request's start minus one, from a slice": (
            "return F.cast(input_row_offsets[1:], DType.int64) - 1",
            "ends = F.cast(input_row_offsets, DType.int64)\n"
            "    return ends[1:] - Tensor(1, dtype=DType.int64, device=ends.device)"),
    },
    "15": {
        "each block's four Linears named, not found by walking the modules": (
            "        use_kernel(self.transformer)\n",
            "        for block in self.transformer.h:\n"
            "            block.attn.c_attn, block.attn.c_proj = "
            "KernelLinear(block.attn.c_attn), KernelLinear(block.attn.c_proj)\n"
            "            block.mlp.c_fc, block.mlp.c_proj = "
            "KernelLinear(block.mlp.c_fc), KernelLinear(block.mlp.c_proj)\n"),
        "rows taken with an index and put back with unsqueeze": (
            "        rows = x.reshape([-1, x.shape[-1]])  # [B, in]: one row per sequence\n"
            "        return matvec(rows, self.weight, self.bias).reshape([*x.shape[:-1], self.weight.shape[0]])",
            "        return F.unsqueeze(matvec(x[:, 0, :], self.weight, self.bias), 1)  # [B, in] -> [B, 1, out]"),
        "the head's zero bias made with Tensor.zeros": (
            "        bias = F.broadcast_to(Tensor(0.0, dtype=x.dtype, device=x.device), [weight.shape[0]])",
            "        bias = Tensor.zeros([weight.shape[0]], dtype=x.dtype, device=x.device)"),
    },
    "16": {
        "quantize block by block in a Python loop, the scale computed in float64": (
            "    m, k = weight.shape\n    blocks = -(-k // BLOCK)\n",
            "    q = np.zeros(weight.shape, dtype=np.int8)\n"
            "    scales = np.zeros((weight.shape[0], -(-weight.shape[1] // BLOCK)), dtype=np.float32)\n"
            "    for j in range(scales.shape[1]):\n"
            "        block = weight[:, j * BLOCK:(j + 1) * BLOCK].astype(np.float64)\n"
            "        scale = np.abs(block).max(axis=1) / 127\n"
            "        scales[:, j] = scale\n"
            "        ratio = block / np.where(scale == 0, 1, scale)[:, None]\n"
            "        q[:, j * BLOCK:(j + 1) * BLOCK] = np.clip(np.rint(ratio), -127, 127).astype(np.int8)\n"
            "    return q, scales\n"
            "    m, k = weight.shape\n    blocks = -(-k // BLOCK)\n"),
        "dequantize by padding to whole blocks and broadcasting the scales": (
            "    per_column = np.repeat(scales, BLOCK, axis=-1)[:, :q.shape[-1]]  # [M, K]: column k's scale is "
            "scales[:, k // BLOCK]\n    return q.astype(np.float32) * per_column",
            "    m, k = q.shape\n"
            "    padded = np.zeros((m, scales.shape[1] * BLOCK), dtype=np.float32)\n"
            "    padded[:, :k] = q\n"
            "    return (padded.reshape(m, -1, BLOCK) * scales[:, :, None]).reshape(m, -1)[:, :k]"),
        "each block's four Linears named, not found by walking the modules": (
            "        for _, module in [(\"\", self.transformer), *self.transformer.descendants]:\n"
            "            for name, child in list(module.children):\n"
            "                if isinstance(child, Linear):\n"
            "                    setattr(module, name, QuantizedLinear(child))\n",
            "        for block in self.transformer.h:\n"
            "            block.attn.c_attn, block.attn.c_proj = "
            "QuantizedLinear(block.attn.c_attn), QuantizedLinear(block.attn.c_proj)\n"
            "            block.mlp.c_fc, block.mlp.c_proj = "
            "QuantizedLinear(block.mlp.c_fc), QuantizedLinear(block.mlp.c_proj)\n"),
    },
    "17": {
        "the caches appended layer by layer, a key cache then a value cache": (
            "    return [Tensor.from_dlpack(np.zeros(shape, dtype=CACHE_DTYPE.to_numpy())) for _ in range(2 * "
            "config.n_layer)]",
            "    caches = []\n"
            "    for _ in range(config.n_layer):\n"
            "        caches.append(Tensor.from_dlpack(np.zeros(shape, dtype=CACHE_DTYPE.to_numpy())))  # keys\n"
            "        caches.append(Tensor.from_dlpack(np.zeros(shape, dtype=CACHE_DTYPE.to_numpy())))  # values\n"
            "    return caches"),
        "the heads split by reshape and transpose written out": (
            "            q, k, v = (attn._split_heads(u, attn.num_heads, attn.head_dim) for u in (q, k, v))",
            "            q, k, v = (u.reshape([*u.shape[:-1], attn.num_heads, attn.head_dim]).transpose(1, 2)\n"
            "                       for u in (q, k, v))"),
        "generate_flash with the prompt's length kept apart and past counted from it": (
            "    ids, past = np.array([input_ids], dtype=np.int64), 0\n"
            "    for _ in range(max_new_tokens):\n"
            "        logits = model(Tensor.from_dlpack(ids), Tensor.from_dlpack(np.array([past], np.int64)), *cache)\n"
            "        past += ids.shape[1]\n",
            "    ids = np.array([input_ids], dtype=np.int64)\n"
            "    for step in range(max_new_tokens):\n"
            "        past = 0 if step == 0 else len(input_ids) + step - 1  # the prompt, then one token a step\n"
            "        logits = model(Tensor.from_dlpack(ids), Tensor.from_dlpack(np.array([past], np.int64)), "
            "*cache)\n"),
    },
    "18": {
        "each block's four Linears named, not found by walking the modules": (
            "        for _, module in [(\"\", self.transformer), *self.transformer.descendants]:\n"
            "            for name, child in list(module.children):\n"
            "                if isinstance(child, Linear):\n"
            "                    setattr(module, name, BatchedQ8Linear(child))\n"
            "                elif isinstance(child, LayerNorm):\n"
            "                    setattr(module, name, OneOpLayerNorm(child))\n",
            "        for block in self.transformer.h:\n"
            "            block.attn.c_attn, block.attn.c_proj = "
            "BatchedQ8Linear(block.attn.c_attn), BatchedQ8Linear(block.attn.c_proj)\n"
            "            block.mlp.c_fc, block.mlp.c_proj = "
            "BatchedQ8Linear(block.mlp.c_fc), BatchedQ8Linear(block.mlp.c_proj)\n"
            "            block.ln_1, block.ln_2 = OneOpLayerNorm(block.ln_1), OneOpLayerNorm(block.ln_2)\n"
            "        self.transformer.ln_f = OneOpLayerNorm(self.transformer.ln_f)\n"),
        "the rows asked for gathered after ln_f, not before": (
            "        chosen = t.ln_f(F.gather(x, rows, axis=0))  # [R, C]",
            "        chosen = F.gather(t.ln_f(x), rows, axis=0)  # [R, C]: ln_f is per row"),
        "q, k and v sliced out of c_attn's output, not split": (
            "            q, k, v = F.split(attn.c_attn(block.ln_1(x)), [attn.split_size] * 3, axis=-1)  # [T, C] each",
            "            qkv, width = attn.c_attn(block.ln_1(x)), attn.split_size  # [T, 3C]\n"
            "            q, k, v = qkv[:, :width], qkv[:, width:2 * width], qkv[:, 2 * width:]"),
    },
}
