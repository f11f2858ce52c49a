"""Step 17's model and generate parts: the learner's GPT2Flash against Hugging Face, then generate_flash.

  model      op by op first (a short prompt, two decode steps: seconds), then compiled as `pixi run gpt2`
             compiles it, its caches written in place: the last logits of a prompt as long as the context
             (n_positions), then a short prompt and each of its decode steps' logits, and the greedy ids
  generate   the learner's generate_flash on the compiled model: transformers' greedy ids, a stop at eos
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext

import numpy as np

from checker.diagnosis.stream import first_placed, recording
from checker.harness import verdicts
from checker.harness.runner import StepRun
from checker.reporting.compare import DECODE, FLOAT16_CACHE, compare
from checker.reporting.report import FAIL, PASS, SKIP, Part
from checker.steps.step15.decode import (
    EAGER_TOKENS,
    NEW_TOKENS,
    PROMPT_LENGTH,
    DecodeReference,
    counting_kernel_calls,
    ids_differ,
    kernel_calls_problem,
)
from checker.steps.step16.decode import hf_with, load_dequantized
from checker.steps.step17.around import around_kernel, kernel_calls
from runtime.checkpoints import Checkpoint
from runtime.compiling import compile_flash, load_gpt2, prefill_then_decode
from runtime.decoding import greedy_steps, in_place, no_positions
from runtime.hf import load_hf_model
from runtime.learner import LearnerError
from runtime.paths import shown

ATTENTION = ("flash_attention (the keys and values it writes at positions P .. P+T-1 of this block's caches and reads "
             "back, the mask's offset P, the scale) or the heads around it (split before, merged after)")

# MAX and torch are imported inside the functions that use them: importing them takes seconds.


def prompt_of(config, length: int, seed: int) -> list[int]:
    """`length` ids, fixed, below the stand-ins' tokenizer's size."""
    return np.random.default_rng(seed).integers(0, min(config.vocab_size, 400), length).tolist()


def _long_logits(hf, ids: list[int]) -> np.ndarray:
    """Hugging Face's logits at the last position of `ids`: [V]."""
    import torch

    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0, -1].double().numpy()


def cache_dtype(run: StepRun, step, config) -> np.dtype:
    """The dtype of the caches the learner's empty_flash_cache makes: float16 when it makes float16 ones,
    else float32 (also when it is not written yet, or fails: the model part says why)."""
    try:
        caches = run.call(step.empty_flash_cache, config, 1)
        first = np.from_dlpack(caches[0]).dtype
    except Exception:  # noqa: BLE001 - the learner's function, judged in the model part
        return np.dtype(np.float32)
    return np.dtype(np.float16) if first == np.float16 else np.dtype(np.float32)


