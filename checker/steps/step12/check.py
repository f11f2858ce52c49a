"""Step 12: the learner's encode, decode, next_token and generate.

Only the greedy part drives a real GPT-2: the course's own (solutions 01-11),
compiled once, so this step is judged on its own logic. Every sampling part
drives a scripted model instead, whose logits are chosen to be spread (a
trained GPT-2's are often so peaked that sampling is greedy in all but name,
and then a sampler's mistakes cannot show). Parts:

  encode/decode    against the checkpoint's tokenizer
  greedy           NEW_TOKENS ids, equal to Hugging Face `generate`'s greedy ids
  eos              generation stops right after yielding eos_token_id, and only then
  top_k            next_token draws each of the k best and never another, even when the next one is close
  top_k=1          sampling that may only pick the best token must be greedy
  seeded sampling  the same seed gives the same tokens, another seed others, one
                   generator serves the whole generation, every token is in the top_k
  distribution     next_token's draws follow softmax(logits / T) over the top k, on logits far below 0
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.harness.runner import StepRun
from checker.references.reference import (
    NEW_TOKENS,
    PROMPT,
    activations,
    greedy_continuation,
)
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.steps.step12.mistakes import (
    DISTRIBUTION_MISTAKES,
    ENCODING_RETURNED,
    EOS_IGNORED,
    EOS_NOT_YIELDED,
    GREEDY_MISTAKES,
    RAW_TOKENS,
    SEED_FIXED,
    SEED_IGNORED,
    SEED_PER_TOKEN,
    TOP_K_IGNORED,
    TOP_K_MISTAKES,
    TOP_K_PLUS_ONE,
    TOP_K_REVERSED,
)
from checker.steps.step12.reference import (
    CANDIDATES,
    DRAWS,
    EOS,
    EOS_SCRIPT,
    LOW,
    NEAR_TIE,
    SPREAD,
    TEMPERATURE,
    TOP_K,
    TOP_K_DRAWS,
    TV_LIMIT,
    VOCAB,
    expected,
    softmax_over,
)
from runtime.checkpoints import Checkpoint
from runtime.compiling import compile_gpt2, load_gpt2
from runtime.learner import LearnerError
from runtime.online_book import GENERATE, generate_follows_book
from runtime.tokenizer import tokenizer_of

# MAX and the solutions (which import MAX) are imported inside the functions that use them: importing them
# takes seconds.


def _one_hot_row(token: int) -> np.ndarray:
    row = np.full(VOCAB, -1e4, dtype=np.float32)
    row[token] = 0.0
    return row


def compiled_solution(checkpoint: Checkpoint):
    """The course's GPT-2 (solutions 11) on `checkpoint`, compiled: the model the sampling parts call."""
    from solutions.solution_11 import GPT2LMHeadModel, load_hf_weights

    return compile_gpt2(load_gpt2(GPT2LMHeadModel, load_hf_weights, checkpoint))


class ScriptedModel:
    """Stands in for a compiled GPT-2: ids [1, T] -> logits [1, T, VOCAB], float32.

    The last position's logits are `row(n)`, n the number of tokens after the
    prompt (placed at ids 0..len-1 of the vocabulary, every other id at -1e4);
    the earlier positions are 0.
    """

    def __init__(self, prompt_length: int, row):
        self.prompt_length, self.row, self.calls = prompt_length, row, 0

    def __call__(self, ids):
        from max.experimental.tensor import Tensor

        self.calls += 1
        T = (np.shape(ids) if isinstance(ids, (list, tuple, np.ndarray)) else np.from_dlpack(ids).shape)[-1]
        logits = np.zeros((1, T, VOCAB), dtype=np.float32)
        logits[0, -1] = -1e4
        row = self.row(T - self.prompt_length)
        logits[0, -1, :len(row)] = row
        return Tensor.from_dlpack(logits)


# top_k (next_token alone, its draws compared with what each top_k mistake computes) comes before the
# parts that sample through generate, so the first failing part is the one that can name a top_k mistake.
PARTS = ["encode/decode", "greedy", "eos", "top_k", "top_k=1", "seeded sampling", "distribution"]


