"""Step 18: serve many users at once on your own kernels: paged FlashAttention and batched int8 products.

Step 14 served a ragged batch over MAX's paged cache with MAX's own attention and float32 matmuls;
steps 16 and 17 made one request fast with your int8 products and your one-pass attention. A server
runs many requests in one batch: every request's new rows end to end (a prompt's chunk beside another
request's single decode row), their keys and values in pages scattered through one pool. Here your
kernels take that batch (step_18_kernel/):

    paged_flash_attention(q, k, v, kv_collection, input_row_offsets, layer)
        q, k, v [T, H, D] -> [T, H, D]: the rows' keys and values first stored into their requests' pages of
        MAX's cache (kv_collection, as MAX hands it: kv_blocks [pages, 2, L, PAGE, H, D], cache_lengths [B],
        lookup_table [B, max_pages]) for layer `layer` (a Python int), then each row's causal attention over
        its own request's positions (the op `gpt2_paged_flash_attention`, paged_flash.mojo)
    matmul_q8(x, q, scales, bias)
        x [M, K], q [N, K] int8, scales [N, KB], bias [N] or None -> x @ dequantize(q, scales).T + bias [M, N]:
        step 16's product for M rows at once, each weight read from memory once (`gpt2_matmul_q8`, matmul_q8.mojo)
    GPT2PagedQ8(model, kv_params)
        step 14's GPT2Paged on your kernels, every Linear and the tied wte int8 (step 16's quantisation): the
        head's product, and the embedding's rows too (q times its block's scale, as llama.cpp's Q8_0 keeps its
        token table): the model is GPT-2 on dequantised weights, which the check holds it to;
        forward(tokens [T], kv_collection, input_row_offsets [B+1], rows [R] int64) -> logits [R, V],
        the next-token scores of the rows the server asks for (each request's last, or every row when a
        client wants a prompt's log-probabilities). `pixi run serve --fast` serves it

Facts you cannot guess (MAX 26.7), beside steps 14-17's:
- An op that writes a buffer in place is staged with `max.graph.ops.inplace_custom(name, device, values,
  out_types=[TensorType(...)])` inside a graph function made callable on Tensors by `F.functional(fn)`;
  its Mojo package is loaded into the graph being built by `Graph.current._import_kernels([KERNEL])`.
  Its parameters need no type hints: unhinted, each receives what it is called with (q, k, v as Tensors,
  which graph ops take while the graph is built; kv_collection.kv_blocks is already the pool's BufferValue).
  The hints F.functional's docstring speaks of turn Tensors into graph values; nothing here needs them.
  inplace_custom returns a list of graph values, one per out_type: the function returns the first one's
  `.tensor`.
- `Tensor([layer], dtype=DType.uint32, device=q.device)` is a [1] uint32 tensor of a Python int.
- `custom.declare` (step 16) declares matmul_q8's op as matvec_q8's was declared.
- MAX 26.7 compiles one way of dequantising gathered rows wrongly (right op by op): an int8 table's rows
  gathered, cast to float32, reshaped to [T, C / 32, 32] and multiplied by their scales reshaped to
  [T, C / 32, 1]. Give each column its block's scale instead: F.gather(scales_rows, arange(C) // 32, axis=1).

Read: the book's page for this step (book/docs/steps/18.md).
Check: pixi run s18        Then: pixi run serve --fast        Stuck? pixi run s18 --hint
"""

from pathlib import Path

from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_11 import GPT2LMHeadModel, load_hf_weights  # noqa: F401  (the server loads your model with them)

KERNEL = Path(__file__).with_name("step_18_kernel")  # your Mojo package: paged_flash.mojo and matmul_q8.mojo

# TODO (imports): what else will you need? DType, MAX's graph ops (ops, Graph, TensorType), its functional ops
#   and custom op module, Linear, step 03's LayerNorm, step 14's ragged_positions and step 16's quantized.


def paged_flash_attention(q: Tensor, k: Tensor, v: Tensor, kv_collection, input_row_offsets: Tensor,
                          layer: int) -> Tensor:
    """q, k, v [T, H, D] -> [T, H, D] by your kernel, which first stores k and v into the requests' pages."""
    # TODO: stage `gpt2_paged_flash_attention` in place (it writes kv_collection.kv_blocks) with the pool, the
    #   cache lengths, the page table, the row offsets and the layer as a [1] uint32 tensor.
    raise NotImplementedError("step 18: paged_flash_attention")


def matmul_q8(x: Tensor, q: Tensor, scales: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [M, K], q [N, K] int8, scales [N, KB], bias [N] or None -> [M, N] by your kernel."""
    # TODO: as step 16's matvec_q8, on the op `gpt2_matmul_q8` declared from KERNEL (declared once).
    raise NotImplementedError("step 18: matmul_q8")


class GPT2PagedQ8(Module):
    """A loaded GPT2LMHeadModel (step 11) for a ragged batch over MAX's paged cache, on your kernels."""

    def __init__(self, model: GPT2LMHeadModel, kv_params):
        # TODO: keep the model's body; swap every Linear for one whose product is matmul_q8 on its weight
        #   quantised (step 16's quantized), walking the modules as in step 15 (module.children: its (name,
        #   child) pairs; module.descendants: every module's; setattr swaps one); quantise the tied head's weight
        #   too. kv_params is handed as to step 14's GPT2Paged, whose MAX attention needed it; your kernel reads
        #   the pool's shape from kv_collection.
        #   For speed, swap every LayerNorm (step 03's) too, for MAX's one op on its own weight, bias and eps:
        #   F.layer_norm(x, gamma=..., beta=..., epsilon=...) (the book's page says what it saves).
        #   Once the head is int8, the float32 wte is read by nothing (forward embeds from the int8 table):
        #   del it, or max serve's worker keeps its 154 MB.
        raise NotImplementedError("step 18: GPT2PagedQ8.__init__")

    def forward(self, tokens: Tensor, kv_collection, input_row_offsets: Tensor, rows: Tensor) -> Tensor:
        """tokens [T], input_row_offsets [B+1], rows [R] int64 -> logits [R, V]"""
        # TODO: step 14's GPT2Paged.forward with your attention for each block, then only the rows asked for
        #   through ln_f and the int8 head.
        raise NotImplementedError("step 18: GPT2PagedQ8.forward")
