"""Step 17: causal attention in one pass over the keys (FlashAttention), the cache written in place.

Shapes (float32 unless said, each tensor one block of memory, its last axis contiguous):
    q, k, v            [B, H, T, D]  the T new positions' queries, keys and values (D = head_dim)
    k_cache, v_cache   [B, H, N, D]  N = n_positions: room for the whole context, allocated once
    past               [1] int64     P: how many positions the caches already hold
    result             [B, H, T, D]  each new query's attention output
Element [b, h, i, d] of a [B, H, X, D] tensor is at ((b * H + h) * X + i) * D + d.

What to compute, for each head (b, h) and each new position t (its absolute position P + t):
    first   k_cache[b, h, P + t] = k[b, h, t] and v_cache[b, h, P + t] = v[b, h, t], for every t
    then    s_j = q[b, h, t] . k_cache[b, h, j] / sqrt(D)            for keys j = 0 .. P + t
            result[b, h, t] = sum_j softmax(s)_j v_cache[b, h, j]     (keys after P + t: masked)

Without ever storing the scores of a whole row: the online softmax. Go over the keys in tiles; keep
per query a running maximum m (starting at -infinity), a running sum l (0) and an accumulator a [D]
(0). For each tile, with s_max the tile's largest score:
    m_new = max(m, s_max)
    l     = l * exp(m - m_new) + sum_j exp(s_j - m_new)
    a     = a * exp(m - m_new) + sum_j exp(s_j - m_new) v_j
    m     = m_new
and after the last tile result = a / l. Parts of the keys done apart, (m1, l1, a1) and (m2, l2, a2),
combine exactly: m = max(m1, m2), l = l1 e^(m1-m) + l2 e^(m2-m), a = a1 e^(m1-m) + a2 e^(m2-m).

Facts you cannot guess (MAX 26.7 and its Mojo), beside step 15's:
- The caches come in as InputTensors, yet their memory is the caller's own: what the kernel writes
  through k_cache.unsafe_ptr() is there at the next call. Write positions P .. P+T-1 only.
- `from std.math import exp, sqrt`; `from std.sys import simd_width_of`: `simd_width_of[DType.float32]()`
  is this CPU's vector width in floats (16 with AVX-512, 8 with AVX2), known when Mojo compiles.
- `from std.memory import alloc`: `alloc[Float32](n)` is room for n floats, `.free()` gives it back (this
  Mojo warns that both are deprecated: they work, and the check does not show the warnings);
  `from std.memory import stack_allocation`: `stack_allocation[n, Float32]()` is n floats on the stack,
  freed when the function returns; `Array[Float32, n](fill=0)` too; n known when Mojo compiles.
- Type-check in seconds, before a check: `mojo precompile steps/step_17_kernel -o /tmp/flash.mojoc`.
- `Float32.MIN` is the most negative float32 (exp(Float32.MIN - m) is 0); `Int(t.unsafe_ptr()[unsafe_offset=0])`
  reads an int64 tensor's first value.
- `from std.sys.info import num_logical_cores`: the CPU's threads, for how many tasks to make.
- Caches in float16 (optional; your empty_flash_cache decides): declare them
  `k_cache: InputTensor[rank=4, ...]` and `v_cache: InputTensor[dtype=k_cache.dtype, rank=4, ...]`,
  so the kernel is built for the dtype it is handed; store with `x.cast[k_cache.dtype]()`, compute with
  `kc.unsafe_load[width=W](i).cast[DType.float32]()`.

Read: the book's page for this step (book/docs/steps/17.md).
Check: pixi run s17        Stuck? pixi run s17 --hint
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext


@extensibility.register("gpt2_flash_attention")
struct GPT2FlashAttention:
    """The custom op: the new keys and values into the caches, then each new query's causal attention."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[dtype=DType.float32, rank=4, ...],
        q: InputTensor[dtype=DType.float32, rank=4, ...],
        k: InputTensor[dtype=DType.float32, rank=4, ...],
        v: InputTensor[dtype=DType.float32, rank=4, ...],
        k_cache: InputTensor[dtype=DType.float32, rank=4, ...],
        v_cache: InputTensor[dtype=DType.float32, rank=4, ...],
        past: InputTensor[dtype=DType.int64, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var B, H, T, D = q.dim_size(0), q.dim_size(1), q.dim_size(2), q.dim_size(3)
        var N = k_cache.dim_size(2)
        # TODO: write the new keys and values into the caches, then fill result. Decide first:
        #   - What does one task own? (A head, and some of its queries; at decode T = 1, and B * H heads
        #     may be fewer than the CPU's threads: could a head's keys be split between tasks?)
        #   - Where is a tile's score kept, and how many of them at once?
        #   - What do m, l and the accumulator start at, and what happens to l and the accumulator
        #     when a tile's largest score is above m?
        #   - Which keys may query t see, when P positions were cached before it?
        # Start simple and correct (one task, one key at a time), pass the kernel part, then make it
        # fast and watch the timing part.
        raise Error("step 17: not implemented yet (write the kernel in flash.mojo)")