def prepare(checkpoint: Checkpoint) -> None:
    activations(checkpoint)
    greedy_continuation(checkpoint, tokenizer_of(checkpoint).encode(PROMPT).ids)


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    tokenizer = tokenizer_of(checkpoint)
    prompt = tokenizer.encode(PROMPT).ids
    want = greedy_continuation(checkpoint, prompt)
    run = StepRun("12", "encode, decode, next_token, generate", path, checkpoint,
                  f"prompt {PROMPT!r} ({len(prompt)} tokens), {NEW_TOKENS} new tokens; greedy on the course's "
                  "own GPT-2, compiled; sampling on scripted logits that are spread", PARTS, timeout=timeout)
    step = run.import_step()
    if step and generate_follows_book(step):
        return _check_book(run, step, checkpoint, prompt, want)
    fns = step and {name: run.need(step, name) for name in ("encode", "decode", "next_token", "generate")}
    if not fns or None in fns.values():
        return run.finish("needs encode, decode, next_token and generate")

    run.add(_encode_decode_part(run, fns["encode"], fns["decode"], tokenizer, prompt, want))
    generate = fns["generate"]

    tokens = generation(run, "generate", lambda model, ids, n, **kw: generate(model, ids, n, **kw))
    model = compiled_solution(checkpoint)
    for name, part in (("greedy", lambda: greedy_part(tokens, model, prompt, want)),
                       ("eos", lambda: eos_part(tokens, prompt)),
                       ("top_k=1", lambda: _top1_part(tokens, prompt)),
                       ("seeded sampling", lambda: seeded_part(tokens, prompt))):
        try:
            run.add(part())
        except LearnerError as e:
            run.add(Part.from_error(name, e))
    run.add(_top_k_part(run, fns["next_token"]))
    run.add(_distribution_part(run, fns["next_token"]))
    return run.finish()


def generation(run: StepRun, name: str, generate):
    """tokens(model, ids, n, **kw): the ids `generate(model, ids, n, **kw)` yields, run as the learner's code;
    a LearnerError when it returns None or changes the caller's list of ids."""

    def tokens(model, ids, n, **kw) -> list[int]:
        def run_generate():
            given = list(ids)
            made = generate(model, given, n, **kw)
            if made is None:
                raise LearnerError(f"{name} returned None: it should `yield` each new token id")
            out = list(made)
            if given != list(ids):
                raise LearnerError(f"{name} changed the list of ids it was given (the caller's prompt, "
                                   f"{len(ids)} ids, now {len(given)}): build its own (ids = list(input_ids))")
            return out

        return [int(t) for t in run.call(run_generate)]

    return tokens


WIDE = "Café 🐱 naïve"  # characters of 2 and 4 bytes, some split across tokens


def _encode_decode_part(run: StepRun, encode, decode, tokenizer, prompt: list[int], want: list[int]) -> Part:
    name = "encode/decode"
    try:
        got_ids = run.call(encode, tokenizer, PROMPT)
        # The prompt and the expected continuation, less ids the tokenizer lacks (the stand-in
        # checkpoints' models have GPT-2's 50257 ids; their tokenizer has fewer).
        ids = prompt + [i for i in want if i < tokenizer.get_vocab_size()]
        text = run.call(decode, tokenizer, ids)
    except LearnerError as e:
        return Part.from_error(name, e)
    wanted_text = tokenizer.decode(ids)
    if getattr(got_ids, "ids", None) == prompt:
        return Part(name, FAIL, f"encode gave {type(got_ids).__name__}, not a list of ids", mistake=ENCODING_RETURNED)
    if list(got_ids) != prompt:
        return Part(name, FAIL, f"encode gave {list(got_ids)[:8]}..., expected {prompt[:8]}...")
    if text != wanted_text:
        raw = "".join(tokenizer.id_to_token(i) for i in ids)
        return Part(name, FAIL, f"decode gave {text[:40]!r}, expected {wanted_text[:40]!r}",
                    mistake=RAW_TOKENS if text == raw else None)
    wide = [i for i in tokenizer.encode(WIDE).ids if i < tokenizer.get_vocab_size()]
    try:
        text = run.call(decode, tokenizer, wide)
    except LearnerError as e:
        return Part.from_error(name, e)
    if text != (wanted_text := tokenizer.decode(wide)):
        return Part(name, FAIL, f"decode of {WIDE!r}'s {len(wide)} ids gave {text!r}, expected {wanted_text!r}: a "
                    "character of more than one byte can take more than one token, whose bytes are a character only "
                    "together: decode the whole list at once")
    return Part(name, PASS, f"{len(prompt)} ids and back to the same text; {WIDE!r} too", margin=0.0)


