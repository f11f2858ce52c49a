"""Step 16's catalogue: quantisers, dequantisers and int8 kernels a learner may write instead of the right
ones, each with what it computes and the edit that makes it in the solution (its Python or its Mojo)."""

from __future__ import annotations

import dataclasses

import numpy as np

from checker.reporting.compare import Edit, Mistake
from checker.steps.step15.mistakes import BIAS_HINT
from checker.steps.step15.mistakes import RACE as FLOAT32_RACE
from checker.steps.step15.reference import expected
from runtime import quantize as ref
from runtime.quantize import BLOCK


def _per_tensor(w):
    scale = np.float32(np.abs(w).max() / 127)
    q = np.rint(w / scale).astype(np.int8)
    return q, np.full((w.shape[0], -(-w.shape[1] // BLOCK)), scale, np.float32)


def _per_row(w):
    scale = (np.abs(w).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    q = np.rint(w / np.where(scale == 0, 1, scale)).astype(np.int8)
    return q, np.repeat(scale, -(-w.shape[1] // BLOCK), axis=1)


def _rounded_by(rule):
    def quantize(w):
        _, scales = ref.quantize(w)
        per_column = np.repeat(scales, BLOCK, axis=1)[:, :w.shape[1]]
        return np.clip(rule(w / np.where(per_column == 0, 1, per_column)), -127, 127).astype(np.int8), scales
    return quantize


def _divided_by(d):
    def quantize(w):
        q, scales = ref.quantize(w)
        scales = (scales * np.float32(127) / np.float32(d)).astype(np.float32)
        per_column = np.repeat(scales, BLOCK, axis=1)[:, :w.shape[1]]
        return np.clip(np.rint(w / np.where(per_column == 0, 1, per_column)), -127, 127).astype(np.int8), scales
    return quantize


def _whole_blocks_only(w):
    q, scales = ref.quantize(w)
    whole = w.shape[1] // BLOCK
    q[:, whole * BLOCK:] = 0
    return q, scales[:, :whole]


SCALE_HINT = ("One scale per BLOCK columns of a row: reshape (or slice) w [M, K] into its row's blocks along K, "
              "take each block's max |w|, and divide by 127.")
MISTAKES = [
    (Mistake("one-scale-per-tensor", "one scale for the whole weight (max |w| of all of it), not one per block: "
             "every block that holds no outlier loses precision", SCALE_HINT,
    edit=Edit("scales = np.abs(grouped).max(axis=-1) / np.float32(127)  # [M, KB]",
              "scales = np.broadcast_to(np.abs(grouped).max() / np.float32(127), (m, blocks))")), _per_tensor),
    (Mistake("one-scale-per-row", "one scale per row (the row's max |w|), not one per block of 32 of its columns",
             SCALE_HINT,
    edit=Edit("scales = np.abs(grouped).max(axis=-1) / np.float32(127)  # [M, KB]",
              "scales = np.repeat(np.abs(grouped).max(axis=(1, 2))[:, None] / np.float32(127), blocks, axis=1)")),
     _per_row),
    (Mistake("truncated", "w / scale is cut toward zero (astype(int8) without rounding), not rounded to the "
             "nearest: every weight loses up to a whole step, half a step on average",
             "Round before the cast: np.rint rounds to the nearest (ties to even).",
    edit=Edit("q = np.clip(np.rint(grouped / safe), -127, 127).astype(np.int8)",
              "q = np.clip(np.trunc(grouped / safe), -127, 127).astype(np.int8)")), _rounded_by(np.trunc)),
    (Mistake("floored", "w / scale is rounded down (floor), not to the nearest", "np.rint rounds to the nearest.",
    edit=Edit("q = np.clip(np.rint(grouped / safe), -127, 127).astype(np.int8)",
              "q = np.clip(np.floor(grouped / safe), -127, 127).astype(np.int8)")),
     _rounded_by(np.floor)),
    (Mistake("scale-over-128", "the scale is max |w| / 128: q reaches only +-127 * 128 / 127 of the range, and "
             "the block's largest weight comes back off", "The largest |w| of a block maps to 127 exactly: scale = "
             "max |w| / 127.",
    edit=Edit("scales = np.abs(grouped).max(axis=-1) / np.float32(127)  # [M, KB]",
              "scales = np.abs(grouped).max(axis=-1) / np.float32(128)  # [M, KB]")), _divided_by(128)),
    (Mistake("scale-over-255", "the scale is max |w| / 255, as for unsigned 8 bits: q would need -255..255 and "
             "is clipped at int8's range", "Symmetric int8 uses -127..127: scale = max |w| / 127.",
    edit=Edit("scales = np.abs(grouped).max(axis=-1) / np.float32(127)  # [M, KB]",
              "scales = np.abs(grouped).max(axis=-1) / np.float32(255)  # [M, KB]")),
     _divided_by(255)),
    (Mistake("last-block-dropped", "the last K % 32 columns of each row get no block (K // 32 blocks, not "
             "ceil(K / 32)): GPT-2's products have K a multiple of 32, the check's small rows do not",
             "The last block of a row is K % 32 columns wide when K is no multiple of 32: it has its own scale.",
    edit=Edit("    m, k = weight.shape\n    blocks = -(-k // BLOCK)\n",
              "    m, k = weight.shape\n"
              "    whole = k // BLOCK\n"
              "    q = np.zeros((m, k), dtype=np.int8)\n"
              "    scales = np.zeros((m, whole), dtype=np.float32)\n"
              "    for j in range(whole):\n"
              "        block = weight[:, j * BLOCK:(j + 1) * BLOCK]\n"
              "        scales[:, j] = np.abs(block).max(axis=1) / np.float32(127)\n"
              "        safe = np.where(scales[:, j] == 0, np.float32(1), scales[:, j])[:, None]\n"
              "        q[:, j * BLOCK:(j + 1) * BLOCK] = np.clip(np.rint(block / safe), -127, 127).astype(np.int8)\n"
              "    return q, scales\n"
              "    blocks = -(-k // BLOCK)\n")),
     _whole_blocks_only),
]
DEQUANTIZE_MISTAKES = [
    (Mistake("scales-tiled", "column k is scaled by scales[:, k % KB] (the scales tiled along the row), not by "
             "its own block's scales[:, k // 32]", "Each scale covers 32 neighbouring columns: np.repeat(scales, "
             "32, axis=1), cut to K, not np.tile.",
    edit=Edit('np.repeat(scales, BLOCK, axis=-1)', 'np.tile(scales, BLOCK)')),
     lambda q, s: q.astype(np.float32) * np.tile(s, -(-q.shape[1] // s.shape[1]))[:, :q.shape[1]]),
    (Mistake("dequantize-unscaled", "q is returned as floats, never multiplied by its scale",
             "w ~= q * scale: each column times its block's scale.",
    edit=Edit("return q.astype(np.float32) * per_column", "return q.astype(np.float32)")),
     lambda q, s: q.astype(np.float32)),
]


def _stride_k_over_block(x, q, s, b):
    """scales read at m * (K // 32) + j, not m * KB + j: right when K is a multiple of 32."""
    flat, whole = s.reshape(-1), q.shape[1] // BLOCK
    rows = np.stack([flat[m * whole:m * whole + s.shape[1]] for m in range(s.shape[0])])
    return expected(x, ref.dequantize(q, rows), b)


def _tail_scale(which):
    """The last block of each row (when K is no multiple of 32) scaled by 1 ("none"), by block 0's scale
    ("first"), or left out ("dropped")."""
    def compute(x, q, s, b):
        if q.shape[1] % BLOCK == 0:
            return expected(x, ref.dequantize(q, s), b)
        s = s.copy()
        s[:, -1] = {"none": 1.0, "dropped": 0.0, "first": s[:, 0]}[which]
        return expected(x, ref.dequantize(q, s), b)
    return compute


KERNEL_MISTAKES = [
    (Mistake("scales-not-applied", "the kernel sums x * q without the scales: every output is off by its blocks' "
             "scales", "w[m, k] = q[m, k] * scales[m, k // 32]: scale each block's sum once, then add them.",
    edit=Edit(("acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)",
               "s += tail * sp[unsafe_offset=m * KB + whole]"),
              ("acc += block", "s += tail"), file="matvec_q8.mojo")),
     [lambda x, q, s, b: expected(x, q.astype(np.float32), b)]),
    (Mistake("unsigned-q", "q is read as unsigned bytes (0..255): every negative weight becomes 256 more",
             "q is int8 (DType.int8): -127..127; convert with .cast[DType.float32]() from int8.",
    edit=Edit(("qp.unsafe_load[width=WIDTH](row + k).cast", "qp.unsafe_load[width=WIDTH](row + k + c).cast",
               "qp[unsafe_offset=row + k].cast"),
              ("qp.unsafe_load[width=WIDTH](row + k).cast[DType.uint8]().cast",
               "qp.unsafe_load[width=WIDTH](row + k + c).cast[DType.uint8]().cast",
               "qp[unsafe_offset=row + k].cast[DType.uint8]().cast"), file="matvec_q8.mojo")),
     [lambda x, q, s, b: expected(x, ref.dequantize(q.view(np.uint8).astype(np.float32), s), b)]),
    (Mistake("tail-block-scale", "the last block of a row (its K % 32 columns) is left out or scaled by the wrong "
             "scale (block 0's, or none): right wherever K is a multiple of 32", "The last block of a row holds "
             "the K % 32 columns after the whole blocks, and has a scale of its own: scales[m, KB - 1], KB = "
             "ceil(K / 32). When K is a multiple of 32 there is none: read no scale for it.",
    edit=Edit('s += tail * sp[unsafe_offset=m * KB + whole]', 's += tail', file='matvec_q8.mojo')),
     [_tail_scale("none"), _tail_scale("first"), _tail_scale("dropped")]),
    (Mistake("scales-row-stride", "row m's scales are read from m * (K // 32), not m * KB with KB = ceil(K / 32): "
             "right only when K is a multiple of 32", "scales is [M, KB]: row m's start at m * KB, KB = "
             "scales.dim_size(1).",
    edit=Edit(("acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * KB + j]), acc)",
               "s += tail * sp[unsafe_offset=m * KB + whole]"),
              ("acc = block.fma(SIMD[DType.float32, WIDTH](sp[unsafe_offset=m * whole + j]), acc)",
               "s += tail * sp[unsafe_offset=m * whole + whole]"), file="matvec_q8.mojo")),
     [_stride_k_over_block]),
]
# The bias added another number of times than once: named by the count checker.steps.step15.reading reads
BIAS_TWICE = Mistake("bias-twice", "the bias is added twice", BIAS_HINT,
                     edit=Edit("yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]",
                               "yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m] + bp[unsafe_offset=m]",
                               file="matvec_q8.mojo"))
BIAS_MISSING = Mistake("bias-missing", "the bias is not added", "y = x @ dequantize(q, scales).T + b: each output "
                       "adds its own b[m] once, after its row's blocks are summed.",
                       edit=Edit("yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]",
                                 "yp[unsafe_offset=n * M + m] = s", file="matvec_q8.mojo"))


STORE = "yp[unsafe_offset=n * M + m] = s + bp[unsafe_offset=m]"


# Every task takes every output and adds its share into y: tasks add into the same outputs at once.
RACE = dataclasses.replace(FLOAT32_RACE, edit=Edit(
    ("for i in range(task * per_task, min((task + 1) * per_task, N * M)):", STORE),
    ("for i in range(N * M):", "yp[unsafe_offset=n * M + m] += (s + bp[unsafe_offset=m]) / Float32(tasks)"),
    file="matvec_q8.mojo"))

CATALOGUE = [m for m, _ in MISTAKES] + [m for m, _ in DEQUANTIZE_MISTAKES] + [m for m, _ in KERNEL_MISTAKES] + \
    [BIAS_TWICE, BIAS_MISSING, RACE]
