"""Mistakes that no check's catalogue lists, each made in a copy of a step's solution.

Each one is a slip a learner could make (an off-by-one, a wrong axis, a term
added twice, a scale wrong, a sampler keeping the wrong end, ...) and none
computes what a catalogued mistake computes. `tests/test_unseen.py` injects
each, runs the step's check, and requires the check to fail and to place the
fault in the sub-part (or part) named by `cause`: a diagnosis is right when a
line of a failing part contains one of the cause words without calling that
sub-part right.

UNSEEN: a list of Mutation(step, name, old, new, cause), where `old` occurs
exactly once in solutions/solution_NN.py (a pair of tuples makes several
replacements, as a catalogued mistake's Edit) and `cause` holds the words, any
one of which a correct diagnosis must contain.
"""

from __future__ import annotations

from typing import NamedTuple


class Mutation(NamedTuple):
    step: str
    name: str
    old: str | tuple[str, ...]
    new: str | tuple[str, ...]
    cause: tuple[str, ...]


_MASK = "return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)"
_LN = "return centered / F.sqrt(var + self.eps) * self.weight + self.bias"
_GELU = 'F.gelu(hidden_states, approximate="tanh")'
_GELU_TANH = ("0.5 * hidden_states * (1.0 + F.tanh(math.sqrt(2.0 / math.pi) * "
              "(hidden_states + {c} * hidden_states * hidden_states * hidden_states)))")
_IMPORT_MATH = ("from max.experimental import functional as F\n",
                "import math\n\nfrom max.experimental import functional as F\n")
_GATHER_TOKENS = "return F.gather(self.weight, input_ids, axis=0)"
_POSITIONS = "Tensor.arange(past_length, past_length + seq_len,"
_SCALE = "attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))"
_MASK_ADD = "attn_weights = attn_weights + mask  # future positions -> -inf"
_RESIDUAL = "return residual + sublayer(ln(hidden_states))"
_ATTN_HALF = "hidden_states = residual_step(hidden_states, self.ln_1, self.attn)"
_MLP_HALF = "return residual_step(hidden_states, self.ln_2, self.mlp)"
_EMBED = "hidden_states = self.wte(input_ids) + self.wpe(seq_len)"
_HEAD = "return hidden_states @ self.transformer.wte.weight.T"
# Step 08's sub-parts, in the words its check prints: the stream passing through, the sub-layer's
# output added to it, the sub-layer reading ln(x).
_STREAM, _ADDED, _READS = ("passes through",), ("added to the stream",), ("reads ln",)
_TOP_K = ("kth = np.sort(logits)[-top_k]\n"
          "        logits = np.where(logits < kth, -np.inf, logits)")
_LAST = "last = t.ln_f(x[:, -1, :])"

# The sub-parts each check's localisation names, as it prints them ("h.N": any block, h.0 to h.11).
# A failing part's clause that names one of these is a sub-part verdict (right, or not).
SUBPARTS: dict[str, tuple[str, ...]] = {
    "03": ("centring", "division", "scale by weight", "shift by bias"),
    "04": ("c_fc", "activation", "c_proj"),
    "07": ("mask", "normalisation", "scale", "scores", "softmax", "c_attn", "c_proj", "_split_heads", "_merge_heads"),
    "08": ("passes through", "added to the stream", "reads ln"),
    "09": ("attention half", "MLP half"),
    "10": ("embeddings", "ln_f", "h.N"),
    "11": ("head", "body"),
    "14": ("ragged positions", "last rows", "embeddings", "attention half", "paged_attention", "MLP half", "ln_2",
           "ln_f", "head"),
}

