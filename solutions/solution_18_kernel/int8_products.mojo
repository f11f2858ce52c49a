"""Step 18 solution, where the CPU has AVX-512 VNNI or AVX2: the batched product with x quantised as llama.cpp's Q8_0.

Shapes as matmul_q8.mojo's: x [M, K] float32, q [N, K] int8, scales [N, KB], b [N], y [M, N], KB = ceil(K / 32).

x is quantised as the weights are (step 16's rule): per block of 32 columns a scale sx = max|x| / 127 and
xq = x / sx rounded to the nearest, ties to even. A block's product is then a sum of 32 int8 x int8 products,
exact in int32, times sw * sx, where step 16's kernel turns each weight into a float first. One instruction
multiplies bytes four at a time into each int32 lane (`dpbusd`), unsigned bytes by signed ones:

- AVX-512 VNNI: `vpdpbusd`, 64 products an instruction into 16 lanes. x goes in as xq + 128 (0 .. 255) and
  the weights as they are: sum (xq + 128) * q = sum xq * q + 128 * sum q, the second term taken off again
  per block (`offsets`).
- AVX2: `vpmaddubsw` then `vpmaddwd`, 32 products into 8 lanes. Its pairs of products are summed in int16,
  which xq + 128 would overflow, so x goes in as it is and |q| is the unsigned side, x taking q's sign.

Two ways by M, each reading a weight from memory once per call:

- M < GEMM_FROM (decode of a few requests): `row`, step 16's stream, MR rows of x at a time along a row of q
  (a second group reads the row again from the core's cache). A vector of 4L bytes of a row of q holds PER
  blocks (two in 64 bytes, one in 32): each block's int32 sums are turned into floats and scaled (sw * sx of
  their block) before they join the row's sum.
- M >= GEMM_FROM: `gemm` over a tile of NT rows of q repacked once (`repack`): 4 bytes of each of NT rows
  side by side, so one `dpbusd` multiplies the same 4 columns of x (broadcast) into L rows of q at once: a
  lane per output, no sum across lanes, and a block's 8 instructions end in one scaling per L outputs.
  A task takes a run of tiles; while the rows of x pass one tile, the next tile's bytes are asked for, a
  share each pass (into the core's L2), so reading the weights overlaps multiplying them.
"""

from std.memory import alloc, bitcast
from std.sys import llvm_intrinsic, simd_width_of
from std.sys.info import CompilationTarget
from std.sys.intrinsics import PrefetchOptions, prefetch

comptime BLOCK = 32  # columns of q (and of x) that share one scale
comptime VNNI = CompilationTarget._has_feature["avx512vnni"]() and simd_width_of[DType.int32]() == 16
comptime INT8 = VNNI or CompilationTarget._has_feature["avx2"]()  # where these products run at all
comptime L = 16 if VNNI else 8  # int32 lanes of a vector: 512 bits, or AVX2's 256
comptime OFFSET = 128 if VNNI else 0  # added to x's int8 (vpdpbusd's x is unsigned)
comptime GROUPS = BLOCK // 4  # a block's columns, 4 a lane
comptime NT = 2 * L  # rows of q per tile (matmul_q8's too): it stays in the core's cache; two vectors of outputs
comptime MR = 4  # rows of x per row or gemm call (a last call of fewer)
comptime GEMM_FROM = 8  # from this many rows of x on, the tile is repacked once for them all
comptime AHEAD = 4096  # bytes of q asked for before they are read


