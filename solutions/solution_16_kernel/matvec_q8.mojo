"""Step 16 solution: y = x @ dequantize(q, scales).T + b, reading the int8 weights, never a float copy.

Shapes: x [N, K] float32 (N = the batch at decode), q [M, K] int8 (a Linear's weight, [out, in],
quantised), scales [M, KB] float32 with KB = ceil(K / BLOCK) (one per BLOCK columns of a row, the
last block K % BLOCK columns when K is no multiple), b [M], y [N, M]. w[m, k] = q[m, k] * scales[m, k // BLOCK].

The outputs y[n, m] are cut into one run per thread; each output reads its row of q from start to
end, one stream through memory (x's row stays in the core's cache). The op's own context (`ctx`) hands
the runs to the threads: `sync_parallelize` makes a new context for every call, microseconds a decode
step pays 49 times. A block's 32 int8 become BLOCK / WIDTH vectors of floats (two of 16 with AVX-512,
four of 8 with AVX2), their products with x summed, and the sum scaled once per block.
Row after row, not step 15's ROWS rows at once: a row of q is 4x fewer bytes than a row of w, so
the CPU's work per byte is larger, and one stream per task is what lets the memory keep up (the
book's performance page has the figures). Each block asks for the bytes AHEAD further along its row
(a prefetch): a core's own prefetcher alone leaves its stream short of the memory's speed.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from std.sys import simd_width_of
from std.sys.info import num_logical_cores
from std.sys.intrinsics import PrefetchOptions, prefetch

comptime BLOCK = 32  # columns of q that share one scale
comptime WIDTH = min(simd_width_of[DType.float32](), BLOCK)  # floats per SIMD operation, as wide as this CPU's vectors
comptime AHEAD = 4096  # bytes of q asked for before they are read (a hint: never faults, even past the end)


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
        var tasks = num_logical_cores()  # a run of outputs per thread
        var per_task = (N * M + tasks - 1) // tasks  # outputs per run: the last run may have fewer

        def outputs(task: Int) {imm}:
            for i in range(task * per_task, min((task + 1) * per_task, N * M)):
                var n, m = i // M, i % M
                var row, xrow = m * K, n * K  # where q's row m and x's row n start
                var acc = SIMD[DType.float32, WIDTH](0)
                for j in range(whole):
                    var k = j * BLOCK
                    prefetch[PrefetchOptions().for_read().high_locality()](qp + row + k + AHEAD)
                    var block = qp.unsafe_load[width=WIDTH](row + k).cast[DType.float32]() * xp.unsafe_load[width=WIDTH](
                        xrow + k)
                    comptime for c in range(WIDTH, BLOCK, WIDTH):  # the block's other vectors, summed in WIDTH lanes
                        block = qp.unsafe_load[width=WIDTH](row + k + c).cast[DType.float32]().fma(
                            xp.unsafe_load[width=WIDTH](xrow + k + c), block)
                    acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)
                var s = acc.reduce_add()
                if whole < KB:  # the last block: K % BLOCK columns, its own scale
                    var tail: Float32 = 0
                    for k in range(whole * BLOCK, K):
                        tail += qp[unsafe_offset=row + k].cast[DType.float32]() * xp[unsafe_offset=xrow + k]
                    s += tail * sp[unsafe_offset=m * KB + whole]
                yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]

        ctx.enqueue_cpu_range(outputs, count=tasks)
        ctx.synchronize()
