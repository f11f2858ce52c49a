"""`pixi run bench`: the course's GPT-2 on MAX against transformers' GPT-2, measured side by side.

    python -m bench                  GPT-2 small (the real checkpoint if downloaded, else the synthetic one)
    python -m bench --tiny           a 2-layer GPT-2 made here with transformers: seconds (the test suite runs it)
    python -m bench --profile        also each weight product alone (MAX's, step 15's kernel) and the int8 step's
                                     split (bench/matvec.py)
    python -m bench --checks         how long each step's check takes, cold and warm (bench/checks.py)
    python -m bench --serve          max serve at 1, 4 and 16 concurrent streams vs transformers (bench/serve.py)
    python -m bench --serve --tiny   the same at 1 and 2 streams, 8 tokens each: the machinery, quickly
    python -m bench --json out.json  where to write the figures (default .cache/bench.json)
    python -m bench --llama-cpp SRC  also llama.cpp's Q8_0 decode (bench/llama.py; SRC a llama.cpp source tree)
    python -m bench --context        every decoder's tokens/s against the context length, drawn as a PNG
                                     (bench/flash.py; --figure PATH, default .cache/decode-by-context.png)
    python -m bench --memory         the memory a prefill of the whole context takes in one layer's attention,
                                     step 17's kernel against step 13's stored scores (bench/flash.py)

In one process, on the same token ids, float32 on the CPU, both sides with the same threads:
  MAX           the course's step 13 solution: GPT2WithCache around solution 11's loaded model, one
                compiled graph (bench/kv_cache.py drives it)
  transformers  GPT2LMHeadModel, PyTorch eager, its default attention (sdpa), its own cache
  prefill       the prompt pass of generation: every position through the model, the cache
                filled, logits of the last position (transformers: use_cache=True, logits_to_keep=1)
  decode        greedy, batch 1: each step feeds one token and reads the cache; tokens/s over the steps
Each figure is the median of --repeats runs after a warm-up run; speed-up = transformers time / MAX time.
The greedy tokens of both sides (and of the kernels' decodes: step 15's against transformers, step 16's int8
against transformers on the same dequantised weights) are compared, the exit status 1 if any differ, and the
decode speed set against the memory-bandwidth limit (runtime/bandwidth.py), measured in the same
run. The decodes (MAX, transformers, MAX with step 15's kernel, MAX on int8 weights with step 16's) and the
bandwidth are measured in rounds, one of each per round, so their ratios are taken under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np

import runtime
from bench import kv_cache, serve
from bench.checks import main as checks
from bench.flash import CONTEXTS, FLASH_HEAD_DIM, by_context, fast_split, flash_runs, plot, prefill_memory
from bench.llama import convert, decoder, missing
from bench.matvec import int8_split, time_matvecs
from runtime.bandwidth import int8_bytes_per_token, median_seconds, read_bandwidth, settled, weight_bytes_per_token
from runtime.checkpoints import checkpoint_for_command, learner_config
from runtime.compiling import compile_decode, prefill_then_decode
from runtime.paths import CACHE, shown
from runtime.quantize import dequantize_hf, dequantized_tensors

# MAX, torch, transformers, the solutions (which import MAX) and safetensors are imported inside the functions that use
# them: importing them takes seconds.


@dataclass(frozen=True)
class Plan:
    """What to measure: prefill at each (batch, tokens), and decode steps after a prompt."""

    prefill: tuple[tuple[int, int], ...]
    decode_prompt: int
    decode_steps: int
    repeats: int


FULL = Plan(prefill=((1, 128), (1, 512), (8, 128), (8, 512)), decode_prompt=128, decode_steps=64, repeats=5)
TINY = Plan(prefill=((1, 16), (2, 32)), decode_prompt=8, decode_steps=16, repeats=2)
# head_dim 16: no step 17 rows (its kernel is written for GPT-2's head_dim 64)
TINY_CONFIG = dict(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64, initializer_range=0.2,
                   bos_token_id=511, eos_token_id=511)


def _hf_tiny(folder: Path):
    """A deterministic 2-layer GPT-2 made with transformers and saved in `folder`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**TINY_CONFIG)).eval()
    model.save_pretrained(folder)
    return folder


