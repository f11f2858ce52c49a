"""Step 17's model, placed inside an attention half: whether what the learner hands their kernel (q, k, v) is
Hugging Face's c_attn output split into heads, and whether the kernel's output is attention over them, on
every call the model made op by op; so a fault in the half is said before the kernel (the split), in the
call, or after it (the merge, c_proj, the add).

    kernel_calls(step)                         inside: each call of the learner's flash_attention recorded
    around_kernel(calls, hf, sequence, block, config, dtype)    the line, or None
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from checker.reporting.compare import DECODE, FLOAT16_CACHE, compare
from checker.steps.step17.reference import attention

# torch is imported inside the function that uses it: importing it takes seconds.

@contextmanager
def kernel_calls(step):
    """Inside: each call of the learner's flash_attention (looked up by its name in their file, as their forward
    calls it) appended to the yielded list as numpy (q, k, v, output), each [B, H, T, D]. A forward that calls
    the kernel another way records nothing."""
    calls, original = [], step.flash_attention

    def recorded(q, k, v, *rest):
        out = original(q, k, v, *rest)
        try:
            calls.append(tuple(np.from_dlpack(a).astype(np.float64) for a in (q, k, v, out)))
        except Exception:  # noqa: BLE001 - traced, not run: nothing to record
            pass
        return out

    step.flash_attention = recorded
    try:
        yield calls
    finally:
        step.flash_attention = original


def around_kernel(calls: list, hf, sequence: list[int], block: int, config, dtype: np.dtype) -> str | None:
    """Block `block`'s attention half, its input right and the stream after it off: whether, on every call
    recorded (`calls`: a prompt's pass over `sequence`'s first positions, then a decode step each, the
    blocks in order), what the learner handed their kernel (q, k, v) is Hugging Face's c_attn output split
    into heads, and whether the kernel's output is attention over them. A line placing the fault before the
    kernel (the split), in the call, or after it (the merge, c_proj, the add); None when the calls were not
    recorded one a block. The kernel's output is held to a float16 cache's rounding when `dtype` is float16."""
    import torch

    L, H, D = config.n_layer, config.n_head, config.n_embd // config.n_head
    if not calls or len(calls) % L or any(c[0].ndim != 4 or c[0].shape[0] != 1 for c in calls):
        return None
    seen = {}

    def hook(module, inputs, output):  # returns None: the output goes on as it is
        seen.setdefault("qkv", output[0].double().numpy())

    handle = hf.transformer.h[block].attn.c_attn.register_forward_hook(hook)
    try:
        with torch.no_grad():
            hf(torch.tensor([sequence]))
    finally:
        handle.remove()
    S = len(sequence)
    theirs = [u.reshape(S, H, D).transpose(1, 0, 2)[None] for u in np.split(seen["qkv"], 3, axis=-1)]  # [1, H, S, D]
    tol = FLOAT16_CACHE if dtype == np.float16 else DECODE
    start, split, inside = 0, [], False
    for q, k, v, out in calls[block::L]:
        T = q.shape[2]
        want = [u[:, :, start:start + T] for u in theirs]
        split += [name for name, got, w in zip("qkv", (q, k, v), want) if name not in split and not _close(got, w)]
        inside = inside or not (split or _close(out, attention(want[0], theirs[1], theirs[2], start), tol))
        start += T
    if split:
        return (f"there, before your kernel: the {', '.join(split)} you hand flash_attention in block {block} "
                f"{'is' if len(split) == 1 else 'are'} not c_attn's output split into heads, [B, H, T, D] (q, k, v "
                "side by side along C, each [B, T, C] -> [B, T, H, D] -> transposed to [B, H, T, D]): the split")
    if inside:
        return (f"there, in the call: block {block}'s q, k, v are right, and your kernel's output on them is not "
                "attention over them, though your kernel passed its own cases: what else the call hands it (the "
                "caches, past)")
    return (f"there, after your kernel: in block {block} the q, k, v you hand it and its output are right on every "
            "call; what follows is not: the heads merged back ([B, H, T, D] -> transposed to [B, T, H, D] -> "
            "[B, T, C]), c_proj, the add to the stream")


def _close(got: np.ndarray, want: np.ndarray, tol=DECODE) -> bool:
    return got.shape == want.shape and compare(got, want, axes=(), mistakes=[], tol=tol).ok