def greedy_part(tokens, model, prompt: list[int], want: list[int]) -> Part:
    greedy = tokens(model, prompt, NEW_TOKENS)
    if greedy == want:
        return Part("greedy", PASS, f"{NEW_TOKENS} ids equal Hugging Face generate's: {want[:6]}...", margin=0.0)
    mistake = next((m for m in GREEDY_MISTAKES if m.compute(model, prompt) == greedy), None)
    counted = len(greedy) != len(want) and _one_starts_the_other(greedy, want)
    return Part("greedy", FAIL, first_difference(greedy, want, len(prompt)),
                [] if mistake or counted else ["hint: feed the whole sequence so far, take logits[0, -1], pick "
                                               "np.argmax"], mistake)


def eos_part(tokens, prompt: list[int], scripted_class=None) -> Part:
    """Greedy on a script whose third pick is EOS: with eos_token_id it must stop right after it."""
    n = len(EOS_SCRIPT)
    scripted = (scripted_class or ScriptedModel)(len(prompt), lambda i: _one_hot_row(EOS_SCRIPT[min(i, n - 1)]))
    stopped = tokens(scripted, prompt, n, eos_token_id=EOS)
    want = EOS_SCRIPT[:EOS_SCRIPT.index(EOS) + 1]
    if stopped == want:
        going = tokens(scripted, prompt, n)
        if going != EOS_SCRIPT:
            return Part("eos", FAIL, f"with eos_token_id=None it gave {going}, expected all {n}: {EOS_SCRIPT}")
        # Id 0 as the eos (GPT-NeoX's <|endoftext|>) is an eos too: `if eos_token_id and ...` takes it for none.
        zero = [0 if t == EOS else t for t in EOS_SCRIPT]
        scripted = (scripted_class or ScriptedModel)(len(prompt), lambda i: _one_hot_row(zero[min(i, n - 1)]))
        if (at_zero := tokens(scripted, prompt, n, eos_token_id=0)) != zero[:len(want)]:
            return Part("eos", FAIL, f"with eos_token_id=0 it gave {at_zero}, expected {zero[:len(want)]}: id 0 is "
                        "an eos like any other, and a test of eos_token_id's truth (`if eos_token_id and ...`) "
                        "takes 0 for none: test `is not None`")
        return Part("eos", PASS, f"stops right after yielding eos_token_id {EOS} (and 0): {want}; without it, "
                    f"all {n}", margin=0.0)
    mistake = EOS_IGNORED if stopped[:len(want)] == want else EOS_NOT_YIELDED if stopped == want[:-1] else None
    return Part("eos", FAIL, f"greedy picks {EOS_SCRIPT[:4]}... ({EOS} is eos_token_id): it gave {stopped}, "
                f"expected {want}", mistake=mistake)


def _top1_part(tokens, prompt: list[int], scripted_class=None) -> Part:
    """top_k=1 on spread logits (a different order at each step) must pick the best token every time."""
    scripted = (scripted_class or ScriptedModel)(len(prompt), lambda i: np.roll(SPREAD, i))
    best = [int(np.argmax(np.roll(SPREAD, i))) for i in range(NEW_TOKENS)]
    got = tokens(scripted, prompt, NEW_TOKENS, temperature=1.0, top_k=1, seed=0)
    if got == best:
        return Part("top_k=1", PASS, f"{NEW_TOKENS} tokens from spread logits, each the best one", margin=0.0)
    second = [int(np.argsort(np.roll(SPREAD, i))[-2]) for i in range(NEW_TOKENS)]
    worst = [int(np.argmin(np.roll(SPREAD, i))) for i in range(NEW_TOKENS)]
    if len(got) != len(best):
        mistake = None
    elif got == worst:
        mistake = TOP_K_REVERSED  # the one lowest logit, every time
    elif all(g in (b, s) for g, b, s in zip(got, best, second)):
        mistake = TOP_K_PLUS_ONE  # every token one of the two best
    else:  # the same draws without top_k: top_k changed nothing
        mistake = TOP_K_IGNORED if tokens(scripted, prompt, NEW_TOKENS, temperature=1.0, seed=0) == got else None
    return Part("top_k=1", FAIL, f"top_k=1 must pick the best token every time; {first_difference(got, best)}",
                mistake=mistake)


