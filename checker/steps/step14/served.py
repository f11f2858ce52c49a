"""Step 14's served part: the learner's model under a real `max serve` on 127.0.0.1, asked as OpenAI's
clients and evaluation harnesses ask it (greedy, streamed, concurrent, log-probabilities, refusals), each
answer against transformers'.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from checker.reporting.compare import DECODE, Tolerance, compare
from checker.reporting.report import FAIL, PASS, Part
from checker.steps.step14.reference import PAGED_LAYERS, hf_model
from runtime.checkpoints import Checkpoint
from runtime.learner import limit_hit
from runtime.server import MODEL, Server, ServerError, ServerTimeout, same_text

# torch, transformers and openai are imported inside the functions that use them: importing them takes seconds.

PROMPTS = ["Hello world, this is", "The model", "A longer prompt for the server, with more tokens in it"]
NEW_TOKENS = 8
CONCURRENT = 8
TOP_LOGPROBS = 3


@dataclass(frozen=True)
class Held:
    """What a server's answers are held to: transformers' `model` (None: the checkpoint's own), `tol` on
    log-probabilities, and `tie`: how far under the top logit a token may be and still be chosen (0: greedy
    token for token; a model whose products round gets the gap float32's noise moves its reference by)."""

    model: Any = None
    tol: Tolerance = DECODE
    tie: float = 0.0

    def said(self) -> str:
        return f", or a token within {self.tie:.2g} of the top logit (a tie that float32's noise decides)" \
            if self.tie else ""


def greedy_reference(checkpoint: Checkpoint, prompts: list[str], new_tokens: int, model=None):
    """transformers' greedy ids, the argmax taken over the tokenizer's ids (max serve's sampler masks
    the logits past the tokenizer's size: the stand-ins' tokenizers are smaller than the model), up to
    `new_tokens` or an end-of-text token, where max serve stops; with each chosen id's log-probability
    (log_softmax over the whole vocabulary, as max serve reports it). `model`: transformers' model to run
    (default: the checkpoint's own)."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    model = hf_model(checkpoint, None) if model is None else model
    stops = {tokenizer.eos_token_id, checkpoint.config().get("eos_token_id")}  # max serve stops at either
    out, logprobs = [], []
    for prompt in prompts:
        ids = torch.tensor([tokenizer(prompt)["input_ids"]])
        new, lps = [], []
        with torch.no_grad():
            while len(new) < new_tokens and not (new and new[-1] in stops):
                logits = model(ids).logits[0, -1].double()
                token = int(logits[:len(tokenizer)].argmax())
                new.append(token)
                lps.append(float(torch.log_softmax(logits, -1)[token]))
                ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
        out.append(new)
        logprobs.append(lps)
    return out, logprobs


def greedy_path(checkpoint: Checkpoint, held: Held, prompt: str, served: str, new_tokens: int) -> list[int] | None:
    """The ids a served text was decoded from if each was the reference's choice: its argmax over the
    tokenizer's ids, or a token within held.tie of it; up to `new_tokens` or a stop, as greedy_reference.
    None when no such ids decode to `served`."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    model = hf_model(checkpoint, None) if held.model is None else held.model
    stops = {tokenizer.eos_token_id, checkpoint.config().get("eos_token_id")}
    start = tokenizer(prompt)["input_ids"]

    def walk(new: list[int]) -> list[int] | None:
        if len(new) == new_tokens or (new and new[-1] in stops):
            return new if same_text(served, tokenizer.decode(new, skip_special_tokens=True)) else None
        with torch.no_grad():
            logits = model(torch.tensor([start + new])).logits[0, -1, :len(tokenizer)].double()
        for token in torch.argsort(logits, descending=True)[:int((logits >= logits.max() - held.tie).sum())]:
            ids = [*new, int(token)]
            if served.startswith(tokenizer.decode(ids, skip_special_tokens=True).rstrip("\ufffd")):
                if (found := walk(ids)) is not None:
                    return found
        return None

    return walk([])


def path_logprobs(checkpoint: Checkpoint, held: Held, prompt: str, new: list[int]) -> np.ndarray:
    """Each of the ids `new`'s log-probability after `prompt` and the ids before it (log_softmax over the
    whole vocabulary)."""
    import torch
    from transformers import AutoTokenizer

    start = AutoTokenizer.from_pretrained(checkpoint.path)(prompt)["input_ids"]
    model = hf_model(checkpoint, None) if held.model is None else held.model
    with torch.no_grad():
        lp = torch.log_softmax(model(torch.tensor([start + new])).logits[0].double(), -1).numpy()
    return np.array([lp[len(start) - 1 + i, token] for i, token in enumerate(new)])


def prompt_logprobs(checkpoint: Checkpoint, prompts: list[str], model=None) -> list[np.ndarray]:
    """Each prompt token's log-probability given the tokens before it (transformers' log_softmax), from
    the second token on: what `echo` with `logprobs` reports after its null for the first."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    model = hf_model(checkpoint, None) if model is None else model
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt)["input_ids"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1).numpy()
        out.append(np.array([lp[i - 1, ids[i]] for i in range(1, len(ids))]))
    return out


def _close_logprobs(got: list, want: list[np.ndarray], tol: Tolerance = DECODE) -> tuple[bool, str]:
    """Log-probabilities against transformers' under `tol` (DECODE: the model ran over a cache, one kernel
    per position): (ok, what to say)."""
    if [len(g) for g in got] != [len(w) for w in want] or any(x is None for g in got for x in g):
        return False, f"{[len(g) for g in got]} values per request, expected {[len(w) for w in want]}"
    verdict = compare(np.concatenate([np.array(g, dtype=np.float64) for g in got]), np.concatenate(want),
                      axes=("token",), mistakes=[], tol=tol)
    return verdict.ok, verdict.summary


def held_paths(checkpoint: Checkpoint, held: Held, prompts: list[str], got: list[str], expected: list[list[int]],
               new_tokens: int = NEW_TOKENS) -> list[list[int] | None]:
    """Per served text, the ids it was decoded from if held's reference could have chosen them: the greedy ids
    `expected` when the text is theirs, else (held.tie > 0) a path through near ties (greedy_path); else None."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    out = []
    for prompt, text, ids in zip(prompts, got, expected):
        if same_text(text, tokenizer.decode(ids, skip_special_tokens=True)):
            out.append(ids)
        else:
            out.append(greedy_path(checkpoint, held, prompt, text, new_tokens) if held.tie else None)
    return out


def serving_checks(server, checkpoint: Checkpoint, held: Held = Held()) -> list[tuple[str, bool, str]]:
    """Real requests against a running server: (what, ok, what came back) for each check, held to `held`
    (default: the checkpoint's own transformers model, greedy token for token, DECODE)."""
    from openai import APIStatusError
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    client, model, hf = server.client(), MODEL, held.model
    expected, expected_lps = greedy_reference(checkpoint, PROMPTS, NEW_TOKENS, hf)
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in expected]  # as max serve shows them

    def complete(prompt: str, n: int = NEW_TOKENS) -> str:
        return client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text

    results = []
    got = [complete(p) for p in PROMPTS]
    paths = held_paths(checkpoint, held, PROMPTS, got, expected)
    results.append((f"greedy completions of {len(PROMPTS)} prompts equal transformers' greedy ids{held.said()}",
                    None not in paths,
                    "; ".join(f"{g!r} (expected {t!r})" for g, t, p in zip(got, texts, paths) if p is None)))
    stream = client.completions.create(model=model, prompt=PROMPTS[0], max_tokens=NEW_TOKENS, temperature=0,
                                       stream=True)
    pieces = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    streamed = same_text(pieces, texts[0]) or bool(held.tie and pieces == got[0] and paths[0] is not None)
    results.append(("streaming returns the same tokens in order", streamed, f"{pieces!r}, expected {texts[0]!r}"))
    many = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(CONCURRENT)]
    lengths = [NEW_TOKENS - i % 3 for i in range(CONCURRENT)]
    alone = [complete(p, n) for p, n in zip(many, lengths)]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        together = list(pool.map(complete, many, lengths))
    crossed = [i for i, (a, b) in enumerate(zip(alone, together)) if a != b and not (
        held.tie and greedy_path(checkpoint, held, many[i], b, lengths[i]) is not None)]
    results.append((f"{CONCURRENT} concurrent requests of different lengths each get its single-request answer"
                    f"{held.said()}", not crossed, f"requests {crossed} differ: {[together[i] for i in crossed]} "
                                                   f"against {[alone[i] for i in crossed]}"))
    scored = [client.completions.create(model=model, prompt=p, max_tokens=0, echo=True, logprobs=1, temperature=0)
              .choices[0] for p in PROMPTS]
    ok, said = _close_logprobs([c.logprobs.token_logprobs[1:] for c in scored],
                               prompt_logprobs(checkpoint, PROMPTS, hf), held.tol)
    ok = ok and all(c.text == p and c.logprobs.token_logprobs[0] is None for c, p in zip(scored, PROMPTS))
    results.append(("the log-probability of every prompt token (echo, max_tokens 0, logprobs 1: how evaluation "
                    "harnesses score text) equals transformers' log_softmax", ok, said))
    generated = [client.completions.create(model=model, prompt=p, max_tokens=NEW_TOKENS, logprobs=TOP_LOGPROBS,
                                           temperature=0).choices[0] for p in PROMPTS]
    chosen = held_paths(checkpoint, held, PROMPTS, [g.text for g in generated], expected)
    want = [np.array(lps) if ids == e else None if ids is None else path_logprobs(checkpoint, held, p, ids)
            for p, ids, e, lps in zip(PROMPTS, chosen, expected, expected_lps)]
    if any(w is None for w in want):
        ok, said = False, f"answers with logprobs not transformers' greedy ids: {[g.text for g in generated]!r}"
    else:
        ok, said = _close_logprobs([g.logprobs.token_logprobs for g in generated], want, held.tol)
    ok = ok and all(0 < len(top) <= TOP_LOGPROBS + 1 for g in generated for top in g.logprobs.top_logprobs)
    results.append((f"each generated token's log-probability (logprobs {TOP_LOGPROBS}) equals transformers' "
                    "log_softmax", ok, said))
    for what, kwargs in (("a request past n_positions", {"prompt": "word " * 1100, "max_tokens": 4}),
                         ("invalid parameters (temperature -1)", {"prompt": PROMPTS[0], "max_tokens": 4,
                                                                 "temperature": -1})):
        try:
            client.completions.create(model=model, **kwargs)
            results.append((f"{what} gets a 4xx", False, "it was answered"))
        except APIStatusError as e:  # 4xx and 5xx alike: the code is checked below
            code = getattr(e, "status_code", 0)
            message = _message(e)
            results.append((f"{what} gets a 4xx with a message", 400 <= code < 500 and bool(message),
                            f"{code}: {message}"))
    after = complete(PROMPTS[1])
    results.append(("the server goes on serving after them (the same answer as before them)", after == got[1],
                    f"{after!r}, before them {got[1]!r}"))
    return results


