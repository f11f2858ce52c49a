"""Y = x @ w.T (+ b) for a few rows of x, reading each row of w once: decode's weight products."""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize
from std.memory import Pointer

comptime W = 16  # floats per SIMD operation (avx512)
comptime R = 4  # rows of w per pass: four accumulators share each load of x
comptime TASKS = 8  # bands of w's rows, run on the CPU's threads


def _matvec[
    has_bias: Bool
](
    yp: Pointer[Float32, MutAnyOrigin],
    xp: Pointer[Float32, ImmutAnyOrigin],
    wp: Pointer[Float32, ImmutAnyOrigin],
    bp: Pointer[Float32, ImmutAnyOrigin],
    N: Int,
    K: Int,
    M: Int,
):
    var per_task = ((M + TASKS - 1) // TASKS + R - 1) // R * R

    def band(task: Int) {imm}:
        var end = min((task + 1) * per_task, M)
        var m = task * per_task
        while m < end:
            var rows = min(R, end - m)
            for n in range(N):
                var acc = Array[SIMD[DType.float32, W], R](fill=0)
                var k = 0
                while k + W <= K:
                    var xv = xp.unsafe_load[width=W](n * K + k)
                    comptime for r in range(R):
                        if r < rows:
                            acc[r] += wp.unsafe_load[width=W]((m + r) * K + k) * xv
                    k += W
                comptime for r in range(R):
                    if r < rows:
                        var s = acc[r].reduce_add()
                        for j in range(k, K):
                            s += wp[unsafe_offset=(m + r) * K + j] * xp[unsafe_offset=n * K + j]
                        comptime if has_bias:
                            s += bp[unsafe_offset=m + r]
                        yp[unsafe_offset=n * M + m + r] = s
            m += R

    sync_parallelize(band, TASKS)


@extensibility.register("matvec_t")
struct MatvecT:
    """Y[n, m] = sum_k x[n, k] * w[m, k]."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        y: OutputTensor[dtype=DType.float32, rank=2, ...],
        x: InputTensor[dtype=DType.float32, rank=2, ...],
        w: InputTensor[dtype=DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        _matvec[False](y.unsafe_ptr(), x.unsafe_ptr(), w.unsafe_ptr(), w.unsafe_ptr(),
                       x.dim_size(0), x.dim_size(1), w.dim_size(0))


@extensibility.register("matvec_bias_t")
struct MatvecBiasT:
    """Y[n, m] = sum_k x[n, k] * w[m, k] + b[m]."""

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
        _matvec[True](y.unsafe_ptr(), x.unsafe_ptr(), w.unsafe_ptr(), b.unsafe_ptr(),
                      x.dim_size(0), x.dim_size(1), w.dim_size(0))