def seeded_part(tokens, prompt: list[int], scripted_class=None) -> Part:
    """Sampling on constant spread logits: reproducible per seed, one generator per call, in the top_k."""
    name, k = "seeded sampling", 40
    scripted = (scripted_class or ScriptedModel)(len(prompt), lambda i: SPREAD)
    a, b, c = (tokens(scripted, prompt, NEW_TOKENS, temperature=1.0, top_k=k, seed=s) for s in (0, 0, 1))
    allowed = set(np.argsort(SPREAD)[-k:].tolist())
    setting = f"{NEW_TOKENS} tokens from the same {CANDIDATES} spread logits, T=1, top_k={k}"
    if a != b:
        return Part(name, FAIL, f"{setting}: the same seed gave different tokens", mistake=SEED_IGNORED)
    if set(a) == set(c) == {int(np.argmax(SPREAD))}:
        return Part(name, FAIL, f"{setting}: with seeds 0 and 1 every token was {a[0]}, the best logit: sampling "
                    "took the argmax instead of drawing")
    if len(set(a)) == 1:  # not computed (how the learner draws is theirs): said as "looks like", and why
        return Part(name, FAIL, f"{setting}: every token was {a[0]}, and seed 1 gave {c[0]}"
                    f"{' every time' if len(set(c)) == 1 else ' first'}: looks like one draw repeated per seed",
                    mistake=SEED_PER_TOKEN)
    if a == c:
        return Part(name, FAIL, f"{setting}: seeds 0 and 1 gave the same tokens", mistake=SEED_FIXED)
    outside = [t for t in a if t not in allowed]
    if outside:
        t = outside[0]
        rank = (f"rank {int((SPREAD > SPREAD[t]).sum()) + 1}, 1 = the best logit" if t < CANDIDATES
                else "its logit is -1e4, among the lowest")
        return Part(name, FAIL, f"{setting}: token {t} ({rank}) is not among the {k} best; the top_k part says "
                    "how top_k keeps tokens")
    return Part(name, PASS, f"{setting}: reproducible per seed, different across seeds, all in the top {k}",
                margin=0.0)


def _one_starts_the_other(got: list[int], want: list[int]) -> bool:
    """Whether the shorter of the two lists of ids is where the longer starts."""
    n = min(len(got), len(want))
    return got[:n] == want[:n]


def first_difference(got: list[int], want: list[int], prompt_length: int | None = None) -> str:
    """Where generated ids part from the expected ones; a count that is off by the prompt's length is said so."""
    if len(got) != len(want):
        said = f"{len(got)} tokens, expected {len(want)}"
        if (n := min(len(got), len(want))) and _one_starts_the_other(got, want):
            said += f"; the {n} {'it gave' if n == len(got) else 'expected'} match"
        if prompt_length and abs(len(got) - len(want)) == prompt_length:
            said += (f": {'fewer' if len(got) < len(want) else 'more'} by the prompt's length ({prompt_length}), "
                     "as a loop counting the whole sequence, not the new tokens, would make")
        return said
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    same = "the very first token differs" if i == 0 else f"tokens 0-{i - 1} match" if i > 1 else "token 0 matches"
    return f"{same}; token {i} is {got[i]}, expected {want[i]}"


def _draws(run: StepRun, next_token, logits: np.ndarray, n: int, temperature: float, top_k: int) -> list[int]:
    rng = np.random.default_rng(0)
    return run.call(lambda: [int(next_token(logits.copy(), temperature=temperature, top_k=top_k, rng=rng))
                             for _ in range(n)])


def _draws_on(run: StepRun, next_token, logits: np.ndarray) -> bool:
    """Whether next_token draws from `logits` (a few times, the distribution part's T and top_k) without raising."""
    try:
        _draws(run, next_token, logits, 10, TEMPERATURE, TOP_K)
    except LearnerError:
        return False
    return True


