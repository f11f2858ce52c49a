"""The cache grown by one position: out [B, H, P+1, D] = past [B, H, P, D], then new [B, H, 1, D].

What F.concat([past, new], axis=-2) gives, as one copy per head's rows, the heads in parallel: MAX
26.7's concat copies far more slowly than a plain copy on the CPU (the book's performance page has the
figures).
"""

import extensibility
from extensibility import InputTensor, OutputTensor
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize
from std.sys import simd_width_of

comptime WIDTH = simd_width_of[DType.float32]()  # floats per SIMD copy, as wide as this CPU's vectors


@extensibility.register("gpt2_append")
struct GPT2Append:
    """The custom op: out[b, h, :P] = past[b, h], out[b, h, P] = new[b, h, 0]."""

    @staticmethod
    def execute[
        target: StaticString,
    ](
        result: OutputTensor[dtype=DType.float32, rank=4, ...],
        past: InputTensor[dtype=DType.float32, rank=4, ...],
        new: InputTensor[dtype=DType.float32, rank=4, ...],
        ctx: DeviceContext,
    ) raises:
        var op, pp, np_ = result.unsafe_ptr(), past.unsafe_ptr(), new.unsafe_ptr()
        var heads = past.dim_size(0) * past.dim_size(1)  # B * H rows of positions
        var P, D = past.dim_size(2), past.dim_size(3)

        def head(i: Int) {imm}:
            var dst, src, n = i * (P + 1) * D, i * P * D, P * D  # a head's P positions are contiguous
            var k = 0
            while k + WIDTH <= n:
                op.unsafe_store(dst + k, pp.unsafe_load[width=WIDTH](src + k))
                k += WIDTH
            while k < n:
                op[unsafe_offset=dst + k] = pp[unsafe_offset=src + k]
                k += 1
            for j in range(D):  # then the new position
                op[unsafe_offset=dst + n + j] = np_[unsafe_offset=i * D + j]

        sync_parallelize(head, heads)
