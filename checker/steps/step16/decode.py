"""Step 16's decode and quality: what quantisation costs against float32 (KL, top-1 agreement, perplexity),
the int8 decode against transformers on the same dequantised weights (step 15's decode, KernelDecode INT8),
and a timing report."""

from __future__ import annotations

import functools

import numpy as np

from checker.harness.runner import StepRun
from checker.reporting.report import FAIL, PASS, Part
from checker.steps.step15.decode import KernelDecode
from runtime import quantize as ref
from runtime.bandwidth import int8_bytes_per_token, read_bandwidth, weight_bytes_per_token
from runtime.checkpoints import STANDINS, Checkpoint
from runtime.decoding import decode_rates
from runtime.hf import load_hf_model
from runtime.learner import LearnerError
from runtime.loading import stored_tensors
from runtime.quantize import BLOCK
from runtime.standins import CORPUS
from runtime.tokenizer import tokenizer_of

# MAX and torch are imported inside the functions that use them: importing them takes seconds.

# A right quantiser's KL is the reference's (the same q); on the stand-ins one scale per row is 1.7-1.9x it,
# rounding toward zero 1.8-2.5x, one scale per tensor 5-12x, max|w| / 128 1.3-1.5x (tests/test_step16.py).
QUALITY_BOUND = 1.2
TEXT_TOKENS = 128


def hf_with(checkpoint: Checkpoint, quantize=ref.quantize, dequantize=ref.dequantize):
    """transformers' GPT-2 with every product weight (the tied head's too) replaced by
    dequantize(quantize(.)), by the functions given."""
    return ref.dequantize_hf(load_hf_model(checkpoint), quantize, dequantize)


def load_dequantized(eleven, checkpoint: Checkpoint):
    """The learner's step 11 model loaded by their load_hf_weights with the reference's dequantised weights."""
    from max.experimental import functional as F

    with F.lazy():
        model = eleven.GPT2LMHeadModel(checkpoint.learner_config())
    eleven.load_hf_weights(model, ref.dequantized_tensors(stored_tensors(checkpoint)))
    return model


def _q8_product(x, q, scales, b):
    """x @ dequantize(q, scales).T + b in MAX's own ops: what gpt2_matvec_q8 computes."""
    from max.dtype import DType
    from max.experimental import functional as F

    m, k, blocks = q.shape[0], q.shape[1], scales.shape[1]
    per_column = F.broadcast_to(scales.reshape([m, blocks, 1]), [m, blocks, BLOCK]).reshape([m, blocks * BLOCK])
    return x @ (F.cast(q, DType.float32) * per_column[:, :k]).T + b


INT8 = KernelDecode("GPT2Quantized", "QuantizedLinear", "matvec_q8", "gpt2_matvec_q8", _q8_product,
                           load_dequantized, hf_with, held_to="transformers on the same dequantised weights")


def text_ids(checkpoint: Checkpoint) -> list[int]:
    """The course's text (runtime/data/corpus.txt), its first TEXT_TOKENS tokens."""
    return tokenizer_of(checkpoint).encode(CORPUS.read_text()).ids[:TEXT_TOKENS]


@functools.cache
def float_logprobs(checkpoint: Checkpoint):
    """transformers float32's log-probabilities [T, V] at every position of text_ids(checkpoint)."""
    return _logprobs(load_hf_model(checkpoint), text_ids(checkpoint))


def _logprobs(model, ids: list[int]):
    import torch

    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), dim=-1)


def quality(checkpoint: Checkpoint, int8_model) -> dict[str, float]:
    """Next-token distributions of transformers float32 and of `int8_model` at every position of the course's
    text: mean KL(float || int8), the share of positions whose top-1 token agrees, each one's perplexity."""
    ids = text_ids(checkpoint)
    p, q = float_logprobs(checkpoint), _logprobs(int8_model, ids)
    kl = (p.exp() * (p - q)).sum(-1)
    nll = {name: -lp[:-1].gather(-1, lp.new_tensor(ids[1:], dtype=int)[:, None]).mean().item()
           for name, lp in (("float", p), ("int8", q))}
    return {"kl": kl.mean().item(), "top1": (p.argmax(-1) == q.argmax(-1)).double().mean().item(),
            "ppl float": float(np.exp(nll["float"])), "ppl int8": float(np.exp(nll["int8"]))}


@functools.cache
def reference_quality(checkpoint: Checkpoint) -> dict[str, float]:
    """quality() of the reference quantiser on `checkpoint`: the same for every check of a process."""
    return quality(checkpoint, hf_with(checkpoint))


def quality_part(run: StepRun, quantize, dequantize, checkpoint: Checkpoint) -> Part:
    try:
        theirs = run.call(hf_with, checkpoint, quantize, dequantize)
    except LearnerError as e:
        return run.add(Part.from_error("quality", e))
    except Exception as e:  # noqa: BLE001 - their arrays did not fit the weights
        return run.add(Part("quality", FAIL, f"dequantize(*quantize(w)) did not give back a weight of w's shape: {e}"))
    got, reference = quality(checkpoint, theirs), reference_quality(checkpoint)
    bound = QUALITY_BOUND * reference["kl"]
    line = (f"over {len(text_ids(checkpoint))} tokens of the course's text: mean KL(float32 || int8) "
            f"{got['kl']:.2e} (the reference quantiser's {reference['kl']:.2e}, at most {bound:.2e} allowed), "
            f"top-1 agreement {got['top1']:.1%}")
    if checkpoint.kind in STANDINS:
        line += " (a stand-in's random weights: GPT-2's own, `pixi run weights`, give the figures that mean something)"
    else:
        line += f", perplexity {got['ppl float']:.2f} float32 -> {got['ppl int8']:.2f} int8"
    if got["kl"] <= bound:
        return run.add(Part("quality", PASS, line))
    return run.add(Part("quality", FAIL, "your int8 weights change the next-token distributions "
                        f"{got['kl'] / reference['kl']:.1f}x as much as the reference quantiser's do (blocks of "
                        f"{BLOCK}, each with its own scale, rounded to the nearest): {line}"))


def timing_part(prefill, both, empty_cache, config) -> Part:
    """A report of speed: never fails (timings vary with the machine and its load)."""
    float_name, int8_name = "MAX's float32 products (your step 13)", "your int8 kernel"
    rates, busy = decode_rates({float_name: prefill, int8_name: both}, config, empty_cache)
    per_token = {float_name: weight_bytes_per_token(config), int8_name: int8_bytes_per_token(config)}
    limit = read_bandwidth()
    lines = [f"{name}: {rate:.1f} tokens/s, {per_token[name] / 1e6:.0f} MB per token read at "
             f"{rate * per_token[name] / 1e9:.1f} GB/s ({rate * per_token[name] / limit:.0%} of the "
             f"{limit / 1e9:.1f} GB/s this machine reads now)" for name, rate in rates.items()] + busy
    mine, theirs = rates[int8_name], rates[float_name]
    return Part("timing", PASS, f"a report, not a verdict: decode {mine / theirs:.2f}x as fast on int8 weights "
                f"({mine:.1f} against {theirs:.1f} tokens/s)", lines)
