"""OpenAI's /v1/completions semantics on MAX 26.7's server: each request and answer, changed.

MAX's server answers /v1/completions, but where a client would notice it does otherwise than OpenAI's
API. This middleware changes each request before MAX reads it and each answer before the client does
(the book's step 14 page lists the same):

    parameter            MAX 26.7 alone                           here (OpenAI's completions API)
    echo                 the prompt is not echoed                 the text starts with the prompt; with
                                                                  logprobs, every prompt token's (the
                                                                  first one null)
    max_tokens: 0        one token is generated                   none: with echo, the prompt and its
                                                                  log-probabilities alone (scoring)
    max_tokens absent    tokens until the context is full         16, OpenAI's default
    stop                 the stop string stays in the text; a     the text ends before it; a whole
                         whole answer can be a 400 instead (a     answer is asked of MAX as one stream
                         chunk after the match, still active)     per prompt, made whole here
    logprobs             token_logprobs and top_logprobs only     also tokens and text_offset; a token
                         (tokens that decode alike, such as       whose bytes are not whole UTF-8 is
                         parts of split characters, share one     `bytes:\\xNN...` in both, each its own
                         top_logprobs entry)                      entry (gpt2_arch/tokenizer.py)
    logprobs: 0          no log-probabilities                     each chosen token's
    n, best_of > 1       one choice, silently                     400: send the request n times
    logprobs > 5         up to MAX's own limit                    400: OpenAI's limit is 5
    logit_bias, suffix   ignored                                  400: not supported
    several prompts,     500                                      400: one prompt per streamed request
    streamed

Here each request and answer is changed as data (`Plan`, `finish`, `Stream`); gpt2_arch/middleware.py
puts them between the client and MAX's app. Token ids, prompt lengths and the context are checked by
the tokenizer (gpt2_arch/tokenizer.py), before the model runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

DEFAULT_MAX_TOKENS = 16  # OpenAI's completions API, when a request names none
MAX_LOGPROBS = 5  # OpenAI's completions API: at most 5 alternatives per token

Decode = Callable[[list[int]], str]
Key = Callable[[int], str]  # a token id's key in tokens and top_logprobs (gpt2_arch/token_keys.py)


def refusal(body: dict) -> str | None:
    """Why MAX 26.7's server cannot answer this request as OpenAI's would, or None."""
    for name in ("n", "best_of"):
        value = body.get(name)
        if value is not None and value != 1:
            return (f"{name}={value!r}: this server makes one completion per prompt; send the request "
                    f"{value} times instead (with temperature > 0, each gets its own sample)")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0):
        return f"max_tokens must be a whole number, 0 or more: got {max_tokens!r}"
    logprobs = body.get("logprobs")
    if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)
                                 or not 0 <= logprobs <= MAX_LOGPROBS):
        return f"logprobs must be a whole number from 0 to {MAX_LOGPROBS} (as in OpenAI's API): got {logprobs!r}"
    if body.get("logit_bias"):
        return "logit_bias is not supported by this server (MAX 26.7): leave it out"
    if body.get("suffix"):
        return "suffix is not supported: GPT-2 continues a prompt, it does not fill in before a suffix"
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        return f"stop must be a string or a list of strings: got {stop!r}"
    prompt = body.get("prompt")
    if not _prompt_shaped(prompt):
        return ("prompt must be a string, a list of token ids, or a list of either (several prompts): got "
                f"{json.dumps(prompt)[:80]}")
    if prompt == "" or prompt == [] or (isinstance(prompt, list) and any(p == "" or p == [] for p in prompt)):
        return ("the prompt is empty: GPT-2 needs at least one token to predict the next from (OpenAI's "
                "models begin an empty prompt with <|endoftext|>: send that, token id 50256)")
    several = isinstance(prompt, list) and prompt and all(isinstance(p, (str, list)) for p in prompt)
    if body.get("stream") and several and len(prompt) > 1:
        return "a streamed request takes one prompt: send one streamed request per prompt, or leave stream out"
    return None


def _prompt_shaped(prompt) -> bool:
    """A string, a list of token ids (ints: which ids the tokenizer checks), or a list of those."""
    def one(p):
        return isinstance(p, str) or (isinstance(p, list) and all(isinstance(t, int) for t in p))
    return one(prompt) or (isinstance(prompt, list) and all(one(p) for p in prompt))


@dataclass
class Plan:
    """What the answer to one request must become: from the request as the client sent it."""

    prompts: list  # each prompt as sent: a string or a list of token ids
    echo: bool = False
    drop: bool = False  # max_tokens 0: generate one (MAX always does), show none
    stops: list[str] = field(default_factory=list)
    logprobs: int | None = None
    want_ids: bool = False  # the client asked for token ids (return_token_ids) itself
    usage: bool = False  # a stream's last chunk is its usage (stream_options.include_usage)

    @classmethod
    def of(cls, body: dict) -> Plan:
        prompt = body.get("prompt")
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompts = [prompt]
        else:
            prompts = list(prompt or [])
        stop = body.get("stop")
        stops = [s for s in ([stop] if isinstance(stop, str) else stop or []) if isinstance(s, str) and s]
        options = body.get("stream_options")
        return cls(prompts=prompts, echo=bool(body.get("echo")), drop=body.get("max_tokens") == 0, stops=stops,
                   logprobs=body.get("logprobs"), want_ids=bool(body.get("return_token_ids")),
                   usage=isinstance(options, dict) and bool(options.get("include_usage")))

    def forwarded(self, body: dict) -> dict:
        """The request as MAX is sent it."""
        out = dict(body)
        if out.get("max_tokens") is None:
            out["max_tokens"] = DEFAULT_MAX_TOKENS
        if self.drop:
            out["max_tokens"] = 1
        if self.logprobs == 0:
            out["logprobs"] = 1  # MAX reads 0 as none; the top entries are cut back to the chosen token
        out["return_token_ids"] = True  # the ids give tokens, text_offset and the echoed prompt
        # Stop strings go to MAX in streams only (its text is cut here). MAX 26.7 cancels a request whose
        # text matched one, yet reads on: a chunk the worker had made still comes, marked active, and a
        # whole answer ending on it is a 400 ("has no associated finish_reason"). A stream ends well, and
        # stops early: a whole answer with stop strings is asked as streams (`whole`). MAX also misses a
        # match that arrives as it trims its buffer: the middleware then ends MAX's request itself.
        out.pop("stop", None)
        if body.get("stream") and self.stops:
            out["stop"] = self.stops
        return out


def starts(ids: list[int], decode: Decode, text: str, first: int = 0) -> list[int]:
    """Where each token from ids[first] on starts in `text`, what the tokens read as: how far what the
    tokens before it decode to agrees with `text`. A token inside a character split across tokens starts
    where that character does; a token of bytes the text leaves out (a character never finished), at the
    text's end."""
    return [_shared(decode(ids[:i]) if i else "", text) for i in range(first, len(ids))]


