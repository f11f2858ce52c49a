"""How a GPT2PagedQ8 whose matmul_q8 rounds what it multiplies (a key of reference.ROUNDINGS) is held: to
transformers whose every product rounds the same way, within what float32's noise alone moves that reference.

A rounded x is a step function of x: where float32's last bits (the kernel's order of sums against torch's) put a
value on the other side of a rounding boundary, the product moves by a whole rounding step, and the layers after
it carry the move on. So a right rounding kernel cannot equal its rounded reference to float32's noise; how far it
may be is measured, not guessed: the reference is run again DRAWS times with each product's input multiplied by
(1 + NOISE x a standard normal) before it rounds. A right model's own distance is a draw like theirs, so the
farthest they went, times MARGIN, is the model's tolerance (never under the float32 one): a right model then uses
about a tenth of it, as a right answer does in every other part. The server's tokens may differ from the
reference's where the top two logits are within TIE x the farthest a logit went (a tie the noise decides), and its
log-probabilities by TIE x theirs. A model that does not round is held as before.

    rounded_hf(hf, rounding)       transformers' GPT-2 whose products round as ROUNDINGS[rounding] says
    reach(hf, run, tol)            (run(), the farthest a noisy run() went, in multiples of tol.allowed)
    widened(tol, far, factor)      tol scaled by factor x far, at least tol
    held(checkpoint, rounding)     step 14's Held for the served model: the rounded reference, its log-probability
                                   tolerance and the logit gap under which two tokens tie
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from checker.reporting.compare import CORRECT_MARGIN, DECODE, Tolerance
from checker.steps.step14.served import NEW_TOKENS, PROMPTS, Held, greedy_reference, prompt_logprobs
from checker.steps.step18.reference import ROUNDINGS
from runtime.checkpoints import Checkpoint
from runtime.quantize import PRODUCTS

# torch is imported inside the functions that use it: importing it takes seconds.

NOISE = 1e-6  # relative: the size of float32's rounding in a sum of a few hundred products
DRAWS = 3
MARGIN = 1 / CORRECT_MARGIN  # the model part: a right model's distance, about the noise's, a tenth of its tolerance
TIE = 3.0  # the served part: how many times the noise's farthest move still counts as a tie


def rounded_hf(hf, rounding: str | None):
    """transformers' GPT2LMHeadModel `hf` (its weights already dequantised), each product (c_attn, c_proj, c_fc,
    mlp.c_proj, the tied head) computed by a forward hook with its input and weight rounded as ROUNDINGS[rounding]
    says (None: as it is); the embedding still reads wte as it is. Returns hf."""
    import torch

    if rounding is None:
        return hf
    rx, rw = ROUNDINGS[rounding]
    hf._noise = None  # a numpy Generator while noisy() runs

    def rounded(f, t):
        a = t.detach().reshape(-1, t.shape[-1]).numpy().astype(np.float32)
        return torch.from_numpy(f(a) if f else a).reshape(t.shape)

    def hook(module, args, out, head=False):
        if "_rounded_weight" not in module.__dict__:  # once: the head's is 50257 x 768
            module._rounded_weight = rounded(rw, module.weight)  # [in, out], the head's [V, C]
        w = module._rounded_weight
        x = args[0]
        if hf._noise is not None:
            x = x * (1 + NOISE * torch.from_numpy(hf._noise.standard_normal(x.shape, dtype=np.float32)))
        y = rounded(rx, x) @ (w.T if head else w)
        return y if head else y + module.bias

    for name, module in hf.named_modules():
        if f"{name}.weight".endswith(PRODUCTS):
            module.register_forward_hook(hook)
    hf.lm_head.register_forward_hook(lambda module, args, out: hook(module, args, out, head=True))
    return hf


@contextmanager
def noisy(hf, seed: int):
    """Inside: rounded_hf's products perturb their inputs by NOISE before they round."""
    hf._noise = np.random.default_rng(seed)
    try:
        yield hf
    finally:
        hf._noise = None


def reach(hf, run, tol: Tolerance | None = None) -> tuple[np.ndarray, float]:
    """run() -> an array from hf; returns it and the most any of DRAWS noisy runs moved it: max |noisy - clean|,
    in multiples of tol.allowed(clean) (None: as it is)."""
    clean = run()
    allowed = 1.0 if tol is None else tol.allowed(clean)
    far = 0.0
    for seed in range(DRAWS):
        with noisy(hf, seed):
            far = max(far, float(np.max(np.abs(run() - clean) / allowed)))
    return clean, far


def widened(tol: Tolerance, far: float, factor: float = MARGIN) -> Tolerance:
    """tol scaled by factor x far, never below tol."""
    f = max(1.0, factor * far)
    return Tolerance(tol.scale * f, tol.rtol * f)


def held(checkpoint: Checkpoint, rounding: str | None, model) -> Held:
    """step 14's Held for a served model whose products round as `rounding` says: `model` (transformers on the
    dequantised weights) made to round alike, log-probabilities to DECODE widened TIE x their reach over
    PROMPTS' echo, and the tie: TIE x the farthest a logit of PROMPTS' greedy continuations moved under noise."""
    import torch
    from transformers import AutoTokenizer

    if rounding is None:
        return Held(model)
    hf = rounded_hf(model, rounding)
    _, far_lp = reach(hf, lambda: np.concatenate(prompt_logprobs(checkpoint, PROMPTS, hf)), DECODE)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    continued, _ = greedy_reference(checkpoint, PROMPTS, NEW_TOKENS, hf)
    sequences = [tokenizer(p)["input_ids"] + ids for p, ids in zip(PROMPTS, continued)]

    def logits() -> np.ndarray:
        with torch.no_grad():
            return np.concatenate([hf(torch.tensor([s])).logits[0].double().numpy() for s in sequences])

    _, gap = reach(hf, logits)
    return Held(hf, widened(DECODE, far_lp, TIE), TIE * gap)
