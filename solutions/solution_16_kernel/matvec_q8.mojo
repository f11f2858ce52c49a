"""Step 16 solution: y = x @ dequantize(q, scales).T + b, reading the int8 weights, never a float copy.

Shapes: x [N, K] float32 (N = the batch at decode), q [M, K] int8 (a Linear's weight, [out, in],
quantised), scales [M, KB] float32 with KB = ceil(K / BLOCK) (one per BLOCK columns of a row, the
last block K % BLOCK columns when K is no multiple), b [M], y [N, M]. w[m, k] = q[m, k] * scales[m, k // BLOCK].

Each task streams its band of q's rows once, ROWS rows against one load of x. A block's 32 int8
become two vectors of 16 floats, their products with x summed, and the sum scaled once per block.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize

comptime BLOCK = 32  # columns of q that share one scale
comptime WIDTH = 16  # floats per SIMD operation: 512 bits; a block is two
comptime ROWS = 8  # rows of q per pass: eight sums share each load of x
comptime TASKS = 8  # bands of q's rows, run on the CPU's threads


@extensibility.register("gpt2_matvec_q8")
struct GPT2MatvecQ8:
    """The custom op: y[n, m] = sum_k x[n, k] * q[m, k] * scales[m, k // BLOCK] + b[m]."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        y: OutputTensor[dtype=DType.float32, rank=2, ...],
        x: InputTensor[dtype=DType.float32, rank=2, ...],
        q: InputTensor[dtype=DType.int8, rank=2, ...],
        scales: InputTensor[dtype=DType.float32, rank=2, ...],
        b: InputTensor[dtype=DType.float32, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var yp, xp, qp, sp, bp = y.unsafe_ptr(), x.unsafe_ptr(), q.unsafe_ptr(), scales.unsafe_ptr(), b.unsafe_ptr()
        var N, K, M, KB = x.dim_size(0), x.dim_size(1), q.dim_size(0), scales.dim_size(1)
        var whole = K // BLOCK  # blocks of a full BLOCK columns; a last one of K % BLOCK when K is no multiple
        # Each task's band of rows: a multiple of ROWS, so only the last band has fewer.
        var per_task = ((M + TASKS - 1) // TASKS + ROWS - 1) // ROWS * ROWS

        def band(task: Int) {imm}:
            var end = min((task + 1) * per_task, M)
            var m = task * per_task
            while m < end:
                var rows = min(ROWS, end - m)  # ROWS, or fewer at the end of q
                for n in range(N):
                    var acc = Array[SIMD[DType.float32, WIDTH], ROWS](fill=0)
                    for j in range(whole):
                        var k = j * BLOCK
                        var x0 = xp.unsafe_load[width=WIDTH](n * K + k)
                        var x1 = xp.unsafe_load[width=WIDTH](n * K + k + WIDTH)
                        comptime for r in range(ROWS):
                            if r < rows:
                                var row = (m + r) * K + k
                                var q0 = qp.unsafe_load[width=WIDTH](row).cast[DType.float32]()
                                var q1 = qp.unsafe_load[width=WIDTH](row + WIDTH).cast[DType.float32]()
                                acc[r] += (q0 * x0 + q1 * x1) * sp[unsafe_offset=(m + r) * KB + j]
                    comptime for r in range(ROWS):
                        if r < rows:
                            var s = acc[r].reduce_add()
                            if whole < KB:  # the last block: K % BLOCK columns, its own scale
                                var tail: Float32 = 0
                                for k in range(whole * BLOCK, K):
                                    tail += qp[unsafe_offset=(m + r) * K + k].cast[DType.float32]() * xp[unsafe_offset=n * K + k]
                                s += tail * sp[unsafe_offset=(m + r) * KB + whole]
                            yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]
                m += ROWS

        sync_parallelize(band, TASKS)
