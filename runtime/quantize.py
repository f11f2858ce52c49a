"""8-bit block quantisation (step 16), in numpy: the reference the learner's is held to.

A Linear's weight [M, K] (out, in) is cut, row by row, into blocks of BLOCK columns along K (the last
block K % BLOCK columns when K is no multiple); each block keeps one float32 scale and BLOCK int8:

    scale = max |w| over the block / 127      (0 for a block of zeros)
    q     = round(w / scale), ties to even, clipped to [-127, 127]; 0 where scale is 0
    w    ~= q * scale

    quantize    w [M, K] float32 -> q [M, K] int8, scales [M, ceil(K / BLOCK)] float32
    dequantize  q, scales -> [M, K] float32

`dequantized_tensors` applies the round trip to a GPT-2 checkpoint's product weights, in the layout
they are stored in (Hugging Face's Conv1D keeps [in, out]: quantised as the Linear [out, in] it is);
`dequantize_hf` to a transformers GPT-2's, in place.
"""

from __future__ import annotations

import numpy as np

# torch is imported inside the functions that use it: importing it takes seconds.

BLOCK = 32
PRODUCTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
HEAD = "wte.weight"  # the tied head [V, C]: a product too, read at every decode step


def block_columns(k: int) -> list[slice]:
    """The column ranges of a row's blocks: BLOCK wide, the last K % BLOCK when K is no multiple."""
    return [slice(start, min(start + BLOCK, k)) for start in range(0, k, BLOCK)]


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w [M, K] float32 -> q [M, K] int8, scales [M, KB] float32, block by block."""
    w = np.asarray(w, dtype=np.float32)
    q = np.zeros(w.shape, dtype=np.int8)
    columns = block_columns(w.shape[1])
    scales = np.zeros((w.shape[0], len(columns)), dtype=np.float32)
    for j, cols in enumerate(columns):
        block = w[:, cols]
        scale = (np.max(np.abs(block), axis=1) / np.float32(127)).astype(np.float32)  # [M]
        nonzero = scale > 0
        q[nonzero, cols] = np.clip(np.rint(block[nonzero] / scale[nonzero, None]), -127, 127).astype(np.int8)
        scales[:, j] = scale
    return q, scales


def dequantize(q: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """q [M, K] int8, scales [M, KB] float32 -> w [M, K] float32."""
    w = np.zeros(q.shape, dtype=np.float32)
    for j, cols in enumerate(block_columns(q.shape[1])):
        w[:, cols] = q[:, cols].astype(np.float32) * scales[:, j:j + 1]
    return w


def is_product(name: str) -> bool:
    """Whether a stored tensor is one of the weights a decode step multiplies by (the head's included)."""
    return name.endswith(PRODUCTS) or name.endswith(HEAD)


def dequantized_tensors(tensors: dict[str, np.ndarray], quantize=quantize, dequantize=dequantize
                        ) -> dict[str, np.ndarray]:
    """A checkpoint's tensors, as stored, each product weight replaced by dequantize(quantize(.)) (by the
    functions given: the reference's, or a learner's); the rest as they are."""
    out = {}
    for name, value in tensors.items():
        if not is_product(name):
            out[name] = value
        elif name.endswith(HEAD):
            out[name] = np.asarray(dequantize(*quantize(value)), dtype=np.float32)
        else:  # Conv1D [in, out]: the Linear [out, in] is its transpose
            out[name] = np.ascontiguousarray(np.asarray(dequantize(*quantize(value.T)), dtype=np.float32).T)
    return out


def dequantize_hf(model, quantize=quantize, dequantize=dequantize):
    """A transformers GPT2LMHeadModel, every product weight (the tied head's too) replaced in place by
    dequantize(quantize(.)), by the functions given; returns the model."""
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if is_product(name):
                head = name.endswith(HEAD)
                linear = param.detach().numpy() if head else param.detach().numpy().T  # Conv1D keeps [in, out]
                back = np.asarray(dequantize(*quantize(np.ascontiguousarray(linear))), dtype=np.float32)
                param.copy_(torch.from_numpy(np.ascontiguousarray(back if head else back.T)))
    return model
