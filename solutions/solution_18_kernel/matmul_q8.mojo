"""Step 18 solution: y = x @ dequantize(q, scales).T + b for a batch of rows, each weight read once.

Shapes: x [M, K] float32 (M = the batch's rows: 1 per decoding request, a prompt's every row), q [N, K]
int8 (a Linear's weight, [out, in], step 16's format), scales [N, KB] float32 (KB = ceil(K / BLOCK)),
b [N], y [M, N]. w[n, k] = q[n, k] * scales[n, k // BLOCK].

Step 16's kernel reads q's row n once per row of x: sixteen decoding requests read every weight sixteen
times. Here the rows of q are cut into tiles of NT rows (a tile stays in the core's cache), and every row
of x passes each tile.

Where the CPU has AVX-512 VNNI or AVX2, x is quantised as llama.cpp's Q8_0 does (int8 per block of 32)
and multiplied int8 by int8 (int8_products.mojo): the check finds that rounding and holds the model to
transformers rounding alike (the book's page says what it costs). Elsewhere x and w multiply as float32,
one of three ways by M:

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
per core: starting a task costs more than a 32-row tile of a decode's work. The op's own context (`ctx`)
hands the tasks to the threads, as in step 16's kernel.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from std.memory import alloc
from std.sys import simd_width_of
from std.sys.info import num_logical_cores
from std.sys.intrinsics import PrefetchOptions, prefetch

from .int8_products import BLOCK, INT8, NT, products, quantize_row  # BLOCK: columns of q that share one scale

comptime W = min(simd_width_of[DType.float32](), BLOCK)  # floats per SIMD operation
comptime MR = 4  # rows of x at a time (a last group of fewer)
comptime NR = 4  # rows of q at a time (the last rows of q repeated past N, their sums dropped)
comptime AHEAD = 1024  # bytes of q asked for before they are read
comptime TASKS_PER_CORE = 4  # a task runs several tiles: a task's start costs more than a small tile's work
comptime PACK_FROM = 12  # from this many rows of x on, a task turns its tile into floats once for them all


@always_inline
def weights(qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, k: Int,
            K: Int, KB: Int) -> SIMD[DType.float32, W]:
    """w[n, k .. k + W] = q times its block's scale (W divides BLOCK: one block, one scale)."""
    return qp.unsafe_load[width=W](n * K + k).cast[DType.float32]() * sp[unsafe_offset=n * KB + k // BLOCK]


@always_inline
def tail(qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
         xp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, m: Int, K: Int, KB: Int) -> Float32:
    """The sum over the K % W columns after the last whole W."""
    var t: Float32 = 0
    for k in range(K - K % W, K):
        t += qp[unsafe_offset=n * K + k].cast[DType.float32]() * sp[unsafe_offset=n * KB + k // BLOCK] * xp[
            unsafe_offset=m * K + k]
    return t


@always_inline
def row[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xp: UnsafePointer[Float32, ImmutAnyOrigin],
                 qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
                 bp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, K: Int, N: Int, KB: Int):
    """y[0 .. mr, n]: row n of q read once, from start to end, for the mr (1-3) rows of x: step 16's stream."""
    var acc = Array[SIMD[DType.float32, W], mr](fill=0)
    for v in range(K // W):
        var k = v * W
        prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + 4 * AHEAD)
        var w = weights(qp, sp, n, k, K, KB)
        comptime for i in range(mr):
            acc[i] = w.fma(xp.unsafe_load[width=W](i * K + k), acc[i])
    comptime for i in range(mr):
        yp[unsafe_offset=i * N + n] = acc[i].reduce_add() + tail(qp, sp, xp, n, i, K, KB) + bp[unsafe_offset=n]


@always_inline
def group[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xp: UnsafePointer[Float32, ImmutAnyOrigin],
                   qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
                   bp: UnsafePointer[Float32, ImmutAnyOrigin], m0: Int, n0: Int, K: Int, N: Int, KB: Int):
    """y[m0 .. m0 + mr, n0 .. n0 + NR]: mr rows of x against NR rows of q, their sums in registers."""
    var acc = Array[SIMD[DType.float32, W], mr * NR](fill=0)
    for v in range(K // W):
        var k = v * W
        var w = Array[SIMD[DType.float32, W], NR](fill=0)
        comptime for r in range(NR):
            var n = min(n0 + r, N - 1)  # the last rows of q repeated past N, their sums dropped
            prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + AHEAD)
            w[r] = weights(qp, sp, n, k, K, KB)
        comptime for i in range(mr):
            var xv = xp.unsafe_load[width=W]((m0 + i) * K + k)
            comptime for r in range(NR):
                acc[i * NR + r] = xv.fma(w[r], acc[i * NR + r])
    comptime for i in range(mr):
        comptime for r in range(NR):
            var m, n = m0 + i, n0 + r
            if n < N:
                yp[unsafe_offset=m * N + n] = acc[i * NR + r].reduce_add() + tail(qp, sp, xp, n, m, K, KB) + bp[
                    unsafe_offset=n]


@always_inline
def unpack(wp: UnsafePointer[Float32, MutUntrackedOrigin], qp: UnsafePointer[Int8, ImmutAnyOrigin],
           sp: UnsafePointer[Float32, ImmutAnyOrigin], n: Int, K: Int, KB: Int):
    """Row n of q as floats: wp[k] = q[n, k] * scales[n, k // BLOCK]."""
    for v in range(K // W):
        var k = v * W
        prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + AHEAD)
        wp.unsafe_store(k, weights(qp, sp, n, k, K, KB))
    for k in range(K - K % W, K):
        wp[unsafe_offset=k] = qp[unsafe_offset=n * K + k].cast[DType.float32]() * sp[unsafe_offset=n * KB + k // BLOCK]


@always_inline
def packed_group[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xp: UnsafePointer[Float32, ImmutAnyOrigin],
                          wp: UnsafePointer[Float32, MutUntrackedOrigin], bp: UnsafePointer[Float32, ImmutAnyOrigin],
                          m0: Int, n0: Int, rows: Int, K: Int, N: Int):
    """y[m0 .. m0 + mr, n0 .. n0 + NR] from the tile's rows (wp: `rows` rows of K, row 0 is n0's)."""
    var acc = Array[SIMD[DType.float32, W], mr * NR](fill=0)
    for v in range(K // W):
        var k = v * W
        comptime for i in range(mr):
            var xv = xp.unsafe_load[width=W]((m0 + i) * K + k)
            comptime for r in range(NR):
                acc[i * NR + r] = xv.fma(wp.unsafe_load[width=W](min(r, rows - 1) * K + k), acc[i * NR + r])
    comptime for i in range(mr):
        comptime for r in range(NR):
            var m, n = m0 + i, n0 + r
            if r < rows:
                var s = acc[i * NR + r].reduce_add()
                for k in range(K - K % W, K):
                    s += wp[unsafe_offset=r * K + k] * xp[unsafe_offset=m * K + k]
                yp[unsafe_offset=m * N + n] = s + bp[unsafe_offset=n]


def float_products(yp: UnsafePointer[Float32, MutAnyOrigin], xp: UnsafePointer[Float32, ImmutAnyOrigin],
                   qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
                   bp: UnsafePointer[Float32, ImmutAnyOrigin], t: Int, M: Int, K: Int, N: Int, KB: Int):
    """Tile t of y (its NT columns, every row of x), x and w as float32."""
    var n_lo, n_hi = t * NT, min((t + 1) * NT, N)
    if M < MR:
        for n in range(n_lo, n_hi):
            if M == 1:
                row[1](yp, xp, qp, sp, bp, n, K, N, KB)
            elif M == 2:
                row[2](yp, xp, qp, sp, bp, n, K, N, KB)
            else:
                row[3](yp, xp, qp, sp, bp, n, K, N, KB)
    elif M < PACK_FROM:
        for n0 in range(n_lo, n_hi, NR):
            var m0 = 0
            while m0 + MR <= M:
                group[MR](yp, xp, qp, sp, bp, m0, n0, K, N, KB)
                m0 += MR
            if M - m0 == 3:
                group[3](yp, xp, qp, sp, bp, m0, n0, K, N, KB)
            elif M - m0 == 2:
                group[2](yp, xp, qp, sp, bp, m0, n0, K, N, KB)
            elif M - m0 == 1:
                group[1](yp, xp, qp, sp, bp, m0, n0, K, N, KB)
    else:
        var wp = alloc[Float32]((n_hi - n_lo) * K)
        for n in range(n_lo, n_hi):
            unpack(wp + (n - n_lo) * K, qp, sp, n, K, KB)
        var m0 = 0
        while m0 + MR <= M:
            for n0 in range(n_lo, n_hi, NR):
                packed_group[MR](yp, xp, wp + (n0 - n_lo) * K, bp, m0, n0, min(NR, n_hi - n0), K, N)
            m0 += MR
        for n0 in range(n_lo, n_hi, NR):
            var rows = min(NR, n_hi - n0)
            if M - m0 == 3:
                packed_group[3](yp, xp, wp + (n0 - n_lo) * K, bp, m0, n0, rows, K, N)
            elif M - m0 == 2:
                packed_group[2](yp, xp, wp + (n0 - n_lo) * K, bp, m0, n0, rows, K, N)
            elif M - m0 == 1:
                packed_group[1](yp, xp, wp + (n0 - n_lo) * K, bp, m0, n0, rows, K, N)
        wp.unsafe_free()


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
        var tiles = (N + NT - 1) // NT
        var tasks = min(tiles, TASKS_PER_CORE * num_logical_cores())
        var per_task = (tiles + tasks - 1) // tasks

        comptime if INT8:
            var xu, xs = alloc[UInt8](M * KB * BLOCK), alloc[Float32](M * KB)  # x quantised, once for every tile

            def quantize(task: Int) {imm}:
                for m in range(task, M, tasks):
                    quantize_row(xu, xs, xp, m, K, KB)

            if M * K <= 1 << 16:  # a decode's few rows: quantised here, quicker than handing them to the cores
                for m in range(M):
                    quantize_row(xu, xs, xp, m, K, KB)
            else:
                ctx.enqueue_cpu_range(quantize, count=min(M, tasks))
                ctx.synchronize()

            def int8_run(task: Int) {imm}:
                products(yp, xu, xs, qp, sp, bp, task * per_task, min((task + 1) * per_task, tiles), M, K, N, KB)

            ctx.enqueue_cpu_range(int8_run, count=tasks)
            ctx.synchronize()
            xu.unsafe_free()
            xs.unsafe_free()
        else:

            def float_run(task: Int) {imm}:
                for t in range(task * per_task, min((task + 1) * per_task, tiles)):
                    float_products(yp, xp, qp, sp, bp, t, M, K, N, KB)

            ctx.enqueue_cpu_range(float_run, count=tasks)
            ctx.synchronize()
