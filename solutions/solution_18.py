"""Step 18 solution: serve many users at once on your own kernels, paged attention and batched int8 products.

Step 14 served a ragged batch over MAX's paged cache with MAX's own attention and float32 matmuls;
steps 16 and 17 made one request fast with int8 products and one-pass attention. Here the two meet:
solution_18_kernel/ holds two custom ops for the batch MAX's serving stack hands the model:

    paged_flash_attention(q, k, v, kv_collection, input_row_offsets, layer)
        q, k, v [T, H, D] (every request's new rows, end to end) -> [T, H, D]; the rows' keys and values
        are first stored into their requests' pages of MAX's cache (kv_collection: the pool
        kv_blocks [pages, 2, L, PAGE, H, D], cache_lengths [B], lookup_table [B, max_pages]), then each
        row attends to its own request's positions up to its own (`gpt2_paged_flash_attention`)
    matmul_q8(x, q, scales, bias)
        x [M, K], q [N, K] int8, scales [N, KB], bias [N] or None -> [M, N]: step 16's product for M rows
        at once, each weight read from memory once for all of them (`gpt2_matmul_q8`)

    GPT2PagedQ8(model, kv_params)   step 14's GPT2Paged with both: every Linear and the tied wte int8 (the
        head's product and the embedding's rows, as llama.cpp's Q8_0 keeps its token table), and every
        LayerNorm as MAX's one op (OneOpLayerNorm)
        forward(tokens [T], kv_collection, input_row_offsets [B+1], rows [R]) -> logits [R, V]
        (rows: which rows' next-token scores the server wants, each request's last, or every row for a
        prompt's log-probabilities)

Quantisation is step 16's (int8 per block of 32 along a row, one float32 scale), and the model is GPT-2 on
dequantize(quantize(.)) of every product weight and of wte (n_embd a multiple of 32). Where the CPU has
AVX-512 VNNI or AVX2 the kernel quantises x too, per block of 32 as llama.cpp's Q8_0 does, and multiplies int8 by
int8 (the check finds that rounding and holds the model to it); elsewhere x stays float32 and the product
equals x @ dequantize(q, scales).T up to float32 rounding of the sums.
"""

from functools import cache
from pathlib import Path

from max.dtype import DType
from max.experimental import custom
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor
from max.graph import Graph, TensorType, ops

from solutions.solution_03 import LayerNorm
from solutions.solution_11 import GPT2LMHeadModel
from solutions.solution_14 import ragged_positions
from solutions.solution_16 import BLOCK, quantized

KERNEL = Path(__file__).with_name("solution_18_kernel")  # the Mojo package (paged_flash.mojo, matmul_q8.mojo)


def _paged_flash(q, k, v, kv_collection, input_row_offsets, layer):
    """The op staged into the graph being built: an in-place custom op, since it writes kv_blocks."""
    Graph.current._import_kernels([KERNEL])  # the Mojo package, built once (MAX keeps it by its path)
    (out,) = ops.inplace_custom(
        "gpt2_paged_flash_attention", q.device,
        [q, k, v, kv_collection.kv_blocks, kv_collection.cache_lengths, kv_collection.lookup_table,
         input_row_offsets, layer],
        out_types=[TensorType(DType.float32, q.shape, q.device)])
    return out.tensor


_paged_flash_op = F.functional(_paged_flash)


def paged_flash_attention(q: Tensor, k: Tensor, v: Tensor, kv_collection, input_row_offsets: Tensor,
                          layer: int) -> Tensor:
    """q, k, v [T, H, D] -> [T, H, D]: causal attention of each request's rows over its own positions in the
    paged cache, after storing k and v at positions cache_lengths[b] .. of request b's pages (layer `layer`)."""
    layer_idx = Tensor([layer], dtype=DType.uint32, device=q.device)  # [1]
    return _paged_flash_op(q, k, v, kv_collection, input_row_offsets, layer_idx)


@cache
def matmul_q8_op():
    """The custom op, declared once: MAX compiles the Mojo package here (seconds when unchanged)."""
    m, k, n, kb = custom.Symbols("m", "k", "n", "kb")
    return custom.declare("gpt2_matmul_q8",
                          inputs={"x": custom.TemplateType(DType.float32, [m, k]),
                                  "q": custom.TemplateType(DType.int8, [n, k]),
                                  "scales": custom.TemplateType(DType.float32, [n, kb]),
                                  "b": custom.TemplateType(DType.float32, [n])},
                          outputs=[custom.TemplateType(DType.float32, [m, n])], custom_extensions=[KERNEL])


