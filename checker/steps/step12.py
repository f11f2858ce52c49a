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
  distribution     next_token's draws follow softmax(logits / T) over the top k
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.reporting.compare import Mistake
from checker.running.learner import LearnerError
from checker.references.reference import NEW_TOKENS, PROMPT, activations, greedy_continuation
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.harness.runner import StepRun
from checker.references.weights import Checkpoint
from checker.registry import Step, register

VOCAB = 50257
EOS = 50256  # GPT-2's <|endoftext|>
# The distribution part: CANDIDATES logits spaced SLOPE apart, in a fixed shuffled order,
# sampled DRAWS times at TEMPERATURE with TOP_K. There, ignoring the temperature or
# multiplying by it moves the distribution by a total variation of 0.42 and 0.63 (0.32
# between the two); a right sampler's draws stay within 0.009 of it (99.9% of seeds),
# under a tenth of TV_LIMIT.
CANDIDATES, SLOPE, TEMPERATURE, TOP_K, DRAWS, TV_LIMIT = 50, 0.5, 0.3, 10, 20_000, 0.1
SPREAD = -SLOPE * np.random.default_rng(12).permutation(CANDIDATES).astype(np.float64)
# The top_k part: ten logits almost tied, the eleventh just below them (it would get ~9%).
NEAR_TIE = -np.concatenate([np.linspace(0.0, 0.09, TOP_K), 0.1 + 0.3 * np.arange(CANDIDATES - TOP_K)])
TOP_K_DRAWS = 2000
EOS_SCRIPT = [11, 12, EOS, 13, 14, 15, 16, 17]  # what greedy picks at each step of the eos part


def tokenizer_of(checkpoint: Checkpoint):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(checkpoint.path / "tokenizer.json"))


def _model(checkpoint: Checkpoint):
    from checker.diagnosis.compiled import compile_gpt2, load_gpt2
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


def _one_hot_row(token: int) -> np.ndarray:
    row = np.full(VOCAB, -1e4, dtype=np.float32)
    row[token] = 0.0
    return row