def _shared(a: str, b: str) -> int:
    """How many leading characters a and b share (found by halves: a prompt's text is thousands long)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if b.startswith(a[:mid]) else (lo, mid - 1)
    return lo


def stop_at(text: str, stops: list[str]) -> int | None:
    """Where the first stop string starts in `text`, or None."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None


def _top(entries: list, k: int) -> list:
    """logprobs 0: each entry cut back to its chosen token (the last MAX adds)."""
    return [dict(list(e.items())[-1:]) if isinstance(e, dict) and k == 0 else e for e in entries]


def finish_choice(choice: dict, plan: Plan, prompt, decode: Decode, key: Key) -> int:
    """One choice of a whole (not streamed) answer made as OpenAI's API gives it, in place: the number of
    generated tokens it keeps."""
    prompt_ids = list(choice.get("prompt_token_ids") or [])
    ids = list(choice.get("token_ids") or [])
    text = choice.get("text") or ""
    logprobs = choice.get("logprobs") if plan.logprobs is not None else None
    lps = list((logprobs or {}).get("token_logprobs") or [])
    tops = list((logprobs or {}).get("top_logprobs") or [])
    if plan.echo and logprobs is not None:  # MAX gives prompt rows from the second token on
        lps, tops = [None, *lps], [None, *tops]
    kept = len(ids)
    if plan.drop:
        text, kept = "", 0
        choice["finish_reason"] = "length"
    elif plan.stops and (at := stop_at(text, plan.stops)) is not None:
        kept = sum(start < at for start in starts(ids, decode, text))
        text = text[:at]
        choice["finish_reason"] = "stop"
    shown_prompt = prompt if isinstance(prompt, str) else decode(prompt_ids)
    choice["text"] = (shown_prompt if plan.echo else "") + text
    choice["logprobs"] = None
    if logprobs is not None:
        all_ids = (prompt_ids if plan.echo else []) + ids[:kept]
        n = len(all_ids)
        shown = len(shown_prompt) if plan.echo else 0
        offsets = (starts(prompt_ids, decode, shown_prompt) if plan.echo else []) + [
            shown + start for start in starts(ids[:kept], decode, text)]
        choice["logprobs"] = {"tokens": [key(i) for i in all_ids], "token_logprobs": lps[:n],
                              "top_logprobs": _top(tops[:n], plan.logprobs or 0), "text_offset": offsets}
    if not plan.want_ids:
        choice.pop("token_ids", None)
        choice.pop("prompt_token_ids", None)
    else:
        choice["token_ids"] = ids[:kept]
    return kept