def matmul_q8(x: Tensor, q: Tensor, scales: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [M, K], q [N, K] int8, scales [N, KB], bias [N] or None -> x @ dequantize(q, scales).T + bias [M, N]"""
    if bias is None:  # the tied head has none: the kernel adds zeros
        bias = F.broadcast_to(Tensor(0.0, dtype=x.dtype, device=x.device), [q.shape[0]])
    return matmul_q8_op()(x, q, scales, bias)


class BatchedQ8Linear(Module):
    """A Linear's weight [out, in] as int8 and scales, its bias as it is: x [T, in] -> [T, out] by the kernel."""

    def __init__(self, linear: Linear):
        self.q, self.scales = quantized(linear.weight)
        self.bias = linear.bias

    def forward(self, x: Tensor) -> Tensor:
        return matmul_q8(x, self.q, self.scales, self.bias)


class OneOpLayerNorm(Module):
    """A LayerNorm's weight, bias and eps, as MAX's one layer_norm op: x [T, C] -> [T, C]. Step 03's seven ops
    (two means, the centring, a square root, a division, the scale and shift) are seven small kernels for
    every one of the 25 layer norms of a step; a step of one decode row took 10.5 ms with them and 8.3 ms
    with this on 2 cores (`bench --decode-split`)."""

    def __init__(self, ln: LayerNorm):
        self.weight, self.bias, self.eps = ln.weight, ln.bias, ln.eps

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, gamma=self.weight, beta=self.bias, epsilon=self.eps)


class GPT2PagedQ8(Module):
    """A loaded GPT2LMHeadModel (step 11) for a ragged batch over MAX's paged cache, on your kernels."""

    def __init__(self, model: GPT2LMHeadModel, kv_params):
        self.transformer = model.transformer
        self.kv_params = kv_params
        for _, module in [("", self.transformer), *self.transformer.descendants]:
            for name, child in list(module.children):
                if isinstance(child, Linear):
                    setattr(module, name, BatchedQ8Linear(child))
                elif isinstance(child, LayerNorm):
                    setattr(module, name, OneOpLayerNorm(child))
        self.head_q, self.head_scales = quantized(self.transformer.wte.weight)  # the tied head [V, C], int8
        del self.transformer.wte  # float32 (154 MB), read by nothing now: forward embeds from the int8 table

    def embed(self, tokens: Tensor) -> Tensor:
        """tokens [T] -> their rows of wte [T, C] as the int8 head holds them: each q times its block's scale.
        (Each column's scale gathered, not the rows reshaped into blocks: MAX 26.7 compiles a gather, cast,
        reshape and broadcast multiply of an int8 table into wrong values; run op by op it is right.)"""
        q = F.cast(F.gather(self.head_q, tokens, axis=0), DType.float32)  # [T, C]
        scales = F.gather(self.head_scales, tokens, axis=0)  # [T, C / BLOCK]
        block = Tensor.arange(q.shape[-1], dtype=DType.int64, device=q.device) // BLOCK  # [C]: each column's block
        return q * F.gather(scales, block, axis=1)  # [T, C]

    def forward(self, tokens: Tensor, kv_collection, input_row_offsets: Tensor, rows: Tensor) -> Tensor:
        """tokens [T], input_row_offsets [B+1], rows [R] int64 -> logits [R, V]: the chosen rows' next-token
        scores; each layer's new keys and values stored in the requests' pages."""
        t = self.transformer
        positions = ragged_positions(tokens.shape[0], input_row_offsets, kv_collection.cache_lengths)  # [T]
        x = self.embed(tokens) + F.gather(t.wpe.weight, positions, axis=0)  # [T, C]
        for i, block in enumerate(t.h):
            attn = block.attn
            q, k, v = F.split(attn.c_attn(block.ln_1(x)), [attn.split_size] * 3, axis=-1)  # [T, C] each
            heads = [-1, attn.num_heads, attn.head_dim]
            attended = paged_flash_attention(q.reshape(heads), k.reshape(heads), v.reshape(heads), kv_collection,
                                             input_row_offsets, i)  # [T, H, D]
            x = x + attn.c_proj(attended.reshape([-1, attn.num_heads * attn.head_dim]))
            x = x + block.mlp(block.ln_2(x))
        chosen = t.ln_f(F.gather(x, rows, axis=0))  # [R, C]
        return matmul_q8(chosen, self.head_q, self.head_scales)  # [R, V]
