"""`pixi run gpt2 "prompt"`: your GPT-2 writes, token by token.

    python -m gpt2 "The meaning of life is"              your steps 11 and 12
    python -m gpt2 "The meaning of life is" --solutions  the course's solutions
    python -m gpt2 "..." --compare                       and transformers' continuation beside it;
                                                         if the ids differ, which of your steps to look at
    python -m gpt2 "..." --temperature 0.8 --top-k 40 --seed 1
    python -m gpt2 "..." --int8                          and your step 16's decode on 8-bit weights
    python -m gpt2 "..." --fast                          and your fastest: step 17's FlashAttention, on
                                                         step 16's int8 weights once both pass

The model is your GPT2LMHeadModel with GPT-2's checkpoint loaded by your
load_hf_weights, compiled into one MAX graph; the loop is your generate.
Once your step 13 passes its check, the text comes from your KV cache
(GPT2WithCache, compiled, and generate_with_cache), and the tokens per
second of both paths are printed side by side. Once your step 15 passes,
each decode step runs through your Mojo kernel (GPT2WithKernel; the prompt
keeps MAX's products), and its tokens per second are printed too. With --int8,
once your step 16 passes, the text also comes from your int8 decode
(GPT2Quantized on the weights through your quantize and dequantize). With
--fast, once your step 17 passes, the text also comes from your FlashAttention
(GPT2Flash, the caches written in place), each decode step on int8 weights
(GPT2FlashQ8) when step 16 passes too.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import runtime
from checker import api
from runtime.checkpoints import checkpoint_for_command
from runtime.compiling import (
    compile_decode,
    compile_flash,
    compile_gpt2,
    compile_with_cache,
    load_gpt2,
    prefill_then_decode,
)
from runtime.hf import load_hf_model
from runtime.learner import LearnerError, call, explain, import_step
from runtime.loading import stored_tensors
from runtime.online_book import MODEL, book_load, generate_follows_book, model_follows_book
from runtime.paths import shown, step_file
from runtime.quantize import dequantized_tensors
from runtime.tokenizer import tokenizer_of

# MAX and torch are imported inside the functions that use them: importing either takes seconds.


def _learner_modules(solutions: bool):
    eleven = import_step(step_file("11", solution=solutions), "_gpt2_step11")
    twelve = import_step(step_file("12", solution=solutions), "_gpt2_step12")
    return eleven, twelve


def _passing_step(step: str, solutions: bool, checkpoint, *, use: str, otherwise: str, missing: str,
                  skeleton_stop=None):
    """Your step `step` module if it passes its check (from the verdict cache, or checked now), else None
    after saying why (`otherwise`: what the text comes from then). `skeleton_stop(module)`, when given,
    is called before a first check: a skeleton raises there, before the whole check runs."""

    path = step_file(step, solution=solutions)
    try:
        module = import_step(path, f"_gpt2_step{step}")
        if not solutions and api.cached_verdict(step, path, checkpoint) is None:
            if skeleton_stop is not None:
                skeleton_stop(module)
            print(f"(checking your step {step} once, as pixi run s{step} does, to use {use}: {shown(path)})",
                  flush=True)
        if solutions or api.verdict(step, path, checkpoint)["ok"]:
            return module
        print(f"(your step {step} does not pass its check yet: pixi run s{step}; {otherwise})")
    except (LearnerError, AttributeError) as e:
        print(f"(no {missing}: your step {step} is not done yet ({e}); pixi run s{step})")
    return None


def _with_cache(solutions: bool, checkpoint):
    """Your step 13 module if it passes its check, else None after saying why the text comes from the
    path without a cache."""
    def skeleton_stop(thirteen):
        call(thirteen.empty_cache, checkpoint.learner_config(), 1, timeout=60)

    return _passing_step("13", solutions, checkpoint, use="its cache", otherwise="the text comes without a cache",
                         missing="KV cache", skeleton_stop=skeleton_stop)


def _with_kernel(solutions: bool, checkpoint, loaded, cached):
    """Your step 15 decode (prefill through `cached`, step 13's graph; each one-position step through your
    GPT2WithKernel) if step 15 passes its check, else None after saying why."""
    fifteen = _passing_step("15", solutions, checkpoint, use="its kernel", otherwise="decode uses MAX's products",
                            missing="kernel")
    if fifteen is None:
        return None
    try:
        decode = call(lambda: compile_decode(fifteen.GPT2WithKernel(loaded), checkpoint.learner_config()), timeout=0)
    except LearnerError as e:
        print(f"(no kernel: your step 15 is not done yet ({e}); pixi run s15)")
        return None
    print("Your step 15 passes: each decode step runs through your Mojo kernel (GPT2WithKernel); the prompt "
          "through your step 13 graph.")
    return prefill_then_decode(cached, decode)


def _int8(solutions: bool, checkpoint, eleven, thirteen):
    """Your step 16 decode if step 16 passes its check, else None after saying why: your model loaded with
    dequantize(quantize(w)) by your functions, the prompt through your step 13 graph on those weights, each
    one-position step through your GPT2Quantized."""
    sixteen = _passing_step("16", solutions, checkpoint, use="its int8 decode", otherwise="no int8 decode",
                            missing="int8 decode")
    if sixteen is None:
        return None
    config = checkpoint.learner_config()

    def build():
        from max.experimental import functional as F

        with F.lazy():
            model = eleven.GPT2LMHeadModel(config)
        eleven.load_hf_weights(model, dequantized_tensors(stored_tensors(checkpoint), sixteen.quantize,
                                                          sixteen.dequantize))
        prefill = compile_with_cache(thirteen.GPT2WithCache(model), config)
        return prefill_then_decode(prefill, compile_decode(sixteen.GPT2Quantized(model), config))

    try:
        run = call(build, timeout=0)
    except LearnerError as e:
        print(f"(no int8 decode: your step 16 is not done yet ({e}); pixi run s16)")
        return None
    print("Your step 16 passes: the last text comes from your int8 weights, each decode step through your int8 "
          "kernel (GPT2Quantized).")
    return run


def _fast(solutions: bool, checkpoint, eleven):
    """Your fastest GPT-2 if step 17 passes its check, else None after saying why: (generate_flash, the
    compiled run, what it is). Each decode step through your GPT2FlashQ8 on int8 weights when your step 16
    passes and GPT2FlashQ8 is written, else through GPT2Flash; the prompt through GPT2Flash."""
    seventeen = _passing_step("17", solutions, checkpoint, use="its FlashAttention", otherwise="no --fast decode",
                              missing="FlashAttention decode")
    if seventeen is None:
        return None
    config = checkpoint.learner_config()
    sixteen = _passing_step("16", solutions, checkpoint, use="its int8 products", otherwise="--fast decodes on "
                            "float32 weights", missing="int8 products") if hasattr(seventeen, "GPT2FlashQ8") else None

    def load(dequantized: bool):
        from max.experimental import functional as F

        with F.lazy():
            model = eleven.GPT2LMHeadModel(config)
        tensors = stored_tensors(checkpoint)
        if dequantized:
            tensors = dequantized_tensors(tensors, sixteen.quantize, sixteen.dequantize)
        eleven.load_hf_weights(model, tensors)
        return model

    def build():
        dtype = seventeen.empty_flash_cache(config, 1)[0].dtype  # the caches generate_flash will make
        prefill = compile_flash(seventeen.GPT2Flash(load(sixteen is not None)), config, cache_dtype=dtype)
        if sixteen is None:
            return prefill
        return prefill_then_decode(prefill, compile_flash(seventeen.GPT2FlashQ8(load(True)), config, seq=1,
                                                          cache_dtype=dtype))

    try:
        run = call(build, timeout=0)
    except LearnerError as e:
        if sixteen is None:
            print(f"(no --fast decode: your step 17 could not be built ({e}); pixi run s17)")
            return None
        print(f"(your GPT2FlashQ8 could not be built ({e}): --fast decodes on float32 weights)")
        sixteen = None
        run = call(build, timeout=0)
    what = "your FlashAttention and your int8 products (GPT2FlashQ8)" if sixteen else "your FlashAttention (GPT2Flash)"
    print(f"Your step 17 passes: --fast decodes with {what}.")
    return seventeen.generate_flash, run, what


def _timed_tokens(tokens, text, show: bool) -> tuple[list[int], float]:
    """Runs the token generator `tokens`, printing each new piece of text when `show`; (ids, seconds)."""
    out, started = [], time.perf_counter()
    for token in tokens:
        out.append(int(token))
        piece = text.add(int(token))
        if show:
            print(piece, end="", flush=True)
    return out, time.perf_counter() - started


def _model_parts(eleven):
    """Your model class and loader: this course's step 11, or the online book's (MaxGPT2LMHeadModel,
    no loader: the weights are loaded as the book's main.py loads them)."""
    if not model_follows_book(eleven):
        return eleven.GPT2LMHeadModel, eleven.load_hf_weights
    print("(your step 11 follows the online book's contract: MaxGPT2LMHeadModel, loaded as the book's main.py "
          "loads it)")
    return getattr(eleven, MODEL[0]), book_load


def _generate(twelve, model, prompt_ids: list[int], n: int, *, temperature: float, top_k, seed, eos_token_id):
    """Your generate's tokens; for a step 12 written to the online book, its generate_next_token in a
    loop (numpy's global generator seeded with --seed; the book has no top_k or eos)."""
    if not generate_follows_book(twelve):
        yield from twelve.generate(model, prompt_ids, n, temperature=temperature, top_k=top_k, seed=seed,
                                   eos_token_id=eos_token_id)
        return
    from max.experimental.tensor import Tensor

    if seed is not None:
        np.random.seed(seed)
    ids = list(prompt_ids)
    for _ in range(n):
        token = twelve.generate_next_token(model, Tensor.from_dlpack(np.array([ids], dtype=np.int64)),
                                           temperature=temperature, do_sample=temperature > 0)
        ids.append(int(np.from_dlpack(token).reshape(-1)[0]))
        yield ids[-1]


class _Text:
    """The text after the prompt, a token at a time; an id the tokenizer has no text for (the
    stand-in checkpoints' tokenizer knows few) shows as <id>."""

    def __init__(self, decode, prompt_ids: list[int]):
        self.decode, self.ids = decode, list(prompt_ids)
        self.shown = decode(self.ids)

    def add(self, token: int) -> str:
        self.ids.append(token)
        text = self.decode(self.ids)
        piece = text[len(self.shown):] if text != self.shown else f"<{token}>"
        self.shown = text
        return piece


def _compare(checkpoint, prompt: str, prompt_ids: list[int], ours: list[int], tokenizer, n: int) -> bool:
    import torch

    ids = torch.tensor([prompt_ids])
    out = load_hf_model(checkpoint).generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                             min_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    theirs = out[0, len(prompt_ids):].tolist()
    text = _Text(tokenizer.decode, prompt_ids)
    print(f"\ntransformers: {prompt}{''.join(text.add(t) for t in theirs)}")
    same = theirs == ours
    if same:
        print(f"Token ids identical for all {n} new tokens: {ours[:8]}...")
    else:
        i = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        print(f"Token ids differ from position {i}: yours {ours[i:i + 5]}, transformers' {theirs[i:i + 5]}")
    return same


def _diagnose(eleven, checkpoint, error=None) -> None:
    """Names the step whose piece differs from transformers, compiled as here."""
    print("\nLooking for the step: each of your steps' pieces compiled alone, as here, and compared with "
          "transformers (~15 s a piece the first time)...", flush=True)
    for line in api.which_step(eleven, checkpoint, error):
        print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpt2", description=__doc__.split("\n")[0])
    parser.add_argument("prompt")
    parser.add_argument("--solutions", action="store_true", help="use the course's solutions, not your steps")
    parser.add_argument("--max-new-tokens", type=int, default=30)
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy (the default)")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--compare", action="store_true", help="also run transformers (greedy) and compare ids")
    parser.add_argument("--int8", action="store_true", help="also decode on 8-bit weights (your step 16)")
    parser.add_argument("--fast", action="store_true", help="also decode with your FlashAttention (step 17), on "
                        "int8 weights when your step 16 passes: your fastest GPT-2")
    args = parser.parse_args(argv)

    runtime.setup()

    if (checkpoint := checkpoint_for_command()) is None:
        return 2
    print(f"Weights: {checkpoint.describe()}")
    if not checkpoint.is_real:
        print("These are random weights, so the text is gibberish. What matters: the token ids equal "
              "transformers' (try --compare). `pixi run weights` fetches the real GPT-2.")
    try:
        eleven, twelve = _learner_modules(args.solutions)
        model = loaded = call(load_gpt2, *_model_parts(eleven), checkpoint, timeout=0)
    except (LearnerError, AttributeError) as e:
        print(f"Your model could not be built: {e}\nRun the checks first: pixi run s11, pixi run s12.",
              file=sys.stderr)
        return 1
    try:
        model = call(compile_gpt2, model, timeout=0)
    except LearnerError as e:
        print(f"Your model could not be compiled: {e}", file=sys.stderr)
        _diagnose(eleven, checkpoint, e)
        return 1
    tokenizer = tokenizer_of(checkpoint)
    prompt_ids = tokenizer.encode(args.prompt).ids
    eos = tokenizer.token_to_id("<|endoftext|>")
    thirteen = _with_cache(args.solutions, checkpoint)
    cached = None
    if thirteen is not None:

        try:
            cached = call(lambda: compile_with_cache(thirteen.GPT2WithCache(loaded), checkpoint.learner_config()),
                          timeout=0)
            print("Your step 13 passes: the text comes from your KV cache (GPT2WithCache, compiled, and "
                  "generate_with_cache).")
        except LearnerError as e:
            print(f"(your model with its cache could not be compiled: {e}; the text comes without a cache)")
    kernel = None if cached is None or thirteen is None else _with_kernel(args.solutions, checkpoint, loaded, cached)
    int8 = None
    if args.int8:
        int8 = None if cached is None else _int8(args.solutions, checkpoint, eleven, thirteen)
        if cached is None:
            print("(--int8 needs your step 13's cache first: pixi run s13)")
    fast = _fast(args.solutions, checkpoint, eleven) if args.fast else None
    settings = dict(temperature=args.temperature, top_k=args.top_k, seed=args.seed,
                    eos_token_id=None if args.compare else eos)
    decode = twelve.decode if hasattr(twelve, "decode") else lambda tokenizer, ids: tokenizer.decode(ids)
    print(f"\n{args.prompt}", end="", flush=True)
    try:
        plain = _generate(twelve, model, prompt_ids, args.max_new_tokens, **settings)
        ours, seconds = _timed_tokens(plain, _Text(lambda ids: decode(tokenizer, ids), prompt_ids), cached is None)
        if cached is not None:
            with_cache = thirteen.generate_with_cache(cached, checkpoint.learner_config(), prompt_ids,
                                                      args.max_new_tokens, **settings)
            ours_cached, cached_seconds = _timed_tokens(with_cache, _Text(lambda ids: decode(tokenizer, ids),
                                                                         prompt_ids), kernel is None)
        if kernel is not None:
            with_kernel = thirteen.generate_with_cache(kernel, checkpoint.learner_config(), prompt_ids,
                                                       args.max_new_tokens, **settings)
            ours_kernel, kernel_seconds = _timed_tokens(with_kernel, _Text(lambda ids: decode(tokenizer, ids),
                                                                          prompt_ids), True)
        if int8 is not None:  # on a line of its own, under the float32 text
            print(f"\n\nint8: {args.prompt}", end="", flush=True)
            with_int8 = thirteen.generate_with_cache(int8, checkpoint.learner_config(), prompt_ids,
                                                     args.max_new_tokens, **settings)
            ours_int8, int8_seconds = _timed_tokens(with_int8, _Text(lambda ids: decode(tokenizer, ids), prompt_ids),
                                                    True)
        if fast is not None:
            print(f"\n\nfast: {args.prompt}", end="", flush=True)
            generate_flash, run, _ = fast
            ours_fast, fast_seconds = _timed_tokens(
                generate_flash(run, checkpoint.learner_config(), prompt_ids, args.max_new_tokens, **settings),
                _Text(lambda ids: decode(tokenizer, ids), prompt_ids), True)
    except Exception as e:  # the learner's generate, generate_with_cache, generate_flash or decode

        print(f"\n\nYour generate failed: {explain(e)}", file=sys.stderr)
        return 1
    print(f"\n\n({len(ours)} tokens in {seconds:.1f} s, {len(ours) / seconds:.1f} tokens/s without a cache)")
    if cached is not None:
        print(f"({len(ours_cached)} tokens in {cached_seconds:.1f} s, {len(ours_cached) / cached_seconds:.1f} "
              f"tokens/s with your KV cache: {seconds / cached_seconds:.1f}x as fast)")
        if ours_cached != ours:
            print(f"The two paths gave different tokens: without the cache {ours[:8]}..., with it "
                  f"{ours_cached[:8]}...; run pixi run s13.")
            return 1
    if kernel is not None:
        print(f"({len(ours_kernel)} tokens in {kernel_seconds:.1f} s, {len(ours_kernel) / kernel_seconds:.1f} "
              f"tokens/s with your KV cache and your kernel: {cached_seconds / kernel_seconds:.2f}x as fast as "
              "with the cache alone)")
        if ours_kernel != ours:
            print(f"Your kernel's decode gave other tokens: without it {ours[:8]}..., with it {ours_kernel[:8]}...; "
                  "run pixi run s15.")
            return 1
    if int8 is not None:
        same = next((i for i, (a, b) in enumerate(zip(ours_int8, ours)) if a != b), len(ours))
        print(f"({len(ours_int8)} tokens in {int8_seconds:.1f} s, {len(ours_int8) / int8_seconds:.1f} tokens/s on int8 "
              f"weights: {cached_seconds / int8_seconds:.2f}x as fast as float32 with the cache alone; the same "
              f"tokens as float32 for the first {same} of {len(ours)}: quantisation changes the numbers a little, "
              "and a greedy choice between two close tokens may tip)")
    if fast is not None:
        baseline = (f": {cached_seconds / fast_seconds:.2f}x as fast as with the cache alone" if cached is not None
                    else "")
        print(f"({len(ours_fast)} tokens in {fast_seconds:.1f} s, {len(ours_fast) / fast_seconds:.1f} tokens/s with "
              f"{fast[2]}{baseline})")
        if "int8" in fast[2] and ours_fast != ours:
            same = next((i for i, (a, b) in enumerate(zip(ours_fast, ours)) if a != b), len(ours))
            print(f"(the same tokens as float32 for the first {same} of {len(ours)}: int8 rounds the weights, and a "
                  "greedy choice between two close tokens may tip; step 17's check holds your int8 decode to "
                  "transformers on the same rounded weights)")
        if "int8" not in fast[2] and ours_fast != ours:
            print(f"Your FlashAttention's decode gave other tokens: without it {ours[:8]}..., with it "
                  f"{ours_fast[:8]}...; run pixi run s17.")
            return 1
    if not args.compare:
        return 0
    if args.temperature != 0.0:
        print("(--compare runs transformers greedily; with sampling the ids are not expected to match)")
    if _compare(checkpoint, args.prompt, prompt_ids, ours, tokenizer, len(ours)) or args.temperature:
        return 0
    if not args.solutions:
        _diagnose(eleven, checkpoint)
    return 1


if __name__ == "__main__":
    sys.exit(main())
