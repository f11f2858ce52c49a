"""Step 17 solution: attention as runtimes compute it, one pass over the keys in your own Mojo kernel,
the cache written in place.

Step 13's attention builds every score of a head, [T, P + T], masks it, softmaxes it and multiplies
it by the values, and grows the cache by copying it. solution_17_kernel/flash.mojo (the custom op
`gpt2_flash_attention`) reads each key and value once per band of queries, keeps only a running
maximum, a running sum and an accumulator per query, and stores the new keys and values into a cache
allocated once for the whole context; this file declares it to MAX and builds GPT-2 around it:

    flash_attention(q, k, v, k_cache, v_cache, past)   q, k, v [B, H, T, D], caches [B, H, N, D],
                                                       past [1] int64 -> [B, H, T, D]
    empty_flash_cache(config, batch_size)              2L x [B, H, n_positions, D] zeros, CACHE_DTYPE
    GPT2Flash(model)                                   input_ids [B, T], past [1] int64, *cache -> logits [B, V]
    GPT2FlashQ8(model)                                 the same at decode, on step 16's int8 weights and kernel,
                                                       the heads split and merged by reshape (T = 1)
    generate_flash(model, config, ids, n, ...)         step 13's generate, the cache never copied

N = n_positions: the cache has room for the whole context, and a call writes positions past .. past+T-1.
The caches are float16 (CACHE_DTYPE), as llama.cpp keeps its own: a decode step at the end of the context
reads 37 MB of keys and values instead of 74, and the kernel computes in float32 all the same. The check
has Hugging Face attend over what the caches hold, and holds that to its own keys and values; float32
caches work too.
"""

from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np
from max.dtype import DType
from max.experimental import custom
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_11 import GPT2LMHeadModel
from solutions.solution_12 import next_token

KERNEL = Path(__file__).with_name("solution_17_kernel")  # the Mojo package (its flash.mojo)
CACHE_DTYPE = DType.float16  # the keys' and values' dtype in the caches (the kernel takes float32 too)


@cache
def flash_op():
    """The custom op, declared once: MAX builds the Mojo package here (seconds when unchanged)."""
    b, h, t, d, n = custom.Symbols("b", "h", "t", "d", "n")
    new = custom.TemplateType(DType.float32, [b, h, t, d])
    cached = custom.TemplateType(custom.DTypeVar("cache"), [b, h, n, d])  # float32 or float16, both alike
    return custom.declare("gpt2_flash_attention",
                          inputs={"q": new, "k": new, "v": new, "k_cache": cached, "v_cache": cached,
                                  "past": custom.TemplateType(DType.int64, [1])},
                          outputs=[new], custom_extensions=[KERNEL])


def flash_attention(q: Tensor, k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, past: Tensor) -> Tensor:
    """Causal attention of the T new positions over the past ones and themselves, by the kernel, which
    first writes k and v into the caches at positions past .. past+T-1: [B, H, T, D]."""
    return flash_op()(q, k, v, k_cache, v_cache, past)