@always_inline
def dpbusd(acc: SIMD[DType.int32, L], u: SIMD[DType.uint8, 4 * L], s: SIMD[DType.int8, 4 * L]) -> SIMD[DType.int32, L]:
    """acc[j] + x[4j] * s[4j] + ... + x[4j + 3] * s[4j + 3], x = u - OFFSET: x's bytes times q's, in int32.
    VNNI: x + 128 unsigned times s (the 128 x s taken off by the caller). AVX2: `vpmaddubsw` multiplies
    unsigned by signed bytes into pairs of int16, so |s| times x with s's sign (|pair| <= 2 x 128 x 127, no
    saturation), then `vpmaddwd` by ones sums the pairs."""
    comptime if VNNI:
        return llvm_intrinsic["llvm.x86.avx512.vpdpbusd.512", SIMD[DType.int32, L]](acc, u, s)
    else:
        var x = bitcast[DType.int8, 4 * L](u)
        var signed = llvm_intrinsic["llvm.x86.avx2.psign.b", SIMD[DType.int8, 4 * L]](x, s)  # x times s's sign
        var pairs = llvm_intrinsic["llvm.x86.avx2.pmadd.ub.sw", SIMD[DType.int16, 2 * L]](
            bitcast[DType.uint8, 4 * L](abs(s)), signed)
        return acc + llvm_intrinsic["llvm.x86.avx2.pmadd.wd", SIMD[DType.int32, L]](pairs, SIMD[DType.int16, 2 * L](1))


@always_inline
def offsets(s: SIMD[DType.int8, 4 * L]) -> SIMD[DType.int32, L]:
    """-OFFSET x the sums of s per 4 bytes: what x's offset adds to dpbusd, taken off again."""
    comptime if VNNI:
        return SIMD[DType.int32, L](0) - dpbusd(0, SIMD[DType.uint8, 4 * L](OFFSET), s)
    else:
        return 0


comptime PER = 4 * L // BLOCK  # blocks in a vector of bytes: 2 (512 bits) or 1