@contextmanager
def _on_c_attn(hf, hook):
    """`hook(i, output)` on every block's c_attn output (q, k, v side by side, [B, T, 3C]) while inside."""
    handles = [block.attn.c_attn.register_forward_hook(lambda module, inputs, output, i=i: hook(i, output))
               for i, block in enumerate(hf.transformer.h)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def rounded(hf, dtype: np.dtype):
    """Inside: `hf`'s keys and values rounded to `dtype` as they leave c_attn, as a cache of that dtype stores
    them (q and the arithmetic float32): transformers' own greedy ids for a float16 cache."""
    import torch

    def hook(i, output):
        width = output.shape[-1] // 3
        return torch.cat([output[..., :width], output[..., width:].to(torch.float16).to(output.dtype)], dim=-1)

    return _on_c_attn(hf, hook) if dtype == np.float16 else nullcontext()


@contextmanager
def fed(hf, caches, held: int):
    """Inside: `hf` attending over the keys and values the learner's `caches` hold (2L x [1, H, N, D]) at
    positions 0 .. held-1: each block's k and v, as they leave c_attn on a forward from position 0, replaced
    by that block's cached ones (widened to float32), q kept. Yields {block: (k, v, q)}, what Hugging Face
    computed itself, each [T, C] (for `cached`; q to name a cache holding the queries). Hugging Face then
    computes what the learner's attention computes from those caches, whatever their dtype, to float32's
    precision; the caches themselves are judged by `cached`."""
    import torch

    own: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def hook(i, output):
        t, width = min(output.shape[1], held), output.shape[-1] // 3
        q, k, v = output[0, :, :width], output[0, :, width:2 * width], output[0, :, 2 * width:]
        own[i] = (k[:t].double().numpy(), v[:t].double().numpy(), q[:t].double().numpy())
        kv = [torch.from_dlpack(np.ascontiguousarray(_rows(caches[2 * i + j], t), np.float32)) for j in (0, 1)]
        out = output.clone()
        out[0, :t, width:] = torch.cat(kv, dim=-1)
        return out

    with _on_c_attn(hf, hook):
        yield own


def _rows(cache, t: int) -> np.ndarray:
    """A cache [1, H, N, D]'s first t positions as c_attn lays them out: [t, H * D]."""
    held = np.from_dlpack(cache)[0, :, :t, :]  # [H, t, D]
    return held.transpose(1, 0, 2).reshape(t, -1)


def cached(caches, own: dict, dtype: np.dtype) -> tuple[str | None, float, int | None]:
    """Whether every block's caches hold Hugging Face's keys and values (`own`, from fed) to the precision of
    their dtype: (None, the worst margin, None) when they do; else (which block's which cache, at which
    positions, how far off; its margin; the block)."""
    tol, worst = FLOAT16_CACHE if dtype == np.float16 else DECODE, 0.0
    for i in sorted(own):
        for j, name in enumerate(("key", "value")):
            want, got = own[i][j], _rows(caches[2 * i + j], len(own[i][j])).astype(np.float64)
            verdict = compare(got, want, axes=("position", "channel"), mistakes=[], tol=tol)
            if not verdict.ok:
                held = next((f": it holds the {other}, so the kernel was handed {other[0]} where {name[0]} belongs"
                             for other, theirs in zip(("keys", "values", "queries"), own[i])
                             if other != name + "s" and compare(got, theirs, axes=("position", "channel"), mistakes=[],
                                                          tol=tol).ok), "")
                return (f"block {i}'s {name} cache does not hold Hugging Face's {name}s at positions 0 .. "
                        f"{len(want) - 1}{held}: {verdict.summary}; "
                        f"{verdict.details[0] if verdict.details else ''} (the kernel stores the new k and v at "
                        f"positions P .. P+T-1 of [B, H, N, D])", verdict.margin or 0.0, i)
            worst = max(worst, verdict.margin or 0.0)
    return None, worst, None


def _cache_rule(dtype: np.dtype) -> str:
    return "float16: within 1.5% of each" if dtype == np.float16 else "float32: as the decode's logits"


def _against(dtype: np.dtype) -> str:
    """How the reference was computed, for a report."""
    return "" if dtype == np.float32 else " (attending over your float16 caches' keys and values)"


def model_part(run: StepRun, step, eleven, checkpoint: Checkpoint, dtype: np.dtype):
    """Returns the compiled GPT2Flash when the part passes, else None after recording why."""
    config = checkpoint.learner_config()
    prompt = prompt_of(config, PROMPT_LENGTH, 17)
    print("(running your GPT2Flash op by op: seconds; then, if it is right, compiled as pixi run gpt2 runs it: "
          "about a minute after a change on 2 cores)", file=sys.stderr, flush=True)
    hf = load_hf_model(checkpoint)
    with rounded(hf, dtype):
        reference = DecodeReference(hf, prompt)
    try:
        eager = run.call(step.GPT2Flash, run.call(load_gpt2, eleven.GPT2LMHeadModel, eleven.load_hf_weights,
                                                  checkpoint))
        caches = run.call(step.empty_flash_cache, config, 1)
        problem = _caches_problem(caches, config, dtype)
        if problem:
            run.add(Part("model", FAIL, problem))
            return None
        recorded, first = [], []
        with recording(recorded, eager), kernel_calls(step) as calls:
            ids, decoded = run.call(greedy_steps, in_place(eager, caches), config, no_positions, prompt,
                                    EAGER_TOKENS, first=first)
    except LearnerError as e:
        run.add(Part.from_error("model", e))
        return None
    def lines(placed) -> list[str]:
        """Where the stream first differs, and in an attention half, whether before, in or after the kernel."""
        if placed is None:
            return []
        around = around_kernel(calls, hf, prompt + ids[:-1], placed.block, config, dtype) if placed.attention else None
        return [placed.line, *([around] if around else [])]

    # The logits first (a wrong piece of the model is placed), then the caches (keys wrong in a way the
    # learner's own attention agrees with: Hugging Face fed them agrees too), then the greedy ids.
    with fed(hf, caches, len(prompt) + len(ids) - 1) as own:
        failed = reference.problems(ids, decoded, first)
        logits_off = failed is not None and not failed[0].ok
        placed = first_placed(recorded, hf, prompt + ids[:-1], 0, len(prompt), config.n_layer,
                              attention=lambda i: ATTENTION,
                              logits=(np.stack(decoded), reference.logits(ids))) if logits_off else None
    if logits_off:
        verdict, problems = failed
        run.add(Part("model", FAIL, f"your GPT2Flash (run op by op) differs from Hugging Face{_against(dtype)} "
                     f"at decode: {verdict.summary}", problems + lines(placed), margin=verdict.margin))
        return None
    problem, _, block = cached(caches, own, dtype)
    if problem is not None:
        # a block's keys are wrong when its input is: the first piece of the stream that differs, if before it
        with rounded(hf, dtype):
            placed = first_placed(recorded, hf, prompt + ids[:-1], 0, len(prompt), config.n_layer,
                                  attention=lambda i: ATTENTION)
        if placed is not None and placed.block is not None and placed.block < block:
            run.add(Part("model", FAIL, f"your GPT2Flash (run op by op) differs from Hugging Face{_against(dtype)} "
                         f"before block {block}'s caches", [*lines(placed), f"and so (its input is off): {problem}"]))
        else:
            run.add(Part("model", FAIL, f"your GPT2Flash (run op by op): {problem}"))
        return None
    if failed is not None:
        run.add(Part("model", FAIL, f"your GPT2Flash (run op by op): {failed[1][0]}", failed[1][1:]))
        return None
    try:
        compiled = run.call(compile_flash, run.call(step.GPT2Flash, run.call(
            load_gpt2, eleven.GPT2LMHeadModel, eleven.load_hf_weights, checkpoint)), config, cache_dtype=dtype)
        long, filled = prompt_of(config, config.n_positions, 171), step.empty_flash_cache(config, 1)
        logits = run.call(lambda: np.from_dlpack(compiled(*_inputs(long, 0), *filled)))
        caches = step.empty_flash_cache(config, 1)
        ids, decoded = run.call(greedy_steps, in_place(compiled, caches), config, no_positions, prompt, NEW_TOKENS)
    except LearnerError as e:
        run.add(Part.from_error("model", e))
        return None
    with fed(hf, filled, len(long)) as own:
        whole = compare(np.asarray(logits, np.float64)[0], _long_logits(hf, long), axes=("vocab",), mistakes=[],
                        tol=DECODE)
    if not whole.ok:
        run.add(Part("model", FAIL, f"compiled, the last logits of a prompt of {config.n_positions} positions (the "
                     f"whole context) differ from Hugging Face's{_against(dtype)}: {whole.summary}", whole.details,
                     margin=whole.margin))
        return None
    problem, held_long, _ = cached(filled, own, dtype)
    if problem is not None:
        run.add(Part("model", FAIL, f"compiled, after a prompt of {config.n_positions} positions: {problem}"))
        return None
    with fed(hf, caches, len(prompt) + len(ids) - 1) as own:
        failed = reference.problems(ids, decoded)
        verdict = reference.verdict(ids, decoded)
    problem, held, _ = cached(caches, own, dtype)
    if failed is not None and (not verdict.ok or problem is None):
        run.add(Part("model", FAIL, f"compiled, your GPT2Flash's decode steps differ from Hugging Face, though right "
                     f"op by op: {verdict.summary}", failed[1], margin=verdict.margin))
        return None
    if problem is not None:
        run.add(Part("model", FAIL, f"compiled, your GPT2Flash's decode steps: {problem}"))
        return None
    margin = max(whole.margin or 0.0, verdict.margin or 0.0, held_long, held)
    run.add(Part("model", PASS, f"the last logits of a {config.n_positions}-position prompt, {NEW_TOKENS - 1} decode "
                 f"steps and {NEW_TOKENS} greedy ids, op by op and compiled, match Hugging Face{_against(dtype)}: "
                 f"{whole.summary}; {verdict.summary}; your caches hold its keys and values, "
                 f"{max(held_long, held):.2f} of allowed ({_cache_rule(dtype)})", margin=margin))
    return compiled


def _inputs(ids: list[int], past: int):
    from max.experimental.tensor import Tensor

    return Tensor.from_dlpack(np.array([ids], np.int64)), Tensor.from_dlpack(np.array([past], np.int64))


def _caches_problem(caches, config, dtype: np.dtype) -> str | None:
    """What is wrong with what empty_flash_cache returned, or None."""
    from max.experimental.tensor import Tensor

    want = [1, config.n_head, config.n_positions, config.n_embd // config.n_head]
    if not isinstance(caches, (list, tuple)) or len(caches) != 2 * config.n_layer:
        return (f"empty_flash_cache(config, 1) returned {type(caches).__name__}"
                f"{f' of {len(caches)}' if isinstance(caches, (list, tuple)) else ''}, expected a list of "
                f"{2 * config.n_layer} caches: a key cache and a value cache per block")
    for i, c in enumerate(caches):
        if not isinstance(c, Tensor) or [int(d) for d in c.shape] != want or c.dtype.to_numpy() != dtype:
            shape = (f"{np.dtype(c.dtype.to_numpy())} {[int(d) for d in c.shape]}" if isinstance(c, Tensor)
                     else type(c).__name__)
            return (f"empty_flash_cache's cache {i} is {shape}, expected a {dtype} Tensor {want} [B, H, n_positions, "
                    f"D]: every cache float32, or every one float16")
    if (distinct := len({id(c) for c in caches})) < len(caches):
        return (f"empty_flash_cache returned {len(caches)} caches but only {distinct} distinct "
                f"tensor{'s' * (distinct != 1)}: the kernel "
                "writes into each in place, so a tensor listed twice is one cache shared (a block's values over "
                "its keys, one block's over another's); make a new tensor for each")
    return None


def generate_part(run: StepRun, step, compiled, checkpoint: Checkpoint, dtype: np.dtype) -> Part:
    """The learner's generate_flash: transformers' greedy ids, and a stop right after eos_token_id."""
    config = checkpoint.learner_config()
    prompt = prompt_of(config, PROMPT_LENGTH, 17)
    hf = load_hf_model(checkpoint)
    with rounded(hf, dtype):
        theirs = DecodeReference(hf, prompt).theirs
    try:
        ids = run.call(lambda: [int(t) for t in step.generate_flash(compiled, config, prompt, NEW_TOKENS)])
        eos = theirs[3]
        stopped = run.call(lambda: [int(t) for t in step.generate_flash(compiled, config, prompt, NEW_TOKENS,
                                                                         eos_token_id=eos)])
    except LearnerError as e:
        return run.add(Part.from_error("generate", e))
    if ids != theirs:
        return run.add(Part("generate", FAIL, f"generate_flash's {ids_differ(ids, theirs)} (your GPT2Flash passed: "
                            "look at what each call is handed, past above all)"))
    want = theirs[:theirs.index(eos) + 1]
    if stopped != want:
        return run.add(Part("generate", FAIL, f"with eos_token_id={eos} generate_flash gave {stopped}, expected "
                            f"{want}: yield the eos token, then stop"))
    return run.add(Part("generate", PASS, f"{NEW_TOKENS} greedy ids equal transformers' generate; it stops after "
                        "eos_token_id"))


def _q8_placed(run: StepRun, step, eleven, quantized, reference, checkpoint: Checkpoint, dtype: np.dtype
               ) -> list[str]:
    """Where GPT2FlashQ8's decode first differs from transformers on the dequantised weights: the prompt
    through GPT2Flash and EAGER_TOKENS - 1 decode steps through GPT2FlashQ8, op by op, the decode steps'
    pieces recorded; one line, or none."""
    config = checkpoint.learner_config()
    try:
        prefill = run.call(step.GPT2Flash, run.call(load_dequantized, eleven, checkpoint))
        recorded, caches = [], step.empty_flash_cache(config, 1)
        with recording(recorded, quantized):
            ids, decoded = run.call(greedy_steps, in_place(prefill_then_decode(prefill, quantized), caches), config,
                                    no_positions, reference.prompt, EAGER_TOKENS)
    except LearnerError:
        return []
    prompt = reference.prompt
    with rounded(reference.hf, dtype):
        placed = first_placed(recorded, reference.hf, prompt + ids[:-1], len(prompt), len(prompt), config.n_layer,
                              attention=lambda i: ATTENTION, logits=(np.stack(decoded), reference.logits(ids)))
    return [] if placed is None else [f"op by op, GPT2FlashQ8's decode steps: {placed.line.removeprefix('where: ')}"]


def int8_part(run: StepRun, step, eleven, path, checkpoint: Checkpoint, dtype: np.dtype) -> Part:
    """GPT2FlashQ8, optional: once the learner's step 16 passes, a prompt through GPT2Flash and each decode step
    through GPT2FlashQ8 on the same caches, compiled as `pixi run gpt2 --fast` runs them, against transformers
    on the same dequantised weights; every product of a decode step through step 16's int8 kernel."""
    config = checkpoint.learner_config()
    sixteen = path.with_name(path.name.replace("17", "16"))
    later = "a decode on int8 weights, what pixi run gpt2 --fast runs once it passes"
    if not hasattr(step, "GPT2FlashQ8"):
        return run.add(Part("int8", SKIP, f"optional: no GPT2FlashQ8 in your file ({later})", optional=True))
    found = verdicts.lookup("16", sixteen, checkpoint) if sixteen.exists() else {"ok": False}
    if found is None:
        print(f"(checking your step 16 once, as pixi run s16 does, for GPT2FlashQ8: {shown(sixteen)})",
              file=sys.stderr, flush=True)
        found = verdicts.verdict("16", sixteen, checkpoint, timeout=run.timeout)
    if not found["ok"]:
        first = next((f"{name} {status}" for name, status in found.get("parts", []) if status != PASS), None)
        where = f": its first part not passing, {first}" if first else ""
        return run.add(Part("int8", SKIP, f"optional: your step 16 ({shown(sixteen)}) does not pass its check yet"
                            f"{where} (pixi run s16 says why); GPT2FlashQ8 is {later}", optional=True))
    print("(compiling your GPT2Flash for the prompt and GPT2FlashQ8 for each decode step, on int8 weights: about "
          "two minutes after a change on 2 cores)", file=sys.stderr, flush=True)
    prompt = prompt_of(config, PROMPT_LENGTH, 17)
    try:
        quantized = run.call(step.GPT2FlashQ8, run.call(load_dequantized, eleven, checkpoint))
    except LearnerError as e:
        if e.todo:
            return run.add(Part("int8", SKIP, f"optional: GPT2FlashQ8 is not written yet ({later})", optional=True))
        return run.add(Part.from_error("int8", e))
    try:
        with counting_kernel_calls() as calls:
            decode = run.call(compile_flash, quantized, config, seq=1, cache_dtype=dtype)
        prefill = run.call(compile_flash, run.call(step.GPT2Flash, run.call(load_dequantized, eleven, checkpoint)),
                           config, cache_dtype=dtype)
        both, caches = prefill_then_decode(prefill, decode), step.empty_flash_cache(config, 1)
        ids, decoded = run.call(greedy_steps, in_place(both, caches), config, no_positions, prompt, NEW_TOKENS)
    except LearnerError as e:
        return run.add(Part.from_error("int8", e))
    if (problem := kernel_calls_problem(calls, "gpt2_matvec_q8", config)) is not None:
        return run.add(Part("int8", FAIL, f"GPT2FlashQ8: {problem}"))
    hf = hf_with(checkpoint)
    with rounded(hf, dtype):
        reference = DecodeReference(hf, prompt)
    with fed(hf, caches, len(prompt) + len(ids) - 1) as own:
        failed = reference.problems(ids, decoded)
        verdict = reference.verdict(ids, decoded)
    problem, held, _ = cached(caches, own, dtype)
    if failed is not None and (not verdict.ok or problem is None):
        where = _q8_placed(run, step, eleven, quantized, reference, checkpoint, dtype)
        return run.add(Part("int8", FAIL, f"GPT2FlashQ8's decode steps differ from transformers on the same "
                            f"dequantised weights{_against(dtype)}: {verdict.summary}", failed[1] + where,
                            margin=verdict.margin))
    if problem is not None:
        return run.add(Part("int8", FAIL, f"GPT2FlashQ8's decode steps: {problem}"))
    return run.add(Part("int8", PASS, f"{NEW_TOKENS - 1} decode steps through GPT2FlashQ8 (every product int8) and "
                        f"{NEW_TOKENS} greedy ids match transformers on the same dequantised weights{_against(dtype)}: "
                        f"{verdict.summary}; your caches hold its keys and values, {held:.2f} of allowed",
                        margin=max(verdict.margin or 0.0, held)))