def finish(response: dict, plan: Plan, decode: Decode, key: Key) -> dict:
    """A whole answer, as OpenAI's API gives it."""
    counts = []
    for choice in response.get("choices") or []:
        i = choice.get("index", 0)
        counts.append(finish_choice(choice, plan, plan.prompts[i] if i < len(plan.prompts) else None, decode, key))
    usage = response.get("usage")
    if plan.drop and isinstance(usage, dict):
        usage["completion_tokens"] = 0
        usage["total_tokens"] = usage.get("prompt_tokens", 0)
    elif plan.stops and isinstance(usage, dict):  # the tokens before each choice's stop string
        usage["completion_tokens"] = sum(counts)
        usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage["completion_tokens"]
    return response


class Stream:
    """A streamed answer (one prompt), chunk by chunk, as OpenAI's API gives it.

    With stop strings, a chunk is held back while its text could still be the start of one, so that
    no stop string (nor anything after it) is ever sent. Once `done`, the answer ends with `ending()`
    (MAX 26.7 misses some matches and would generate on: the middleware ends MAX's request)."""

    def __init__(self, plan: Plan, decode: Decode, key: Key):
        self.plan, self.decode, self.key = plan, decode, key
        self.first = True
        self.done = False  # a stop string was found, or max_tokens 0: later text is not sent
        self.held: list[dict] = []  # chunks not yet sent (stop strings)
        self.text = ""  # the generated text so far (sent and held)
        self.sent = 0  # how much of it was sent
        self.keep = max((len(s) for s in plan.stops), default=1) - 1
        self.echoed = 0  # characters of echoed prompt before the generated text
        self.ids: list[int] = []  # the generated tokens so far
        self.prompt_tokens = 0
        self.meta: dict = {}  # the answer's id, model, created

    def chunk(self, payload: dict) -> list[dict]:
        """What to send for one of MAX's chunks (zero, one or more chunks)."""
        choices = payload.get("choices") or []
        if not choices:  # the usage chunk
            if self.plan.drop and isinstance(payload.get("usage"), dict):
                payload["usage"]["completion_tokens"] = 0
                payload["usage"]["total_tokens"] = payload["usage"].get("prompt_tokens", 0)
            return [*self._release(all_=True), payload]
        choice = choices[0]
        out = []
        if self.first:
            self.first = False
            self.prompt_tokens = len(choice.get("prompt_token_ids") or [])
            self.meta = {k: payload[k] for k in ("id", "object", "created", "model") if k in payload}
            out += self._opening(payload, choice)
        if self.done:
            return out
        if self.plan.drop:
            self.done = True
            out.append(self._final(payload, "length"))
            return out
        ids = list(choice.get("token_ids") or [])
        text = choice.get("text") or ""
        self.text += text
        self.ids += ids
        choice["logprobs"] = self._logprobs(choice.get("logprobs"), ids)
        if not self.plan.want_ids:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
        if not self.plan.stops:
            return out + [payload]
        at = stop_at(self.text, self.plan.stops)
        if at is None:
            self.held.append(payload)
            return out + self._release(all_=choice.get("finish_reason") is not None)
        self.done = True
        self.held.append(payload)
        room = at - self.sent  # the characters still to send: the held chunks' text up to the stop string
        for held in self.held:
            piece = held["choices"][0].get("text") or ""
            held["choices"][0]["text"] = piece[:max(0, room)]
            room -= len(piece)
        out += self._release(all_=True)
        out[-1]["choices"][0]["finish_reason"] = "stop"
        return out

    def ending(self) -> list[dict]:
        """What a done stream sends last, before [DONE]: its usage, if asked (the kept tokens)."""
        if not self.plan.usage:
            return []
        at = stop_at(self.text, self.plan.stops)
        kept = 0 if self.plan.drop else len(self.ids) if at is None else sum(
            start < at for start in starts(self.ids, self.decode, self.text))
        return [{**self.meta, "choices": [], "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": kept,
                                                       "total_tokens": self.prompt_tokens + kept}}]

    def _opening(self, payload: dict, choice: dict) -> list[dict]:
        """With echo, the prompt (and its tokens' log-probabilities), as a chunk of its own."""
        if not self.plan.echo:
            return []
        prompt = self.plan.prompts[0] if self.plan.prompts else ""
        prompt_ids = list(choice.get("prompt_token_ids") or [])
        text = prompt if isinstance(prompt, str) else self.decode(prompt_ids)
        self.echoed = len(text)
        opening = {**payload, "choices": [{"index": 0, "text": text, "finish_reason": None, "logprobs": None}]}
        logprobs = choice.get("logprobs") if self.plan.logprobs is not None else None
        if logprobs is not None:
            n = len(prompt_ids)
            lps = [None, *(logprobs.get("token_logprobs") or [])]
            tops = [None, *(logprobs.get("top_logprobs") or [])]
            opening["choices"][0]["logprobs"] = {
                "tokens": [self.key(i) for i in prompt_ids], "token_logprobs": lps[:n],
                "top_logprobs": _top(tops[:n], self.plan.logprobs or 0),
                "text_offset": starts(prompt_ids, self.decode, text)}
            # what is left is the generated token's
            choice["logprobs"] = {"token_logprobs": lps[n:], "top_logprobs": tops[n:]}
        return [opening]

    def _logprobs(self, logprobs, ids: list[int]):
        if logprobs is None or self.plan.logprobs is None:
            return None
        return {"tokens": [self.key(i) for i in ids], "token_logprobs": logprobs.get("token_logprobs") or [],
                "top_logprobs": _top(logprobs.get("top_logprobs") or [], self.plan.logprobs or 0),
                "text_offset": [self.echoed + start for start in
                                starts(self.ids, self.decode, self.text, len(self.ids) - len(ids))]}

    def _final(self, payload: dict, reason: str) -> dict:
        return {**payload, "choices": [{"index": 0, "text": "", "finish_reason": reason, "logprobs": None}]}

    def _release(self, *, all_: bool) -> list[dict]:
        """Held chunks that can no longer hold the start of a stop string (all of them with all_)."""
        out = []
        while self.held:
            size = len(self.held[0]["choices"][0].get("text") or "")
            if not all_ and self.sent + size > len(self.text) - self.keep:
                break
            self.sent += size
            out.append(self.held.pop(0))
        return out


