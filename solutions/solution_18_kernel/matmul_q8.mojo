"""Step 18 solution: y = x @ dequantize(q, scales).T + b for a batch of rows, each weight read once.

Shapes: x [M, K] float32 (M = the batch's rows: 1 per decoding request, a prompt's every row), q [N, K]
int8 (a Linear's weight, [out, in], step 16's format), scales [N, KB] float32 (KB = ceil(K / BLOCK)),
b [N], y [M, N]. w[n, k] = q[n, k] * scales[n, k // BLOCK].

Step 16's kernel reads q's row n once per row of x: sixteen decoding requests read every weight sixteen
times. Here a task owns NT rows of q (a tile that stays in the core's cache) and runs every row of x
past it, `group` by `group`: NR rows of q and mr rows of x (4, or the 1-3 left over), a block of the NR
rows' weights turned into floats times their scale once and multiplied into the mr rows of x, mr * NR
sums kept in registers. The weights come from memory once per call, whatever M is; each block asks for
the bytes AHEAD further along its row (a prefetch), as step 16's kernel does.
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext
from std.sys import simd_width_of
from std.sys.intrinsics import PrefetchOptions, prefetch

comptime BLOCK = 32  # columns of q that share one scale
comptime W = min(simd_width_of[DType.float32](), BLOCK)  # floats per SIMD operation
comptime BV = BLOCK // W  # vectors per block
comptime MR = 4  # rows of x at a time (a last group of fewer)
comptime NR = 4  # rows of q at a time (the last rows of q repeated past N, their sums dropped)
comptime NT = 32  # rows of q per task: its tile stays in the core's cache while every row of x passes
comptime AHEAD = 1024  # bytes of q asked for before they are read


@always_inline
def group[mr: Int](yp: UnsafePointer[Float32, MutAnyOrigin], xp: UnsafePointer[Float32, ImmutAnyOrigin],
                   qp: UnsafePointer[Int8, ImmutAnyOrigin], sp: UnsafePointer[Float32, ImmutAnyOrigin],
                   bp: UnsafePointer[Float32, ImmutAnyOrigin], m0: Int, n0: Int, M: Int, K: Int, N: Int, KB: Int):
    """y[m0 .. m0 + mr, n0 .. n0 + NR]: mr rows of x against NR rows of q, their sums in registers."""
    var acc = Array[SIMD[DType.float32, W], mr * NR](fill=0)
    var whole = K // BLOCK
    for j in range(whole):
        var k = j * BLOCK
        var w = Array[SIMD[DType.float32, W], NR * BV](fill=0)
        comptime for r in range(NR):
            var n = min(n0 + r, N - 1)
            prefetch[PrefetchOptions().for_read().high_locality()](qp + n * K + k + AHEAD)
            var s = SIMD[DType.float32, W](sp[unsafe_offset=n * KB + j])
            comptime for c in range(BV):
                w[r * BV + c] = qp.unsafe_load[width=W](n * K + k + c * W).cast[DType.float32]() * s
        comptime for i in range(mr):
            comptime for c in range(BV):
                var xv = xp.unsafe_load[width=W]((m0 + i) * K + k + c * W)
                comptime for r in range(NR):
                    acc[i * NR + r] = w[r * BV + c].fma(xv, acc[i * NR + r])
    comptime for i in range(mr):
        comptime for r in range(NR):
            var m, n = m0 + i, n0 + r
            if n < N:
                var s = acc[i * NR + r].reduce_add()
                if whole * BLOCK < K:
                    var tail: Float32 = 0
                    for kk in range(whole * BLOCK, K):
                        tail += qp[unsafe_offset=n * K + kk].cast[DType.float32]() * xp[unsafe_offset=m * K + kk]
                    s += tail * sp[unsafe_offset=n * KB + whole]
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

        def tile(t: Int) {imm}:
            for n0 in range(t * NT, min((t + 1) * NT, N), NR):
                var m0 = 0
                while m0 + MR <= M:
                    group[MR](yp, xp, qp, sp, bp, m0, n0, M, K, N, KB)
                    m0 += MR
                if M - m0 == 3:
                    group[3](yp, xp, qp, sp, bp, m0, n0, M, K, N, KB)
                elif M - m0 == 2:
                    group[2](yp, xp, qp, sp, bp, m0, n0, M, K, N, KB)
                elif M - m0 == 1:
                    group[1](yp, xp, qp, sp, bp, m0, n0, M, K, N, KB)

        sync_parallelize(tile, (N + NT - 1) // NT)