def _message(e) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        return str(body.get("message") or body.get("detail") or json.dumps(body))[:200]
    return str(e)[:200]


def served_part(path: Path, checkpoint: Checkpoint, checks=serving_checks, report=None) -> Part:
    """The served part: `checks(server, checkpoint)` against a max serve of the file at `path`; then
    `report(server)`, a line of timings shown beside the verdicts (a report: it never fails)."""
    try:
        with Server(path, checkpoint.path) as server:
            results = checks(server, checkpoint)
            timing = report(server) if report else None
            started = server.started_in
    except ServerError as e:
        if isinstance(e, ServerTimeout):
            limit_hit()  # a time limit, as for code stopped by one: the verdict is not kept (a loaded machine)
        return Part("served", FAIL, "max serve of your model did not start", str(e).splitlines()[-12:])
    except Exception as e:  # noqa: BLE001 - a request that failed outright
        from openai import APITimeoutError

        if isinstance(e, APITimeoutError):
            limit_hit()
        return Part("served", FAIL, f"a request to max serve failed: {type(e).__name__}: {str(e)[:300]}")
    failed = [f"{what}: {said}" for what, ok, said in results if not ok]
    summary = f"{len(results) - len(failed)} of {len(results)} serving checks pass (server ready in {started:.0f} s)"
    details = [f"{'ok  ' if ok else 'FAIL'} {what}" for what, ok, _ in results] + failed
    if timing:
        details.append(f"timing (a report, not a verdict): {timing}")
    if checks is serving_checks and not results[0][1]:  # the paged part passed: the server runs every block
        details.append(f"the paged part above passed with {PAGED_LAYERS} blocks, and the server runs all "
                       f"{checkpoint.config()['n_layer']}: look at what changes with the block (its layer_idx, an "
                       "index or a loop over blocks) and at how every block's weights are loaded")
    return Part("served", FAIL if failed else PASS, summary, details)
