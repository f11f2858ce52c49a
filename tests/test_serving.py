"""The served GPT-2 as clients the course did not write use it: one real `max serve` of solution 14 (the
course's `Server`, as `pixi run serve` starts it), sent raw HTTP requests.

No request can stop it: each bad request gets a 4xx that says why, and afterwards (and during, under
concurrent load) a normal request gets the answer it got before. OpenAI's completions semantics hold
(echo, max_tokens 0, stop strings, logprobs with tokens and offsets, streaming with each of them), and
what MAX 26.7 cannot do is refused, not ignored. A kill of `pixi run serve` in any way leaves nothing
behind and frees the port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from runtime.guard import GRACE
from runtime.paths import REPO
from runtime.server import MODEL, Server, ServerError, descendants, same_text
from tests.conftest import SERVED, one_server

pytestmark = pytest.mark.xdist_group(SERVED)  # slow: tests/conftest.py (SLOW_FILES)

SOLUTION = REPO / "solutions" / "solution_14.py"
PROMPT = "Hello world, this is"


@pytest.fixture(scope="module")
def served(checkpoint):
    with one_server(), Server(SOLUTION, checkpoint.path, quiet=True) as server:
        yield server


def post(server, body, *, raw: bytes | None = None, stream: bool = False, route: str = "completions"):
    """(status, the JSON answer, or for a stream the list of its events' JSON, "[DONE]" included)."""
    data = raw if raw is not None else json.dumps({"model": MODEL, "temperature": 0, **body,
                                                   **({"stream": True} if stream else {})}).encode()
    request = urllib.request.Request(f"{server.url}/v1/{route}", data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as r:
            text = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "null")
    if not stream:
        return status, json.loads(text)
    events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    return status, [e if e == "[DONE]" else json.loads(e) for e in events]


def message(answer) -> str:
    return json.dumps(answer)


# (what, the request's fields or raw bytes, a word the 4xx's body must hold)
BAD = [
    ("a token id past the vocabulary", {"prompt": [50257], "max_tokens": 2}, "50257"),
    ("a token id far past it", {"prompt": [1, 2, 60000], "max_tokens": 2}, "60000"),
    ("a negative token id", {"prompt": [-1], "max_tokens": 2}, "-1"),
    ("token ids, one past the vocabulary, in a list of prompts", {"prompt": [[1, 2], [3, 50257]], "max_tokens": 2},
     "prompt 1 of 2"),
    ("a stop token id past the vocabulary", {"prompt": PROMPT, "max_tokens": 2, "stop_token_ids": [70000]},
     "stop_token_ids"),
    ("n: 2", {"prompt": PROMPT, "max_tokens": 2, "n": 2}, "n=2"),
    ("best_of: 3", {"prompt": PROMPT, "max_tokens": 2, "best_of": 3}, "best_of"),
    ("logit_bias", {"prompt": PROMPT, "max_tokens": 2, "logit_bias": {"5": 10}}, "logit_bias"),
    ("suffix", {"prompt": PROMPT, "max_tokens": 2, "suffix": "end"}, "suffix"),
    ("two prompts streamed", {"prompt": [PROMPT, PROMPT], "max_tokens": 2, "stream": True}, "one prompt"),
    ("a prompt that leaves no room (1002 + 100 tokens)", {"prompt": [1] * 1002, "max_tokens": 100}, "1024"),
    ("a prompt past the context", {"prompt": [1] * 1100, "max_tokens": 1}, "1024"),
    ("an empty prompt", {"prompt": "", "max_tokens": 2}, "empty"),
    ("temperature -1", {"prompt": PROMPT, "max_tokens": 2, "temperature": -1}, "temperature"),
    ("logprobs 6 (OpenAI's limit is 5)", {"prompt": PROMPT, "max_tokens": 2, "logprobs": 6}, "logprobs"),
    ("max_tokens -1", {"prompt": PROMPT, "max_tokens": -1}, "max_tokens"),
    ("a prompt that is not text or token ids", {"prompt": {"a": 1}, "max_tokens": 2}, "prompt"),
    ("a prompt that is one number", {"prompt": 464, "max_tokens": 2}, "prompt"),
    ("a token id that is a float", {"prompt": [464, 2.0], "max_tokens": 2}, "prompt"),
    ("a stop that is a number", {"prompt": PROMPT, "max_tokens": 2, "stop": 5}, "stop"),
    ("invalid JSON", b'{"model": "gpt2", "prompt": ', "JSON"),
]


def test_bad_requests_get_a_4xx_that_says_why_and_serving_goes_on(served):
    _, before = post(served, {"prompt": PROMPT, "max_tokens": 8})
    wrong = []
    for what, body, word in BAD:
        status, answer = post(served, {}, raw=body) if isinstance(body, bytes) else post(served, body)
        if not (400 <= status < 500 and word.lower() in message(answer).lower()):
            wrong.append(f"{what}: {status} {message(answer)[:300]}")
        assert served.process.poll() is None, f"the server stopped after {what}"
    assert not wrong, "\n".join(wrong)
    status, answer = post(served, {"messages": [{"role": "user", "content": "hi"}]}, route="chat/completions")
    assert status == 400 and "chat template" in message(answer), message(answer)  # GPT-2 has none
    reasons = served.refusals()  # what `pixi run serve` prints as it happens
    assert any("50257" in r for r in reasons) and any("n=2" in r for r in reasons), reasons
    status, after = post(served, {"prompt": PROMPT, "max_tokens": 8})
    assert status == 200 and after["choices"][0]["text"] == before["choices"][0]["text"]


def test_bad_ids_mixed_into_concurrent_load_disturb_no_one(served):
    prompts = [[5 + i, 17, 3 * i + 1] for i in range(8)]
    alone = [post(served, {"prompt": p, "max_tokens": 6})[1]["choices"][0]["text"] for p in prompts]
    bodies = [({"prompt": p, "max_tokens": 6}, True) for p in prompts]
    bodies += [({"prompt": [1, 50257 + i], "max_tokens": 6}, False) for i in range(8)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda b: post(served, b[0]), bodies))
    for (body, good), (status, answer) in zip(bodies, answers):
        if good:
            assert status == 200 and answer["choices"][0]["text"] == alone[prompts.index(body["prompt"])]
        else:
            assert status == 400, message(answer)
    assert served.process.poll() is None


