"""Step 15: y = x @ w.T + b for the few rows of x that decode has, each row of w read once.

Shapes: x [N, K] (N = the batch at decode, usually 1), w [M, K] (a Linear's weight, [out, in]),
b [M], y [N, M]. All float32, each in one block of memory, row after row: w's row m starts at
m * K, x's row n at n * K, y's row n at n * M.

What a decode step reads: every weight once (about 500 MB for GPT-2 small), for two flops per
float. No CPU computes that slowly; it waits for memory. So the kernel's one job is to stream w
from memory as fast as memory delivers it, with every core reading its own part.

Facts you cannot guess (MAX 26.7 and its Mojo):
- The struct below registers the op under the name `gpt2_matvec`; keep its execute signature.
- `t.unsafe_ptr()` is a tensor's data; `p.unsafe_load[width=W](i)` reads W floats from index i
  into a SIMD[DType.float32, W] (one vector operation); `p[unsafe_offset=i]` reads or writes one.
  `v.reduce_add()` sums a vector's W lanes. Nothing checks an index: a wrong one reads garbage,
  or crashes (the check runs your kernel in a process of its own).
- `from std.sys import simd_width_of`: `simd_width_of[DType.float32]()` is this CPU's vector width
  in floats (16 with AVX-512, 8 with AVX2), known when Mojo compiles: a good W.
- `sync_parallelize(band, tasks)` calls band(0) .. band(tasks - 1) on the CPU's threads and
  returns when all have finished; a nested `def band(task: Int) {imm}:` may read the variables
  around it.
- `comptime NAME = value` is a constant known when Mojo compiles; `comptime for r in range(R):`
  is a loop Mojo unrolls; `Array[SIMD[DType.float32, W], R](fill=0)` is R vectors of zeros.

Read: the book's page for this step (book/docs/steps/15.md).
Check: pixi run s15        Stuck? pixi run s15 --hint
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize


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
        # TODO: fill y. Decide first:
        #   - What does one task own, so that no two tasks ever write the same output?
        #   - In which order does a task read w, so that each float of w comes from memory once?
        #   - How many floats does one vector operation take, and what happens to the K % width
        #     columns after the last whole vector? (K is 37 or 5 in some of the check's cases.)
        #   - Where does b[m] go, and how many times?
        # Start with something simple and correct (one task, one float at a time), pass the
        # kernel part, then make it fast and watch the timing part.
        raise Error("step 15: not implemented yet (write the kernel in matvec.mojo)")
