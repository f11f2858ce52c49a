"""Step 17 in the bench: the FlashAttention decodes, how decode speed falls with the context, and where
the fastest decode step's time goes.

    flash_runs(folder, config)   {"flash": solution 17's GPT2Flash, float32, one graph for prompt and decode;
                                  "fast": the prompt through GPT2Flash, each decode step through
                                  GPT2FlashQ8 (int8 products), both on the dequantised weights}
                                 each a greedy decoder: (prompt ids [1, T], steps) -> (ids [1, steps + 1], seconds)
    by_context(decoders, ...)    each decoder's tokens/s after prompts of each length, in interleaved rounds
    plot(rates, path, title)     tokens/s against the context length, one line per decoder: a PNG
    fast_split(config, folder)   a GPT2FlashQ8 decode step at P cached positions, and each kind of its work
                                 alone in one graph (the 49 int8 products, the 12 attentions, the 25 layer
                                 norms with the 12 GELUs and 24 adds): what the rest of the step costs
    prefill_memory(config)       one layer's attention at a prefill of the whole context, step 17's kernel and
                                 step 13's, each compiled and called once: the memory each call takes beyond
                                 its output at its peak (Linux; the first MAX work of a fresh process)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.matvec import _alternating, _int8_products
from runtime.bandwidth import settled
from runtime.compiling import Compiled, compile_flash, compile_module, prefill_then_decode
from runtime.decoding import greedy_with_cache, in_place
from runtime.quantize import dequantized_tensors

# MAX, matplotlib and the solutions (which import MAX) are imported inside the functions that use them:
# importing them takes seconds.

Decoder = Callable[[np.ndarray, int], tuple[np.ndarray, float]]
FLASH_HEAD_DIM = 64  # the head_dim solution 17's kernel is written for (GPT-2's)
CONTEXTS = (1, 128, 256, 512, 768, 1000)  # cached positions before the timed decode steps
COLORS = {"transformers": "#999999", "step 13 (KV cache)": "#1a73e8", "step 15 (Mojo matvec)": "#a142f4",
          "step 16 (int8)": "#e8710a", "step 17 (FlashAttention)": "#188038",
          "step 17 + int8 (gpt2 --fast)": "#0b5e25", "llama.cpp Q8_0": "#d93025"}


def _model(folder: Path, config, dequantized: bool):
    from max.experimental import functional as F
    from safetensors.numpy import load_file

    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights

    with F.lazy():
        model = GPT2LMHeadModel(config)
    tensors = load_file(folder / "model.safetensors")
    load_hf_weights(model, dequantized_tensors(tensors) if dequantized else tensors)
    return model


def _decoder(run, config) -> Decoder:
    """A compiled model that writes its caches in place, as a greedy decoder (its caches allocated once)."""
    from solutions.solution_17 import empty_flash_cache

    caches = empty_flash_cache(config, 1)
    return lambda prompt, steps: greedy_with_cache(in_place(run, caches), [0], prompt, steps)


def flash_runs(folder: Path, config) -> dict[str, Decoder]:
    """Solution 17's two decodes, compiled (about two minutes on 2 cores the first time)."""
    from solutions.solution_17 import CACHE_DTYPE, GPT2Flash, GPT2FlashQ8

    started = time.perf_counter()
    flash = compile_flash(GPT2Flash(_model(folder, config, False)), config, cache_dtype=CACHE_DTYPE)
    prefill = compile_flash(GPT2Flash(_model(folder, config, True)), config, cache_dtype=CACHE_DTYPE)
    decode = compile_flash(GPT2FlashQ8(_model(folder, config, True)), config, seq=1, cache_dtype=CACHE_DTYPE)
    print(f"FlashAttention graphs compiled in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    return {"flash": _decoder(flash, config), "fast": _decoder(prefill_then_decode(prefill, decode), config)}


def by_context(decoders: dict[str, Decoder], vocab: int, contexts=CONTEXTS, steps: int = 16, rounds: int = 2,
               pair: tuple[str, ...] = (), pair_rounds: int = 8) -> dict[str, list[float]]:
    """Each decoder's greedy tokens/s over `steps` decode steps after a prompt of each length in `contexts`
    (the same ids for all), the best of `rounds`; the decoders take turns at each length. The decoders named
    in `pair` (the two a ratio is taken of) take `pair_rounds` turns instead: on a shared machine a burst of
    other work can cost one turn 10%, and the best of many turns each is what the two can do."""
    rng = np.random.default_rng(17)
    rates: dict[str, list[float]] = {name: [] for name in decoders}
    for context in contexts:
        prompt = rng.integers(0, vocab, (1, context), dtype=np.int64)
        best = {name: 0.0 for name in decoders}
        for turn in range(max(rounds, pair_rounds if pair else 0)):
            for name, decode in decoders.items():
                if turn >= (pair_rounds if name in pair else rounds):
                    continue
                settled()
                _, seconds = decode(prompt, steps)
                best[name] = max(best[name], steps / seconds)
        for name in decoders:
            rates[name].append(best[name])
    return rates


def plot(rates: dict[str, list[float]], path: Path, title: str, contexts=CONTEXTS) -> None:
    """tokens/s against the context, a line per decoder, written as a PNG to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.6))
    labelled: list[float] = []  # the end values labelled so far: a label too near one of them is left out
    for name, values in sorted(rates.items(), key=lambda item: -item[1][-1]):
        ax.plot(contexts, values, marker="o", markersize=4, label=name, color=COLORS.get(name),
                linewidth=2.5 if "fast" in name or "llama" in name else 1.5)
        if all(abs(values[-1] - other) > 4 for other in labelled):
            labelled.append(values[-1])
            ax.annotate(f"{values[-1]:.0f}", (contexts[-1], values[-1]), textcoords="offset points",
                        xytext=(6, -3), fontsize=8, color=COLORS.get(name))
    ax.set_xlabel("positions in the cache (context) before the decode step")
    ax.set_ylabel("greedy decode, tokens/s (batch 1)")
    ax.set_ylim(0, max(max(v) for v in rates.values()) * 1.1)
    ax.set_xlim(0, contexts[-1] * 1.08)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)  # beside: no line hidden
    ax.set_title(title, fontsize=9, wrap=True)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _small_ops(model, config):
    """The decode step's work that is neither a product nor attention, in one graph on x [1, 1, C]: every
    block's ln_1, ln_2 and GELU, the two residual adds, then ln_f (the model's own LayerNorms and GELU)."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Module
    from max.graph import TensorType

    t = model.transformer

    class Small(Module):
        def __init__(self):
            self.transformer = t

        def forward(self, x, residual, wide):
            # each add takes `residual`, not x again: x + f(x) chained 24 times is a graph MAX's compiler
            # expands exponentially
            for block in self.transformer.h:
                x = block.ln_1(x) + residual
                x = block.ln_2(x) + residual
                wide = F.gelu(wide, approximate="tanh") * 0.5
            return self.transformer.ln_f(x) + wide[..., : x.shape[-1]]

    small = Small()
    inner = config.n_inner or 4 * config.n_embd
    row = TensorType(DType.float32, [1, 1, config.n_embd], device=CPU())
    return Compiled(small.compile(row, row, TensorType(DType.float32, [1, 1, inner], device=CPU())))


