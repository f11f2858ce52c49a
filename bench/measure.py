"""The bench's two timed runs: prefill and decode side by side (`python -m bench`), and every decoder's
tokens/s against the context length (`--context`)."""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import kv_cache
from bench.decoders import LABELS, decoders, hf, models
from bench.flash import CONTEXTS, by_context, plot
from runtime.bandwidth import int8_bytes_per_token, median_seconds, read_bandwidth, settled, weight_bytes_per_token
from runtime.quantize import dequantize_hf

# torch is imported inside the function that uses it: importing it takes seconds.


@dataclass(frozen=True)
class Plan:
    """What to measure: prefill at each (batch, tokens), and decode steps after a prompt."""

    prefill: tuple[tuple[int, int], ...]
    decode_prompt: int
    decode_steps: int
    repeats: int


FULL = Plan(prefill=((1, 128), (1, 512), (8, 128), (8, 512)), decode_prompt=128, decode_steps=64, repeats=5)
TINY = Plan(prefill=((1, 16), (2, 32)), decode_prompt=8, decode_steps=16, repeats=2)


def measure(folder: Path, config, plan: Plan, llama_source: Path | None = None) -> dict:
    """Every figure of the bench for the checkpoint in `folder`, whose config.json is `config`; with
    `llama_source` (a llama.cpp source tree), llama.cpp's Q8_0 decode too (bench/llama.py)."""
    import torch

    hf_model, run, model = models(folder, config)
    rng = np.random.default_rng(0)
    rows = []
    for batch, tokens in plan.prefill:
        ids = rng.integers(0, config.vocab_size, (batch, tokens), dtype=np.int64)
        ours = median_seconds(lambda: kv_cache.prefill(run, config, ids), plan.repeats)
        theirs = median_seconds(lambda: hf_model(torch.from_numpy(ids), use_cache=True, logits_to_keep=1), plan.repeats)
        theirs_last = hf_model(torch.from_numpy(ids), logits_to_keep=1).logits[:, -1].numpy()
        diff = np.abs(kv_cache.prefill(run, config, ids)[0] - theirs_last)
        rows.append(dict(what="prefill", batch=batch, tokens=tokens, max_ms=1e3 * ours, transformers_ms=1e3 * theirs,
                         speedup=theirs / ours, max_abs_diff=float(diff.max())))
        print(f"prefill batch {batch} x {tokens} tokens: MAX {1e3 * ours:.0f} ms, transformers {1e3 * theirs:.0f} ms",
              file=sys.stderr, flush=True)
    prompt = rng.integers(0, config.vocab_size, (1, plan.decode_prompt), dtype=np.int64)
    # The decodes and the bandwidth interleaved, one of each per round, so a change in the machine's load
    # (it may be shared) falls on all of them; each waits until the threads of the one before are quiet
    # (MAX's spin about half a second after a call: timed at once, transformers lost a third of its speed).
    found, llama = decoders(folder, config, hf_model, run, model, llama_source)
    decoders_now = {name: (lambda decode=decode: decode(prompt, plan.decode_steps)) for name, decode in found.items()}
    rounds = [{name: (settled(), decode())[1] for name, decode in decoders_now.items()}
              | dict(bandwidth=(settled(), read_bandwidth())[1]) for _ in range(plan.repeats + 1)][1:]
    bandwidth = statistics.median(r["bandwidth"] for r in rounds)
    tps = {name: plan.decode_steps / statistics.median(r[name][1] for r in rounds) for name in decoders_now}
    ours_tps, theirs_tps, kernel_tps, int8_tps = (tps[name] for name in ("ours", "theirs", "kernel", "int8"))
    if "llama_cpp" in tps:
        llama.update(tokens_per_s=tps["llama_cpp"], speedup=tps["llama_cpp"] / theirs_tps,
                     int8_over_llama_cpp=int8_tps / tps["llama_cpp"])
        if "fast" in tps:
            llama.update(fast_over_llama_cpp=tps["fast"] / tps["llama_cpp"])

    def generate(model):
        return model.generate(torch.from_numpy(prompt), attention_mask=torch.ones_like(torch.from_numpy(prompt)),
                              max_new_tokens=plan.decode_steps + 1, min_new_tokens=plan.decode_steps + 1,
                              do_sample=False, pad_token_id=0)[:, plan.decode_prompt:].numpy()

    generated = generate(hf_model)
    generated_int8 = generate(dequantize_hf(hf(folder)))  # transformers on the same dequantised weights
    ours_ids, theirs_ids, kernel_ids, int8_ids = (rounds[0][name][0] for name in ("ours", "theirs", "kernel", "int8"))
    flash = {}  # step 17's decodes, where its kernel runs (GPT-2's head_dim)
    if "flash" in tps:
        flash_ids, fast_ids = rounds[0]["flash"][0], rounds[0]["fast"][0]
        flash = dict(flash_tokens_per_s=tps["flash"], flash_speedup=tps["flash"] / theirs_tps,
                     flash_same_tokens=bool(np.array_equal(flash_ids, generated)),
                     fast_tokens_per_s=tps["fast"], fast_speedup=tps["fast"] / theirs_tps,
                     fast_over_int8=tps["fast"] / int8_tps,
                     fast_same_tokens=bool(np.array_equal(fast_ids, generated_int8)))
    weight_bytes, int8_bytes = weight_bytes_per_token(config), int8_bytes_per_token(config)
    limit = bandwidth / weight_bytes
    return dict(
        prefill=rows,
        decode=dict(batch=1, prompt=plan.decode_prompt, steps=plan.decode_steps, max_tokens_per_s=ours_tps,
                    transformers_tokens_per_s=theirs_tps, speedup=ours_tps / theirs_tps,
                    kernel_tokens_per_s=kernel_tps, kernel_speedup=kernel_tps / theirs_tps,
                    kernel_same_tokens=bool(np.array_equal(kernel_ids, generated)),
                    int8_tokens_per_s=int8_tps, int8_speedup=int8_tps / theirs_tps,
                    int8_over_kernel=int8_tps / kernel_tps,
                    int8_same_tokens=bool(np.array_equal(int8_ids, generated_int8)), **flash),
        llama_cpp=llama,
        tokens=dict(max_kv_cache=ours_ids[0].tolist(), transformers_generate=generated[0].tolist(),
                    identical=bool(np.array_equal(ours_ids, generated)
                                   and np.array_equal(ours_ids, theirs_ids))),
        memory=dict(read_bandwidth_gb_s=bandwidth / 1e9, weight_mb_per_token=weight_bytes / 1e6,
                    limit_tokens_per_s=limit, max_fraction_of_limit=ours_tps / limit,
                    kernel_fraction_of_limit=kernel_tps / limit, int8_mb_per_token=int8_bytes / 1e6,
                    int8_fraction_of_limit=int8_tps * int8_bytes / bandwidth,
                    transformers_fraction_of_limit=theirs_tps / limit),
    )


def context(folder: Path, config, llama_source: Path | None, figure: Path, machine_info: dict) -> dict:
    """--context: every decoder's tokens/s after each context length (bench.flash.CONTEXTS), drawn as a PNG."""
    hf_model, run, model = models(folder, config)
    found, llama = decoders(folder, config, hf_model, run, model, llama_source)
    pair = (LABELS["fast"], LABELS["llama_cpp"])  # the ratio the course's goal is about: more turns each
    rates = by_context({LABELS[name]: decode for name, decode in found.items()}, config.vocab_size, pair=pair)
    m = machine_info
    plot(rates, figure, f"GPT-2 small decode on {m['processor']}, {m['cpus']} CPUs "
                        f"({', '.join(m['vector_extensions'])})\n16 greedy steps after each context, best of 2 "
                        "(gpt2 --fast and llama.cpp: of 8)")
    return dict(contexts=list(CONTEXTS), tokens_per_s=rates, llama_cpp=llama, figure=str(figure))
