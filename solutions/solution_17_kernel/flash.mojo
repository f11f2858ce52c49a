"""Step 17 solution: causal attention in one pass over the keys, the cache written in place.

Shapes: q, k, v [B, H, T, D] (the new positions' queries, keys and values), k_cache and v_cache
[B, H, N, D] (N = n_positions, allocated once), past [1] int64 = P (the positions already cached),
result [B, H, T, D]. The caches are float32 or float16 (half the bytes to read at decode, as llama.cpp
keeps its cache): a key is stored rounded to the cache's dtype and read back as float32, the
arithmetic all float32. The new keys and values are stored at positions P .. P+T-1 of the caches, then
query t (position P + t) attends to keys 0 .. P + t with the online softmax: over tiles of TILE keys,
a running maximum m, a running sum l and an accumulator acc [D], both rescaled by exp(m_old - m_new)
whenever a tile raises the maximum; result = acc / l. No [T, P + T] score matrix is ever stored: a
tile's scores, TILE of them, are all a query holds.

The work: a task per (b, h, band of QROWS queries); the band's queries go one after another over the
same keys, which stay in the core's cache. At decode the tasks are dealt out in as many runs as the CPU
has threads: a task handed to a thread costs microseconds, a head's decode not many more. A query's scaled q and its accumulator are kept in vectors
of W floats, W the CPU's own vector width. At decode (T = 1) the B * H tasks may be fewer than the
CPU's threads: each head's keys are then split too (flash-decoding), every split keeping its own
(m, l, acc), combined exactly at the end:
    m = max m_s,  l = sum l_s exp(m_s - m),  result = sum acc_s exp(m_s - m) / l
The split holding position P writes the new key and value before it reads them: one pass, no other.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext
from std.math import exp, sqrt
from std.memory import alloc
from std.sys import simd_width_of
from std.sys.info import num_logical_cores

comptime W = simd_width_of[DType.float32]()  # floats per SIMD operation, as wide as this CPU's vectors
comptime TILE = 64  # keys scored at once: their scores are all the softmax ever holds
comptime QROWS = 8  # queries per task at prefill, one after another over the same keys
comptime D = 64  # GPT-2's head_dim: a query and its accumulator are D / W vectors, kept in registers
comptime DV = D // W
comptime NEG_INF = Float32.MIN  # the running maximum before any key: exp(NEG_INF - m) is 0


@extensibility.register("gpt2_flash_attention")
struct GPT2FlashAttention:
    """The custom op: result[b, h, t] = softmax(q[b, h, t] . keys 0..P+t / sqrt(D)) @ values 0..P+t, the new
    keys and values first written at P .. P+T-1 of the caches."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[dtype=DType.float32, rank=4, ...],
        q: InputTensor[dtype=DType.float32, rank=4, ...],
        k: InputTensor[dtype=DType.float32, rank=4, ...],
        v: InputTensor[dtype=DType.float32, rank=4, ...],
        k_cache: InputTensor[rank=4, ...],  # float32 or float16
        v_cache: InputTensor[dtype=k_cache.dtype, rank=4, ...],
        past: InputTensor[dtype=DType.int64, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var B, H, T = q.dim_size(0), q.dim_size(1), q.dim_size(2)
        var N = k_cache.dim_size(2)
        var P = Int(past.unsafe_ptr()[unsafe_offset=0])
        if P < 0 or P + T > N:
            raise Error("past + the new positions (" + String(P + T) + ") exceed the cache's " + String(N))
        if q.dim_size(3) != D:
            raise Error("this kernel is GPT-2's: head_dim " + String(D) + ", not " + String(q.dim_size(3)))
        var op, qp, kp, vp = result.unsafe_ptr(), q.unsafe_ptr(), k.unsafe_ptr(), v.unsafe_ptr()
        var kc, vc = k_cache.unsafe_ptr(), v_cache.unsafe_ptr()
        var scale = Float32(1) / sqrt(Float32(D))
        var heads = B * H

        def store(i: Int) {imm}:  # head i = b * H + h: its T new positions after its P cached ones
            for t in range(T):
                var to, source = (i * N + P + t) * D, (i * T + t) * D
                for e in range(0, D, W):
                    kc.unsafe_store(to + e, kp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())
                    vc.unsafe_store(to + e, vp.unsafe_load[width=W](source + e).cast[k_cache.dtype]())

        if T > 1:  # prefill: every band reads keys other bands' queries bring, so all are stored first
            sync_parallelize(store, heads)

        var bands = (T + QROWS - 1) // QROWS
        var S = P + T  # the keys the last query sees
        var splits = 1
        if T == 1:  # decode: split each head's keys when the heads alone leave threads idle
            splits = max(1, min((num_logical_cores() + heads - 1) // heads, (S + TILE - 1) // TILE))
        var per_split = (S + splits - 1) // splits
        var parts = heads * splits if splits > 1 else 1  # each split's (m, l, acc), for the combine
        var ms, ls, accs = alloc[Float32](parts), alloc[Float32](parts), alloc[Float32](parts * D)

        def task(n: Int) {imm}:  # n = ((head * bands) + band) * splits + split
            var split = n % splits
            var band = (n // splits) % bands
            var head = n // (splits * bands)
            var first = split * per_split  # this split's keys: first .. end - 1
            var end = min(S, first + per_split)
            if T == 1 and end == S:  # decode: the split that holds position P stores it, then reads it
                store(head)
            var keys, values = head * N * D, head * N * D
            var s = alloc[Float32](TILE)  # a tile's scores, then their exponentials
            var t0 = band * QROWS
            for t in range(t0, min(t0 + QROWS, T)):
                var qv = Array[SIMD[DType.float32, W], DV](fill=0)
                var acc = Array[SIMD[DType.float32, W], DV](fill=0)
                comptime for e in range(DV):
                    qv[e] = qp.unsafe_load[width=W]((head * T + t) * D + e * W) * scale
                var m, l = NEG_INF, Float32(0)
                var limit = min(end, P + t + 1)  # query t sees the keys up to its own position
                var j0 = first
                while j0 < limit:
                    var count = min(TILE, limit - j0)
                    var tile_max = NEG_INF
                    for j in range(count):  # the scores: q . k / sqrt(D)
                        var dot = SIMD[DType.float32, W](0)
                        var key = keys + (j0 + j) * D
                        comptime for e in range(DV):
                            dot = qv[e].fma(kc.unsafe_load[width=W](key + e * W).cast[DType.float32](), dot)
                        var score = dot.reduce_add()
                        s[unsafe_offset=j] = score
                        tile_max = max(tile_max, score)
                    var new_m = max(m, tile_max)
                    var factor = exp(m - new_m)  # what was summed against the old maximum, rescaled
                    l = l * factor
                    comptime for e in range(DV):
                        acc[e] = acc[e] * factor
                    var c = 0
                    while c + W <= count:  # the weights exp(s - m), W at once
                        s.unsafe_store(c, exp(s.unsafe_load[width=W](c) - new_m))
                        c += W
                    while c < count:
                        s[unsafe_offset=c] = exp(s[unsafe_offset=c] - new_m)
                        c += 1
                    for j in range(count):  # added to the sum and the accumulator
                        var p = s[unsafe_offset=j]
                        l += p
                        var value = values + (j0 + j) * D
                        comptime for e in range(DV):
                            var vv = vc.unsafe_load[width=W](value + e * W).cast[DType.float32]()
                            acc[e] = vv.fma(SIMD[DType.float32, W](p), acc[e])
                    m = new_m
                    j0 += count
                if splits == 1:
                    var out = (head * T + t) * D
                    comptime for e in range(DV):
                        op.unsafe_store(out + e * W, acc[e] / l)
                else:
                    var at = head * splits + split
                    ms[unsafe_offset=at] = m
                    ls[unsafe_offset=at] = l
                    comptime for e in range(DV):
                        accs.unsafe_store(at * D + e * W, acc[e])
            s.free()

        var tasks = heads * bands * splits
        var runs = min(tasks, num_logical_cores()) if T == 1 else tasks  # prefill: uneven bands, a task each
        var per_run = (tasks + runs - 1) // runs

        def run(r: Int) {imm}:
            for n in range(r * per_run, min((r + 1) * per_run, tasks)):
                task(n)

        sync_parallelize(run, runs)

        def combine(head: Int) {imm}:  # decode: the head's splits' (m, l, acc) into its output
            var top = NEG_INF
            for sp in range(splits):
                top = max(top, ms[unsafe_offset=head * splits + sp])
            var total: Float32 = 0
            var out = head * D
            for e in range(0, D, W):
                op.unsafe_store(out + e, SIMD[DType.float32, W](0))
            for sp in range(splits):
                var at = head * splits + sp
                var weight = exp(ms[unsafe_offset=at] - top)
                total += ls[unsafe_offset=at] * weight
                for e in range(0, D, W):
                    op.unsafe_store(out + e, accs.unsafe_load[width=W](at * D + e).fma(
                        SIMD[DType.float32, W](weight), op.unsafe_load[width=W](out + e)))
            for e in range(0, D, W):
                op.unsafe_store(out + e, op.unsafe_load[width=W](out + e) / total)

        if splits > 1:
            sync_parallelize(combine, heads)
        ms.free()
        ls.free()
        accs.free()