def _attentions(config, past: int):
    """The step's 12 attentions alone, chained in one graph through solution 17's kernel, at `past`."""
    from max.driver import CPU
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.graph import TensorType

    from solutions.solution_17 import CACHE_DTYPE, flash_attention

    H, D, N, L = config.n_head, config.n_embd // config.n_head, config.n_positions, config.n_layer

    class Attentions(Module):
        def forward(self, q, past, *cache):
            for i in range(L):
                q = flash_attention(q, q, q, cache[2 * i], cache[2 * i + 1], past)
            return q

    new = TensorType(DType.float32, [1, H, 1, D], device=CPU())
    caches = [TensorType(CACHE_DTYPE, [1, H, N, D], device=CPU())] * (2 * L)
    return Compiled(Attentions().compile(new, TensorType(DType.int64, [1], device=CPU()), *caches))


def fast_split(folder: Path, config, past: int = 1000, repeats: int = 40) -> dict:
    """A GPT2FlashQ8 decode step at `past` cached positions, and its three kinds of work each alone in one
    graph, every graph called as the runtime calls the step (`Compiled`); median ms of each, in alternating
    rounds, and the step less the three (the heads' reshapes, the embeddings, the calls between ops, less
    the cost of two more graph calls: a part alone pays a call's own cost as the step does)."""
    from max.experimental.tensor import Tensor

    from solutions.solution_17 import CACHE_DTYPE, GPT2FlashQ8

    rng = np.random.default_rng(0)
    H, D = config.n_head, config.n_embd // config.n_head
    model = _model(folder, config, True)
    step = compile_flash(GPT2FlashQ8(model), config, seq=1, cache_dtype=CACHE_DTYPE)
    shape = (1, H, config.n_positions, D)
    caches = [Tensor.from_dlpack((rng.standard_normal(shape, dtype=np.float32) * 0.5).astype(CACHE_DTYPE.to_numpy()))
              for _ in range(2 * config.n_layer)]
    ids, at = Tensor.from_dlpack(np.array([[1]], np.int64)), Tensor.from_dlpack(np.array([past], np.int64))
    products, attentions = _int8_products(config), _attentions(config, past)
    small = _small_ops(_model(folder, config, False), config)
    x = Tensor.from_dlpack(rng.standard_normal((1, config.n_embd)).astype(np.float32))
    x3 = Tensor.from_dlpack(rng.standard_normal((1, 1, config.n_embd)).astype(np.float32))
    wide = Tensor.from_dlpack(rng.standard_normal((1, 1, config.n_inner or 4 * config.n_embd)).astype(np.float32))
    q = Tensor.from_dlpack(rng.standard_normal((1, H, 1, D)).astype(np.float32))
    runs = dict(step=lambda: step(ids, at, *caches), products=lambda: products(x),
                attention=lambda: attentions(q, at, *caches), small=lambda: small(x3, x3, wide))
    ms = {name: 1e3 * s for name, s in _alternating(runs, repeats, rounds=4).items()}
    return dict(past=past, **{f"{name}_ms": v for name, v in ms.items()},
                rest_ms=ms["step"] - ms["products"] - ms["attention"] - ms["small"])