def _top_k_part(run: StepRun, next_token) -> Part:
    """Ten near-tied logits and an eleventh just below: top_k=10 must never draw the eleventh."""
    name = "top_k"
    try:
        draws = _draws(run, next_token, NEAR_TIE, TOP_K_DRAWS, 1.0, TOP_K)
    except LearnerError as e:
        return Part.from_error(name, e)
    rank = {int(t): r for r, t in enumerate(np.argsort(-NEAR_TIE))}
    ranks = [rank.get(t, CANDIDATES) for t in draws]  # an id outside the logits counts as the worst
    setting = f"{TOP_K_DRAWS} draws, top_k={TOP_K}, the {TOP_K + 1}th logit 0.01 below the {TOP_K}th"
    seen = np.bincount(ranks, minlength=CANDIDATES + 1)[:CANDIDATES] / len(ranks)  # by rank, 0 = the best
    right = softmax_over(np.sort(NEAR_TIE)[::-1], np.arange(TOP_K))
    if set(ranks) == set(range(TOP_K)):  # each of the k best has ~10%: in 2000 draws none is missed by chance
        return Part(name, PASS, f"{setting}: only the {TOP_K} best were drawn, each of them", margin=0.0)
    drawn = sorted(set(ranks))
    kept = (f"ranks {drawn[0] + 1}-{drawn[-1] + 1}" if drawn == list(range(drawn[0], drawn[-1] + 1))
            else f"{len(drawn)} ranks from {drawn[0] + 1} to {drawn[-1] + 1}") + " (1 = the best logit)"
    if drawn[0] >= CANDIDATES - TOP_K:
        kept += f": the {TOP_K} lowest"
    outside = sum(r >= TOP_K for r in ranks)
    summary = (f"{setting}: {outside} draws were outside the {TOP_K} best; the drawn tokens are {kept}" if outside
               else f"{setting}: the drawn tokens are {kept}, expected all of ranks 1-{TOP_K}")
    by_rank = np.sort(NEAR_TIE)[::-1]
    distance, mistake = min((0.5 * np.abs(seen - compute(by_rank, TOP_K)).sum(), i)
                            for i, (m, compute) in enumerate(TOP_K_MISTAKES))
    named = distance <= TV_LIMIT / 2 and distance < 0.5 * np.abs(seen - right).sum()
    return Part(name, FAIL, summary, mistake=TOP_K_MISTAKES[mistake][0] if named else None)


def _distribution_part(run: StepRun, next_token) -> Part:
    try:
        draws = _draws(run, next_token, LOW, DRAWS, TEMPERATURE, TOP_K)
    except LearnerError as e:
        part = Part.from_error("distribution", e)
        if part.status == FAIL and _draws_on(run, next_token, SPREAD):  # the same logits 250 higher do not raise
            part.details.append(f"the logits were {CANDIDATES} spread float32 ones around -250: divided by T their "
                                "exp is 0, even in float64, unless the largest is subtracted first")
        return part
    return scored(draws, "next_token", f"{DRAWS} draws from {CANDIDATES} spread float32 logits around -250 at "
                  f"T={TEMPERATURE}, top_k={TOP_K}", TOP_K, TV_LIMIT)


def scored(draws: list[int], who: str, setting: str, top_k: int | None, limit: float) -> Part:
    """The "distribution" part: `who`'s draws from SPREAD (or LOW, the same less 250) at TEMPERATURE against
    softmax(logits / T) over the top_k (every logit when None), by total variation; a failure names the closest
    distribution mistake when it lies within `limit`."""
    name = "distribution"
    if any(not 0 <= t < CANDIDATES for t in draws):
        bad = next(t for t in draws if not 0 <= t < CANDIDATES)
        return Part(name, FAIL, f"{who} returned {bad} for {CANDIDATES} logits: return an index into them")
    seen = np.bincount(draws, minlength=CANDIDATES) / len(draws)
    tv = 0.5 * np.abs(seen - expected(SPREAD, TEMPERATURE, top_k)).sum()
    if tv <= limit:
        return Part(name, PASS, f"{setting}: total variation {tv:.3f}, {tv / limit:.2f} of the allowed {limit}",
                    margin=float(tv / limit))
    distance, closest = min((0.5 * np.abs(seen - m.compute(SPREAD, top_k)).sum(), i)
                            for i, m in enumerate(DISTRIBUTION_MISTAKES))
    over = " over the top k" if top_k is not None else ""
    named = DISTRIBUTION_MISTAKES[closest] if distance <= limit else None
    return Part(name, FAIL, f"{setting}: total variation {tv:.3f} > {limit} from softmax(logits / T){over}",
                [] if named else _ids_moved(seen, expected(SPREAD, TEMPERATURE, top_k), limit),
                mistake=named, margin=float(tv / limit))


