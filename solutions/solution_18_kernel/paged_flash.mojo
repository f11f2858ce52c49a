"""Step 18 solution: causal attention for a ragged batch, its keys and values in MAX's paged cache.

Shapes, with T = the new rows of the whole batch, B = requests, H = heads, D = head_dim = 64:

    q, k, v        [T, H, D] float32   every request's new rows, end to end
    blocks         [pages, 2, L, PAGE, H, D]   MAX's pool: page p, keys (0) or values (1), layer, slot
    cache_lengths  [B] uint32          positions request b already has in its pages
    lookup         [B, max_pages] uint32   request b's i-th page is blocks[lookup[b, i]]
    offsets        [B + 1] uint32      request b owns rows offsets[b] .. offsets[b + 1] - 1
    layer          [1] uint32          which layer's keys and values
    result         [T, H, D] float32

Row r of request b sits at position pos = cache_lengths[b] + (r - offsets[b]); position pos lives in
page lookup[b, pos / PAGE], slot pos % PAGE. The rows' keys and values are first stored there (only
positions at or after cache_lengths[b]: pages a request shares with another, a prefix both prompts
begin with, hold positions before it and are read, never written), then row r attends to its
request's positions 0 .. pos with step 17's online softmax, a page's keys at a time.

The work: a task per (request, head, band of QROWS rows). A band of a prompt is scored as a block
(`band`): lane i of a vector holds row i, so a key's scores for the band are D products of the rows'
q[d] by k[d] and the online softmax runs lane by lane; a band of fewer rows goes row by row. At decode
(every request a single row) a task takes a run of heads instead, all of a request's
when the requests alone keep the cores busy: a position's keys (and values) of every head are one run of
H * D floats in the page, read from start to end, where a head's alone are D floats every H * D, a
pattern the memory serves at half the speed. When the B * H heads still leave threads idle, each head's
keys are split too, every split keeping its own (m, l, acc), combined exactly at the end.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from extensibility import _MutableInputTensor as MutableInputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext
from std.math import exp, sqrt
from std.memory import alloc
from std.sys import size_of, simd_width_of
from std.sys.intrinsics import PrefetchOptions, prefetch
from std.sys.info import num_logical_cores

comptime W = simd_width_of[DType.float32]()  # floats per SIMD operation, as wide as this CPU's vectors
comptime TILE = 64  # keys scored at once (never past a page's end)
comptime QROWS = W  # rows per task at prefill: a band, one row per lane of a vector
comptime BAND_FROM = 4  # a band of this many rows or more is scored as a block; fewer, row by row
comptime KG = 8  # keys scored at once in a band: eight sums in flight, not one waiting on the last
comptime D = 64  # GPT-2's head_dim
comptime DV = D // W
comptime NEG_INF = Float32.MIN  # the running maximum before any key: exp(NEG_INF - m) is 0


@extensibility.register("gpt2_paged_flash_attention")
struct GPT2PagedFlashAttention:
    """The custom op: every new row's attention over its own request's positions up to its own, the new
    keys and values first stored into the request's pages."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[dtype=DType.float32, rank=3, ...],
        q: InputTensor[dtype=DType.float32, rank=3, ...],
        k: InputTensor[dtype=DType.float32, rank=3, ...],
        v: InputTensor[dtype=DType.float32, rank=3, ...],
        blocks: MutableInputTensor[rank=6, ...],  # float32 or float16
        cache_lengths: InputTensor[dtype=DType.uint32, rank=1, ...],
        lookup: InputTensor[dtype=DType.uint32, rank=2, ...],
        offsets: InputTensor[dtype=DType.uint32, rank=1, ...],
        layer: InputTensor[dtype=DType.uint32, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var T, H = q.dim_size(0), q.dim_size(1)
        var B, MP = cache_lengths.dim_size(0), lookup.dim_size(1)
        var NP, L, PAGE = blocks.dim_size(0), blocks.dim_size(2), blocks.dim_size(3)
        if q.dim_size(2) != D or blocks.dim_size(5) != D:
            raise Error("this kernel is GPT-2's: head_dim " + String(D))
        if blocks.dim_size(4) != H:
            raise Error("the cache holds " + String(blocks.dim_size(4)) + " heads, q " + String(H))
        if offsets.dim_size(0) != B + 1:
            raise Error("input_row_offsets has " + String(offsets.dim_size(0)) + " entries, not B + 1 = "
                        + String(B + 1))
        var lay = Int(layer.unsafe_ptr()[unsafe_offset=0])
        if lay >= L:
            raise Error("layer " + String(lay) + " of a cache of " + String(L))
        var op, qp, kp, vp = result.unsafe_ptr(), q.unsafe_ptr(), k.unsafe_ptr(), v.unsafe_ptr()
        var bp, cl, lk, off = blocks.unsafe_ptr(), cache_lengths.unsafe_ptr(), lookup.unsafe_ptr(), offsets.unsafe_ptr()
        if Int(off[unsafe_offset=0]) != 0 or Int(off[unsafe_offset=B]) != T:
            raise Error("input_row_offsets must run from 0 to the rows' count " + String(T))
        var bands_before = alloc[Int](B + 1)  # tasks of requests 0 .. b - 1, per head: their bands
        var row_request = alloc[Int](T)
        bands_before[unsafe_offset=0] = 0
        var all_single = True
        for b in range(B):
            var first, end = Int(off[unsafe_offset=b]), Int(off[unsafe_offset=b + 1])
            if end < first:
                raise Error("input_row_offsets must not decrease")
            var last = Int(cl[unsafe_offset=b]) + end - first  # positions the request has after this call
            if (last + PAGE - 1) // PAGE > MP:
                raise Error("request " + String(b) + "'s " + String(last) + " positions need more pages than its table")
            for i in range((last + PAGE - 1) // PAGE):
                if Int(lk[unsafe_offset=b * MP + i]) >= NP:
                    raise Error("request " + String(b) + "'s page table names a page past the pool")
            for r in range(first, end):
                row_request[unsafe_offset=r] = b
            if end - first != 1:
                all_single = False
            bands_before[unsafe_offset=b + 1] = bands_before[unsafe_offset=b] + (end - first + QROWS - 1) // QROWS
        var head_size = H * D  # floats of one position in a page
        comptime LINE = 64 // size_of[blocks.dtype]()  # a cache line's floats (or halves)
        var part = PAGE * head_size  # floats of one layer's keys (or values) in one page

        def slot(b: Int, pos: Int, kv: Int) {imm} -> Int:  # where position pos of request b starts, keys 0, values 1
            var page = Int(lk[unsafe_offset=b * MP + pos // PAGE])
            return ((page * 2 + kv) * L + lay) * part + (pos % PAGE) * head_size

        for r in range(T):  # the new rows' keys and values into their requests' pages, in order, on one thread: a
            # row is a few KB, less work than handing it to the cores
            var b = row_request[unsafe_offset=r]
            var pos = Int(cl[unsafe_offset=b]) + r - Int(off[unsafe_offset=b])
            var kto, vto = slot(b, pos, 0), slot(b, pos, 1)
            for e in range(0, head_size, W):
                bp.unsafe_store(kto + e, kp.unsafe_load[width=W](r * head_size + e).cast[blocks.dtype]())
                bp.unsafe_store(vto + e, vp.unsafe_load[width=W](r * head_size + e).cast[blocks.dtype]())

        var cores = num_logical_cores()
        var splits = 1
        if all_single and B * H < cores:  # decode with threads to spare: each head's keys split too
            splits = (cores + B * H - 1) // (B * H)
        # A task's heads: one at prefill; at decode a run of them, read together (a position's heads are one run
        # of memory), as many runs a request as keep the cores busy.
        var groups = min(H, (cores + B - 1) // max(B, 1)) if all_single else H
        var per_group = (H + groups - 1) // groups
        var parts = B * H * splits if splits > 1 else 1
        var ms, ls, accs = alloc[Float32](parts), alloc[Float32](parts), alloc[Float32](parts * D)
        var scale = Float32(1) / sqrt(Float32(D))

        def band(b: Int, h: Int, first_row: Int, end_row: Int, cached: Int) {imm}:
            # Rows first_row .. end_row - 1 of request b (BAND_FROM to W of them), head h, as a block: a vector holds
            # one value per row (lane i, row first_row + i), so a key's scores for all the rows are D products of a
            # vector of the rows' q[d] by one float k[d], and the online softmax runs on vectors of rows.
            var n = end_row - first_row
            var qt = alloc[Float32](D * W)  # qt[d * W + i] = q[first_row + i, h, d] / sqrt(D), lanes past n zero
            var p = alloc[Float32](TILE * W)  # p[j * W + i]: key j's score for row i, then its weight
            var acc = alloc[Float32](W * D)  # acc[i * D + e]: row i's weighted sum of values so far
            for d in range(D):
                for i in range(W):
                    var qd = qp[unsafe_offset=((first_row + i) * H + h) * D + d] if i < n else 0
                    qt[unsafe_offset=d * W + i] = qd * scale
            for i in range(D):
                acc.unsafe_store(i * W, SIMD[DType.float32, W](0))
            var m, l = SIMD[DType.float32, W](NEG_INF), SIMD[DType.float32, W](0)
            var seen = SIMD[DType.int32, W]()  # keys each row sees: 0 .. its own position (lanes past n: row n - 1's)
            for i in range(W):
                seen[i] = Int32(cached + first_row + min(i, n - 1) + 1)
            var S = Int(seen.reduce_max())  # the keys the band reads
            var j0 = 0
            while j0 < S:
                var count = min(TILE, PAGE - j0 % PAGE, S - j0)  # a tile never crosses a page
                var keys, values = slot(b, j0, 0) + h * D, slot(b, j0, 1) + h * D
                var j = 0
                while j < count:  # the scores, KG keys at a time (the last group may repeat its last key)
                    var sc = Array[SIMD[DType.float32, W], KG](fill=0)
                    var at = Array[Int, KG](fill=0)
                    comptime for g in range(KG):
                        at[g] = keys + min(j + g, count - 1) * head_size
                    for d in range(D):
                        var qv = qt.unsafe_load[width=W](d * W)
                        comptime for g in range(KG):
                            var kd = bp[unsafe_offset=at[g] + d].cast[DType.float32]()
                            sc[g] = qv.fma(SIMD[DType.float32, W](kd), sc[g])
                    comptime for g in range(KG):
                        if j + g < count:
                            p.unsafe_store((j + g) * W, sc[g])
                    j += KG
                var tile_max = SIMD[DType.float32, W](NEG_INF)
                for j in range(count):  # causal: a key after a row's position is no key of that row's
                    var sj = seen.gt(SIMD[DType.int32, W](Int32(j0 + j))).select(p.unsafe_load[width=W](j * W),
                                                                                 SIMD[DType.float32, W](NEG_INF))
                    p.unsafe_store(j * W, sj)
                    tile_max = max(tile_max, sj)
                var new_m = max(m, tile_max)  # every row sees key 0, in the first tile: new_m is a score from there on
                var factor = exp(m - new_m)
                l = l * factor
                for j in range(count):
                    var pj = exp(p.unsafe_load[width=W](j * W) - new_m)
                    l += pj
                    p.unsafe_store(j * W, pj)
                m = new_m
                for i0 in range(0, n, 2):  # two rows at a time: their sums of values, rescaled, then this tile's
                    # weighted values added (a row past n repeats row n - 1, its sums not stored)
                    var a = Array[SIMD[DType.float32, W], 2 * DV](fill=0)
                    var i1 = min(i0 + 1, n - 1)
                    comptime for e in range(DV):
                        a[e] = acc.unsafe_load[width=W](i0 * D + e * W) * factor[i0]
                        a[DV + e] = acc.unsafe_load[width=W](i1 * D + e * W) * factor[i1]
                    # the keys of the tile each row sees (a weight of 0 times a key no row has stored could be NaN)
                    var c0, c1 = max(0, min(count, Int(seen[i0]) - j0)), max(0, min(count, Int(seen[i1]) - j0))
                    for j in range(c0):
                        var p0 = SIMD[DType.float32, W](p[unsafe_offset=j * W + i0])
                        var p1 = SIMD[DType.float32, W](p[unsafe_offset=j * W + i1])
                        comptime for e in range(DV):
                            var vv = bp.unsafe_load[width=W](values + j * head_size + e * W).cast[DType.float32]()
                            a[e] = vv.fma(p0, a[e])
                            a[DV + e] = vv.fma(p1, a[DV + e])
                    for j in range(c0, c1):  # the key row i1 sees and row i0 does not
                        var p1 = SIMD[DType.float32, W](p[unsafe_offset=j * W + i1])
                        comptime for e in range(DV):
                            var vv = bp.unsafe_load[width=W](values + j * head_size + e * W).cast[DType.float32]()
                            a[DV + e] = vv.fma(p1, a[DV + e])
                    comptime for e in range(DV):
                        acc.unsafe_store(i0 * D + e * W, a[e])
                        if i1 != i0:
                            acc.unsafe_store(i1 * D + e * W, a[DV + e])
                j0 += count
            for i in range(n):
                op.unsafe_store(((first_row + i) * H + h) * D, acc.unsafe_load[width=D](i * D) / l[i])
            qt.unsafe_free()
            p.unsafe_free()
            acc.unsafe_free()

        def task(n: Int) {imm}:  # n = (band task * groups + group) * splits + split, band tasks counted over requests
            var split = n % splits
            var group = (n // splits) % groups
            var band_task = n // (splits * groups)
            var h0, h1 = group * per_group, min(H, (group + 1) * per_group)  # its heads
            var lo, hi = 0, B  # the request whose bands hold band_task: bands_before[b] <= band_task < [b + 1]
            while hi - lo > 1:
                var mid = (lo + hi) // 2
                if bands_before[unsafe_offset=mid] <= band_task:
                    lo = mid
                else:
                    hi = mid
            var b = lo
            var first_row = Int(off[unsafe_offset=b]) + (band_task - bands_before[unsafe_offset=b]) * QROWS
            var end_row = min(first_row + QROWS, Int(off[unsafe_offset=b + 1]))
            var cached = Int(cl[unsafe_offset=b]) - Int(off[unsafe_offset=b])  # row r sits at position cached + r
            if end_row - first_row >= BAND_FROM:  # a prompt's band (one head at prefill): as a block
                band(b, h0, first_row, end_row, cached)
                return
            var s = alloc[Float32]((h1 - h0) * TILE)  # a tile's scores, then weights, per head
            var qs = alloc[Float32]((h1 - h0) * D)  # the row's queries, scaled
            var mls = alloc[Float32](2 * (h1 - h0))  # per head: running maximum, running sum
            var held = alloc[Float32]((h1 - h0) * D)  # per head: the weighted sum of values so far
            for r in range(first_row, end_row):
                var S = cached + r + 1  # the keys row r sees: 0 .. its own position
                var per_split = (S + splits - 1) // splits
                var j0, limit = split * per_split, min(S, (split + 1) * per_split)
                for i in range(h1 - h0):
                    qs.unsafe_store(i * D, qp.unsafe_load[width=D]((r * H + h0 + i) * D) * scale)
                    mls[unsafe_offset=2 * i], mls[unsafe_offset=2 * i + 1] = NEG_INF, 0
                    held.unsafe_store(i * D, SIMD[DType.float32, D](0))
                while j0 < limit:
                    var count = min(TILE, PAGE - j0 % PAGE, limit - j0)  # a tile never crosses a page
                    var keys, values = slot(b, j0, 0), slot(b, j0, 1)
                    for j in range(count):  # the scores: q . k / sqrt(D), the heads' keys of a position in a run
                        for e in range(h0 * D, h1 * D, LINE):  # its values, asked for now, read below
                            prefetch[PrefetchOptions().for_read().medium_locality()](bp + values + j * head_size + e)
                        for i in range(h1 - h0):
                            var at = keys + j * head_size + (h0 + i) * D
                            var dot = SIMD[DType.float32, W](0)
                            comptime for e in range(DV):
                                dot = qs.unsafe_load[width=W](i * D + e * W).fma(
                                    bp.unsafe_load[width=W](at + e * W).cast[DType.float32](), dot)
                            s[unsafe_offset=i * TILE + j] = dot.reduce_add()
                    for i in range(h1 - h0):  # head by head: step 17's online softmax over the tile
                        var tile_max = NEG_INF
                        for j in range(count):
                            tile_max = max(tile_max, s[unsafe_offset=i * TILE + j])
                        var m, l = mls[unsafe_offset=2 * i], mls[unsafe_offset=2 * i + 1]
                        var new_m = max(m, tile_max)
                        var factor = exp(m - new_m)  # what was summed against the old maximum, rescaled
                        l = l * factor
                        var acc = Array[SIMD[DType.float32, W], DV](fill=0)
                        comptime for e in range(DV):
                            acc[e] = held.unsafe_load[width=W](i * D + e * W) * factor
                        var at = values + (h0 + i) * D
                        for j in range(count):
                            var p = exp(s[unsafe_offset=i * TILE + j] - new_m)
                            l += p
                            comptime for e in range(DV):
                                var vv = bp.unsafe_load[width=W](at + j * head_size + e * W).cast[DType.float32]()
                                acc[e] = vv.fma(SIMD[DType.float32, W](p), acc[e])
                        comptime for e in range(DV):
                            held.unsafe_store(i * D + e * W, acc[e])
                        mls[unsafe_offset=2 * i], mls[unsafe_offset=2 * i + 1] = new_m, l
                    j0 += count
                for i in range(h1 - h0):
                    var h, m, l = h0 + i, mls[unsafe_offset=2 * i], mls[unsafe_offset=2 * i + 1]
                    if splits == 1:
                        op.unsafe_store((r * H + h) * D, held.unsafe_load[width=D](i * D) / l)
                    else:  # decode: one row per request, so row r is request b's only one
                        var at = (b * H + h) * splits + split
                        ms[unsafe_offset=at] = m
                        ls[unsafe_offset=at] = l
                        accs.unsafe_store(at * D, held.unsafe_load[width=D](i * D))
            s.unsafe_free()
            qs.unsafe_free()
            mls.unsafe_free()
            held.unsafe_free()

        var tasks = bands_before[unsafe_offset=B] * groups * splits
        var runs = min(tasks, cores) if all_single else tasks  # decode: cheap tasks, dealt in runs
        var per_run = (tasks + runs - 1) // runs

        def run(i: Int) {imm}:
            for n in range(i * per_run, min((i + 1) * per_run, tasks)):
                task(n)

        if tasks > 0:
            sync_parallelize(run, runs)

        def combine(i: Int) {imm}:  # head i = b * H + h: its splits' (m, l, acc), exactly
            var top = NEG_INF
            for sp in range(splits):
                top = max(top, ms[unsafe_offset=i * splits + sp])
            var total: Float32 = 0
            var sum = Array[SIMD[DType.float32, W], DV](fill=0)
            for sp in range(splits):
                var at = i * splits + sp
                var weight = exp(ms[unsafe_offset=at] - top)  # 0 for a split with no keys
                total += ls[unsafe_offset=at] * weight
                comptime for e in range(DV):
                    sum[e] = accs.unsafe_load[width=W](at * D + e * W).fma(SIMD[DType.float32, W](weight), sum[e])
            comptime for e in range(DV):
                op.unsafe_store(i * D + e * W, sum[e] / total)  # row b is request b's: [T, H, D] = [B, H, D]

        if splits > 1:
            sync_parallelize(combine, B * H)
        bands_before.unsafe_free()
        row_request.unsafe_free()
        ms.unsafe_free()
        ls.unsafe_free()
        accs.unsafe_free()