@always_inline
def block_scales(p: UnsafePointer[Float32, _], at: Int) -> SIMD[DType.float32, L]:
    """p[at] in every lane, or p[at] in lanes 0-7 and p[at + 1] in 8-15: a vector's blocks' scales beside
    their sums."""
    comptime if PER == 1:
        return SIMD[DType.float32, L](p[at])
    else:
        var two = SIMD[DType.float32, L // 2](p[at]).join(SIMD[DType.float32, L // 2](p[at + 1]))
        return rebind[SIMD[DType.float32, L]](two)


@always_inline
def rint[n: Int](v: SIMD[DType.float32, n]) -> SIMD[DType.float32, n]:
    """v rounded to the nearest whole number, ties to even (numpy's rint, step 16's quantisation)."""
    return llvm_intrinsic["llvm.roundeven", SIMD[DType.float32, n]](v)


def quantize_row(xu: UnsafePointer[UInt8, MutUntrackedOrigin], xs: UnsafePointer[Float32, MutUntrackedOrigin],
                 xp: UnsafePointer[Float32, ImmutAnyOrigin], m: Int, K: Int, KB: Int):
    """Row m of x per block: xs[m, b] = max|x| / 127, xu[m, k] = rint(x / xs) + OFFSET as a byte (KB * 32 bytes
    a row, the columns past K OFFSET: x = 0)."""
    for b in range(KB):
        var lo, hi = b * BLOCK, min(K, b * BLOCK + BLOCK)
        var at = m * KB * BLOCK + lo
        if hi - lo == BLOCK:
            var v = xp.unsafe_load[width=BLOCK](m * K + lo)
            var s = abs(v).reduce_max() / 127
            var u = SIMD[DType.int32, BLOCK](OFFSET)
            if s > 0:
                u += rint[BLOCK](v / s).cast[DType.int32]()
            xu.unsafe_store(at, u.cast[DType.uint8]())
            xs[m * KB + b] = s
        else:  # a last block of K % 32 columns
            var amax: Float32 = 0
            for k in range(lo, hi):
                amax = max(amax, abs(xp[unsafe_offset=m * K + k]))
            var s = amax / 127
            for k in range(lo, lo + BLOCK):
                var u = Int32(OFFSET)
                if k < hi and s > 0:
                    u += rint[1](xp[unsafe_offset=m * K + k] / s).cast[DType.int32]()
                xu[at + k - lo] = UInt8(u)
            xs[m * KB + b] = s


@always_inline
def block_sum(xu: UnsafePointer[UInt8, MutUntrackedOrigin], xs: UnsafePointer[Float32, MutUntrackedOrigin],
              qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
              m: Int, n: Int, b: Int, K: Int, KB: Int) -> Float32:
    """One block's product of row m of x and row n of q, a column at a time (the blocks after the last whole vector)."""
    var d: Int32 = 0
    for k in range(b * BLOCK, min(K, b * BLOCK + BLOCK)):
        var x = bitcast[DType.int8, 1](xu[m * KB * BLOCK + k] - UInt8(OFFSET))  # xq
        d += x.cast[DType.int32]() * qp[unsafe_offset=n * K + k].cast[DType.int32]()
    return d.cast[DType.float32]() * sp[unsafe_offset=n * KB + b] * xs[m * KB + b]


@always_inline
def row[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xu: UnsafePointer[UInt8, MutUntrackedOrigin],
                 xs: UnsafePointer[Float32, MutUntrackedOrigin], qp: UnsafePointer[Int8, ImmutAnyOrigin],
                 sp: UnsafePointer[Float32, ImmutAnyOrigin], bp: UnsafePointer[Float32, ImmutAnyOrigin],
                 m0: Int, n: Int, K: Int, N: Int, KB: Int):
    """y[m0 .. m0 + mr, n]: row n of q, from start to end, for mr (1-4) rows of x."""
    var acc = Array[SIMD[DType.float32, L], mr](fill=0)
    for p in range(K // (4 * L)):  # a vector of bytes: PER blocks
        var k = p * 4 * L
        prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + AHEAD)
        var w = qp.unsafe_load[width=4 * L](n * K + k)
        var less = offsets(w)
        var sw = block_scales(sp, n * KB + PER * p)
        comptime for i in range(mr):
            var d = dpbusd(less, xu.unsafe_load[width=4 * L]((m0 + i) * KB * BLOCK + k), w)  # xq . q per 4 columns
            acc[i] = d.cast[DType.float32]().fma(sw * block_scales(xs, (m0 + i) * KB + PER * p), acc[i])
    comptime for i in range(mr):
        var y = acc[i].reduce_add()
        for b in range(K // (4 * L) * PER, KB):
            y += block_sum(xu, xs, qp, sp, m0 + i, n, b, K, KB)
        yp[unsafe_offset=(m0 + i) * N + n] = y + bp[unsafe_offset=n]


@always_inline
def upper_lanes[s: Int]() -> SIMD[DType.bool, L]:
    """Lane j is True where j & s != 0: the upper s lanes of every run of 2s."""
    var upper = SIMD[DType.bool, L](fill=False)
    comptime for j in range(L):
        comptime if j & s != 0:
            upper[j] = True
    return upper


@always_inline
def transpose(mut r: Array[SIMD[DType.int32, L], L]):
    """r[i][j] <-> r[j][i] for an L x L block, in rounds for s = L / 2, ..., 2, 1: each swaps, in every pair of
    rows i and i + s (i & s == 0), row i's upper lanes of each run of 2s with row i + s's lower ones."""
    comptime for e in range(1, 5):
        comptime s = L >> e
        comptime if s > 0:
            var upper = upper_lanes[s]()
            comptime for i in range(L):
                comptime if i & s == 0:
                    var a, b = r[i], r[i + s]
                    r[i] = upper.select(b.shift_right[s](), a)  # lane j: a[j], or b[j - s] in the upper lanes
                    r[i + s] = upper.select(b, a.shift_left[s]())  # lane j: a[j + s], or b[j] in the upper lanes


def repack(wp: UnsafePointer[Int32, MutUntrackedOrigin], cp: UnsafePointer[Int32, MutUntrackedOrigin],
           ws: UnsafePointer[Float32, MutUntrackedOrigin], qp: UnsafePointer[Int8, ImmutAnyOrigin],
           sp: UnsafePointer[Float32, ImmutAnyOrigin], n_lo: Int, n_hi: Int, K: Int, KB: Int):
    """Rows n_lo .. n_hi of q (the last repeated up to NT rows) as wp[g, j] = q[n_lo + j, 4g .. 4g + 4) (KB * 8
    groups of NT words, zero past K); cp[b, j] = -OFFSET x block b's sum of the row's weights, ws[b, j] its scale."""
    for v in range(NT // L):
        var rows = SIMD[DType.int32, L](0)
        comptime for j in range(L):
            rows[j] = Int32(min(n_lo + v * L + j, n_hi - 1))
        for c in range(K // (4 * L)):  # L rows x 4L bytes: transposed in registers
            var r = Array[SIMD[DType.int32, L], L](fill=0)
            comptime for j in range(L):
                r[j] = (qp + Int(rows[j]) * K + c * 4 * L).bitcast[Int32]().load[width=L]()
            transpose(r)
            comptime for g in range(L):
                wp.unsafe_store((c * L + g) * NT + v * L, r[g])
        for g in range(K // (4 * L) * L, KB * GROUPS):  # the columns after the last 64, a word at a time
            var word = SIMD[DType.int32, L](0)
            comptime for j in range(L):
                var four = SIMD[DType.int8, 4](0)
                for c in range(4):
                    if 4 * g + c < K:
                        four[c] = qp[unsafe_offset=Int(rows[j]) * K + 4 * g + c]
                word[j] = bitcast[DType.int32, 1](four)
            wp.unsafe_store(g * NT + v * L, word)
        for b in range(KB):
            var less = SIMD[DType.int32, L](0)
            comptime for g in range(GROUPS):
                less += offsets(bitcast[DType.int8, 4 * L](wp.unsafe_load[width=L]((b * GROUPS + g) * NT + v * L)))
            cp.unsafe_store(b * NT + v * L, less)
            ws.unsafe_store(b * NT + v * L, sp.gather(rows * Int32(KB) + Int32(b)))


@always_inline
def gemm[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xu: UnsafePointer[UInt8, MutUntrackedOrigin],
                  xs: UnsafePointer[Float32, MutUntrackedOrigin], wp: UnsafePointer[Int32, MutUntrackedOrigin],
                  cp: UnsafePointer[Int32, MutUntrackedOrigin], ws: UnsafePointer[Float32, MutUntrackedOrigin],
                  bp: UnsafePointer[Float32, ImmutAnyOrigin], m0: Int, n_lo: Int, rows: Int, N: Int, KB: Int,
                  ahead: UnsafePointer[Int8, ImmutAnyOrigin], ahead_bytes: Int):
    """y[m0 .. m0 + mr, n_lo .. n_lo + rows] from the repacked tile: per block, 8 x 2 x mr `dpbusd` into
    2 x mr vectors of L int32 sums (started at -OFFSET x the rows' block sums), then one scaling each.
    Meanwhile the ahead_bytes at `ahead` are asked for, spread over the blocks."""
    var acc = Array[SIMD[DType.float32, L], 2 * mr](fill=0)
    var per_block = (ahead_bytes + 64 * KB - 1) // (64 * KB) * 64
    for b in range(KB):
        for off in range(b * per_block, min((b + 1) * per_block, ahead_bytes), 64):
            prefetch[PrefetchOptions().for_read().medium_locality()](ahead + off)
        var d = Array[SIMD[DType.int32, L], 2 * mr](fill=0)
        comptime for i in range(mr):
            comptime for h in range(2):
                d[2 * i + h] = cp.unsafe_load[width=L](b * NT + h * L)
        for g in range(GROUPS):  # a loop, not unrolled: AVX2's 16 registers then hold the sums, not the stack
            var w0 = bitcast[DType.int8, 4 * L](wp.unsafe_load[width=L]((b * GROUPS + g) * NT))
            var w1 = bitcast[DType.int8, 4 * L](wp.unsafe_load[width=L]((b * GROUPS + g) * NT + L))
            comptime for i in range(mr):  # x's 4 columns of this group, in every lane
                var x4 = bitcast[DType.uint8, 4 * L](SIMD[DType.int32, L](
                    xu.bitcast[Int32]()[(m0 + i) * KB * GROUPS + b * GROUPS + g]))
                d[2 * i] = dpbusd(d[2 * i], x4, w0)
                d[2 * i + 1] = dpbusd(d[2 * i + 1], x4, w1)
        var s0, s1 = ws.unsafe_load[width=L](b * NT), ws.unsafe_load[width=L](b * NT + L)
        comptime for i in range(mr):
            var sx = SIMD[DType.float32, L](xs[(m0 + i) * KB + b])
            acc[2 * i] = d[2 * i].cast[DType.float32]().fma(s0 * sx, acc[2 * i])
            acc[2 * i + 1] = d[2 * i + 1].cast[DType.float32]().fma(s1 * sx, acc[2 * i + 1])
    comptime for i in range(mr):
        var at = (m0 + i) * N + n_lo
        if rows == NT:
            yp.unsafe_store(at, acc[2 * i] + bp.unsafe_load[width=L](n_lo))
            yp.unsafe_store(at + L, acc[2 * i + 1] + bp.unsafe_load[width=L](n_lo + L))
        else:
            for j in range(rows):
                yp[unsafe_offset=at + j] = acc[2 * i + j // L][j % L] + bp[unsafe_offset=n_lo + j]


def products(yp: UnsafePointer[Float32, MutAnyOrigin], xu: UnsafePointer[UInt8, MutUntrackedOrigin],
             xs: UnsafePointer[Float32, MutUntrackedOrigin], qp: UnsafePointer[Int8, ImmutAnyOrigin],
             sp: UnsafePointer[Float32, ImmutAnyOrigin], bp: UnsafePointer[Float32, ImmutAnyOrigin],
             t0: Int, t1: Int, M: Int, K: Int, N: Int, KB: Int):
    """Tiles t0 .. t1 of y (NT columns each, every row of x), x already quantised (xu, xs)."""
    if M < GEMM_FROM:
        for n in range(t0 * NT, min(t1 * NT, N)):
            var m0 = 0
            while m0 + MR <= M:
                row[MR](yp, xu, xs, qp, sp, bp, m0, n, K, N, KB)
                m0 += MR
            if M - m0 == 3:
                row[3](yp, xu, xs, qp, sp, bp, m0, n, K, N, KB)
            elif M - m0 == 2:
                row[2](yp, xu, xs, qp, sp, bp, m0, n, K, N, KB)
            elif M - m0 == 1:
                row[1](yp, xu, xs, qp, sp, bp, m0, n, K, N, KB)
        return
    var wp, cp, ws = alloc[Int32](KB * GROUPS * NT), alloc[Int32](KB * NT), alloc[Float32](KB * NT)
    for off in range(t0 * NT * K, min(t0 * NT + NT, N) * K, 64):  # the run's first tile, asked for in order
        prefetch[PrefetchOptions().for_read().high_locality()](qp + off)
    for t in range(t0, t1):
        var n_lo, n_hi = t * NT, min((t + 1) * NT, N)
        repack(wp, cp, ws, qp, sp, n_lo, n_hi, K, KB)
        var ahead = qp + n_hi * K  # the next tile's bytes: each pass of MR rows of x asks for its share
        var next_bytes = 0 if t == t1 - 1 else (min(n_hi + NT, N) - n_hi) * K
        var share = (next_bytes // (M // MR) + 63) // 64 * 64
        var m0 = 0
        while m0 + MR <= M:
            var start = min(m0 // MR * share, next_bytes)
            gemm[MR](yp, xu, xs, wp, cp, ws, bp, m0, n_lo, n_hi - n_lo, N, KB, ahead + start,
                     min(share, next_bytes - start))
            m0 += MR
        if M - m0 == 3:
            gemm[3](yp, xu, xs, wp, cp, ws, bp, m0, n_lo, n_hi - n_lo, N, KB, ahead, 0)
        elif M - m0 == 2:
            gemm[2](yp, xu, xs, wp, cp, ws, bp, m0, n_lo, n_hi - n_lo, N, KB, ahead, 0)
        elif M - m0 == 1:
            gemm[1](yp, xu, xs, wp, cp, ws, bp, m0, n_lo, n_hi - n_lo, N, KB, ahead, 0)
    wp.unsafe_free()
    cp.unsafe_free()
    ws.unsafe_free()