def empty_flash_cache(config, batch_size: int) -> list[Tensor]:
    """2L caches [B, H, n_positions, D] of zeros, CACHE_DTYPE: allocated once, written in place by the kernel."""
    shape = (batch_size, config.n_head, config.n_positions, config.n_embd // config.n_head)
    return [Tensor.from_dlpack(np.zeros(shape, dtype=CACHE_DTYPE.to_numpy())) for _ in range(2 * config.n_layer)]


class GPT2Flash(Module):
    """A loaded GPT2LMHeadModel (step 11) whose attention is the kernel's; its modules, shared."""

    def __init__(self, model: GPT2LMHeadModel):
        self.transformer = model.transformer

    def forward(self, input_ids: Tensor, past: Tensor, *cache: Tensor) -> Tensor:
        """input_ids [B, T], past [1] int64 (P), cache 2L x [B, H, N, D] -> logits [B, V]; the caches
        hold positions 0 .. P+T-1 afterwards."""
        t = self.transformer
        seq_len = input_ids.shape[-1]
        positions = Tensor.arange(0, seq_len, dtype=DType.int64, device=input_ids.device) + past  # [T]: P..P+T-1
        x = t.wte(input_ids) + F.gather(t.wpe.weight, positions, axis=0)  # [B, T, C]
        for i, block in enumerate(t.h):
            attn = block.attn
            q, k, v = F.split(attn.c_attn(block.ln_1(x)), [attn.split_size] * 3, axis=-1)
            q, k, v = (attn._split_heads(u, attn.num_heads, attn.head_dim) for u in (q, k, v))  # [B, H, T, D]
            heads = flash_attention(q, k, v, cache[2 * i], cache[2 * i + 1], past)
            x = x + attn.c_proj(attn._merge_heads(heads, attn.num_heads, attn.head_dim))
            x = x + block.mlp(block.ln_2(x))
        return self.head(t.ln_f(x[:, -1, :]))  # [B, V]: the last position only

    def head(self, last: Tensor) -> Tensor:
        """last [B, C] -> logits [B, V]: the tied head, wte's weight."""
        return last @ self.transformer.wte.weight.T


class GPT2FlashQ8(GPT2Flash):
    """GPT2Flash on int8 weights through step 16's kernel, for decode (T = 1): every Linear a QuantizedLinear,
    the tied head int8 too. A prompt runs through GPT2Flash on the same caches: the int8 kernel reads its
    weights once per row, right for one row, slow for a thousand. Step 16 is imported here, not at the top:
    the float32 path needs nothing of it."""

    def __init__(self, model: GPT2LMHeadModel):
        from solutions.solution_16 import QuantizedLinear, quantized

        super().__init__(model)
        for _, module in [("", self.transformer), *self.transformer.descendants]:
            for name, child in list(module.children):
                if isinstance(child, Linear):
                    setattr(module, name, QuantizedLinear(child))
        self.head_q, self.head_scales = quantized(self.transformer.wte.weight)  # [V, C] int8, [V, C / 32]

    def forward(self, input_ids: Tensor, past: Tensor, *cache: Tensor) -> Tensor:
        """input_ids [B, 1], past [1] int64 (P), cache 2L x [B, H, N, D] -> logits [B, V]: GPT2Flash's forward
        at one position, where [B, 1, C] and [B, H, 1, D] hold the same floats in the same order, so the
        heads split and merge by reshape alone (a decode step's other work is the gap to llama.cpp)."""
        t = self.transformer
        batch, width = input_ids.shape[0], t.wte.weight.shape[-1]
        x = t.wte(input_ids) + F.gather(t.wpe.weight, past, axis=0)  # [B, 1, C]: position P
        for i, block in enumerate(t.h):
            attn = block.attn
            heads = [batch, attn.num_heads, 1, attn.head_dim]
            q, k, v = F.split(attn.c_attn(block.ln_1(x)), [attn.split_size] * 3, axis=-1)  # [B, 1, C] each
            q, k, v = (u.reshape(heads) for u in (q, k, v))  # [B, H, 1, D]: no transpose
            attended = flash_attention(q, k, v, cache[2 * i], cache[2 * i + 1], past)
            x = x + attn.c_proj(attended.reshape([batch, 1, width]))
            x = x + block.mlp(block.ln_2(x))
        return self.head(t.ln_f(x.reshape([batch, width])))  # [B, V]

    def head(self, last: Tensor) -> Tensor:
        from solutions.solution_16 import matvec_q8

        return matvec_q8(last, self.head_q, self.head_scales)


def generate_flash(model, config, input_ids: list[int], max_new_tokens: int, *, temperature: float = 0.0,
                   top_k: int | None = None, seed: int | None = None,
                   eos_token_id: int | None = None) -> Iterator[int]:
    """Step 13's generate_with_cache on GPT2Flash (usually compiled): the cache allocated once, never copied."""
    rng = np.random.default_rng(seed)
    cache = empty_flash_cache(config, 1)
    ids, past = np.array([input_ids], dtype=np.int64), 0
    for _ in range(max_new_tokens):
        logits = model(Tensor.from_dlpack(ids), Tensor.from_dlpack(np.array([past], np.int64)), *cache)
        past += ids.shape[1]
        token = next_token(np.from_dlpack(logits)[0], temperature=temperature, top_k=top_k, rng=rng)
        yield token
        if token == eos_token_id:
            return
        ids = np.array([[token]], dtype=np.int64)
