"""Step 16: y = x @ dequantize(q, scales).T + b for decode's few rows, reading the int8 weights.

Shapes: x [N, K] float32 (N = the batch at decode, usually 1), q [M, K] int8 (a Linear's weight
[out, in], quantised), scales [M, KB] float32 with KB = ceil(K / 32), b [M] float32, y [N, M]. Each
in one block of memory, row after row: q's row m starts at m * K, scales' row m at m * KB.

The weight w[m, k] is q[m, k] * scales[m, k // 32]: 32 neighbouring columns of a row share one
scale, and the last block of a row has K % 32 columns when K is no multiple of 32 (the check's
small shapes; GPT-2's products have K = 768 or 3072, and then there is no partial block: its scale,
scales[m, KB], would be the next row's).

What a decode step reads now: one byte a weight and four bytes per 32 of them, about 140 MB for
GPT-2 small instead of 500. The CPU still waits for memory: convert each vector of int8 to floats
as it arrives, and scale a block's sum once, not every product.

Facts you cannot guess (MAX 26.7 and its Mojo), beside step 15's:
- The struct below registers the op under the name `gpt2_matvec_q8`; keep its execute signature.
- `qp.unsafe_load[width=W](i)` on q's pointer reads W int8 into a SIMD[DType.int8, W];
  `.cast[DType.float32]()` makes them floats (q is signed: -127..127).
- `scales.dim_size(1)` is KB.

Read: the book's page for this step (book/docs/steps/16.md).
Check: pixi run s16        Stuck? pixi run s16 --hint
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize


@extensibility.register("gpt2_matvec_q8")
struct GPT2MatvecQ8:
    """The custom op: y[n, m] = sum_k x[n, k] * q[m, k] * scales[m, k // 32] + b[m]."""

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
        # TODO: fill y. Decide first:
        #   - Your step 15 kernel's bands of rows, tasks and vectors: what changes when a row of
        #     weights is K bytes and KB scales?
        #   - Where does the scale multiply: every product, or once per block's sum?
        #   - The last block of a row when K % 32 is not 0: which columns, which scale?
        # Start from something simple and correct (one task, one weight at a time), pass the
        # kernel part, then make it fast and watch the timing part.
        raise Error("step 16: not implemented yet (write the kernel in matvec_q8.mojo)")
