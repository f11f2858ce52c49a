"""Step 18 solution: y = x @ dequantize(q, scales).T + b for a batch of rows, each weight read once.

Shapes: x [M, K] float32 (M = the batch's rows: 1 per decoding request, a prompt's every row), q [N, K]
int8 (a Linear's weight, [out, in], step 16's format), scales [N, KB] float32 (KB = ceil(K / BLOCK)),
b [N], y [M, N]. w[n, k] = q[n, k] * scales[n, k // BLOCK].

Step 16's kernel reads q's row n once per row of x: sixteen decoding requests read every weight sixteen
times. Here a task owns NT rows of q (a tile that stays in the core's cache) and runs every row of x
past it, MR rows of x by NR rows of q at a time: a block of NR rows' weights is turned into floats once
and multiplied into MR rows of x, MR * NR sums kept in registers. The weights come from memory once per
call, whatever M is. A last chunk of fewer than MR rows (or NR weight rows) repeats the last row
and keeps only the sums it owns.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext
from std.sys import simd_width_of

comptime BLOCK = 32  # columns of q that share one scale
comptime W = min(simd_width_of[DType.float32](), BLOCK)  # floats per SIMD operation
comptime BV = BLOCK // W  # vectors per block
comptime MR = 4  # rows of x at a time
comptime NR = 4  # rows of q at a time
comptime NT = 64  # rows of q per task: its tile stays in the core's cache while every row of x passes


@extensibility.register("gpt2_matmul_q8")
struct GPT2MatmulQ8:
    """The custom op: y[m, n] = sum_k x[m, k] * q[n, k] * scales[n, k // BLOCK] + b[n]."""

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
        var M, K, N, KB = x.dim_size(0), x.dim_size(1), q.dim_size(0), scales.dim_size(1)
        if q.dim_size(1) != K or KB != (K + BLOCK - 1) // BLOCK or scales.dim_size(0) != N or b.dim_size(0) != N:
            raise Error("x [M, K], q [N, K], scales [N, ceil(K / 32)], b [N]: the shapes disagree")
        if M == 0:
            return
        var whole = K // BLOCK  # blocks of a full BLOCK columns; a last one of K % BLOCK when K is no multiple

        def tile(t: Int) {imm}:
            for m0 in range(0, M, MR):
                for n0 in range(t * NT, min((t + 1) * NT, N), NR):
                    var acc = Array[SIMD[DType.float32, W], MR * NR](fill=0)
                    for j in range(whole):
                        var k = j * BLOCK
                        comptime for c in range(BV):
                            var w = Array[SIMD[DType.float32, W], NR](fill=0)
                            comptime for r in range(NR):
                                var n = min(n0 + r, N - 1)
                                w[r] = qp.unsafe_load[width=W](n * K + k + c * W).cast[DType.float32]() * sp[
                                    unsafe_offset=n * KB + j]
                            comptime for i in range(MR):
                                var xv = xp.unsafe_load[width=W](min(m0 + i, M - 1) * K + k + c * W)
                                comptime for r in range(NR):
                                    acc[i * NR + r] = w[r].fma(xv, acc[i * NR + r])
                    comptime for i in range(MR):
                        comptime for r in range(NR):
                            var m, n = m0 + i, n0 + r
                            if m < M and n < N:
                                var s = acc[i * NR + r].reduce_add()
                                if whole < KB:  # the last block: K % BLOCK columns, its own scale
                                    var tail: Float32 = 0
                                    for kk in range(whole * BLOCK, K):
                                        tail += qp[unsafe_offset=n * K + kk].cast[DType.float32]() * xp[
                                            unsafe_offset=m * K + kk]
                                    s += tail * sp[unsafe_offset=n * KB + whole]
                                yp[unsafe_offset=m * N + n] = s + bp[unsafe_offset=n]

        sync_parallelize(tile, (N + NT - 1) // NT)
