"""Step 18's served part: the learner's GPT2PagedQ8 under a real `max serve` on 127.0.0.1 (`serve --fast`), held
to transformers on the same dequantised weights (its products rounded as matmul_q8 rounds: step18.rounded):
CONCURRENT requests of different lengths at once, each token for token (a rounding model: up to ties float32's
noise decides), then step 14's serving checks (streaming, echo with logprobs, generated logprobs, refusals).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from checker.reporting.report import Part
from checker.steps.step14.served import (
    NEW_TOKENS,
    PROMPTS,
    Held,
    greedy_reference,
    held_paths,
    served_part,
    serving_checks,
)
from checker.steps.step16.decode import hf_with
from checker.steps.step18.rounded import held
from runtime.checkpoints import Checkpoint
from runtime.server import MODEL

# transformers is imported inside the functions that use it: importing it takes seconds.

CONCURRENT = 16
TIMED_TOKENS = 32  # new tokens per request of the timing report
SCALED = 1.5  # the timing report asks about the products when CONCURRENT streams make less than this x one's tokens/s


def prompts() -> list[str]:
    """CONCURRENT prompts of different lengths, 2 to ~40 tokens."""
    return [f"{PROMPTS[i % len(PROMPTS)]}{' and more' * i}" for i in range(CONCURRENT)]


def fast_checks(server, checkpoint: Checkpoint, rounding: str | None) -> list[tuple[str, bool, str]]:
    from transformers import AutoTokenizer

    hold: Held = held(checkpoint, rounding, hf_with(checkpoint))  # every product's weight dequantize(quantize(.))
    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    client = server.client()
    asked = prompts()
    expected, _ = greedy_reference(checkpoint, asked, NEW_TOKENS, hold.model)
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in expected]

    def complete(prompt: str) -> str:
        return client.completions.create(model=MODEL, prompt=prompt, max_tokens=NEW_TOKENS,
                                         temperature=0).choices[0].text

    with ThreadPoolExecutor(CONCURRENT) as pool:
        got = list(pool.map(complete, asked))
    wrong = [i for i, ids in enumerate(held_paths(checkpoint, hold, asked, got, expected)) if ids is None]
    first = (f"{CONCURRENT} concurrent requests of different lengths each equal transformers' greedy ids on the "
             f"same dequantised weights{hold.said()}", not wrong,
             "; ".join(f"request {i}: {got[i]!r} (expected {texts[i]!r})" for i in wrong[:4]))
    return [first, *serving_checks(server, checkpoint, hold)]


def speed(server) -> str:
    """Tokens/s of one request alone and of CONCURRENT at once (prompt included), told by `speed_said`."""
    client = server.client()

    def timed(asked: list[str]) -> float:
        def complete(prompt: str) -> int:
            return client.completions.create(model=MODEL, prompt=prompt, max_tokens=TIMED_TOKENS,
                                             temperature=0).usage.completion_tokens

        start = time.perf_counter()
        with ThreadPoolExecutor(len(asked)) as pool:
            made = sum(pool.map(complete, asked))
        return made / (time.perf_counter() - start)

    return speed_said(timed(prompts()[:1]), timed(prompts()))


def speed_said(alone: float, together: float) -> str:
    """The timing report from tokens/s alone and CONCURRENT at once: a batch's step reads each weight once for
    all its rows, so sixteen streams should make many times one's tokens/s; under SCALED x it asks why."""
    said = (f"one request alone {alone:.0f} tokens/s, {CONCURRENT} at once {together:.0f} tokens/s "
            f"({together / alone:.1f}x; {TIMED_TOKENS} new tokens each, the prompts' time included)")
    if together < SCALED * alone:
        said += (f"; under {SCALED}x, as if each row of x cost what a whole step costs. Either matmul_q8 reads each "
                 "weight from memory once per row of x, not once for all of them (one request alone is then fast, "
                 "sixteen hardly faster), or its arithmetic takes longer than the reading (one float at a time, "
                 "one request alone slow too): SIMD lanes and several rows of x for each weight loaded")
    return said


def fast_served_part(path: Path, checkpoint: Checkpoint, rounding: str | None = None) -> Part:
    """`rounding`: how matmul_q8 rounds x and w (a key of ROUNDINGS, None: not at all)."""
    return served_part(path, checkpoint, lambda server, checkpoint: fast_checks(server, checkpoint, rounding), speed)