def test_echo_max_tokens_zero_and_logprobs_score_the_prompt(served):
    """An evaluation harness's log-likelihood request: the prompt back, every token's log-probability
    (the first null), its tokens and offsets, nothing generated."""
    status, answer = post(served, {"prompt": PROMPT, "max_tokens": 0, "echo": True, "logprobs": 1})
    choice = answer["choices"][0]
    lp = choice["logprobs"]
    assert status == 200 and choice["text"] == PROMPT and answer["usage"]["completion_tokens"] == 0
    assert lp["token_logprobs"][0] is None and all(isinstance(v, float) for v in lp["token_logprobs"][1:])
    assert "".join(lp["tokens"]) == PROMPT and len(lp["tokens"]) == answer["usage"]["prompt_tokens"]
    assert lp["text_offset"] == [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]
    assert lp["top_logprobs"][0] is None and all(1 <= len(t) <= 2 for t in lp["top_logprobs"][1:])


def test_a_prompt_of_the_whole_context_is_scored_and_one_more_token_refused(served):
    """1024 tokens with max_tokens 0 (an evaluation harness scoring a whole window) or 1: every row's
    log-probability; 1024 + 2 or 1023 + 2 would embed position 1024: 400 (MAX alone shortens the answer)."""
    ids = [464 + i % 7 for i in range(1024)]
    scored = []
    for max_tokens in (0, 1):  # the second's prompt is in MAX's prefix cache: every row scored all the same
        status, answer = post(served, {"prompt": ids, "max_tokens": max_tokens, "echo": True, "logprobs": 1})
        assert status == 200, message(answer)
        lp = answer["choices"][0]["logprobs"]["token_logprobs"]
        assert len(lp) == 1024 + max_tokens and all(isinstance(v, float) for v in lp[1:]), len(lp)
        scored.append(np.array(lp[1:1024]))
    np.testing.assert_allclose(scored[0], scored[1], atol=1e-4)
    for prompt in (ids, ids[:-1]):
        status, answer = post(served, {"prompt": prompt, "max_tokens": 2})
        assert status == 400 and "1024" in message(answer), message(answer)


