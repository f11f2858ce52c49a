"""Step 18: causal attention for a ragged batch, its keys and values in MAX's paged cache.

Shapes, with T = the new rows of the whole batch, B = requests, H = heads, D = head_dim = 64, L = layers:
    q, k, v        [T, H, D] float32      every request's new rows, end to end (no padding)
    blocks         [pages, 2, L, PAGE, H, D] float32   MAX's pool of pages: blocks[page, 0] keys, [page, 1]
                                          values, then the layer, the slot within the page, the head
    cache_lengths  [B] uint32             positions request b already has in its pages
    lookup         [B, max_pages] uint32  request b's i-th page is blocks[lookup[b, i]]
    offsets        [B + 1] uint32         request b owns rows offsets[b] .. offsets[b + 1] - 1
    layer          [1] uint32             which layer's keys and values this call stores and reads
    result         [T, H, D] float32
Element [a, b, c, ...] of a tensor is at a row-major offset: blocks[page, kv, layer, slot, h, d] at
((((page * 2 + kv) * L + layer) * PAGE + slot) * H + h) * D + d.

What to compute, for each request b and each of its new rows r:
    pos     = cache_lengths[b] + (r - offsets[b])          the row's position in its request
    first   its key k[r] and value v[r] stored at position pos: page lookup[b, pos / PAGE], slot pos % PAGE
    then    result[r, h] = softmax_j(q[r, h] . key_j[h] / sqrt(D)) @ values, j = 0 .. pos of request b's
            positions (found through its page table)
Positions before cache_lengths[b] are already in the pool and may sit in pages another request shares
(MAX's prefix caching: a prompt that starts as one seen before reuses its pages): never write them.

Facts you cannot guess (MAX 26.7 and its Mojo), beside steps 15 and 17's:
- The pool is written in place: it comes in as a `MutableInputTensor`, imported as
  `from extensibility import _MutableInputTensor as MutableInputTensor` (MAX 26.7 names it with a leading
  underscore); its memory is the serving stack's own, kept from call to call.
- A uint32 tensor's value: `Int(t.unsafe_ptr()[unsafe_offset=i])`.
- A nested function that reads the kernel's variables and returns a value is declared
  `def f(i: Int) {imm} -> Int:`.

Read: the book's page for this step (book/docs/steps/18.md).
Check: pixi run s18        Stuck? pixi run s18 --hint
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from extensibility import _MutableInputTensor as MutableInputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext


@extensibility.register("gpt2_paged_flash_attention")
struct GPT2PagedFlashAttention:
    """The custom op: the new keys and values into their requests' pages, then every new row's causal attention."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[dtype=DType.float32, rank=3, ...],
        q: InputTensor[dtype=DType.float32, rank=3, ...],
        k: InputTensor[dtype=DType.float32, rank=3, ...],
        v: InputTensor[dtype=DType.float32, rank=3, ...],
        blocks: MutableInputTensor[dtype=DType.float32, rank=6, ...],
        cache_lengths: InputTensor[dtype=DType.uint32, rank=1, ...],
        lookup: InputTensor[dtype=DType.uint32, rank=2, ...],
        offsets: InputTensor[dtype=DType.uint32, rank=1, ...],
        layer: InputTensor[dtype=DType.uint32, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var T, H = q.dim_size(0), q.dim_size(1)
        var B, PAGE = cache_lengths.dim_size(0), blocks.dim_size(3)
        # TODO: store the new rows' keys and values, then fill result. Decide first:
        #   - How does a row find its request? (offsets) And its position? (cache_lengths)
        #   - Where in the pool is position p of request b, for the keys and for the values?
        #   - Step 17's online softmax per (row, head): can a tile of keys cross a page's end?
        #   - What does one task own, when one request brings 100 rows and another one?
        # Start simple and correct (one task, one key at a time), pass the attention part, then make it fast.
        raise Error("step 18: not implemented yet (write the kernel in paged_flash.mojo)")
