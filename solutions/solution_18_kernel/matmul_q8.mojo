"""Step 18 solution: y = x @ dequantize(q, scales).T + b for a batch of rows, each weight read once.

Shapes: x [M, K] float32 (M = the batch's rows: 1 per decoding request, a prompt's every row), q [N, K]
int8 (a Linear's weight, [out, in], step 16's format), scales [N, KB] float32 (KB = ceil(K / BLOCK)),
b [N], y [M, N]. w[n, k] = q[n, k] * scales[n, k // BLOCK].

Step 16's kernel reads q's row n once per row of x: sixteen decoding requests read every weight sixteen
times. Here the rows of q are cut into tiles of NT rows (a tile stays in the core's cache), and every row
of x passes each tile, one of three ways by M:

- M < MR (one to three decoding requests): `row`, step 16's stream: each row of q read from start to
  end once, for every row of x; a block's sums scaled once.
- MR <= M < PACK_FROM: `group` by `group`: NR rows of q and mr rows of x (4, or the 1-3 left over); a
  block of the NR rows' weights turned into floats times their scale, then multiplied into the mr rows
  of x, mr * NR sums kept in registers.
- M >= PACK_FROM (a batch of many requests, a prompt): the tile turned into floats once (`unpack`),
  then `packed_group` by `packed_group` over it, the float products alone in the inner loop: a weight
  turned into a float once per call, not once per four rows of x.

The weights come from memory once per call, whatever M is; each block asks for the bytes AHEAD further
along its row (a prefetch), as step 16's kernel does. A task runs a run of tiles, TASKS_PER_CORE tasks
per core: starting a task costs more than a 32-row tile of a decode's work.

Where the CPU multiplies bfloat16 pairs (avx512_bf16), x and w are rounded to bfloat16 in every path and
multiplied by `vdpbf16ps`, twice float32's products per instruction, the sums kept in float32; elsewhere
they multiply as float32. The check finds the rounding and holds the model to transformers rounding alike
(the book's page says what it costs).
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext
from std.memory import alloc
from std.sys import llvm_intrinsic, simd_width_of
from std.sys.info import CompilationTarget, num_logical_cores
from std.sys.intrinsics import PrefetchOptions, prefetch

comptime BLOCK = 32  # columns of q that share one scale
comptime W = min(simd_width_of[DType.float32](), BLOCK)  # floats per SIMD operation
comptime MR = 4  # rows of x at a time (a last group of fewer)
comptime NR = 4  # rows of q at a time (the last rows of q repeated past N, their sums dropped)
comptime NT = 32  # rows of q per task: its tile stays in the core's cache while every row of x passes
comptime AHEAD = 1024  # bytes of q asked for before they are read
comptime TASKS_PER_CORE = 4  # a task runs several tiles: a task's start costs more than a small tile's work
comptime PACK_FROM = 12  # from this many rows of x on, a task turns its tile into floats once for them all
comptime BF16 = W == 16 and CompilationTarget._has_feature["avx512bf16"]()  # the CPU multiplies bfloat16 pairs
comptime PT = DType.bfloat16 if BF16 else DType.float32  # the packed tile's and x's numbers
comptime PW = 2 * W if BF16 else W  # numbers of PT per dot


@always_inline
def dot(acc: SIMD[DType.float32, W], a: SIMD[PT, PW], b: SIMD[PT, PW]) -> SIMD[DType.float32, W]:
    """acc[j] + a[2j] * b[2j] + a[2j + 1] * b[2j + 1] in one bfloat16 instruction, else acc + a * b in float32."""
    comptime if BF16:
        return llvm_intrinsic["llvm.x86.avx512bf16.dpbf16ps.512", SIMD[DType.float32, W]](acc, a, b)
    else:
        return rebind[SIMD[DType.float32, W]](
            a.cast[DType.float32]().fma(b.cast[DType.float32](), rebind[SIMD[DType.float32, PW]](acc)))


@always_inline
def weights(qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, k: Int,
            K: Int, KB: Int) -> SIMD[PT, PW]:
    """w[n, k .. k + PW] = q times its block's scale, as PT (PW divides BLOCK: one block, one scale)."""
    var s = sp[unsafe_offset=n * KB + k // BLOCK]
    return (qp.unsafe_load[width=PW](n * K + k).cast[DType.float32]() * s).cast[PT]()


@always_inline
def tail(qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
         xs: UnsafePointer[Scalar[PT], MutUntrackedOrigin], n: Int, m: Int, K: Int, KB: Int) -> Float32:
    """The sum over the K % PW columns after the last whole PW, w and x as PT as everywhere else."""
    var t: Float32 = 0
    for k in range(K - K % PW, K):
        var w = (qp[unsafe_offset=n * K + k].cast[DType.float32]() * sp[unsafe_offset=n * KB + k // BLOCK]).cast[PT]()
        t += w.cast[DType.float32]() * xs[unsafe_offset=m * K + k].cast[DType.float32]()
    return t


@always_inline
def row[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xs: UnsafePointer[Scalar[PT], MutUntrackedOrigin],
                 qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
                 bp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, K: Int, N: Int, KB: Int):
    """y[0 .. mr, n]: row n of q read once, from start to end, for the mr (1-3) rows of x: step 16's stream."""
    var acc = Array[SIMD[DType.float32, W], mr](fill=0)
    for v in range(K // PW):
        var k = v * PW
        prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + 4 * AHEAD)
        var w = weights(qp, sp, n, k, K, KB)
        comptime for i in range(mr):
            acc[i] = dot(acc[i], xs.unsafe_load[width=PW](i * K + k), w)
    comptime for i in range(mr):
        yp[unsafe_offset=i * N + n] = acc[i].reduce_add() + tail(qp, sp, xs, n, i, K, KB) + bp[unsafe_offset=n]


@always_inline
def group[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xs: UnsafePointer[Scalar[PT], MutUntrackedOrigin],
                   qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
                   bp: UnsafePointer[Float32, ImmutAnyOrigin], m0: Int, n0: Int, K: Int, N: Int, KB: Int):
    """y[m0 .. m0 + mr, n0 .. n0 + NR]: mr rows of x against NR rows of q, their sums in registers."""
    var acc = Array[SIMD[DType.float32, W], mr * NR](fill=0)
    for v in range(K // PW):
        var k = v * PW
        var w = Array[SIMD[PT, PW], NR](fill=0)
        comptime for r in range(NR):
            var n = min(n0 + r, N - 1)  # the last rows of q repeated past N, their sums dropped
            prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + AHEAD)
            w[r] = weights(qp, sp, n, k, K, KB)
        comptime for i in range(mr):
            var xv = xs.unsafe_load[width=PW]((m0 + i) * K + k)
            comptime for r in range(NR):
                acc[i * NR + r] = dot(acc[i * NR + r], xv, w[r])
    comptime for i in range(mr):
        comptime for r in range(NR):
            var m, n = m0 + i, n0 + r
            if n < N:
                yp[unsafe_offset=m * N + n] = acc[i * NR + r].reduce_add() + tail(qp, sp, xs, n, m, K, KB) + bp[
                    unsafe_offset=n]


@always_inline
def unpack(wp: UnsafePointer[Scalar[PT], MutUntrackedOrigin], qp: UnsafePointer[Int8, ImmutAnyOrigin],
           sp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, K: Int, KB: Int):
    """Row n of q as PT: wp[k] = q[n, k] * scales[n, k // BLOCK]."""
    for v in range(K // PW):
        var k = v * PW
        prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + AHEAD)
        wp.unsafe_store(k, weights(qp, sp, n, k, K, KB))
    for k in range(K - K % PW, K):
        wp[unsafe_offset=k] = (qp[unsafe_offset=n * K + k].cast[DType.float32]() * sp[
            unsafe_offset=n * KB + k // BLOCK]).cast[PT]()


@always_inline
def packed_group[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xs: UnsafePointer[Scalar[PT], MutUntrackedOrigin],
                          wp: UnsafePointer[Scalar[PT], MutUntrackedOrigin], bp: UnsafePointer[Float32, ImmutAnyOrigin],
                          m0: Int, n0: Int, rows: Int, K: Int, N: Int):
    """y[m0 .. m0 + mr, n0 .. n0 + NR] from the tile's rows (wp: `rows` rows of K, row 0 is n0's)."""
    var acc = Array[SIMD[DType.float32, W], mr * NR](fill=0)
    for v in range(K // PW):
        var k = v * PW
        comptime for i in range(mr):
            var xv = xs.unsafe_load[width=PW]((m0 + i) * K + k)
            comptime for r in range(NR):
                acc[i * NR + r] = dot(acc[i * NR + r], xv, wp.unsafe_load[width=PW](min(r, rows - 1) * K + k))
    comptime for i in range(mr):
        comptime for r in range(NR):
            var m, n = m0 + i, n0 + r
            if r < rows:
                var s = acc[i * NR + r].reduce_add()
                for k in range(K - K % PW, K):
                    s += wp[unsafe_offset=r * K + k].cast[DType.float32]() * xs[unsafe_offset=m * K + k].cast[
                        DType.float32]()
                yp[unsafe_offset=m * N + n] = s + bp[unsafe_offset=n]


@extensibility.register("gpt2_matmul_q8")
struct GPT2MatmulQ8:
    """The custom op: y[m, n] = sum_k x[m, k] * q[n, k] * scales[n, k // BLOCK] + b[n]."""

    @staticmethod
    def execute[target: StaticString](
        y: OutputTensor[dtype=DType.float32, rank=2, ...],
        x: InputTensor[dtype=DType.float32, rank=2, ...],
        q: InputTensor[dtype=DType.int8, rank=2, ...],
        scales: InputTensor[dtype=DType.float32, rank=2, ...],
        b: InputTensor[dtype=DType.float32, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var yp = y.unsafe_ptr()
        var xp, qp, sp, bp = x.unsafe_ptr(), q.unsafe_ptr(), scales.unsafe_ptr(), b.unsafe_ptr()
        var M, K, N, KB = x.dim_size(0), x.dim_size(1), q.dim_size(0), scales.dim_size(1)
        if q.dim_size(1) != K or KB != (K + BLOCK - 1) // BLOCK or scales.dim_size(0) != N or b.dim_size(0) != N:
            raise Error("x [M, K], q [N, K], scales [N, ceil(K / 32)], b [N]: the shapes disagree")

        var xs = alloc[Scalar[PT]](M * K)  # x as PT, once for every tile
        for i in range(M * K):
            xs[i] = xp[unsafe_offset=i].cast[PT]()

        def packed_tile(t: Int) {imm}:
            var n_lo, n_hi = t * NT, min((t + 1) * NT, N)
            var wp = alloc[Scalar[PT]]((n_hi - n_lo) * K)
            for n in range(n_lo, n_hi):
                unpack(wp + (n - n_lo) * K, qp, sp, n, K, KB)
            var m0 = 0
            while m0 + MR <= M:
                for n0 in range(n_lo, n_hi, NR):
                    packed_group[MR](yp, xs, wp + (n0 - n_lo) * K, bp, m0, n0, min(NR, n_hi - n0), K, N)
                m0 += MR
            for n0 in range(n_lo, n_hi, NR):
                var rows = min(NR, n_hi - n0)
                if M - m0 == 3:
                    packed_group[3](yp, xs, wp + (n0 - n_lo) * K, bp, m0, n0, rows, K, N)
                elif M - m0 == 2:
                    packed_group[2](yp, xs, wp + (n0 - n_lo) * K, bp, m0, n0, rows, K, N)
                elif M - m0 == 1:
                    packed_group[1](yp, xs, wp + (n0 - n_lo) * K, bp, m0, n0, rows, K, N)
            wp.free()

        def tile(t: Int) {imm}:
            for n0 in range(t * NT, min((t + 1) * NT, N), NR):
                var m0 = 0
                while m0 + MR <= M:
                    group[MR](yp, xs, qp, sp, bp, m0, n0, K, N, KB)
                    m0 += MR
                if M - m0 == 3:
                    group[3](yp, xs, qp, sp, bp, m0, n0, K, N, KB)
                elif M - m0 == 2:
                    group[2](yp, xs, qp, sp, bp, m0, n0, K, N, KB)
                elif M - m0 == 1:
                    group[1](yp, xs, qp, sp, bp, m0, n0, K, N, KB)

        def stream(t: Int) {imm}:
            for n in range(t * NT, min((t + 1) * NT, N)):
                if M == 1:
                    row[1](yp, xs, qp, sp, bp, n, K, N, KB)
                elif M == 2:
                    row[2](yp, xs, qp, sp, bp, n, K, N, KB)
                else:
                    row[3](yp, xs, qp, sp, bp, n, K, N, KB)

        var tiles = (N + NT - 1) // NT
        var tasks = min(tiles, TASKS_PER_CORE * num_logical_cores())
        var per_task = (tiles + tasks - 1) // tasks

        def run(task: Int) {imm}:
            for t in range(task * per_task, min((task + 1) * per_task, tiles)):
                if M < MR:
                    stream(t)
                elif M >= PACK_FROM:
                    packed_tile(t)
                else:
                    tile(t)

        sync_parallelize(run, tasks)
        xs.free()