def _peak_above(run) -> tuple[float, float]:
    """(bytes resident at the peak of `run()` above before it, bytes still resident after): Linux's peak RSS,
    reset before the call through /proc/self/clear_refs."""
    def resident() -> tuple[int, int]:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
        return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024

    Path("/proc/self/clear_refs").write_text("5")  # the peak, reset to what is resident now
    before, _ = resident()
    run()
    after, peak = resident()
    return peak - before, after - before


def prefill_memory(config) -> dict | None:
    """One layer's attention at T = n_positions (P = 0) through solution 17's kernel and as steps 07 and 13
    write it (solution 07's _attn: q k^T [B, H, T, T], masked, softmaxed, times v: what MAX's compiler makes
    of that), each compiled, then
    called once: the memory its first call takes above its output [1, H, T, D] at the peak, in MB, and the
    size of a layer's scores for scale. MAX keeps what a call allocated for the next, so only a process's
    first calls tell: run it in a fresh process. None off Linux."""
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor

    from solutions.solution_07 import GPT2MultiHeadAttention
    from solutions.solution_17 import flash_attention

    if not Path("/proc/self/clear_refs").exists():
        return None
    H, D, N = config.n_head, config.n_embd // config.n_head, config.n_positions

    class Flash(Module):
        def forward(self, q, k, v, past, k_cache, v_cache):
            return flash_attention(q, k, v, k_cache, v_cache, past)

    class Scores(Module):  # the scores written whole, as step 07's attention (and step 13's at P = 0) does
        def __init__(self):
            self.attn = GPT2MultiHeadAttention(config)

        def forward(self, q, k, v):
            return self.attn._attn(q, k, v)

    new = (np.zeros((1, H, N, D), np.float32), ("batch", None, "seq", None))
    cache = (np.zeros((1, H, N, D), np.float32), ("batch", None, None, None))
    flash = compile_module(Flash(), [new, new, new, (np.zeros(1, np.int64), (None,)), cache, cache])
    scores = compile_module(Scores(), [new, new, new])
    rng = np.random.default_rng(0)
    q, k, v, kc, vc = (Tensor.from_dlpack(rng.standard_normal((1, H, N, D), dtype=np.float32)) for _ in range(5))
    at = Tensor.from_dlpack(np.zeros(1, np.int64))
    output = H * N * D * 4
    mb = {}
    for name, run in (("step 17", lambda: flash(q, k, v, at, kc, vc)), ("step 13", lambda: scores(q, k, v))):
        peak, _ = _peak_above(run)
        mb[name] = (peak - output) / 1e6
    return dict(positions=N, scores_mb=H * N * N * 4 / 1e6, output_mb=output / 1e6, above_output_mb=mb)
