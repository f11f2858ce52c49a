"""Step 14's served part: the learner's model under a real `max serve` on 127.0.0.1, asked as OpenAI's
clients and evaluation harnesses ask it (greedy, streamed, concurrent, log-probabilities, refusals), each
answer against transformers'.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from checker.reporting.compare import DECODE, compare
from checker.reporting.report import FAIL, PASS, Part
from checker.steps.step14.reference import PAGED_LAYERS, hf_model
from runtime.checkpoints import Checkpoint
from runtime.server import MODEL, Server, ServerError, same_text

# torch, transformers and openai are imported inside the functions that use them: importing them takes seconds.

PROMPTS = ["Hello world, this is", "The model", "A longer prompt for the server, with more tokens in it"]
NEW_TOKENS = 8
CONCURRENT = 8
TOP_LOGPROBS = 3


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


def _close_logprobs(got: list, want: list[np.ndarray]) -> tuple[bool, str]:
    """Log-probabilities against transformers' under DECODE (the model ran over a cache, one kernel per
    position): (ok, what to say)."""
    if [len(g) for g in got] != [len(w) for w in want] or any(x is None for g in got for x in g):
        return False, f"{[len(g) for g in got]} values per request, expected {[len(w) for w in want]}"
    verdict = compare(np.concatenate([np.array(g, dtype=np.float64) for g in got]), np.concatenate(want),
                      axes=("token",), mistakes=[], tol=DECODE)
    return verdict.ok, verdict.summary


def serving_checks(server, checkpoint: Checkpoint, hf=None) -> list[tuple[str, bool, str]]:
    """Real requests against a running server: (what, ok, what came back) for each check; `hf`: transformers'
    model the answers are held to (default: the checkpoint's own)."""
    from openai import APIStatusError
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    client, model = server.client(), MODEL
    expected, expected_lps = greedy_reference(checkpoint, PROMPTS, NEW_TOKENS, hf)
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in expected]  # as max serve shows them

    def complete(prompt: str, n: int = NEW_TOKENS) -> str:
        return client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0).choices[0].text

    results = []
    got = [complete(p) for p in PROMPTS]
    results.append((f"greedy completions of {len(PROMPTS)} prompts equal transformers' greedy ids",
                    all(map(same_text, got, texts)),
                    "; ".join(f"{g!r} (expected {t!r})" for g, t in zip(got, texts) if not same_text(g, t))))
    stream = client.completions.create(model=model, prompt=PROMPTS[0], max_tokens=NEW_TOKENS, temperature=0,
                                       stream=True)
    pieces = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    results.append(("streaming returns the same tokens in order", same_text(pieces, texts[0]),
                    f"{pieces!r}, expected {texts[0]!r}"))
    many = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(CONCURRENT)]
    lengths = [NEW_TOKENS - i % 3 for i in range(CONCURRENT)]
    alone = [complete(p, n) for p, n in zip(many, lengths)]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        together = list(pool.map(complete, many, lengths))
    crossed = [i for i, (a, b) in enumerate(zip(alone, together)) if a != b]
    results.append((f"{CONCURRENT} concurrent requests of different lengths each get its single-request answer",
                    not crossed, f"requests {crossed} differ: {[together[i] for i in crossed]} against "
                                 f"{[alone[i] for i in crossed]}"))
    scored = [client.completions.create(model=model, prompt=p, max_tokens=0, echo=True, logprobs=1, temperature=0)
              .choices[0] for p in PROMPTS]
    ok, said = _close_logprobs([c.logprobs.token_logprobs[1:] for c in scored],
                               prompt_logprobs(checkpoint, PROMPTS, hf))
    ok = ok and all(c.text == p and c.logprobs.token_logprobs[0] is None for c, p in zip(scored, PROMPTS))
    results.append(("the log-probability of every prompt token (echo, max_tokens 0, logprobs 1: how evaluation "
                    "harnesses score text) equals transformers' log_softmax", ok, said))
    generated = [client.completions.create(model=model, prompt=p, max_tokens=NEW_TOKENS, logprobs=TOP_LOGPROBS,
                                           temperature=0).choices[0].logprobs for p in PROMPTS]
    ok, said = _close_logprobs([g.token_logprobs for g in generated], [np.array(w) for w in expected_lps])
    ok = ok and all(0 < len(top) <= TOP_LOGPROBS + 1 for g in generated for top in g.top_logprobs)
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
        return Part("served", FAIL, "max serve of your model did not start", str(e).splitlines()[-12:])
    except Exception as e:  # noqa: BLE001 - a request that failed outright
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