def test_echo_and_max_tokens_zero_apart(served):
    _, plain = post(served, {"prompt": PROMPT, "max_tokens": 5})
    _, echoed = post(served, {"prompt": PROMPT, "max_tokens": 5, "echo": True})
    assert echoed["choices"][0]["text"] == PROMPT + plain["choices"][0]["text"]
    _, none = post(served, {"prompt": PROMPT, "max_tokens": 0})
    assert none["choices"][0]["text"] == "" and none["choices"][0]["finish_reason"] == "length"
    assert none["usage"]["completion_tokens"] == 0


def test_greedy_tokens_without_maxs_sampler_are_the_tokens_it_samples(served):
    """A plainly greedy batch takes the argmax of its logits (gpt2_arch/pipeline.py); asked for log-probabilities,
    the same request goes through MAX's sampler: the same tokens. So do top_k 1 at temperature 1 (greedy too)
    and the plain requests sent all at once."""
    prompts = [PROMPT, "The capital of France", [464, 2068, 7586, 21831], "1, 2, 3,"]
    plain = [post(served, {"prompt": p, "max_tokens": 12}) for p in prompts]
    sampled = [post(served, {"prompt": p, "max_tokens": 12, "logprobs": 1}) for p in prompts]
    top_k = [post(served, {"prompt": p, "max_tokens": 12, "temperature": 1, "top_k": 1}) for p in prompts]
    with ThreadPoolExecutor(len(prompts)) as pool:
        together = list(pool.map(lambda p: post(served, {"prompt": p, "max_tokens": 12}), prompts))
    for answers in (plain, sampled, top_k, together):
        assert all(status == 200 for status, _ in answers), [message(a) for _, a in answers]
    texts = [[a["choices"][0]["text"] for _, a in answers] for answers in (plain, sampled, top_k, together)]
    assert texts[0] == texts[1] == texts[2] == texts[3], texts


def test_only_a_plainly_greedy_request_skips_maxs_sampler():
    from max.pipelines.context import SamplingParams, TextContext, TokenBuffer

    from gpt2_arch.pipeline import plainly_greedy

    def context(**fields):
        params = {k: v for k, v in fields.items() if k not in ("json_schema", "label_token_ids")}
        return TextContext(max_length=64, tokens=TokenBuffer(np.array([464, 2068], np.int64)),
                           sampling_params=SamplingParams(**params), json_schema=fields.get("json_schema"),
                           label_token_ids=fields.get("label_token_ids"))

    assert plainly_greedy(context(temperature=0)) and plainly_greedy(context(temperature=1, top_k=1))
    for fields in ({}, {"temperature": 0.7}, {"temperature": 0, "repetition_penalty": 1.2},
                   {"temperature": 0, "frequency_penalty": 0.5}, {"temperature": 0, "min_new_tokens": 3},
                   {"temperature": 0, "logits_processors": [lambda inputs: None]},
                   {"temperature": 0, "json_schema": '{"type": "object"}'},
                   {"temperature": 0, "label_token_ids": [11, 12]}):
        assert not plainly_greedy(context(**fields)), fields


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="thread priorities are read from Linux's /proc")
def test_the_model_workers_runtime_threads_give_way_to_its_python(served):
    """The process that runs the graph has MAX's runtime threads at runtime.threads.NICENESS and its Python (the
    scheduler's thread) at the niceness it started with."""
    from runtime.threads import NICENESS, lowered

    assert post(served, {"prompt": PROMPT, "max_tokens": 2})[0] == 200
    workers = {pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in lowered(descendants(served.process.pid))}
    assert len(workers) == 1, f"processes with every runtime thread at {NICENESS}: {workers}"
    assert list(workers.values()) == [os.getpriority(os.PRIO_PROCESS, os.getpid())], workers


