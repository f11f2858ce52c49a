"""Step 16 solution: decode on 8-bit weights, through your own int8 Mojo kernel.

Step 15's kernel reads every float32 weight once per token, so decode runs at the memory's speed:
4 bytes a weight. Stored as int8 with one float32 scale per BLOCK weights of a row, a weight costs
1 + 4 / BLOCK = 1.125 bytes: 3.6x fewer bytes read per token, the same number of weights.

Quantisation, per row of a Linear's weight [M, K] (out, in), in blocks of BLOCK columns along K (the
last block K % BLOCK columns when K is no multiple of BLOCK), symmetric like llama.cpp's Q8_0:

    scale   = max |w| over the block / 127          (0 for a block of zeros)
    q       = round(w / scale), ties to even (np.rint), in [-127, 127]; 0 where scale is 0
    w      ~= q * scale                              (dequantize: the error at most scale / 2)

Shapes, with N = rows (the batch at decode), K = in, M = out, KB = ceil(K / BLOCK):

    quantize          weight [M, K] float32 -> q [M, K] int8, scales [M, KB] float32
    dequantize        q [M, K], scales [M, KB] -> weight [M, K] float32
    matvec_q8         x [N, K], q, scales, bias [M] or None -> x @ dequantize(q, scales).T + bias [N, M]
    QuantizedLinear   a Linear, quantised: x [B, 1, in] -> [B, 1, out] through the kernel
    GPT2Quantized     step 13's GPT2WithCache, decode only, every product (the tied head too) int8

With the weights 3.6x smaller, a decode step's other work shows: MAX's concat, which grows the cache,
copies far more slowly than a plain copy of the same bytes. decode_attention grows it with a
second small kernel (append.mojo, `gpt2_append`) and drops the mask, which one new position never needs:

    append_op         past [B, H, P, D], new [B, H, 1, D] -> [B, H, P+1, D]
    decode_attention  step 13's attention_with_cache at one position: [B, 1, C], 2 x [B, H, P, D]
                        -> ([B, 1, C], key and value [B, H, P+1, D])
"""

import math
from functools import cache
from pathlib import Path

import numpy as np
from max.dtype import DType
from max.experimental import custom
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_07 import GPT2MultiHeadAttention
from solutions.solution_13 import GPT2WithCache

KERNEL = Path(__file__).with_name("solution_16_kernel")  # the Mojo package (matvec_q8.mojo, append.mojo)
BLOCK = 32  # columns of a row that share one scale (Q8_0's block)