UNSEEN: list[Mutation] = [
    # ---- step 02: causal_mask ----
    Mutation("02", "mask-one-future-token", _MASK, _MASK.replace("num_upper=num_tokens", "num_upper=num_tokens + 1"),
             ("future", "after it", "next key")),
    Mutation("02", "mask-finite", 'Tensor(float("-inf"),', "Tensor(-1e9,", ("-inf", "finite")),
    Mutation("02", "mask-band-only", _MASK, _MASK.replace("num_lower=None", "num_lower=0"),
             ("past", "earlier", "before it")),
    Mutation("02", "mask-cache-counted-twice", _MASK,
             _MASK.replace("num_upper=num_tokens", "num_upper=2 * num_tokens"), ("with cache", "num_upper")),
    Mutation("02", "mask-extra-column", "total = Dim(sequence_length) + num_tokens",
             "total = Dim(sequence_length) + num_tokens + 1", ("shape", "column")),
    Mutation("02", "mask-width-from-length", "total = Dim(sequence_length) + num_tokens",
             "total = Dim(sequence_length) + sequence_length", ("shape", "column")),

    # ---- step 03: LayerNorm ----
    Mutation("03", "ln-output-not-centred", _LN, _LN.replace("return centered /", "return x /"), ("centring",)),
    Mutation("03", "ln-variance-not-centred", "var = (centered * centered).mean(axis=-1)",
             "var = (x * x).mean(axis=-1)", ("division",)),
    Mutation("03", "ln-divides-by-variance", "F.sqrt(var + self.eps)", "(var + self.eps)", ("division",)),
    Mutation("03", "ln-mean-absolute-deviation", "var = (centered * centered).mean(axis=-1)",
             "var = F.abs(centered).mean(axis=-1) ** 2", ("division",)),
    Mutation("03", "ln-scale-one-plus-weight", " * self.weight + self.bias", " * (1.0 + self.weight) + self.bias",
             ("scale by weight",)),
    Mutation("03", "ln-bias-subtracted", " * self.weight + self.bias", " * self.weight - self.bias",
             ("shift by bias",)),
    Mutation("03", "ln-bias-before-weight", _LN,
             "return (centered / F.sqrt(var + self.eps) + self.bias) * self.weight", ("shift by bias",)),

    # ---- step 04: GPT2MLP ----
    Mutation("04", "silu", _GELU, "hidden_states * F.sigmoid(hidden_states)", ("activation",)),
    Mutation("04", "gelu-constant-off", (*_IMPORT_MATH[:1], _GELU),
             (_IMPORT_MATH[1], _GELU_TANH.format(c="0.44715")), ("activation",)),
    Mutation("04", "gelu-no-half", (*_IMPORT_MATH[:1], _GELU),
             (_IMPORT_MATH[1], _GELU_TANH.format(c="0.044715").replace("0.5 * ", "", 1)), ("activation",)),
    Mutation("04", "gelu-quick", _GELU, "hidden_states * F.sigmoid(1.702 * hidden_states)", ("activation",)),
    Mutation("04", "gelu-twice", _GELU, f'F.gelu({_GELU}, approximate="tanh")', ("activation",)),
    Mutation("04", "c-fc-bias-twice", "hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]",
             "hidden_states = self.c_fc(hidden_states) + self.c_fc.bias", ("c_fc",)),
    Mutation("04", "c-proj-bias-subtracted", "return self.c_proj(hidden_states)  # [B, T, C]",
             "return hidden_states @ self.c_proj.weight.T - self.c_proj.bias", ("c_proj",)),

    # ---- step 05: token embedding ----
    Mutation("05", "embedding-row-before", _GATHER_TOKENS,
             "return F.gather(self.weight, input_ids - 1, axis=0)", ("row",)),
    Mutation("05", "embedding-divided", _GATHER_TOKENS,
             "return F.gather(self.weight, input_ids, axis=0) / (768 ** 0.5)", ("multiplied", "scaled", "divided")),
    Mutation("05", "embedding-previous-token",
             _GATHER_TOKENS,
             "ids = F.concat([input_ids[:, :1], input_ids[:, :-1]], axis=1)\n"
             "        return F.gather(self.weight, ids, axis=0)", ("previous", "shifted", "one position")),
    Mutation("05", "embedding-ids-transposed", _GATHER_TOKENS,
             "return F.gather(self.weight, input_ids.T, axis=0)", ("shape",)),
    Mutation("05", "embedding-plus-row-0", _GATHER_TOKENS,
             "return F.gather(self.weight, input_ids, axis=0) + self.weight[0]",
             ("added", "plus", "offset", "extra term")),

    # ---- step 06: position embedding ----
    Mutation("06", "positions-past-twice", _POSITIONS, "Tensor.arange(2 * past_length, 2 * past_length + seq_len,",
             ("row", "+5")),
    Mutation("06", "positions-reversed", _POSITIONS,
             "Tensor.arange(past_length + seq_len - 1, past_length - 1, -1,", ("row", "reversed")),
    Mutation("06", "positions-one-short", _POSITIONS, "Tensor.arange(past_length, past_length + seq_len - 1,",
             ("shape",)),
    Mutation("06", "positions-from-seq-len", _POSITIONS,
             "Tensor.arange(seq_len + past_length, 2 * seq_len + past_length,", ("row",)),
    Mutation("06", "positions-divided", "return F.gather(self.weight, positions, axis=0)",
             "return F.gather(self.weight, positions, axis=0) / (768 ** 0.5)",
             ("multiplied", "scaled", "divided")),

    # ---- step 07: GPT2MultiHeadAttention ----
    Mutation("07", "scale-multiplied", _SCALE, _SCALE.replace(" / ", " * "), ("scale",)),
    Mutation("07", "scale-sqrt-n-head", "math.sqrt(int(value.shape[-1]))", "math.sqrt(self.num_heads)", ("scale",)),
    Mutation("07", "scale-sqrt-seq-len", "math.sqrt(int(value.shape[-1]))", "math.sqrt(int(value.shape[-2]))",
             ("scale",)),
    Mutation("07", "mask-transposed", _MASK_ADD, "attn_weights = attn_weights + mask.transpose(0, 1)", ("mask",)),
    Mutation("07", "mask-sees-next-key",
             "mask = causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)  # [T, T]",
             "mask = causal_mask(seq_len, 1, dtype=query.dtype, device=query.device)[:, :-1]", ("mask",)),
    Mutation("07", "sigmoid-not-softmax", "F.softmax(attn_weights, axis=-1)", "F.sigmoid(attn_weights)",
             ("normalisation",)),
    Mutation("07", "c-attn-bias-twice", "self.c_attn(hidden_states), [self.split_size]",
             "self.c_attn(hidden_states) + self.c_attn.bias, [self.split_size]", ("c_attn",)),
    Mutation("07", "c-proj-bias-twice", "return self.c_proj(attn_output)  # [B, T, C]",
             "return self.c_proj(attn_output) + self.c_proj.bias", ("c_proj",)),
    Mutation("07", "split-permute-last",
             "tensor = tensor.reshape(new_shape)  # [B, T, H, D]\n"
             "        return tensor.transpose(-3, -2)  # [B, H, T, D]",
             "return tensor.reshape(new_shape).permute([0, 2, 3, 1])", ("_split_heads",)),

    Mutation("07", "merge-positions-first",
             "tensor = tensor.transpose(-3, -2)  # [B, T, H, D]\n"
             "        new_shape = list(tensor.shape[:-2]) + [num_heads * attn_head_size]",
             "B, H, T, D = tensor.shape\n        tensor = tensor.permute([2, 0, 1, 3])\n"
             "        new_shape = [B, T, H * D]",
             ("axes T, B, H, D",)),
    Mutation("07", "split-called-with-sizes-swapped",
             ("query = self._split_heads(query, self.num_heads, self.head_dim)",
              "key = self._split_heads(key, self.num_heads, self.head_dim)",
              "value = self._split_heads(value, self.num_heads, self.head_dim)",
              "attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)"),
             ("query = self._split_heads(query, self.head_dim, self.num_heads)",
              "key = self._split_heads(key, self.head_dim, self.num_heads)",
              "value = self._split_heads(value, self.head_dim, self.num_heads)",
              "attn_output = self._merge_heads(attn_output, self.head_dim, self.num_heads)"),
             ("how forward calls it",)),
    # ---- step 08: residual_step ----
    Mutation("08", "residual-stream-twice", _RESIDUAL,
             "return residual + sublayer(ln(hidden_states)) + residual", _STREAM),
    Mutation("08", "residual-sublayer-twice", _RESIDUAL,
             "return residual + sublayer(ln(hidden_states)) + sublayer(ln(hidden_states))", _ADDED),
    Mutation("08", "residual-ln-twice", _RESIDUAL, "return residual + sublayer(ln(ln(hidden_states)))", _READS),
    Mutation("08", "residual-sublayer-subtracted", _RESIDUAL, "return residual - sublayer(ln(hidden_states))", _ADDED),
    Mutation("08", "residual-stream-subtracted", _RESIDUAL, "return sublayer(ln(hidden_states)) - residual",
             _STREAM),
    Mutation("03", "ln-mean-over-c-minus-one", "mean = x.mean(axis=-1)  # [..., 1]: reductions keep the axis",
             "mean = x.sum(axis=-1) / (int(x.shape[-1]) - 1)", ("centring",)),
    Mutation("05", "embedding-eos-row-zeroed", "return F.gather(self.weight, input_ids, axis=0)",
             "return F.gather(self.weight, input_ids, axis=0) * F.unsqueeze((input_ids != 50256).cast("
             "self.weight.dtype), -1)", ("id 50256",)),
    Mutation("07", "scale-precedence", _SCALE, "attn_weights = attn_weights / (int(value.shape[-1]) ** 1/2)",
             ("scale",)),
    Mutation("07", "scores-key-query", "attn_weights = query @ key.transpose(-1, -2)",
             "attn_weights = key @ query.transpose(-1, -2)", ("scores transposed",)),
    Mutation("07", "softmax-max-over-queries", "attn_weights = F.softmax(attn_weights, axis=-1)",
             "attn_weights = F.exp(attn_weights - attn_weights.max(axis=-2))\n"
             "        attn_weights = attn_weights / attn_weights.sum(axis=-1)", ("axis -2",)),
    Mutation("07", "weights-times-keep-probability", "return attn_weights @ value",
             "return attn_weights * 0.9 @ value", ("sum to 0.9",)),
    Mutation("07", "value-from-the-key-third", "value = self._split_heads(value, self.num_heads, self.head_dim)",
             "value = key", ("key third as the value",)),
    Mutation("08", "sublayer-times-keep-probability", _RESIDUAL,
             "return residual + sublayer(ln(hidden_states)) * 0.9", ("0.9x the sub-layer",)),
    Mutation("08", "residual-sublayer-reads-sum", _RESIDUAL,
             "return residual + sublayer(ln(hidden_states) + hidden_states)", _READS),

    # ---- step 09: GPT2Block ----
    Mutation("09", "block-no-attention", _ATTN_HALF, "pass", ("attention half",)),
    Mutation("09", "block-ln-2-twice", "residual_step(hidden_states, self.ln_1, self.attn)",
             "residual_step(hidden_states, self.ln_2, self.attn)", ("attention half",)),
    Mutation("09", "block-attention-twice", _ATTN_HALF, f"{_ATTN_HALF}\n        {_ATTN_HALF}", ("attention half",)),
    Mutation("09", "block-attention-stream-twice", _ATTN_HALF,
             "hidden_states = hidden_states + residual_step(hidden_states, self.ln_1, self.attn)",
             ("attention half",)),
    Mutation("09", "block-mlp-stream-twice", _MLP_HALF,
             "return hidden_states + residual_step(hidden_states, self.ln_2, self.mlp)", ("MLP half",)),
    Mutation("09", "block-mlp-subtracted", _MLP_HALF, "return hidden_states - self.mlp(self.ln_2(hidden_states))",
             ("MLP half",)),

    Mutation("09", "attention-added-to-the-normed-stream", _ATTN_HALF,
             "normed = self.ln_1(hidden_states)\n        hidden_states = normed + self.attn(normed)",
             ("normalised stream",)),
    # ---- step 10: GPT2Model ----
    Mutation("10", "model-ln-f-twice", "return self.ln_f(hidden_states)", "return self.ln_f(self.ln_f(hidden_states))",
             ("ln_f",)),
    Mutation("10", "model-last-block-skipped", "for block in self.h:", "for block in list(self.h)[:-1]:", ("h.11",)),
    Mutation("10", "model-first-block-skipped", "for block in self.h:", "for block in list(self.h)[1:]:", ("h.0",)),
    Mutation("10", "model-positions-from-one", _EMBED, "hidden_states = self.wte(input_ids) + self.wpe(seq_len, 1)",
             ("embeddings",)),
    Mutation("10", "model-positions-twice", _EMBED, _EMBED + " + self.wpe(seq_len)", ("embeddings",)),
    Mutation("10", "model-block-stream-twice", "hidden_states = block(hidden_states)",
             "hidden_states = hidden_states + block(hidden_states)", ("h.1's input", "between blocks")),

    Mutation("10", "one-block-in-every-place", "ModuleList(GPT2Block(config) for _ in range(config.n_layer))",
             "ModuleList([GPT2Block(config)] * config.n_layer)", ("one tensor",)),
    # ---- step 11: GPT2LMHeadModel and load_hf_weights ----
    Mutation("11", "head-scaled", (_HEAD, "import numpy as np\n"),
             (_HEAD + " / math.sqrt(768)", "import math\n\nimport numpy as np\n"), ("head",)),
    Mutation("11", "head-ln-f-again", _HEAD,
             "return self.transformer.ln_f(hidden_states) @ self.transformer.wte.weight.T", ("head",)),
    Mutation("11", "head-logits-centred", _HEAD,
             "logits = hidden_states @ self.transformer.wte.weight.T\n"
             "        return logits - logits.mean(axis=-1)", ("head",)),
    Mutation("11", "load-skips-c-attn-bias", 'name.endswith((".attn.bias", ".attn.masked_bias"))',
             'name.endswith(("attn.bias", "attn.masked_bias"))', ("c_attn",)),
    Mutation("11", "load-transposes-every-matrix", 'if layer in CONV1D_LAYERS and name.endswith(".weight"):',
             "if value.ndim == 2:", ("wte", "wpe")),
    Mutation("11", "load-prefix-always", 'if not name.startswith("transformer."):\n            name',
             "if True:\n            name", ("prefix", "transformer.transformer")),

    # ---- step 12: encode, decode, next_token, generate ----
    Mutation("12", "encode-prepends-eos", "return tokenizer.encode(text).ids",
             "return [50256] + tokenizer.encode(text).ids", ("encode",)),
    Mutation("12", "top-k-index-as-value", "kth = np.sort(logits)[-top_k]", "kth = np.argsort(logits)[-top_k]",
             ("top_k",)),
    Mutation("12", "sampling-takes-argmax", "return int(rng.choice(len(probs), p=probs))",
             "return int(np.argmax(probs))", ("seeded sampling", "distribution")),
    Mutation("12", "temperature-twice", "probs = np.exp(logits - logits.max())",
             "probs = np.exp((logits - logits.max()) / temperature)", ("distribution",)),
    Mutation("12", "greedy-argmax-over-positions", "next_token(np.from_dlpack(logits)[0, -1]",
             "next_token(np.from_dlpack(logits)[0]", ("greedy",)),
    Mutation("12", "greedy-last-token-only", "        ids.append(token)\n", "        ids = [token]\n", ("greedy",)),
    Mutation("12", "softmax-without-the-largest-subtracted", "probs = np.exp(logits - logits.max())",
             "probs = np.exp(logits)", ("largest is subtracted",)),
    Mutation("12", "generate-extends-the-callers-list", "ids = list(input_ids)", "ids = input_ids",
             ("changed the list",)),
    Mutation("12", "top-k-kept-after-softmax-not-summed-to-1",
             ("    if top_k is not None:\n        kth = np.sort(logits)[-top_k]\n"
              "        logits = np.where(logits < kth, -np.inf, logits)  # everything below the k-th best is out\n",
              "    probs /= probs.sum()\n"),
             ("", "    probs /= probs.sum()\n    if top_k is not None:\n"
                  "        probs = np.where(probs < np.sort(probs)[-top_k], 0.0, probs)\n"), ("do not sum to 1",)),
    Mutation("12", "eos-id-0-taken-for-none", "        if token == eos_token_id:",
             "        if eos_token_id and token == eos_token_id:", ("eos_token_id=0",)),
    Mutation("12", "decode-token-by-token", "return tokenizer.decode(ids)",
             'return "".join(tokenizer.decode([i]) for i in ids)', ("whole list at once",)),
    Mutation("12", "top-k-ids-and-logits-sorted-apart",
             ("        kth = np.sort(logits)[-top_k]\n"
              "        logits = np.where(logits < kth, -np.inf, logits)  # everything below the k-th best is out\n",
              "return int(rng.choice(len(probs), p=probs))"),
             ("        candidates = np.argsort(logits)[-top_k:]\n        logits = np.sort(logits)[::-1][:top_k]\n",
              "return int(rng.choice(candidates if top_k is not None else len(probs), p=probs))"), ("other ids",)),
    Mutation("12", "loop-counts-the-whole-sequence", "    for _ in range(max_new_tokens):\n",
             "    while len(ids) < max_new_tokens:\n", ("prompt's length",)),
    Mutation("12", "loop-one-short", "    for _ in range(max_new_tokens):\n",
             "    for _ in range(max_new_tokens - 1):\n", ("greedy",)),

    # ---- step 13: the KV cache ----
    Mutation("13", "empty-cache-one-position", "np.zeros((batch_size, config.n_head, 0, head_dim)",
             "np.zeros((batch_size, config.n_head, 1, head_dim)", ("empty cache",)),
    Mutation("13", "empty-cache-per-layer", "for _ in range(2 * config.n_layer)]", "for _ in range(config.n_layer)]",
             ("empty cache",)),
    Mutation("13", "value-after-past-key", "F.concat([past_value, value], axis=-2)",
             "F.concat([past_key, value], axis=-2)", ("attention with cache",)),
    Mutation("13", "cache-scale-n-embd", "/ math.sqrt(attn.head_dim)", "/ math.sqrt(attn.embed_dim)",
             ("attention with cache",)),
    Mutation("13", "model-first-position", _LAST, "last = t.ln_f(x[:, 0, :])", ("model with cache",)),
    Mutation("13", "model-no-ln-f", _LAST, "last = x[:, -1, :]", ("model with cache",)),
    Mutation("13", "model-cache-index-off-by-one", "cache[2 * i], cache[2 * i + 1])", "cache[i], cache[i + 1])",
             ("model with cache",)),
    Mutation("13", "model-stores-value-then-key", "new_cache += [key, value]", "new_cache += [value, key]",
             ("model with cache",)),
    Mutation("13", "generate-logits-last-index", "next_token(np.from_dlpack(logits)[0],",
             "next_token(np.from_dlpack(logits)[0, -1],", ("generate",)),
    Mutation("13", "cache-keys-then-values",
             ("new_cache = []\n", "cache[2 * i], cache[2 * i + 1])", "            new_cache += [key, value]\n",
              "        last = t.ln_f"),
             ("keys, values = [], []\n", "cache[i], cache[len(t.h) + i])",
              "            keys.append(key)\n            values.append(value)\n",
              "        new_cache = keys + values\n        last = t.ln_f"), ("k_0, v_0",)),
    Mutation("13", "generate-hands-the-sampler-a-batch", "np.from_dlpack(logits)[0]", "np.from_dlpack(logits)",
             ("called from",)),
    Mutation("13", "merge-by-reshape-alone",
             "output = attn.c_proj(attn._merge_heads(heads, attn.num_heads, attn.head_dim))",
             "output = attn.c_proj(heads.reshape(list(hidden_states.shape)))", ("one new position only",)),
    Mutation("13", "cache-read-by-layer-then-kind", "cache[2 * i], cache[2 * i + 1])",
             "cache[i], cache[i + len(t.h)])", ("cache entries",)),
    Mutation("13", "cache-for-the-prompt-length", "empty_cache(config, 1)", "empty_cache(config, len(input_ids))",
             ("another number of sequences",)),
    Mutation("13", "generate-appends-to-the-callers-list", "        yield token\n",
             "        yield token\n        input_ids.append(token)\n", ("changed the list",)),
    Mutation("13", "eos-id-0-taken-for-none", "        if token == eos_token_id:",
             "        if eos_token_id and token == eos_token_id:", ("eos_token_id=0",)),
    # ---- step 14: ragged positions, paged attention, the rows taken ----
    Mutation("14", "chunk-after-a-cache-at-its-length", "    return rows - first_row + cached",
             "    return F.where(cached > 0, cached, rows - first_row)", ("ragged positions",)),
    Mutation("14", "mlp-with-the-exact-gelu", "            x = x + block.mlp(block.ln_2(x))",
             "            x = x + block.mlp.c_proj(F.gelu(block.mlp.c_fc(block.ln_2(x))))", ("mlp",)),
    Mutation("14", "owner-off-by-one", "rows[:, None] >= ends[None, :]", "rows[:, None] > ends[None, :]",
             ("ragged positions",)),
    Mutation("14", "positions-one-late", "return rows - first_row + cached", "return rows - first_row + cached + 1",
             ("ragged positions",)),
    Mutation("14", "k-and-v-swapped", ("store_k(kv_collection, key,", "store_v(kv_collection, value,"),
             ("store_k(kv_collection, value,", "store_v(kv_collection, key,"), ("paged_attention", "stores")),
    Mutation("14", "no-causal-mask", "MHAMaskVariant.CAUSAL_MASK", "MHAMaskVariant.NULL_MASK",
             ("paged_attention", "mask")),
    Mutation("14", "one-layer-of-cache", "layer_idx = Tensor(layer,", "layer_idx = Tensor(0,", ("layer_idx",)),
    Mutation("14", "scale-by-head-dim", "scale=1 / math.sqrt(attn.head_dim)", "scale=1 / attn.head_dim",
             ("paged_attention", "scale")),
    Mutation("14", "row-before-last", "F.cast(input_row_offsets[1:], DType.int64) - 1",
             "F.cast(input_row_offsets[1:], DType.int64) - 2", ("last rows",)),
    Mutation("14", "embeddings-without-positions", "x = t.wte(tokens) + F.gather(t.wpe.weight, positions, axis=0)",
             "x = t.wte(tokens)", ("embeddings",)),
    Mutation("14", "attention-half-not-added", "x = x + paged_attention(", "x = paged_attention(",
             ("attention half",)),
    Mutation("14", "mlp-residual-dropped", "x = x + block.mlp(block.ln_2(x))", "x = block.mlp(block.ln_2(x))",
             ("MLP half",)),
    Mutation("14", "mlp-on-the-stream-unnormed", "x = x + block.mlp(block.ln_2(x))", "x = x + block.mlp(x)",
             ("ln_2",)),
    Mutation("14", "ln-f-skipped", "return t.ln_f(x) @ t.wte.weight.T", "return x @ t.wte.weight.T", ("ln_f",)),
    Mutation("14", "head-doubled", "return t.ln_f(x) @ t.wte.weight.T", "return 2 * (t.ln_f(x) @ t.wte.weight.T)",
             ("head",)),
    # ---- step 15: the decode around a right kernel (the cause is outside it) ----
    Mutation("15", "decode-head-without-ln-f", "last = t.ln_f(x[:, -1, :])", "last = x[:, -1, :]",
             ("outside the kernel",)),
    Mutation("15", "decode-positions-from-zero", "t.wpe(input_ids.shape[-1], cache[0].shape[-2])",
             "t.wpe(input_ids.shape[-1], 0)", ("outside the kernel",)),
    Mutation("15", "decode-mlp-residual-dropped", "            x = x + block.mlp(block.ln_2(x))",
             "            x = block.mlp(block.ln_2(x))", ("outside the kernel",)),
    # ---- step 16: the int8 decode around a right kernel ----
    Mutation("16", "head-in-float", "return (matvec_q8(last, self.head_q, self.head_scales), *new_cache)",
             "return (last @ self.transformer.wte.weight.T, *new_cache)", ("the tied head",)),
    Mutation("16", "decode-head-without-ln-f", "last = t.ln_f(x[:, -1, :])", "last = x[:, -1, :]",
             ("outside the kernel",)),
]