def _ids_moved(seen: np.ndarray, want: np.ndarray, limit: float) -> list[str]:
    """When the draws' probabilities are the right ones, sorted, but on other ids: which logit ranks the most
    drawn ids have (1 = the best logit)."""
    if 0.5 * np.abs(np.sort(seen) - np.sort(want)).sum() > limit:
        return []
    rank = {t: int((SPREAD > SPREAD[t]).sum()) + 1 for t in range(CANDIDATES)}
    drawn = [rank[int(t)] for t in np.argsort(-seen, kind="stable")[:3]]
    return [f"the probabilities are the right ones, on other ids: the three most drawn are the logits ranked "
            f"{', '.join(map(str, drawn))} (expected 1, 2, 3): each probability goes with another id than its logit's "
            "(ids and logits sorted in different orders?)"]


BOOK = GENERATE  # the online book's step 12: generate_next_token and generate_tokens
BOOK_PARTS = ["greedy", "distribution"]


BOOK_DRAWS, BOOK_TV_LIMIT = 400, 0.15  # a right sampler's draws: TV ~0.02 (each draw costs ~10 ms here)


def _check_book(run: StepRun, step, checkpoint: Checkpoint, prompt: list[int], want: list[int]) -> Report:
    """The adapter: greedy through generate_tokens on the course's compiled GPT-2; the temperature
    through generate_next_token on the scripted spread logits, numpy's generator seeded by the check."""
    from max.experimental.tensor import Tensor

    run.contract(BOOK[1])
    run.names = BOOK_PARTS
    generate_tokens, generate_next_token = run.need(step, "generate_tokens"), run.need(step, "generate_next_token")
    if generate_next_token is None:
        return run.finish("needs generate_next_token")

    def ids_of(value, what: str) -> list[int]:
        if not isinstance(value, Tensor):
            raise LearnerError(f"{what} returned {type(value).__name__}, not a max Tensor")
        return [int(t) for t in np.from_dlpack(value).reshape(-1)]

    model = compiled_solution(checkpoint)
    try:
        out = ids_of(run.call(generate_tokens, model, Tensor.from_dlpack(np.array([prompt], dtype=np.int64)),
                              max_new_tokens=NEW_TOKENS, do_sample=False), "generate_tokens")
        greedy = out[len(prompt):]
        if out[:len(prompt)] != prompt:
            run.add(Part("greedy", FAIL, "generate_tokens' result does not start with the prompt: return the "
                         "prompt's ids followed by the new ones, [1, T + max_new_tokens]"))
        else:
            run.add(greedy_part(lambda *a, **k: greedy, model, prompt, want))
    except LearnerError as e:
        run.add(Part.from_error("greedy", e))

    scripted = ScriptedModel(len(prompt), lambda i: SPREAD)
    ids = Tensor.from_dlpack(np.array([prompt], dtype=np.int64))
    np.random.seed(0)
    try:
        draws = run.call(lambda: [ids_of(generate_next_token(scripted, ids, temperature=TEMPERATURE, do_sample=True),
                                         "generate_next_token")[0] for _ in range(BOOK_DRAWS)])
    except LearnerError as e:
        run.add(Part.from_error("distribution", e))
        return run.finish()
    run.add(scored(draws, "generate_next_token", f"{BOOK_DRAWS} draws of generate_next_token from {CANDIDATES} "
                    f"spread logits at T={TEMPERATURE}", None, BOOK_TV_LIMIT))
    return run.finish()
