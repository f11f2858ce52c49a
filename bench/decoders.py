"""The two sides the bench sets against each other, loaded, and every greedy decoder it times.

    hf_tiny     a deterministic 2-layer GPT-2 made with transformers (`--tiny`, the test suite)
    models      transformers' GPT-2 and the course's step 13 graph on the same checkpoint
    int8_model  solution 11's model on the checkpoint's weights through int8 and back
    decoders    transformers, steps 13, 15, 16 and 17, and llama.cpp's where it can be measured
    LABELS      each decoder's name in a report and a figure
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import kv_cache
from bench.flash import FLASH_HEAD_DIM, flash_runs
from bench.llama import NO_REPACK, REPACK_NOTE, convert, decoder, missing
from runtime.compiling import compile_decode, prefill_then_decode
from runtime.quantize import dequantized_tensors

# MAX, torch, transformers, the solutions (which import MAX) and safetensors are imported inside the functions that use
# them: importing them takes seconds.

# head_dim 16: no step 17 rows (its kernel is written for GPT-2's head_dim 64)
TINY_CONFIG = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64, initializer_range=0.2,
                   bos_token_id=511, eos_token_id=511)
LABELS = dict(theirs="transformers", ours="step 13 (KV cache)", kernel="step 15 (Mojo matvec)", int8="step 16 (int8)",
              flash="step 17 (FlashAttention)", fast="step 17 + int8 (gpt2 --fast)", llama_cpp="llama.cpp Q8_0")


def hf_tiny(folder: Path):
    """A deterministic 2-layer GPT-2 made with transformers and saved in `folder`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**TINY_CONFIG)).eval()
    model.save_pretrained(folder)
    return folder


def hf(folder: Path):
    """transformers' GPT-2 from `folder`, float32, for inference."""
    import torch
    from transformers import GPT2LMHeadModel as HFModel

    torch.set_grad_enabled(False)
    return HFModel.from_pretrained(folder, dtype=torch.float32).eval()


def _solution_11(config, tensors: dict):
    """Solution 11's model for `config`, loaded with `tensors` (the checkpoint's, by their names)."""
    from max.experimental import functional as F

    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights

    with F.lazy():
        model = GPT2LMHeadModel(config)
    load_hf_weights(model, tensors)
    return model


def models(folder: Path, config):
    """(transformers' model, the compiled MAX model with a cache, the MAX model) for the checkpoint in
    `folder`."""
    from safetensors.numpy import load_file

    theirs = hf(folder)
    model = _solution_11(config, load_file(folder / "model.safetensors"))
    started = time.perf_counter()
    run = kv_cache.compile_with_cache(model, config)
    print(f"MAX graph compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return theirs, run, model


def int8_model(folder: Path, config):
    """Solution 11's model loaded with the checkpoint's weights through dequantize(quantize(w))."""
    from safetensors.numpy import load_file

    return _solution_11(config, dequantized_tensors(load_file(folder / "model.safetensors")))


def _kernel_run(model, config, run):
    """Solution 15's decode: the prompt through `run` (step 13's graph), each one-position step through
    the Mojo kernel (GPT2WithKernel, compiled for one position)."""
    from solutions.solution_15 import GPT2WithKernel

    started = time.perf_counter()
    decode = compile_decode(GPT2WithKernel(model), config)
    print(f"decode graph with the Mojo kernel compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr,
          flush=True)
    return prefill_then_decode(run, decode)


def _int8_run(folder: Path, config):
    """Solution 16's decode on int8 weights: the prompt through step 13's graph on the dequantised weights,
    each one-position step through the int8 kernel (GPT2Quantized, compiled for one position)."""
    from solutions.solution_16 import GPT2Quantized

    model = int8_model(folder, config)
    started = time.perf_counter()
    prefill = kv_cache.compile_with_cache(model, config)
    decode = compile_decode(GPT2Quantized(model), config)
    print(f"int8 decode graphs compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return prefill_then_decode(prefill, decode)


def _hf_greedy(model, ids: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """transformers' greedy decode with its cache, shaped like bench.kv_cache.greedy's result."""
    import torch

    out = model(torch.from_numpy(ids), use_cache=True, logits_to_keep=1)
    new = [out.logits[:, -1].argmax(-1, keepdim=True)]
    cache = out.past_key_values
    started = time.perf_counter()
    for _ in range(steps):
        out = model(new[-1], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        new.append(out.logits[:, -1].argmax(-1, keepdim=True))
    return torch.cat(new, dim=1).numpy(), time.perf_counter() - started


def decoders(folder: Path, config, theirs, run, model, llama_source: Path | None) -> tuple[dict, dict]:
    """Every greedy decoder the bench compares, each (prompt ids [1, T], steps) -> (ids [1, steps + 1],
    seconds of the decode steps): transformers, step 13's graph, step 15's kernel, step 16's int8, step 17's
    FlashAttention in float32 and with int8 products, and llama.cpp's where it can be measured; and what is
    known of llama.cpp (why it was not measured)."""
    found = dict(ours=lambda prompt, steps: kv_cache.greedy(run, config, prompt, steps),
                 theirs=lambda prompt, steps: _hf_greedy(theirs, prompt, steps))
    kernel, int8 = _kernel_run(model, config, run), _int8_run(folder, config)
    found.update(kernel=lambda prompt, steps: kv_cache.greedy(kernel, config, prompt, steps),
                 int8=lambda prompt, steps: kv_cache.greedy(int8, config, prompt, steps))
    if config.n_embd // config.n_head == FLASH_HEAD_DIM:  # solution 17's kernel is GPT-2's: head_dim 64
        found.update(flash_runs(folder, config))
    llama = dict(reason=missing(llama_source) if llama_source else "not asked for (--llama-cpp SOURCE)")
    if llama["reason"] is None:
        found["llama_cpp"] = decoder(convert(folder, llama_source, Path(tempfile.mkdtemp())))
        if NO_REPACK:
            llama["note"] = REPACK_NOTE
    return found, llama