def _expected(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    z = logits / temperature
    if top_k is not None:
        z = np.where(z < np.sort(z)[-top_k], -np.inf, z)
    p = np.exp(z - z.max())
    return p / p.sum()


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


# Greedy mistakes: each computes the greedy continuation it would give, from the model and the prompt.
GREEDY_MISTAKES = [
    Mistake("greedy-first-position", "the first position's logits were used instead of the last's",
            "the next token comes from logits[0, -1], the last position",
            lambda model, prompt: _greedy_with(model, prompt, lambda z, ids: int(np.argmax(z[0])))),
    Mistake("greedy-argmin", "the smallest logit was picked (argmin)", "greedy picks the highest logit: np.argmax",
            lambda model, prompt: _greedy_with(model, prompt, lambda z, ids: int(np.argmax(-z[-1])))),
    Mistake("greedy-not-fed-back", "the new tokens were not appended to the input: the model saw only the prompt",
            "append each new id to the sequence before the next call",
            lambda model, prompt: [int(np.argmax(_last_logits(model, prompt)))] * NEW_TOKENS),
]
EOS_IGNORED = Mistake("eos-ignored", "generation went on after yielding eos_token_id",
                      "after yielding a token equal to eos_token_id, return")
EOS_NOT_YIELDED = Mistake("eos-not-yielded", "generation stopped before yielding eos_token_id",
                          "yield the eos token itself, then stop: the caller sees why generation ended")
TOP_K_IGNORED = Mistake("top-k-ignored", "top_k was not applied: tokens outside the k best can be drawn",
                        "set every logit below the k-th largest to -inf before the softmax")
TOP_K_PLUS_ONE = Mistake("top-k-plus-one", "top_k kept k + 1 tokens: the (k+1)-th best was drawn too",
                         "np.sort(logits)[-top_k] is the k-th largest; keep the logits >= it")
TOP_K_MINUS_ONE = Mistake("top-k-minus-one", "top_k kept k - 1 tokens: the k-th best was never drawn",
                          "np.sort(logits)[-top_k] is the k-th largest; keep the logits >= it, not > it")
TOP_K_REVERSED = Mistake("top-k-reversed", "top_k kept the k lowest logits instead of the k highest",
                         "np.argsort sorts ascending: the k largest are its last k")


def _kept(z: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """softmax(z) over the ids in `keep` only."""
    p = np.zeros(len(z))
    p[keep] = np.exp(z[keep] - z[keep].max())
    return p / p.sum()


# top_k mistakes: each computes the distribution its draws follow, from the logits and k (T = 1).
TOP_K_MISTAKES = [
    (TOP_K_IGNORED, lambda z, k: _kept(z, np.arange(len(z)))),
    (TOP_K_PLUS_ONE, lambda z, k: _kept(z, np.argsort(z)[-(k + 1):])),
    (TOP_K_MINUS_ONE, lambda z, k: _kept(z, np.argsort(z)[-(k - 1):])),
    (TOP_K_REVERSED, lambda z, k: _kept(z, np.argsort(z)[:k])),
]
# Distribution mistakes: each computes the distribution its draws follow, from the logits (and top_k).
DISTRIBUTION_MISTAKES = [
    Mistake("temperature-multiplied", "the logits were multiplied by the temperature instead of divided",
            "logits / temperature: a low temperature sharpens the distribution",
            lambda z, top_k=TOP_K: _expected(z * TEMPERATURE * TEMPERATURE, TEMPERATURE, top_k)),
    Mistake("temperature-ignored", "the temperature was not applied", "divide the logits by the temperature",
            lambda z, top_k=TOP_K: _expected(z, 1.0, top_k)),
]
SEED_IGNORED = Mistake("seed-ignored", "the same seed gave different tokens: the generator is not seeded",
                       "make one np.random.default_rng(seed) per generate call and draw from it")
SEED_FIXED = Mistake("seed-fixed", "seeds 0 and 1 gave the same tokens: the seed argument is not used",
                     "pass the seed argument to np.random.default_rng")
SEED_PER_TOKEN = Mistake("seed-per-token", "every token was the same: the generator is made again from the seed "
                         "for each token, so each draw is the seed's first", "make the generator once, before "
                         "the loop, and draw every token from it")
ENCODING_RETURNED = Mistake("encode-returns-encoding", "encode returned the tokenizer's Encoding object, not its ids",
                            "tokenizer.encode(text) returns an Encoding: its .ids are the token ids")
RAW_TOKENS = Mistake("decode-raw-tokens", "decode joined the BPE token strings (with Ġ for a space) "
                     "instead of decoding them to text", "tokenizer.decode(ids) turns byte-level tokens back into text")
CATALOGUE = [ENCODING_RETURNED, RAW_TOKENS, *GREEDY_MISTAKES, EOS_IGNORED, EOS_NOT_YIELDED, TOP_K_IGNORED,
             TOP_K_PLUS_ONE, TOP_K_MINUS_ONE, TOP_K_REVERSED, *DISTRIBUTION_MISTAKES, SEED_IGNORED, SEED_FIXED, SEED_PER_TOKEN]
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
    if step and follows_book(step):
        return _check_book(run, step, checkpoint, prompt, want)
    fns = step and {name: run.need(step, name) for name in ("encode", "decode", "next_token", "generate")}
    if not fns or None in fns.values():
        return run.finish("needs encode, decode, next_token and generate")

    run.add(_encode_decode_part(run, fns["encode"], fns["decode"], tokenizer, prompt, want))
    generate = fns["generate"]

    def tokens(model, ids, n, **kw) -> list[int]:
        def run_generate():
            made = generate(model, list(ids), n, **kw)
            if made is None:
                raise LearnerError("generate returned None: it should `yield` each new token id")
            return list(made)

        return [int(t) for t in run.call(run_generate)]

    model = _model(checkpoint)
    for name, part in (("greedy", lambda: _greedy_part(tokens, model, prompt, want)),
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
    return Part(name, PASS, f"{len(prompt)} ids and back to the same text", margin=0.0)


def _greedy_part(tokens, model, prompt: list[int], want: list[int]) -> Part:
    greedy = tokens(model, prompt, NEW_TOKENS)
    if greedy == want:
        return Part("greedy", PASS, f"{NEW_TOKENS} ids equal Hugging Face generate's: {want[:6]}...", margin=0.0)
    mistake = next((m for m in GREEDY_MISTAKES if m.compute(model, prompt) == greedy), None)
    return Part("greedy", FAIL, first_difference(greedy, want),
                [] if mistake else ["hint: feed the whole sequence so far, take logits[0, -1], pick np.argmax"], mistake)


def eos_part(tokens, prompt: list[int], scripted_class=None) -> Part:
    """Greedy on a script whose third pick is EOS: with eos_token_id it must stop right after it."""
    n = len(EOS_SCRIPT)
    scripted = (scripted_class or ScriptedModel)(len(prompt), lambda i: _one_hot_row(EOS_SCRIPT[min(i, n - 1)]))
    stopped = tokens(scripted, prompt, n, eos_token_id=EOS)
    want = EOS_SCRIPT[:EOS_SCRIPT.index(EOS) + 1]
    if stopped == want:
        going = tokens(scripted, prompt, n)
        if going == EOS_SCRIPT:
            return Part("eos", PASS, f"stops right after yielding eos_token_id {EOS}: {want}; without it, "
                        f"all {n}", margin=0.0)
        return Part("eos", FAIL, f"with eos_token_id=None it gave {going}, expected all {n}: {EOS_SCRIPT}")
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


def first_difference(got: list[int], want: list[int]) -> str:
    if len(got) != len(want):
        return f"{len(got)} tokens, expected {len(want)}"
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    same = "the very first token differs" if i == 0 else f"tokens 0-{i - 1} match" if i > 1 else "token 0 matches"
    return f"{same}; token {i} is {got[i]}, expected {want[i]}"


def _draws(run: StepRun, next_token, logits: np.ndarray, n: int, temperature: float, top_k: int) -> list[int]:
    rng = np.random.default_rng(0)
    return run.call(lambda: [int(next_token(logits.copy(), temperature=temperature, top_k=top_k, rng=rng))
                             for _ in range(n)])


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
    right = _kept(np.sort(NEAR_TIE)[::-1], np.arange(TOP_K))
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
        draws = _draws(run, next_token, SPREAD, DRAWS, TEMPERATURE, TOP_K)
    except LearnerError as e:
        return Part.from_error("distribution", e)
    return _scored(draws, "next_token", f"{DRAWS} draws from {CANDIDATES} spread logits at T={TEMPERATURE}, "
                   f"top_k={TOP_K}", TOP_K, TV_LIMIT)


def _scored(draws: list[int], who: str, setting: str, top_k: int | None, limit: float) -> Part:
    """The "distribution" part: `who`'s draws from SPREAD at TEMPERATURE against softmax(logits / T)
    over the top_k (every logit when None), by total variation; a failure names the closest
    distribution mistake when it lies within `limit`."""
    name = "distribution"
    if any(not 0 <= t < CANDIDATES for t in draws):
        bad = next(t for t in draws if not 0 <= t < CANDIDATES)
        return Part(name, FAIL, f"{who} returned {bad} for {CANDIDATES} logits: return an index into them")
    seen = np.bincount(draws, minlength=CANDIDATES) / len(draws)
    tv = 0.5 * np.abs(seen - _expected(SPREAD, TEMPERATURE, top_k)).sum()
    if tv <= limit:
        return Part(name, PASS, f"{setting}: total variation {tv:.3f}, {tv / limit:.2f} of the allowed {limit}",
                    margin=float(tv / limit))
    distance, closest = min((0.5 * np.abs(seen - m.compute(SPREAD, top_k)).sum(), i)
                            for i, m in enumerate(DISTRIBUTION_MISTAKES))
    over = " over the top k" if top_k is not None else ""
    return Part(name, FAIL, f"{setting}: total variation {tv:.3f} > {limit} from softmax(logits / T){over}",
                mistake=DISTRIBUTION_MISTAKES[closest] if distance <= limit else None, margin=float(tv / limit))


# The online book's step 12 (Jan 2026): generate_next_token(model, input_ids, temperature, do_sample)
# and generate_tokens(model, input_ids, max_new_tokens, temperature, do_sample), ids as a [1, T]
# Tensor, sampling with numpy's global generator; no tokenizer, eos, top_k or seed in the contract.
BOOK = ("generate_tokens", "generate_next_token and generate_tokens on a [1, T] Tensor of ids, sampling "
        "with numpy's global generator (no encode/decode, eos, top_k or seed in its contract)")
BOOK_PARTS = ["greedy", "distribution"]


def follows_book(module) -> bool:
    """The file defines the online book's step 12 (generate_tokens), not this course's generate."""
    return not hasattr(module, "generate") and hasattr(module, BOOK[0])
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

    model = _model(checkpoint)
    try:
        out = ids_of(run.call(generate_tokens, model, Tensor.from_dlpack(np.array([prompt], dtype=np.int64)),
                              max_new_tokens=NEW_TOKENS, do_sample=False), "generate_tokens")
        greedy = out[len(prompt):]
        if out[:len(prompt)] != prompt:
            run.add(Part("greedy", FAIL, "generate_tokens' result does not start with the prompt: return the "
                         "prompt's ids followed by the new ones, [1, T + max_new_tokens]"))
        else:
            run.add(_greedy_part(lambda *a, **k: greedy, model, prompt, want))
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
    run.add(_scored(draws, "generate_next_token", f"{BOOK_DRAWS} draws of generate_next_token from {CANDIDATES} "
                    f"spread logits at T={TEMPERATURE}", None, BOOK_TV_LIMIT))
    return run.finish()


register(Step("12", check, CATALOGUE,
              reads=("generate", "next_token", "generate_tokens", "generate_next_token"), prepare=prepare))
