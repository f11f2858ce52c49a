"""Step 18: y = x @ dequantize(q, scales).T + b for a batch of rows, each weight read from memory once.

Shapes: x [M, K] float32 (M = the batch's rows: one per decoding request, every row of a prompt),
q [N, K] int8 (a Linear's weight, [out, in], step 16's format), scales [N, KB] float32 (KB = ceil(K / 32)),
b [N], y [M, N].  w[n, k] = q[n, k] * scales[n, k / 32].

Step 16's kernel reads q's row n once per row of x: sixteen decoding requests read every weight sixteen
times, and at decode the memory is the limit. Here each weight is read once for all M rows.

Your choice: x and w multiply as float32 (the model is then held to transformers to float32's noise),
or rounded to multiply faster: both to bfloat16 (AVX-512's vdpbf16ps), or x to int8 per block of 32
(llama.cpp's Q8_0: VNNI's vpdpbusd, or AVX2's vpmaddubsw and vpmaddwd; `grep -o 'avx[^ ]*' /proc/cpuinfo | sort -u`
says which your CPU has). The check finds the rounding your products equal and holds the model and the
server to transformers rounding alike, within what float32's noise moves that reference; one rounding,
or none, in every path (every M). The book's page says what each rounding costs.

Facts you cannot guess: as step 16's (matvec_q8.mojo).

Read: the book's page for this step (book/docs/steps/18.md).
Check: pixi run s18        Stuck? pixi run s18 --hint
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.algorithm import sync_parallelize
from max.gpu.host import DeviceContext


@extensibility.register("gpt2_matmul_q8")
struct GPT2MatmulQ8:
    """The custom op: y[m, n] = sum_k x[m, k] * q[n, k] * scales[n, k // 32] + b[n]."""

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
        var M, K, N = x.dim_size(0), x.dim_size(1), q.dim_size(0)
        # TODO: fill y. Decide first:
        #   - What does one task own, so that a weight is read from memory once for all M rows?
        #   - How many rows of x and of q at a time, their sums kept in registers?
        #   - What of the rows left over when M (or N) is no multiple of your group?
        raise Error("step 18: not implemented yet (write the kernel in matmul_q8.mojo)")
