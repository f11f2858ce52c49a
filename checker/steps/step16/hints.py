"""Step 16's hints, a ladder per part (`pixi run s16 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "quantize": ["Each row of w [M, K] is cut into blocks of 32 columns (the last one K % 32 wide); each block "
                 "gets its own scale, max |w| / 127, and q = w / scale rounded to the nearest, as int8.",
                 "Pad the row with zeros to a multiple of 32 (a zero changes no block's max), reshape to "
                 "[M, KB, 32], take np.abs(...).max(axis=-1); divide where the scale is 0 by 1 instead. numpy's "
                 "rounding: np.rint (https://numpy.org/doc/stable/reference/generated/numpy.rint.html).",
                 "scales = amax / np.float32(127); q = np.clip(np.rint(blocks / safe[..., None]), -127, 127)"
                 ".astype(np.int8), reshaped back to [M, KB * 32] and cut to [M, K]."],
    "dequantize": ["Column k of a row belongs to block k // 32: its weight is q times that block's scale.",
                   "np.repeat(scales, 32, axis=1) gives every column its block's scale (cut it to K columns); "
                   "np.tile would repeat the whole row of scales instead "
                   "(https://numpy.org/doc/stable/reference/generated/numpy.repeat.html).",
                   "q.astype(np.float32) * np.repeat(scales, 32, axis=1)[:, :K]."],
    "quality": ["The quality part measures your quantize and dequantize on the whole model: when quantize "
                "passes, this passes.",
                "A KL several times the reference's comes from fewer scales (per row, per tensor) or from "
                "rounding toward zero: each loses precision on every weight (the KL divergence: "
                "https://en.wikipedia.org/wiki/Kullback%E2%80%93Leibler_divergence).",
                "Blocks of 32 along K, each with max |w| / 127, and np.rint."],
    "kernel": ["Start from your step 15 kernel: the same tasks, the same x and y. A weight is now "
               "q[m, k] * scales[m, k // 32]: sum x * q over a block, multiply that sum by the block's scale "
               "once, and add the blocks up.",
               "Check each index: x's row n at n * K and y[n, m] at n * M + m, as in step 15; q's row m at "
               "m * K (bytes), scales' row m at m * KB with KB = "
               "scales.dim_size(1) = ceil(K / 32), the last block's K % 32 columns with scales[m, KB - 1], "
               "and no scale read for a last block when K % 32 == 0 (there is none: a NaN in the last outputs "
               "says you read one); q is signed (DType.int8). SIMD casts: "
               "https://docs.modular.com/mojo/std/builtin/simd/SIMD/.",
               "For a whole block at k: qp.unsafe_load[width=16](m * K + k).cast[DType.float32]() times "
               "xp.unsafe_load[width=16](n * K + k), twice (k and k + 16), summed, times sp[m * KB + k // 32]."],
    "decode": ["The kernel passed alone: what is left is which tensors go into it. Each QuantizedLinear holds "
               "its own Linear's q, scales and bias; the head multiplies by wte's weight (tied), quantised.",
               "np.from_dlpack(linear.weight) gives the weight as an array for quantize; Tensor.from_dlpack(q)"
               f" gives it back to MAX ({api('Tensor.from_dlpack')}), .to(linear.weight.device) where it lives.",
               "In forward: step 13's forward, with the last line's head as matvec_q8(last, head_q, "
               "head_scales)."],
    "timing": ["The timing part is a report: it passes whatever the speed.",
               "Decode reads every weight once per token: tokens/s x bytes per token = the bandwidth you "
               "reach. int8 reads 1.125 bytes a weight, float32 4 (SIMD casts and fma: "
               "https://docs.modular.com/mojo/std/builtin/simd/SIMD/).",
               "Faster: each task reads its rows of q one after another, each from start to end, so it is "
               "one stream through memory (step 15's several rows at once are several streams, and on int8 "
               "they read at about two thirds of the bandwidth); whole blocks of 32 as two vectors of 16, "
               "the scale applied once per block (an fma), as many tasks as the CPU has threads."],
}

SOURCES: dict[str, str] = {"quantize": "quantize", "dequantize": "dequantize", "quality": "quantize",
       "kernel": "matvec_q8", "decode": "GPT2Quantized.forward", "timing": "QuantizedLinear.forward"}
