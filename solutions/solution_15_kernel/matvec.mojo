"""Step 15 solution: y = x @ w.T + b for the few rows of x that decode has, each row of w read once.

Shapes: x [N, K] (N = the batch at decode, usually 1), w [M, K] (a Linear's weight, [out, in]),
b [M], y [N, M]. The TASKS tasks split w's rows into bands; each streams its band once from memory,
ROWS rows at a time against one load of x, WIDTH floats per SIMD operation.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize
from std.sys import simd_width_of

comptime WIDTH = simd_width_of[DType.float32]()  # floats per SIMD operation: 16 with AVX-512, 8 with AVX2
comptime ROWS = 4  # rows of w per pass: four sums share each load of x
comptime TASKS = 8  # bands of w's rows, run on the CPU's threads


@extensibility.register("gpt2_matvec")
struct GPT2Matvec:
    """The custom op: y[n, m] = sum_k x[n, k] * w[m, k] + b[m]."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        y: OutputTensor[dtype=DType.float32, rank=2, ...],
        x: InputTensor[dtype=DType.float32, rank=2, ...],
        w: InputTensor[dtype=DType.float32, rank=2, ...],
        b: InputTensor[dtype=DType.float32, rank=1, ...],
        ctx: DeviceContext,
    ) raises:
        var yp, xp, wp, bp = y.unsafe_ptr(), x.unsafe_ptr(), w.unsafe_ptr(), b.unsafe_ptr()
        var N, K, M = x.dim_size(0), x.dim_size(1), w.dim_size(0)
        # Each task's band of rows: a multiple of ROWS, so only the last band has fewer.
        var per_task = ((M + TASKS - 1) // TASKS + ROWS - 1) // ROWS * ROWS

        def band(task: Int) {imm}:
            var end = min((task + 1) * per_task, M)
            var m = task * per_task
            while m < end:
                var rows = min(ROWS, end - m)  # ROWS, or fewer at the end of w
                for n in range(N):
                    var acc = Array[SIMD[DType.float32, WIDTH], ROWS](fill=0)
                    var k = 0
                    while k + WIDTH <= K:  # whole vectors of x's row
                        var xv = xp.unsafe_load[width=WIDTH](n * K + k)
                        comptime for r in range(ROWS):
                            if r < rows:
                                acc[r] += wp.unsafe_load[width=WIDTH]((m + r) * K + k) * xv
                        k += WIDTH
                    comptime for r in range(ROWS):
                        if r < rows:
                            var s = acc[r].reduce_add()
                            for j in range(k, K):  # the tail: K % WIDTH columns left
                                s += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j]
                            yp[unsafe_offset=n * M + m + r] = s + bp[unsafe_offset=m + r]
                m += ROWS

        sync_parallelize(band, TASKS)
