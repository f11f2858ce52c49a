"""Step 12: the learner's encode, decode, next_token and generate.

The model they drive is the course's own GPT-2 (solutions 01-11), compiled
once, so this step is judged on its own logic. Parts:

  encode/decode    against the checkpoint's tokenizer
  greedy           NEW_TOKENS ids, equal to Hugging Face `generate`'s greedy ids
  top_k=1          sampling that may only pick the best token must be greedy
  seeded sampling  the same seed gives the same tokens, another seed others,
                   and every token is among the model's top_k at its step
  distribution     next_token's draws on fixed logits follow softmax(logits / T) over the top k
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from checker.compare import Mistake
from checker.learner import LearnerError
from checker.reference import NEW_TOKENS, PROMPT, activations, greedy_continuation
from checker.report import FAIL, PASS, Part, Report
from checker.runner import StepRun
from checker.weights import Checkpoint

DRAWS = 4000
TV_LIMIT = 0.05  # total variation distance allowed between the draws and the expected distribution
TEMPERATURE, TOP_K = 0.7, 10
CANDIDATES = 50  # next_token's distribution is tested on the model's 50 best logits


def tokenizer_of(checkpoint: Checkpoint):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(checkpoint.path / "tokenizer.json"))


def _model(checkpoint: Checkpoint):
    from checker.compiled import compile_gpt2
    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights

    return compile_gpt2(GPT2LMHeadModel, load_hf_weights, checkpoint)


def _last_logits(model, ids: list[int]) -> np.ndarray:
    from max.experimental.tensor import Tensor

    return np.from_dlpack(model(Tensor.from_dlpack(np.array([ids], dtype=np.int64))))[0, -1].astype(np.float64)


def _greedy_with(model, prompt: list[int], pick) -> list[int]:
    """A greedy continuation where `pick(logits [T, V], ids)` chooses each token: for named mistakes."""
    from max.experimental.tensor import Tensor

    ids, out = list(prompt), []
    for _ in range(NEW_TOKENS):
        logits = np.from_dlpack(model(Tensor.from_dlpack(np.array([ids], dtype=np.int64))))[0]
        ids.append(pick(logits, ids))
        out.append(ids[-1])
    return out


def _expected(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    z = logits / temperature
    if top_k is not None:
        z = np.where(z < np.sort(z)[-top_k], -np.inf, z)
    p = np.exp(z - z.max())
    return p / p.sum()


# Greedy mistakes: each computes the greedy continuation it would give, from the model and the prompt.
GREEDY_MISTAKES = [
    Mistake("greedy-first-position", "the first position's logits were used instead of the last's",
            "the next token comes from logits[0, -1], the last position",
            lambda model, prompt: _greedy_with(model, prompt, lambda z, ids: int(np.argmax(z[0])))),
    Mistake("greedy-argmin", "the smallest logit was picked (argmin)", "greedy picks the highest logit: np.argmax",
            lambda model, prompt: _greedy_with(model, prompt, lambda z, ids: int(np.argmin(z[-1])))),
    Mistake("greedy-not-fed-back", "the new tokens were not appended to the input: the model saw only the prompt",
            "append each new id to the sequence before the next call",
            lambda model, prompt: [int(np.argmax(_last_logits(model, prompt)))] * NEW_TOKENS),
]
TOP_K_IGNORED = Mistake("top-k-ignored", "top_k was not applied: tokens outside the k best can be drawn",
                        "set every logit below the k-th largest to -inf before the softmax")
# Distribution mistakes: each computes the distribution its draws follow, from the logits.
DISTRIBUTION_MISTAKES = [
    Mistake("temperature-multiplied", "the logits were multiplied by the temperature instead of divided",
            "logits / temperature: a low temperature sharpens the distribution",
            lambda z: _expected(z * TEMPERATURE * TEMPERATURE, TEMPERATURE, TOP_K)),
    Mistake("temperature-ignored", "the temperature was not applied", "divide the logits by the temperature",
            lambda z: _expected(z, 1.0, TOP_K)),
    dataclasses.replace(TOP_K_IGNORED, compute=lambda z: _expected(z, TEMPERATURE, None)),
]
SEED_IGNORED = Mistake("seed-ignored", "the same seed gave different tokens: the generator is not seeded",
                       "make one np.random.default_rng(seed) per generate call and draw from it")
SEED_FIXED = Mistake("seed-fixed", "seeds 0 and 1 gave the same tokens: the seed argument is not used",
                     "pass the seed argument to np.random.default_rng")
ENCODING_RETURNED = Mistake("encode-returns-encoding", "encode returned the tokenizer's Encoding object, not its ids",
                            "tokenizer.encode(text) returns an Encoding: its .ids are the token ids")
RAW_TOKENS = Mistake("decode-raw-tokens", "decode joined the BPE token strings (with Ġ for a space) "
                     "instead of decoding them to text", "tokenizer.decode(ids) turns byte-level tokens back into text")
CATALOGUE = [ENCODING_RETURNED, RAW_TOKENS, *GREEDY_MISTAKES, *DISTRIBUTION_MISTAKES, SEED_IGNORED, SEED_FIXED]


def prepare(checkpoint: Checkpoint) -> None:
    activations(checkpoint)
    greedy_continuation(checkpoint, tokenizer_of(checkpoint).encode(PROMPT).ids)


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    tokenizer = tokenizer_of(checkpoint)
    prompt = tokenizer.encode(PROMPT).ids
    want = greedy_continuation(checkpoint, prompt)
    run = StepRun("12", "encode, decode, next_token, generate", path, checkpoint,
                  f"prompt {PROMPT!r} ({len(prompt)} tokens), {NEW_TOKENS} new tokens; "
                  "the model is the course's own GPT-2, compiled",
                  ["encode/decode", "greedy", "top_k=1", "seeded sampling", "distribution"], timeout=timeout)
    step = run.import_step()
    fns = step and {name: run.need(step, name) for name in ("encode", "decode", "next_token", "generate")}
    if not fns or None in fns.values():
        return run.finish("needs encode, decode, next_token and generate")

    try:
        got_ids = run.call(fns["encode"], tokenizer, PROMPT)
        # The prompt and the expected continuation, less ids the tokenizer lacks (the synthetic
        # checkpoint's model has GPT-2's 50257 ids; its stand-in tokenizer has fewer).
        ids = prompt + [i for i in want if i < tokenizer.get_vocab_size()]
        text = run.call(fns["decode"], tokenizer, ids)
        wanted_text = tokenizer.decode(ids)
        if getattr(got_ids, "ids", None) == prompt:
            run.add(Part("encode/decode", FAIL, f"encode gave {type(got_ids).__name__}, not a list of ids",
                         mistake=ENCODING_RETURNED))
        elif list(got_ids) != prompt:
            run.add(Part("encode/decode", FAIL, f"encode gave {list(got_ids)[:8]}..., expected {prompt[:8]}..."))
        elif text != wanted_text:
            raw = "".join(tokenizer.id_to_token(i) for i in ids)
            run.add(Part("encode/decode", FAIL, f"decode gave {text[:40]!r}, expected {wanted_text[:40]!r}",
                         mistake=RAW_TOKENS if text == raw else None))
        else:
            run.add(Part("encode/decode", PASS, f"{len(prompt)} ids and back to the same text"))
    except LearnerError as e:
        run.add(Part.from_error("encode/decode", e))

    model = _model(checkpoint)
    generate = fns["generate"]

    def tokens(**kw) -> list[int]:
        def run_generate():
            made = generate(model, list(prompt), NEW_TOKENS, **kw)
            if made is None:
                raise LearnerError("generate returned None: it should `yield` each new token id")
            return list(made)

        return [int(t) for t in run.call(run_generate)]

    try:
        greedy = tokens()
        if greedy == want:
            run.add(Part("greedy", PASS, f"{NEW_TOKENS} ids equal Hugging Face generate's: {want[:6]}..."))
        else:
            mistake = next((m for m in GREEDY_MISTAKES if m.compute(model, prompt) == greedy), None)
            run.add(Part("greedy", FAIL, _first_difference(greedy, want), [] if mistake else
                         ["hint: feed the whole sequence so far, take logits[0, -1], pick np.argmax"], mistake))
    except LearnerError as e:
        run.add(Part.from_error("greedy", e))
        greedy = None

    try:
        top1 = tokens(temperature=0.8, top_k=1, seed=0)
        if top1 == want:
            run.add(Part("top_k=1", PASS, "equals greedy"))
        else:  # the same draws without top_k mean top_k changed nothing
            ignored = tokens(temperature=0.8, seed=0) == top1
            run.add(Part("top_k=1", FAIL, f"top_k=1 must pick the best token every time; {_first_difference(top1, want)}",
                         mistake=TOP_K_IGNORED if ignored else None))
    except LearnerError as e:
        run.add(Part.from_error("top_k=1", e))

    try:
        a, b, c = (tokens(temperature=1.5, top_k=40, seed=s) for s in (0, 0, 1))
        outside = [i for i, t in enumerate(a) if t not in np.argsort(_last_logits(model, prompt + a[:i]))[-40:]]
        if a != b:
            run.add(Part("seeded sampling", FAIL, "the same seed gave different tokens", mistake=SEED_IGNORED))
        elif a == c:
            run.add(Part("seeded sampling", FAIL, "seeds 0 and 1 gave the same tokens", mistake=SEED_FIXED))
        elif outside:
            run.add(Part("seeded sampling", FAIL, f"token {outside[0]} is not among the model's top 40"))
        else:
            run.add(Part("seeded sampling", PASS, "reproducible per seed, different across seeds, always in the top 40"))
    except LearnerError as e:
        run.add(Part.from_error("seeded sampling", e))

    run.add(_distribution_part(run, fns["next_token"], _last_logits(model, prompt)))
    return run.finish()


def _first_difference(got: list[int], want: list[int]) -> str:
    if len(got) != len(want):
        return f"{len(got)} tokens, expected {len(want)}"
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return f"token {i} is {got[i]}, Hugging Face's is {want[i]} (the first {i} match)"


def _distribution_part(run: StepRun, next_token, logits: np.ndarray) -> Part:
    name = "distribution"
    logits = np.sort(logits)[-CANDIDATES:]  # the model's best few: enough to test, fast to draw from
    rng = np.random.default_rng(0)
    try:
        draws = run.call(lambda: [int(next_token(logits, temperature=TEMPERATURE, top_k=TOP_K, rng=rng))
                                  for _ in range(DRAWS)])
    except LearnerError as e:
        return Part.from_error(name, e)
    seen = np.bincount(draws, minlength=len(logits)) / DRAWS
    expected = _expected(logits, TEMPERATURE, TOP_K)
    tv = 0.5 * np.abs(seen - expected).sum()
    setting = f"{DRAWS} draws from {CANDIDATES} logits at T={TEMPERATURE}, top_k={TOP_K}"
    if tv <= TV_LIMIT:
        return Part(name, PASS, f"{setting}: total variation {tv:.3f} <= {TV_LIMIT}")
    mistake = next((m for m in DISTRIBUTION_MISTAKES if 0.5 * np.abs(seen - m.compute(logits)).sum() <= TV_LIMIT), None)
    return Part(name, FAIL, f"{setting}: total variation {tv:.3f} > {TV_LIMIT} from softmax(logits / T) over the top k",
                mistake=mistake)