def whole(streams: list[list[dict]]) -> dict:
    """The whole answer MAX gives, made from one stream's payloads per prompt (in the prompts' order): a
    whole answer with stop strings is asked of MAX as streams, each ended at its match (`Plan.forwarded`)."""
    choices, first = [], {}
    for index, payloads in enumerate(streams):
        made: dict = {"index": index, "text": "", "token_ids": [], "prompt_token_ids": [], "logprobs": None,
                      "finish_reason": None}
        for payload in payloads:
            for choice in payload.get("choices") or []:
                first = first or payload
                made["text"] += choice.get("text") or ""
                made["token_ids"] += choice.get("token_ids") or []
                made["prompt_token_ids"] = made["prompt_token_ids"] or list(choice.get("prompt_token_ids") or [])
                made["finish_reason"] = choice.get("finish_reason") or made["finish_reason"]
                if (logprobs := choice.get("logprobs")) is not None:
                    made["logprobs"] = made["logprobs"] or {"token_logprobs": [], "top_logprobs": []}
                    for name in ("token_logprobs", "top_logprobs"):
                        made["logprobs"][name] += logprobs.get(name) or []
        choices.append(made)
    prompt_tokens = sum(len(c["prompt_token_ids"]) for c in choices)
    completion_tokens = sum(len(c["token_ids"]) for c in choices)
    return {"id": first.get("id"), "object": "text_completion", "created": first.get("created"),
            "model": first.get("model"), "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