def quantize(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """weight [M, K] float32 -> q [M, K] int8, scales [M, ceil(K / BLOCK)] float32"""
    m, k = weight.shape
    blocks = -(-k // BLOCK)
    padded = np.zeros((m, blocks * BLOCK), dtype=np.float32)  # zeros past K change no block's max
    padded[:, :k] = weight
    grouped = padded.reshape(m, blocks, BLOCK)  # [M, KB, BLOCK]
    scales = np.abs(grouped).max(axis=-1) / np.float32(127)  # [M, KB]
    safe = np.where(scales == 0, np.float32(1), scales)[..., None]  # a block of zeros stays zeros
    q = np.clip(np.rint(grouped / safe), -127, 127).astype(np.int8)
    return q.reshape(m, -1)[:, :k], scales.astype(np.float32)


def dequantize(q: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """q [M, K] int8, scales [M, KB] float32 -> weight [M, K] float32: each column times its block's scale"""
    per_column = np.repeat(scales, BLOCK, axis=-1)[:, :q.shape[-1]]  # [M, K]: column k's scale is scales[:, k // BLOCK]
    return q.astype(np.float32) * per_column


@cache
def matvec_q8_op():
    """The custom op, declared once: MAX compiles the Mojo package here (seconds when unchanged)."""
    n, k, m, kb = custom.Symbols("n", "k", "m", "kb")
    return custom.declare("gpt2_matvec_q8",
                          inputs={"x": custom.TemplateType(DType.float32, [n, k]),
                                  "q": custom.TemplateType(DType.int8, [m, k]),
                                  "scales": custom.TemplateType(DType.float32, [m, kb]),
                                  "b": custom.TemplateType(DType.float32, [m])},
                          outputs=[custom.TemplateType(DType.float32, [n, m])], custom_extensions=[KERNEL])


def matvec_q8(x: Tensor, q: Tensor, scales: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, K], q [M, K] int8, scales [M, KB], bias [M] or None -> x @ dequantize(q, scales).T + bias [N, M]"""
    if bias is None:  # the tied head has none: the kernel adds zeros
        bias = F.broadcast_to(Tensor(0.0, dtype=x.dtype, device=x.device), [q.shape[0]])
    return matvec_q8_op()(x, q, scales, bias)


def quantized(weight: Tensor) -> tuple[Tensor, Tensor]:
    """A weight Tensor [M, K] -> (q, scales) as Tensors on its device."""
    q, scales = quantize(np.from_dlpack(weight))
    return Tensor.from_dlpack(q).to(weight.device), Tensor.from_dlpack(scales).to(weight.device)


class QuantizedLinear(Module):
    """A Linear's weight [out, in] as int8 and scales, its bias [out] as it is; one position, by the kernel."""

    def __init__(self, linear: Linear):
        self.q, self.scales = quantized(linear.weight)
        self.bias = linear.bias

    def forward(self, x: Tensor) -> Tensor:
        """x [B, 1, in] -> [B, 1, out]"""
        rows = x.reshape([-1, x.shape[-1]])  # [B, in]: one row per sequence
        return matvec_q8(rows, self.q, self.scales, self.bias).reshape([*x.shape[:-1], self.q.shape[0]])


@cache
def append_op():
    """The custom op `gpt2_append`, declared once: the cache grown by one position."""
    b, h, p, d = custom.Symbols("b", "h", "p", "d")
    return custom.declare("gpt2_append",
                          inputs={"past": custom.TemplateType(DType.float32, [b, h, p, d]),
                                  "new": custom.TemplateType(DType.float32, [b, h, 1, d])},
                          outputs=[custom.TemplateType(DType.float32, [b, h, p + 1, d])], custom_extensions=[KERNEL])


def decode_attention(attn: GPT2MultiHeadAttention, hidden_states: Tensor, past_key: Tensor,
                     past_value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """hidden_states [B, 1, C], past_key and past_value [B, H, P, D]
      -> output [B, 1, C], key and value [B, H, P+1, D]: step 13's attention_with_cache at one position"""
    query, key, value = F.split(attn.c_attn(hidden_states), [attn.split_size] * 3, axis=-1)
    query, key, value = (attn._split_heads(t, attn.num_heads, attn.head_dim) for t in (query, key, value))
    key, value = append_op()(past_key, key), append_op()(past_value, value)  # [B, H, P+1, D]
    scores = (query / math.sqrt(attn.head_dim)) @ key.transpose(-1, -2)  # [B, H, 1, P+1]: no mask, all seen
    heads = F.softmax(scores, axis=-1) @ value  # [B, H, 1, D]
    return attn.c_proj(attn._merge_heads(heads, attn.num_heads, attn.head_dim)), key, value


class GPT2Quantized(GPT2WithCache):
    """Step 13's GPT2WithCache with every weight product of a decode step int8, through the kernel."""

    def __init__(self, model):
        super().__init__(model)
        for _, module in [("", self.transformer), *self.transformer.descendants]:
            for name, child in list(module.children):
                if isinstance(child, Linear):
                    setattr(module, name, QuantizedLinear(child))
        self.head_q, self.head_scales = quantized(self.transformer.wte.weight)  # the tied head [V, C]

    def forward(self, input_ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """input_ids [B, 1], cache 2L x [B, H, P, D] -> (logits [B, V], *cache 2L x [B, H, P+1, D])"""
        t = self.transformer
        x = t.wte(input_ids) + t.wpe(input_ids.shape[-1], cache[0].shape[-2])  # [B, 1, C]
        new_cache = []
        for i, block in enumerate(t.h):
            attended, key, value = decode_attention(block.attn, block.ln_1(x), cache[2 * i], cache[2 * i + 1])
            x = x + attended
            x = x + block.mlp(block.ln_2(x))
            new_cache += [key, value]
        last = t.ln_f(x[:, -1, :])  # [B, C]
        return (matvec_q8(last, self.head_q, self.head_scales), *new_cache)  # the tied head, int8 [B, V]