def _hf(folder: Path):
    """transformers' GPT-2 from `folder`, float32, for inference."""
    import torch
    from transformers import GPT2LMHeadModel as HFModel

    torch.set_grad_enabled(False)
    return HFModel.from_pretrained(folder, dtype=torch.float32).eval()


def _models(folder: Path, config):
    """(transformers' model, the compiled MAX model with a cache) for the checkpoint in `folder`."""
    from max.experimental import functional as F
    from safetensors.numpy import load_file

    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights

    hf = _hf(folder)
    with F.lazy():
        model = GPT2LMHeadModel(config)
    load_hf_weights(model, load_file(folder / "model.safetensors"))
    started = time.perf_counter()
    run = kv_cache.compile_with_cache(model, config)
    print(f"MAX graph compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return hf, run, model


def _kernel_run(model, config, run):
    """Solution 15's decode: the prompt through `run` (step 13's graph), each one-position step through
    the Mojo kernel (GPT2WithKernel, compiled for one position)."""
    from solutions.solution_15 import GPT2WithKernel

    started = time.perf_counter()
    decode = compile_decode(GPT2WithKernel(model), config)
    print(f"decode graph with the Mojo kernel compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr,
          flush=True)
    return prefill_then_decode(run, decode)


def _int8_model(folder: Path, config):
    """Solution 11's model loaded with the checkpoint's weights through dequantize(quantize(w))."""
    from max.experimental import functional as F
    from safetensors.numpy import load_file

    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights

    with F.lazy():
        model = GPT2LMHeadModel(config)
    load_hf_weights(model, dequantized_tensors(load_file(folder / "model.safetensors")))
    return model


def _int8_run(folder: Path, config):
    """Solution 16's decode on int8 weights: the prompt through step 13's graph on the dequantised weights,
    each one-position step through the int8 kernel (GPT2Quantized, compiled for one position)."""
    from solutions.solution_16 import GPT2Quantized

    model = _int8_model(folder, config)
    started = time.perf_counter()
    prefill = kv_cache.compile_with_cache(model, config)
    decode = compile_decode(GPT2Quantized(model), config)
    print(f"int8 decode graphs compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return prefill_then_decode(prefill, decode)


def _hf_greedy(hf, ids: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
    """transformers' greedy decode with its cache, shaped like bench.kv_cache.greedy's result."""
    import torch

    out = hf(torch.from_numpy(ids), use_cache=True, logits_to_keep=1)
    new = [out.logits[:, -1].argmax(-1, keepdim=True)]
    cache = out.past_key_values
    started = time.perf_counter()
    for _ in range(steps):
        out = hf(new[-1], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        new.append(out.logits[:, -1].argmax(-1, keepdim=True))
    return torch.cat(new, dim=1).numpy(), time.perf_counter() - started


def decoders(folder: Path, config, hf, run, model, llama_source: Path | None) -> tuple[dict, dict]:
    """Every greedy decoder the bench compares, each (prompt ids [1, T], steps) -> (ids [1, steps + 1],
    seconds of the decode steps): transformers, step 13's graph, step 15's kernel, step 16's int8, step 17's
    FlashAttention in float32 and with int8 products, and llama.cpp's where it can be measured; and what is
    known of llama.cpp (why it was not measured)."""
    found = dict(ours=lambda prompt, steps: kv_cache.greedy(run, config, prompt, steps),
                 theirs=lambda prompt, steps: _hf_greedy(hf, prompt, steps))
    kernel, int8 = _kernel_run(model, config, run), _int8_run(folder, config)
    found.update(kernel=lambda prompt, steps: kv_cache.greedy(kernel, config, prompt, steps),
                 int8=lambda prompt, steps: kv_cache.greedy(int8, config, prompt, steps))
    if config.n_embd // config.n_head == FLASH_HEAD_DIM:  # solution 17's kernel is GPT-2's: head_dim 64
        found.update(flash_runs(folder, config))
    llama = dict(reason=missing(llama_source) if llama_source else "not asked for (--llama-cpp SOURCE)")
    if llama["reason"] is None:
        found["llama_cpp"] = decoder(convert(folder, llama_source, Path(tempfile.mkdtemp())))
    return found, llama


def measure(folder: Path, config, plan: Plan, llama_source: Path | None = None) -> dict:
    """Every figure of the bench for the checkpoint in `folder`, whose config.json is `config`; with
    `llama_source` (a llama.cpp source tree), llama.cpp's Q8_0 decode too (bench/llama.py)."""
    import torch

    hf, run, model = _models(folder, config)
    rng = np.random.default_rng(0)
    rows = []
    for batch, tokens in plan.prefill:
        ids = rng.integers(0, config.vocab_size, (batch, tokens), dtype=np.int64)
        ours = median_seconds(lambda: kv_cache.prefill(run, config, ids), plan.repeats)
        theirs = median_seconds(lambda: hf(torch.from_numpy(ids), use_cache=True, logits_to_keep=1), plan.repeats)
        theirs_last = hf(torch.from_numpy(ids), logits_to_keep=1).logits[:, -1].numpy()
        diff = np.abs(kv_cache.prefill(run, config, ids)[0] - theirs_last)
        rows.append(dict(what="prefill", batch=batch, tokens=tokens, max_ms=1e3 * ours, transformers_ms=1e3 * theirs,
                         speedup=theirs / ours, max_abs_diff=float(diff.max())))
        print(f"prefill batch {batch} x {tokens} tokens: MAX {1e3 * ours:.0f} ms, transformers {1e3 * theirs:.0f} ms",
              file=sys.stderr, flush=True)
    prompt = rng.integers(0, config.vocab_size, (1, plan.decode_prompt), dtype=np.int64)
    # The decodes and the bandwidth interleaved, one of each per round, so a change in the machine's load
    # (it may be shared) falls on all of them; each waits until the threads of the one before are quiet
    # (MAX's spin about half a second after a call: timed at once, transformers lost a third of its speed).
    found, llama = decoders(folder, config, hf, run, model, llama_source)
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

    generated = generate(hf)
    generated_int8 = generate(dequantize_hf(_hf(folder)))  # transformers on the same dequantised weights
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


VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "asimd", "sve")


def cpu() -> tuple[str, list[str]]:
    """The CPU's model name and the vector extensions it has (of VECTOR_FLAGS), from /proc/cpuinfo."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), []
    name = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", info, re.M)
    have = set(flags.group(1).split()) if flags else set()
    return (name.group(1).strip() if name else platform.machine()), [f for f in VECTOR_FLAGS if f in have]


def machine() -> dict:
    import torch

    model, vectors = cpu()
    return dict(cpus=os.cpu_count(), processor=model, vector_extensions=vectors,
                torch_threads=torch.get_num_threads(), python=platform.python_version(),
                **{name: version(name) for name in ("max", "torch", "transformers")})


def llama_line(llama: dict, decode: dict) -> str:
    """The llama.cpp line of the report: its Q8_0 decode against step 16's, or why it was not measured."""
    if "tokens_per_s" not in llama:
        return f"llama.cpp Q8_0: not measured: {llama.get('reason', 'not asked for')}."
    return (f"llama.cpp Q8_0 (the same checkpoint, converted by its convert_hf_to_gguf.py): "
            f"{llama['tokens_per_s']:.1f} tokens/s, {llama['speedup']:.2f}x transformers; step 16's int8 decode "
            f"{llama['int8_over_llama_cpp']:.2f}x llama.cpp's ({decode['int8_tokens_per_s']:.1f} tokens/s)"
            + (f"; step 17's with int8 products (gpt2 --fast) {llama['fast_over_llama_cpp']:.2f}x "
               f"({decode['fast_tokens_per_s']:.1f} tokens/s)" if "fast_over_llama_cpp" in llama else "") + ".")


def report(result: dict) -> str:
    """The figures as a Markdown table and a few lines."""
    m, d, mem = result["machine"], result["decode"], result["memory"]
    lines = [f"{m['processor']} ({', '.join(m['vector_extensions']) or 'no vector extensions listed'}), "
             f"{m['cpus']} CPUs (torch threads {m['torch_threads']})",
             f"{result['model']}, float32, median of {result['repeats']} runs after a warm-up",
             "", "| measure | batch | tokens | MAX | transformers | speed-up (transformers / MAX time) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in result["prefill"]:
        lines.append(f"| prefill latency | {r['batch']} | {r['tokens']} | {r['max_ms']:.1f} ms | "
                     f"{r['transformers_ms']:.1f} ms | {r['speedup']:.2f}x |")
    lines.append(f"| greedy decode | 1 | {d['prompt']} + {d['steps']} | {d['max_tokens_per_s']:.1f} tokens/s | "
                 f"{d['transformers_tokens_per_s']:.1f} tokens/s | {d['speedup']:.2f}x |")
    lines.append(f"| greedy decode with step 15's Mojo kernel | 1 | {d['prompt']} + {d['steps']} | "
                 f"{d['kernel_tokens_per_s']:.1f} tokens/s | {d['transformers_tokens_per_s']:.1f} tokens/s | "
                 f"{d['kernel_speedup']:.2f}x |")
    lines.append(f"| greedy decode on int8 weights, step 16's kernel | 1 | {d['prompt']} + {d['steps']} | "
                 f"{d['int8_tokens_per_s']:.1f} tokens/s | {d['transformers_tokens_per_s']:.1f} tokens/s | "
                 f"{d['int8_speedup']:.2f}x |")
    for what, key in (("step 17's FlashAttention", "flash"), ("step 17's FlashAttention + int8 (gpt2 --fast)", "fast")):
        if f"{key}_tokens_per_s" in d:
            lines.append(f"| greedy decode, {what} | 1 | {d['prompt']} + {d['steps']} | "
                         f"{d[f'{key}_tokens_per_s']:.1f} tokens/s | {d['transformers_tokens_per_s']:.1f} tokens/s | "
                         f"{d[f'{key}_speedup']:.2f}x |")
    same = result["tokens"]["identical"]
    lines += ["", f"Greedy tokens, MAX with its KV cache vs transformers (its decode loop and generate()): "
                  f"{'identical' if same else 'DIFFERENT'} ({len(result['tokens']['max_kv_cache'])} tokens).",
              f"Memory: read bandwidth {mem['read_bandwidth_gb_s']:.1f} GB/s, weights read per token "
              f"{mem['weight_mb_per_token']:.0f} MB -> limit {mem['limit_tokens_per_s']:.1f} tokens/s; "
              f"MAX decodes at {100 * mem['max_fraction_of_limit']:.0f}% of it, transformers at "
              f"{100 * mem['transformers_fraction_of_limit']:.0f}%; with step 15's kernel MAX decodes at "
              f"{100 * mem['kernel_fraction_of_limit']:.0f}% ({'same' if d['kernel_same_tokens'] else 'OTHER'} "
              "tokens as transformers' generate).",
              f"int8 (step 16): {mem['int8_mb_per_token']:.0f} MB per token, read at "
              f"{100 * mem['int8_fraction_of_limit']:.0f}% of the bandwidth; {d['int8_over_kernel']:.2f}x step 15's "
              f"float32 kernel ({'same' if d['int8_same_tokens'] else 'OTHER'} tokens as transformers' generate on "
              "the same dequantised weights).",
              (f"Step 17: FlashAttention decodes the {'same' if d['flash_same_tokens'] else 'OTHER'} tokens as "
               f"transformers' generate; with int8 products {d['fast_over_int8']:.2f}x step 16's int8 decode "
               f"({'same' if d['fast_same_tokens'] else 'OTHER'} tokens as transformers on the dequantised weights)."
               if "flash_tokens_per_s" in d else "Step 17: not measured (its kernel is GPT-2's: head_dim 64)."),
              llama_line(result.get("llama_cpp", {}), d),
              f"Largest |logit difference| in the prefill rows: "
              f"{max(r['max_abs_diff'] for r in result['prefill']):.1e}."]
    if "matvecs" in result:
        mv, bw = result["matvecs"], mem["read_bandwidth_gb_s"]
        lines += ["", "| weight product, alone (batch 1) | per token | MAX ms | MAX reads at | kernel ms | "
                      "kernel reads at |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['name']} {r['shape']} | {r['per_token']} | {r['ms']:.2f} | {r['gb_s']:.1f} GB/s | "
                  f"{r['kernel_ms']:.2f} | {r['kernel_gb_s']:.1f} GB/s |" for r in mv]
        for side, key, tps in (("MAX's", "ms", d["max_tokens_per_s"]), ("the kernel's", "kernel_ms",
                                                                         d["kernel_tokens_per_s"])):
            products, step_ms = sum(r[key] * r["per_token"] for r in mv), 1e3 / tps
            lines.append(f"{side[0].upper()}{side[1:]} products alone: {products:.1f} ms per token of its decode "
                         f"step's {step_ms:.1f} ms ({100 * products / step_ms:.0f}%); the rest is the small ops "
                         "and the call.")
        mb = mem["weight_mb_per_token"]
        lines.append(f"Reading {mb:.0f} MB at the measured {bw:.1f} GB/s takes {mb / bw:.1f} ms.")
    if "int8_split" in result:
        s, mb = result["int8_split"], mem["int8_mb_per_token"]
        lines += ["", f"| an int8 decode step at {s['past']} cached positions (solution 16) | ms |", "| --- | --- |",
                  f"| with step 13's attention (F.concat grows the cache; the mask) | {s['before_ms']:.2f} |",
                  f"| as the solution runs it (its append kernel; no mask) | {s['step_ms']:.2f} |",
                  f"| its 49 products alone, in one graph | {s['products_ms']:.2f} |",
                  f"| the rest of the step, before and after | {s['before_ms'] - s['products_ms']:.2f}, "
                  f"{s['step_ms'] - s['products_ms']:.2f} |"]
        lines.append(f"Reading {mb:.0f} MB at the measured {mem['read_bandwidth_gb_s']:.1f} GB/s takes "
                     f"{mb / mem['read_bandwidth_gb_s']:.1f} ms.")
    if "fast_split" in result:
        f = result["fast_split"]
        lines += ["", f"| a gpt2 --fast decode step at {f['past']} cached positions (solution 17 + int8) | ms |",
                  "| --- | --- |", f"| the step | {f['step_ms']:.2f} |",
                  f"| its 49 int8 products alone, in one graph | {f['products_ms']:.2f} |",
                  f"| its 12 attentions alone (solution 17's kernel) | {f['attention_ms']:.2f} |",
                  f"| its 25 layer norms, 12 GELUs, 24 adds alone | {f['small_ms']:.2f} |",
                  f"| the step less the three (embeddings, the heads' reshapes, the calls between ops; each part "
                  f"alone pays a graph call's own cost too, so this may fall below zero) | {f['rest_ms']:.2f} |"]
    return "\n".join(lines)


def context_report(rates: dict[str, list[float]], contexts, m: dict) -> str:
    """The --context table: tokens/s of each decoder after each context length, and the ratios to llama.cpp."""
    lines = [f"{m['processor']} ({', '.join(m['vector_extensions'])}), {m['cpus']} CPUs",
             "", "| decoder | " + " | ".join(f"P = {c}" for c in contexts) + " |",
             "| --- |" + " --- |" * len(contexts)]
    lines += [f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + " |" for name, values in rates.items()]
    if (llama := rates.get(LABELS["llama_cpp"])) is not None:
        fast = rates[LABELS["fast"]]
        lines.append("\ngpt2 --fast / llama.cpp: " + ", ".join(f"{a / b:.2f}x at P = {c}"
                                                                for a, b, c in zip(fast, llama, contexts)))
    return "\n".join(lines)


def memory_report(found: dict | None) -> int:
    """Prints --memory's figures; 0, or 1 when they could not be measured here."""
    if found is None:
        print("--memory reads Linux's peak resident memory (/proc/self/clear_refs): not here.")
        return 1
    above = found["above_output_mb"]
    print(f"A prefill of {found['positions']} positions through one layer's attention, the first call of each in "
          f"this process: memory at its peak beyond its output ({found['output_mb']:.1f} MB):")
    for name, mb in above.items():
        print(f"  {name}: {mb:.1f} MB")
    print(f"One layer's scores [1, H, T, T] in float32 are {found['scores_mb']:.1f} MB.")
    return 0


LABELS = dict(theirs="transformers", ours="step 13 (KV cache)", kernel="step 15 (Mojo matvec)", int8="step 16 (int8)",
              flash="step 17 (FlashAttention)", fast="step 17 + int8 (gpt2 --fast)", llama_cpp="llama.cpp Q8_0")


def context(folder: Path, config, llama_source: Path | None, figure: Path, machine_info: dict) -> dict:
    """--context: every decoder's tokens/s after each context length (bench.flash.CONTEXTS), drawn as a PNG."""
    hf, run, model = _models(folder, config)
    found, llama = decoders(folder, config, hf, run, model, llama_source)
    pair = (LABELS["fast"], LABELS["llama_cpp"])  # the ratio the course's goal is about: more turns each
    rates = by_context({LABELS[name]: decode for name, decode in found.items()}, config.vocab_size, pair=pair)
    m = machine_info
    plot(rates, figure, f"GPT-2 small decode on {m['processor']}, {m['cpus']} CPUs "
                        f"({', '.join(m['vector_extensions'])})\n16 greedy steps after each context, best of 2 "
                        "(gpt2 --fast and llama.cpp: of 8)")
    return dict(contexts=list(CONTEXTS), tokens_per_s=rates, llama_cpp=llama, figure=str(figure))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="a 2-layer GPT-2: seconds instead of minutes")
    parser.add_argument("--checks", action="store_true", help="time every step's check, cold and warm")
    parser.add_argument("--profile", action="store_true", help="also time each weight product alone (decode)")
    parser.add_argument("--serve", action="store_true", help="max serve at 1/4/16 streams against transformers")
    parser.add_argument("--repeats", type=int, default=None, help="runs per figure after the warm-up")
    parser.add_argument("--json", type=Path, default=None, help="where to write the figures (default .cache/)")
    parser.add_argument("--context", action="store_true", help="decode tokens/s against the context length, every "
                        "decoder, drawn as a PNG (--figure)")
    parser.add_argument("--figure", type=Path, default=CACHE / "decode-by-context.png", help="where --context draws")
    parser.add_argument("--memory", action="store_true", help="the memory of a prefill through one layer's "
                        "attention, step 17's kernel against step 13's scores")
    parser.add_argument("--llama-cpp", type=Path, default=None, metavar="SOURCE",
                        help="also llama.cpp's Q8_0 decode (llama-cpp-python installed; SOURCE: a llama.cpp tree)")
    args = parser.parse_args(argv)
    if args.checks:

        return checks()
    if args.serve:

        if (checkpoint := checkpoint_for_command()) is None:
            return 2
        return serve.main(checkpoint, machine(), args.json or CACHE / "bench-serve.json",
                          serve.TINY if args.tiny else serve.FULL)

    runtime.setup()

    plan = TINY if args.tiny else FULL
    if args.repeats:
        plan = Plan(plan.prefill, plan.decode_prompt, plan.decode_steps, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            folder, model = (_hf_tiny(Path(tmp)),
                             f"tiny GPT-2 ({TINY_CONFIG['n_layer']} layers, width {TINY_CONFIG['n_embd']})")
        else:

            if (checkpoint := checkpoint_for_command()) is None:
                return 2
            folder, model = checkpoint.path, checkpoint.describe()
        config = learner_config(json.loads((folder / "config.json").read_text()))
        if args.memory:
            return memory_report(prefill_memory(config))
        if args.context:
            info = machine()
            result = dict(model=model, machine=info, **context(folder, config, args.llama_cpp, args.figure, info))
            print(context_report(result["tokens_per_s"], CONTEXTS, info))
            if "reason" in result["llama_cpp"] and result["llama_cpp"]["reason"]:
                print(f"llama.cpp Q8_0: not measured: {result['llama_cpp']['reason']}.")
            path = args.json or CACHE / "bench-context.json"
            path.write_text(json.dumps(result, indent=1))
            print(f"\nFigure drawn in {shown(args.figure)}; figures written to {shown(path)}")
            return 0
        result = dict(model=model, repeats=plan.repeats, plan=asdict(plan), machine=machine(),
                      **measure(folder, config, plan, args.llama_cpp))
        if args.profile:

            result["matvecs"] = time_matvecs(config)
            result["int8_split"] = int8_split(_int8_model(folder, config), config)
            if config.n_embd // config.n_head == FLASH_HEAD_DIM:
                result["fast_split"] = fast_split(folder, config)
    print(report(result))
    path = args.json or CACHE / "bench.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    print(f"\nFigures written to {shown(path)}")
    decode = result["decode"]
    same = ("kernel_same_tokens", "int8_same_tokens", "flash_same_tokens", "fast_same_tokens")
    return 0 if result["tokens"]["identical"] and all(decode.get(key, True) for key in same) else 1


if __name__ == "__main__":
    sys.exit(main())