def test_a_stop_string_ends_the_text_before_it(served):
    """Whole and streamed, a list or one string, alone or among other prompts; asked again and again (MAX
    alone answered a whole request whose stop string matched with a 400 about half the time); an empty
    stop string stops nothing."""
    _, plain = post(served, {"prompt": PROMPT, "max_tokens": 12})
    text = plain["choices"][0]["text"]
    stop = text[len(text) // 2:len(text) // 2 + 2]
    for stops in [[stop], stop] * 3:
        status, stopped = post(served, {"prompt": PROMPT, "max_tokens": 12, "stop": stops})
        assert status == 200 and stopped["choices"][0]["text"] == text[:text.index(stop)], message(stopped)
        assert stopped["choices"][0]["finish_reason"] == "stop"
    assert stopped["usage"]["completion_tokens"] < plain["usage"]["completion_tokens"]
    status, batch = post(served, {"prompt": [PROMPT, PROMPT[:-1], PROMPT], "max_tokens": 12, "stop": stop})
    assert status == 200 and len(batch["choices"]) == 3, message(batch)
    assert all(stop not in c["text"] for c in batch["choices"]), message(batch)
    assert batch["choices"][0]["text"] == batch["choices"][2]["text"] == text[:text.index(stop)], message(batch)
    _, empty = post(served, {"prompt": PROMPT, "max_tokens": 12, "stop": ""})
    assert empty["choices"][0]["text"] == text, message(empty)
    status, events = post(served, {"prompt": PROMPT, "max_tokens": 12, "stop": [stop]}, stream=True)
    chunks = [e for e in events if e != "[DONE]" and e["choices"]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == text[:text.index(stop)]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and events[-1] == "[DONE]"


def test_stop_strings_end_the_answer_and_maxs_request_even_where_max_misses_them(checkpoint):
    """MAX 26.7 cannot stop a whole answer at a stop string (it races), and its streams miss a match that
    arrives as it trims its buffer, generating on to max_tokens. The middleware asks a whole answer as one
    stream per prompt, and once a stream's text holds a stop string it ends the answer and tells MAX the
    client has gone (MAX cancels the request on that): text cut before the stop (also where the stop began
    in a chunk held back), the kept tokens counted, each prompt's choice at its index; a prompt MAX refuses
    refuses the request, its reason kept. Against a stand-in for MAX's app that never stops by itself."""
    import asyncio

    from gpt2_arch.middleware import Completions
    from gpt2_arch.tokenizer import GPT2Tokenizer

    tokenizer = GPT2Tokenizer(str(checkpoint.path), None)
    words = [tokenizer.delegate(w)["input_ids"] for w in [" one", " tw", "o", "\n"]]
    more = tokenizer.delegate(" three")["input_ids"]
    asked, made = [], []  # the requests MAX got; how many chunks it made for each

    async def app(scope, receive, send):  # MAX's app: chunks until the client goes, or a 400 for prompt "bad"
        body = json.loads((await receive())["body"])
        asked.append(body)
        if body["prompt"] == "bad":
            await send({"type": "http.response.start", "status": 400, "headers": []})
            return await send({"type": "http.response.body", "body": _error_body("too long")})
        gone = asyncio.ensure_future(receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(1000):
            if gone.done():
                assert gone.result()["type"] == "http.disconnect"
                break
            ids = words[i] if i < len(words) else more
            chunk = {"id": "c", "model": MODEL, "choices": [{"index": 0, "text": tokenizer.delegate.decode(ids),
                     "token_ids": ids, "prompt_token_ids": [1, 2] if i == 0 else None, "finish_reason": None,
                     "logprobs": None}]}
            await send({"type": "http.response.body", "body": b"data: " + json.dumps(chunk).encode() + b"\n\n",
                        "more_body": True})
            await asyncio.sleep(0.001)
        made.append(i)
        gone.cancel()
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    def call(body):
        sent = []

        async def receive():
            if not sent and not asked:
                return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
            await asyncio.Event().wait()  # the client stays

        async def send(message):
            sent.append(message)

        asked.clear()
        made.clear()
        scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
        asyncio.run(Completions(app, tokenizer)(scope, receive, send))
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    status, raw = call({"prompt": ["a", "b"], "max_tokens": 200, "stop": "wo\n"})
    answer = json.loads(raw)
    assert status == 200 and [c["text"] for c in answer["choices"]] == [" one t"] * 2, answer
    kept = 2 * len(words[0] + words[1])  # " one", " tw" in each choice: the tokens that start before the stop
    assert [c["index"] for c in answer["choices"]] == [0, 1] and answer["usage"]["completion_tokens"] == kept
    assert all(c["finish_reason"] == "stop" and "token_ids" not in c for c in answer["choices"])
    assert sorted(b["prompt"] for b in asked) == ["a", "b"] and all(b["stream"] and b["stop"] == ["wo\n"]
                                                                    for b in asked), asked
    assert max(made) < 10, f"MAX made {made} chunks: never told to stop"
    status, raw = call({"prompt": "a", "max_tokens": 200, "stop": "wo\n", "stream": True,
                        "stream_options": {"include_usage": True}})
    events = [line[5:].strip() for line in raw.decode().split("\n") if line.startswith("data:")]
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == " one t" and events[-1] == "[DONE]"
    assert chunks[-1]["usage"]["completion_tokens"] == kept // 2 and max(made) < 10, (chunks, made)
    status, raw = call({"prompt": ["a", "bad"], "max_tokens": 2, "stop": "\n"})
    assert status == 400 and json.loads(raw)["error"]["message"] == "too long", raw


def _error_body(text: str) -> bytes:
    return json.dumps({"error": {"message": text, "type": "invalid_request_error"}}).encode()


def test_logprobs_give_tokens_offsets_and_at_most_k_plus_one_alternatives(served):
    _, answer = post(served, {"prompt": PROMPT, "max_tokens": 6, "logprobs": 3})
    choice = answer["choices"][0]
    lp = choice["logprobs"]
    # the stand-in's tokenizer has no text for most of its model's ids: each is <|token N|>, an entry of its own
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == 6
    assert all(len(t) in (3, 4) and token in t for token, t in zip(lp["tokens"], lp["top_logprobs"]))
    _, zero = post(served, {"prompt": PROMPT, "max_tokens": 3, "logprobs": 0})
    assert all(len(t) == 1 for t in zero["choices"][0]["logprobs"]["top_logprobs"])


# --- logprobs keys: a token each, as OpenAI's API names it (no server) ------------------------------------

SPLIT = ("Ã", "¦")  # the stand-in's tokens of bytes 0xC3 (a character's first) and 0xA6 (a later one)


def test_tokens_that_decode_alike_get_a_key_each(checkpoint):
    """Two byte tokens that each decode to U+FFFD (parts of a character) get two `bytes:` keys, as OpenAI's
    API writes them; a whole token keeps its text; ids the stand-in's tokenizer lacks (text "") one each."""
    from transformers import AutoTokenizer

    from gpt2_arch.token_keys import token_key

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    lead, tail = tokenizer.convert_tokens_to_ids(list(SPLIT))
    assert tokenizer.decode([lead]) == tokenizer.decode([tail]) == "\ufffd"
    assert (token_key(tokenizer, lead), token_key(tokenizer, tail)) == ("bytes:\\xc3", "bytes:\\xa6")
    word, = tokenizer("The")["input_ids"]
    assert token_key(tokenizer, word) == "The" and token_key(tokenizer, 0) == "<|endoftext|>"
    past = [len(tokenizer), len(tokenizer) + 1]
    assert tokenizer.decode(past[:1]) == "" and len({token_key(tokenizer, i) for i in past}) == 2


def test_top_logprobs_keep_every_alternative_and_tokens_their_key(checkpoint):
    """MAX's server names each alternative by the served tokenizer's text of it alone and keys top_logprobs
    by that: through MAX's own route function, every alternative keeps its entry; the middleware's
    tokens name the chosen token by the same key, text_offset where its text starts."""
    import asyncio
    from functools import partial

    from max.serve.pipelines.llm import TokenGeneratorOutput
    from max.serve.router.openai_routes import _process_log_probabilities

    from gpt2_arch.completions import Plan, Stream, finish
    from gpt2_arch.token_keys import token_key
    from gpt2_arch.tokenizer import GPT2Tokenizer

    tokenizer = GPT2Tokenizer(str(checkpoint.path), None)
    lead, tail = tokenizer.delegate.convert_tokens_to_ids(list(SPLIT))
    word, = tokenizer.delegate("The")["input_ids"]
    rows = [{lead: -0.5, tail: -1.0, word: -2.0, 50000: -3.0}, {word: -0.1, tail: -2.5, lead: -3.0}]
    named = [{i: (asyncio.run(tokenizer.decode(i, skip_special_tokens=True)), lp) for i, lp in row.items()}
             for row in rows]
    logprobs = _process_log_probabilities([TokenGeneratorOutput(
        status=None, token_log_probabilities=[-0.5, -0.1], top_log_probabilities=named)]).model_dump()
    assert [len(top) for top in logprobs["top_logprobs"]] == [4, 3]
    assert logprobs["top_logprobs"][0] == {"bytes:\\xc3": -0.5, "bytes:\\xa6": -1.0, "The": -2.0,
                                           "<|token 50000|>": -3.0}
    text = tokenizer.delegate.decode([lead, word])
    answer = {"choices": [{"index": 0, "text": text, "token_ids": [lead, word], "logprobs": dict(logprobs)}]}
    key = partial(token_key, tokenizer.delegate)  # as the middleware names tokens
    got = finish(answer, Plan(prompts=["x"], logprobs=3), tokenizer.delegate.decode, key)["choices"][0]["logprobs"]
    assert got["tokens"] == ["bytes:\\xc3", "The"] and got["text_offset"] == [0, 1]
    assert all(token in top for token, top in zip(got["tokens"], got["top_logprobs"]))
    chunk = {"choices": [{"index": 0, "text": text, "token_ids": [lead, word], "logprobs": dict(logprobs)}]}
    streamed, = Stream(Plan(prompts=["x"], logprobs=3), tokenizer.delegate.decode, key).chunk(chunk)
    assert streamed["choices"][0]["logprobs"]["tokens"] == got["tokens"]


def test_text_offsets_stay_in_the_text_where_a_character_is_split_across_tokens(checkpoint):
    """The two tokens of one character start where it does; bytes of a character never finished (which
    MAX's text leaves out) at the text's end, never past it; a byte no later token completes keeps its
    U+FFFD. Whole answers and streams alike, one token a chunk."""
    from functools import partial

    from gpt2_arch.completions import Plan, Stream, finish
    from gpt2_arch.token_keys import token_key
    from gpt2_arch.tokenizer import GPT2Tokenizer

    tokenizer = GPT2Tokenizer(str(checkpoint.path), None).delegate
    lead, tail = tokenizer.convert_tokens_to_ids(list(SPLIT))
    word, = tokenizer("The")["input_ids"]
    key = partial(token_key, tokenizer)
    for ids, text, want in [([word, lead, tail, word], "The\u00e6The", [0, 3, 3, 4]),
                            ([word, word, lead, lead], "TheThe", [0, 3, 6, 6]),
                            ([lead, word], "\ufffdThe", [0, 1])]:
        logprobs = {"token_logprobs": [-1.0] * len(ids), "top_logprobs": [{key(i): -1.0} for i in ids]}
        answer = {"choices": [{"index": 0, "text": text, "token_ids": ids, "logprobs": logprobs}]}
        got = finish(answer, Plan(prompts=["x"], logprobs=1), tokenizer.decode, key)["choices"][0]
        assert got["logprobs"]["text_offset"] == want, (ids, got["logprobs"]["text_offset"])
        stream, offsets, sent = Stream(Plan(prompts=["x"], logprobs=1), tokenizer.decode, key), [], ""
        for i, token in enumerate(ids):
            piece = text[len(sent):] if i == len(ids) - 1 else tokenizer.decode(ids[:i + 1]).rstrip("\ufffd")[
                len(sent):]
            sent += piece
            chunk = {"choices": [{"index": 0, "text": piece, "token_ids": [token], "logprobs": {
                "token_logprobs": [-1.0], "top_logprobs": [{key(token): -1.0}]}}]}
            offsets += [o for c in stream.chunk(chunk) for o in c["choices"][0]["logprobs"]["text_offset"]]
        assert offsets == want, (ids, offsets)


def test_streaming_gives_what_the_whole_answer_gives(served):
    body = {"prompt": PROMPT, "max_tokens": 6, "echo": True, "logprobs": 2}
    _, whole = post(served, body)
    status, events = post(served, body, stream=True)
    chunks = [e for e in events if e != "[DONE]" and e["choices"]]
    assert status == 200 and events[-1] == "[DONE]"
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    streamed = [v for c in chunks for v in (c["choices"][0]["logprobs"] or {}).get("token_logprobs", [])]
    assert streamed == whole["choices"][0]["logprobs"]["token_logprobs"]
    _, events = post(served, {"prompt": PROMPT, "max_tokens": 0, "echo": True}, stream=True)
    chunks = [e for e in events if e != "[DONE]" and e["choices"]]
    assert "".join(c["choices"][0]["text"] for c in chunks) == PROMPT


def test_max_tokens_absent_means_openais_sixteen(served):
    _, answer = post(served, {"prompt": PROMPT})
    assert answer["usage"]["completion_tokens"] == 16


# --- however `pixi run serve` ends, nothing is left -------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _start_serve():
    """`pixi run serve --solutions` (python -m gpt2_arch) in a session of its own, as a terminal runs it;
    returns the process and the port once it prints its URL."""
    env = {**os.environ, "GPT2_WEIGHTS": "synthetic", "PYTHONPATH": str(REPO)}
    launcher = subprocess.Popen([sys.executable, "-m", "gpt2_arch", "--solutions"], cwd="/", env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    out, end = "", time.monotonic() + 900
    while "Ctrl-C stops" not in out and time.monotonic() < end and launcher.poll() is None:
        out += launcher.stdout.readline()
    assert "http://127.0.0.1:" in out, out
    return launcher, int(out.split("http://127.0.0.1:")[1].split("/")[0])


def test_a_signal_whose_exception_a_finalizer_drops_still_stops_serve(monkeypatch, capsys):
    """Python drops an exception raised while a finalizer runs: Ctrl-C landing in one would leave `pixi run
    serve` running. The server's handlers also set `signalled`, and serve's loop ends on it."""
    import gpt2_arch.__main__ as serve
    from runtime.server import Signalled, _exit_on_signals, _restore

    class Finalised:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # its KeyboardInterrupt is printed and dropped

    signalled, handler = Signalled(), signal.getsignal(signal.SIGINT)
    before = _exit_on_signals(signalled)
    try:
        Finalised()
    finally:
        _restore(before)
    assert signalled.is_set() and signal.getsignal(signal.SIGINT) is handler

    class Running:  # a server that never stops by itself, signalled as above
        url, log, process = "http://127.0.0.1:1", Path("serve.log"), SimpleNamespace(poll=lambda: None)

        def __init__(self, *args, **kwargs):
            self.signalled = Signalled()
            threading.Timer(0.3, self.signalled.set).start()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def refusals(self):
            return []

    monkeypatch.setattr(serve, "Server", Running)
    codes = []
    loop = threading.Thread(target=lambda: codes.append(serve.main(["--solutions"])), daemon=True)
    loop.start()
    loop.join(timeout=10)
    assert codes == [0], "serve's loop went on after its server was signalled"
    assert "Stopped." in capsys.readouterr().out


_WAITS_UNDER_SIGNALS = """
import select, signal, sys
from runtime.server import Signalled
signalled, handled = Signalled(), 0

def handler(signum, frame):  # what runtime.server's handlers do before they raise
    global handled
    signalled.set()
    handled += 1

signal.signal(signal.SIGTERM, handler)
signal.signal(signal.SIGHUP, handler)
print("ready", flush=True)
while not select.select([sys.stdin], [], [], 0)[0]:  # until the test closes stdin
    for _ in range(100):
        signalled.wait(0)  # serve's loop, most of its time in the wait
print(handled, flush=True)
"""


def test_a_signal_landing_in_the_loops_wait_never_hangs_it():
    """serve's loop waits on `signalled` while a signal's handler sets it: a lock in the flag (a
    threading.Event's) can be held by the very thread the handler interrupts, which then waits on itself
    forever. SIGTERM and SIGHUP in turn every 2 ms for 2 s, at a loop of waits: the loop goes on, and
    ends when told."""
    pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child = subprocess.Popen([sys.executable, "-c", _WAITS_UNDER_SIGNALS], cwd=REPO, text=True, **pipes,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        child.stdout.readline()
        end, sent = time.monotonic() + 2, 0
        while time.monotonic() < end:
            child.send_signal((signal.SIGTERM, signal.SIGHUP)[sent % 2])
            sent += 1
            time.sleep(0.002)
        try:
            out, err = child.communicate(timeout=20)  # closes its stdin: the loop ends
        except subprocess.TimeoutExpired:
            pytest.fail("a signal landing in serve's wait left its loop hung")
        assert child.returncode == 0, f"the loop ended early (exit code {child.returncode}):\n{err[-1500:]}"
        assert int(out) > 100, f"only {out.strip()} of {sent} signals reached the loop"
    finally:
        child.kill()
        child.wait()


def test_stop_ends_the_server_when_a_signal_left_popens_lock_held(tmp_path):
    """A handler that raises inside Popen.poll, between its lock's acquire and its try, leaves the lock held;
    Popen.wait() without a timeout would then wait on it forever. stop() still ends the process group."""
    server = Server(tmp_path / "step_14.py", tmp_path, log=tmp_path / "serve.log")
    server.process = subprocess.Popen(["sleep", "300"], stdin=subprocess.PIPE, start_new_session=True)
    server.process._waitpid_lock.acquire()  # as an interrupted poll leaves it
    done = threading.Thread(target=server.stop, daemon=True)
    done.start()
    done.join(timeout=GRACE + 30)
    assert not done.is_alive(), "stop() hung on Popen's lock"
    assert server.process.returncode == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.killpg(server.process.pid, 0)


# SIGTERM and SIGHUP share SIGINT's handler (runtime.server's _exit_on_signals): the signal test above sends
# both, and test_step14.py's serve-command test SIGTERMs pixi run serve with a server behind it.
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_however_serve_ends_the_server_ends_and_the_port_is_free(checkpoint, server_slot, how):
    """Ctrl-C (SIGINT to the terminal's process group) and a kill -9 of the launcher alone: max serve and
    its workers end, and the port is free within 15 s."""
    launcher, port = _start_serve()
    try:
        assert not _port_free(port)
        sig = getattr(signal, how)
        if how == "SIGINT":
            os.killpg(launcher.pid, sig)  # Ctrl-C reaches the terminal's foreground group
        else:
            launcher.send_signal(sig)
        launcher.wait(timeout=60)

        def left() -> str:
            return subprocess.run(["pgrep", "-af", f"gpt2_arch.*--port {port}$"], capture_output=True, text=True).stdout

        end = time.monotonic() + 15
        while (left().strip() or not _port_free(port)) and time.monotonic() < end:
            time.sleep(0.2)
        assert _port_free(port), f"port {port} still taken 15 s after {how}"
        assert not left().strip(), f"processes left 15 s after {how}: {left()}"
    finally:
        if launcher.poll() is None:
            launcher.kill()


def test_a_pool_smaller_than_the_streams_takes_turns_and_changes_no_token(checkpoint, server_slot):
    """A pool of n_positions (8 pages of 128) for 16 requests of ~120-token prompts and 16 new tokens each: they
    cannot all hold their pages at once (each needs a second page while it decodes), so MAX's scheduler queues
    and preempts them; every one still gets transformers' greedy text. The log shows the pool of 8 pages (and
    MAX's null page) and a request preempted."""
    from transformers import AutoTokenizer

    from checker.steps.step14.served import greedy_reference

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    asked = []
    for i in range(16):  # 110 to 125 tokens, four endings
        asked.append("The model")
        while len(tokenizer(asked[-1])["input_ids"]) < 110 + i:
            asked[-1] += f" {['and more', 'or less', 'then some', 'once again'][i % 4]}"
    assert all(len(tokenizer(p)["input_ids"]) <= 128 for p in asked)
    expected, _ = greedy_reference(checkpoint, asked, 16)
    with Server(SOLUTION, checkpoint.path, quiet=True, pool_positions=1024) as server:
        client = server.client()

        def complete(prompt: str) -> str:
            return client.completions.create(model=MODEL, prompt=prompt, max_tokens=16, temperature=0).choices[0].text

        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(complete, asked))
        log = server.log.read_text()
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in expected]
    assert all(same_text(g, t) for g, t in zip(got, texts)), [(g, t) for g, t in zip(got, texts) if g != t]
    assert "Jenga KV manager: 9 huge pages" in log and "Preempted a request" in log, log[-3000:]


def test_a_pool_that_cannot_hold_one_request_is_refused_at_start(checkpoint, server_slot):
    with pytest.raises(ServerError, match="a pool of 1000 positions cannot hold one request of max_length 1024"):
        with Server(SOLUTION, checkpoint.path, quiet=True, pool_positions=1000):
            pass


def test_serve_refuses_a_pool_under_one_request_before_starting(capsys):
    import gpt2_arch.__main__ as serve

    with pytest.raises(SystemExit) as exited:
        serve.main(["--fast", "--solutions", "--pool", "100"])
    assert exited.value.code == 2
    assert "--pool 100: the pool must hold one request of n_positions, 1024 positions" in capsys.readouterr().err
