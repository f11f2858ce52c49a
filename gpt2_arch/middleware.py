"""The ASGI middleware that puts OpenAI's /v1/completions semantics (gpt2_arch/completions.py) in front
of MAX 26.7's app: each request changed before MAX reads it, each answer before the client does.

    a request the semantics refuse        400 with the reason, MAX never sees it
    a list of prompts, a bad token id     400 naming the prompt and the position
    a streamed request                    MAX's events changed one by one as they pass (`Stream`); once
                                          a stop string is in its text, the answer ends here and MAX
                                          is told the client has gone (MAX 26.7 misses some matches)
    a whole request with stop strings     one stream per prompt asked of MAX, each ended as above,
                                          made into the whole answer (`whole`), then finished
    any other whole request               MAX's answer changed at once (`finish`)

Only POST /v1/completions is changed; every other route, and any body this code cannot read, goes to
MAX as it came. On every route, an error MAX answers with a bare "Value error." gets the reason MAX
logged instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextvars import ContextVar
from typing import Any

from gpt2_arch.completions import Decode, Key, Plan, Stream, finish, refusal, stop_at, whole
from gpt2_arch.token_keys import token_key
from gpt2_arch.tokenizer import ids_refused


def _error(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": None}}).encode()


# What MAX logs about a request it answers with a bare "Value error." (its route logs the reason, then
# hides it): kept per request, in a context variable the route's logging call sees (it runs in the
# request's own task, or one started from it), and put into the answer.
_reasons: ContextVar[list[str] | None] = ContextVar("reasons", default=None)


class _Reasons(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        found = _reasons.get()
        if found is not None and record.msg.startswith("Value error in request") and len(record.args or ()) == 2:
            found.append(str(record.args[1]))


_HANDLER = _Reasons()


class Completions:
    """ASGI middleware: OpenAI's /v1/completions semantics around MAX's app (see the module's docstring).
    `tokenizer`: the served GPT2Tokenizer (its Hugging Face tokenizer decodes; `vocab` bounds the ids)."""

    def __init__(self, app, tokenizer):
        self.app = app
        self.vocab: int = tokenizer.vocab
        self.decode: Decode = lambda ids: tokenizer.delegate.decode(ids)
        self.key: Key = lambda token_id: token_key(tokenizer.delegate, token_id)
        logger = logging.getLogger("max.serve")
        if _HANDLER not in logger.handlers:
            logger.addHandler(_HANDLER)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        reasons: list[str] = []
        _reasons.set(reasons)
        if scope["path"].rstrip("/") != "/v1/completions":  # other routes as MAX answers them, reasons put back
            return await self.app(scope, receive, _answer(send, None, reasons))
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return await self.app(scope, _replay(raw, receive), _answer(send, None, reasons))
        if reason := refusal(body) or self._bad_prompt(body):
            logging.getLogger("max.serve").warning("Refused request: %s", reason)
            return await _send(send, 400, _error(reason))
        plan = Plan.of(body)
        if plan.stops and not body.get("stream"):
            return await self._by_streams(scope, receive, send, body, plan, reasons)
        data = json.dumps(plan.forwarded(body)).encode()
        stream = Stream(plan, self.decode, self.key) if body.get("stream") else None
        ended = asyncio.Event()  # the answer is whole before MAX's is: MAX is told the client has gone
        return await self.app(_sized(scope, data), _replay(data, receive, ended),
                              _answer(send, (plan, self.decode, self.key, stream), reasons, ended))

    def _bad_prompt(self, body: dict) -> str | None:
        """Of several prompts, the first with a token id past the vocabulary (MAX's tokenizer, which checks
        one prompt at a time, could not say which)."""
        prompts = body.get("prompt")
        if not (isinstance(prompts, list) and len(prompts) > 1 and all(isinstance(p, (str, list)) for p in prompts)):
            return None
        for number, prompt in enumerate(prompts):
            if isinstance(prompt, list) and (refused := ids_refused("token ids", prompt, self.vocab)):
                return f"prompt {number} of {len(prompts)} (counted from 0): {refused}"
        return None

    async def _by_streams(self, scope, receive, send, body: dict, plan: Plan, reasons: list[str]):
        """A whole answer with stop strings: one stream per prompt asked of MAX, all at once, each ended at its
        stop string (`_Kept`; a whole answer of MAX 26.7's cannot be, `Plan.forwarded` says why), made whole."""
        async def one(prompt) -> _Kept:
            data = json.dumps(plan.forwarded({**body, "prompt": prompt, "stream": True})).encode()
            kept = _Kept(plan.stops)
            await self.app(_sized(scope, data), _replay(data, receive, kept.ended), kept)
            return kept

        answers = await asyncio.gather(*(one(prompt) for prompt in plan.prompts))
        for answer in answers:
            error = next((p["error"] for p in answer.payloads if isinstance(p.get("error"), dict)), None)
            if answer.status != 200:
                return await _send(send, answer.status, _with_reasons(answer.body, reasons), answer.headers)
            if error is not None:  # an error event after the stream began
                return await _send(send, 400, _with_reasons(_error(str(error.get("message"))), reasons))
        made = finish(whole([[p for p in a.payloads if "choices" in p] for a in answers]), plan, self.decode,
                      self.key)
        return await _send(send, 200, json.dumps(made).encode())


class _Kept:
    """A `send` that keeps a streamed answer (status, headers, body, its events' JSON payloads) instead of
    sending it, and sets `ended` once its text holds a stop string (MAX 26.7 misses a match its trimmed
    buffer cut, and generates on)."""

    def __init__(self, stops: list[str]):
        self.status, self.headers, self.body = 500, None, b""
        self.payloads: list[dict] = []
        self.stops, self.text, self.ended = stops, "", asyncio.Event()

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status, self.headers = message["status"], message.get("headers")
        elif message["type"] == "http.response.body" and not self.ended.is_set():
            self.body += message.get("body", b"")
            for event in message.get("body", b"").replace(b"\r\n", b"\n").split(b"\n\n"):
                if isinstance(payload := _payload(event), dict):
                    self.payloads.append(payload)
                    self.text += "".join(c.get("text") or "" for c in payload.get("choices") or [])
            if self.status == 200 and stop_at(self.text, self.stops) is not None:
                self.ended.set()


def _sized(scope, data: bytes):
    """The request's scope, its content-length that of `data`, its state its own (MAX keeps a request's id
    there: several streams of one request are several requests to it)."""
    headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
    return {**scope, "headers": [*headers, (b"content-length", str(len(data)).encode())],
            "state": dict(scope.get("state") or {})}


def _replay(data: bytes, receive, ended: asyncio.Event | None = None):
    """A `receive` that gives `data` as the whole body, then waits on the client (MAX watches for its
    disconnect while a request runs, and cancels the request on it): a disconnect once `ended` is set."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}
        if ended is None:
            return await receive()
        client, end = asyncio.ensure_future(receive()), asyncio.ensure_future(ended.wait())
        try:
            await asyncio.wait({client, end}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in (client, end):
                if not waiting.done():
                    waiting.cancel()
        return client.result() if client.done() and not client.cancelled() else {"type": "http.disconnect"}

    return replayed


async def _send(send, status: int, body: bytes, headers: list | None = None) -> None:
    kept = [(k, v) for k, v in (headers or [(b"content-type", b"application/json")]) if k.lower() != b"content-length"]
    await send({"type": "http.response.start", "status": status,
                "headers": [*kept, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _with_reasons(body: bytes, reasons: list[str]) -> bytes:
    """An error MAX answered with a bare "Value error.", with the reason MAX logged put in."""
    if not reasons or b"Value error." not in body:
        return body
    try:
        answer = json.loads(body)
        answer["error"]["message"] = "; ".join(reasons)
        return json.dumps(answer).encode()
    except (ValueError, KeyError, TypeError):
        return body


def _answer(send, how, reasons: list[str], ended: asyncio.Event | None = None):
    """A `send` that hands MAX's answer on as OpenAI's API gives it: a streamed 200 event by event (ended
    here once the stream is done, `ended` set), a whole 200 changed at once, an error with MAX's hidden
    reason put back in. `how`: (plan, decode, key, stream or None), or None to change nothing but errors."""
    start: dict[str, Any] = {}
    chunks: list[bytes] = []
    pending = b""

    async def wrapped(message):
        nonlocal pending
        if ended is not None and ended.is_set():
            return  # the answer was ended here: what MAX still sends goes nowhere
        if message["type"] == "http.response.start":
            start.update(message)
            if message["status"] == 200 and how is not None and how[3] is not None:
                await send(message)  # streamed: the events are changed as they pass
            return
        if message["type"] != "http.response.body":
            return await send(message)
        if start.get("status") == 200 and how is not None and how[3] is not None:
            stream = how[3]
            pending += message.get("body", b"")
            events = pending.replace(b"\r\n", b"\n").split(b"\n\n")
            pending = events.pop()
            out = b"".join(_rewrite(event, stream) for event in events)
            if stream.done and ended is not None:  # a stop string, or max_tokens 0: the answer ends here
                ended.set()
                out += b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in stream.ending())
                return await send({"type": "http.response.body", "body": out + b"data: [DONE]\n\n",
                                   "more_body": False})
            if not message.get("more_body"):
                out, pending = out + pending, b""
            return await send({**message, "body": out})
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = b"".join(chunks)
        if start.get("status") == 200 and how is not None:
            try:
                body = json.dumps(finish(json.loads(body), *how[:3])).encode()
            except (ValueError, KeyError, TypeError, IndexError):
                pass
        else:
            body = _with_reasons(body, reasons)
        await _send(send, start.get("status", 500), body, start.get("headers"))

    return wrapped


def _payload(event: bytes):
    """The JSON one server-sent event carries (None for `[DONE]`, an event of no data, or one not JSON)."""
    data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
    if len(data) != 1 or data[0] == b"[DONE]":
        return None
    try:
        return json.loads(data[0])
    except ValueError:
        return None


def _rewrite(event: bytes, stream: Stream) -> bytes:
    payload = _payload(event)
    if not isinstance(payload, dict) or "choices" not in payload:
        return event + b"\n\n"
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in stream.chunk(payload))
