"""`pixi run bench --serve`: GPT-2 served by `max serve` at 1, 4 and 16 concurrent streams, against
transformers' own batched generation on the same checkpoint, the same prompts and the same CPU threads.

    served        solution 14 (the paged KV cache around solution 11's model) behind `max serve`
                  (runtime/server.py starts it); every request streams from /v1/completions, greedy,
                  `ignore_eos`, its prompt sent as token ids so that every request has exactly
                  the same number of prompt tokens and of new ones (the server's usage says so)
    transformers  GPT2LMHeadModel.generate on the same prompts, `streams` of them in one batch, greedy,
                  no EOS stop; its token times are taken by a stopping criterion, called once a step

For each number of streams S, rounds x S requests are sent, S in flight at any time (the served side),
or run as `rounds` batches of S (transformers), after one warm-up round:
  tokens/s        every new token of every request / the wall time from the first send to the last token
  TTFT            time to first token: the request sent -> its first token back (p50)
  per-token       the time between a request's successive streamed pieces (p50, p99 over every gap): a token
                  each, or a turn's tokens at once from a server that decodes in turns (gpt2_arch/pipeline.py)
The same tokens: every request's text equals transformers' greedy ids decoded (runtime.server.same_text),
the argmax taken over the tokenizer's ids as max serve's sampler does (the stand-ins' tokenizers are
smaller than the model), and the server's usage counts every new token asked for.

Then an evaluation harness's scoring: SCORED prompts, each asked for the log-probability of every
prompt token (`echo`, `max_tokens` 0, `logprobs` 1: what lm-evaluation-harness sends for a
log-likelihood), the largest number of streams in flight; the wall time, and the largest difference
from transformers' log_softmax on the same tokens.

Why not `max benchmark`: for /v1/completions it counts the tokens of a request by re-tokenizing the
streamed text (the server's usage is asked for on /v1/chat/completions only, which needs a chat
template GPT-2 has not), and on the stand-ins' tokenizer that count is wrong (62 counted for 16 made).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from runtime.paths import REPO, shown
from runtime.server import MODEL, Server, same_text

# torch, transformers and openai are imported inside the functions that use them: importing them takes seconds.


@dataclass(frozen=True)
class Load:
    """The requests of the bench: at each number of streams, rounds x streams requests."""

    streams: tuple[int, ...]
    prompt_tokens: int
    new_tokens: int
    rounds: int


FULL = Load(streams=(1, 4, 16), prompt_tokens=32, new_tokens=64, rounds=2)
TINY = Load(streams=(1, 2), prompt_tokens=8, new_tokens=8, rounds=1)  # the test suite's: the machinery, quickly
SCORED = 64  # prompts scored with echo (FULL; TINY scores 4)
GOALS = dict(scaling=4.0, against_transformers=1.2)  # at 16 streams: x one stream's tokens/s; x transformers'


@dataclass
class Run:
    """One request's clock: when it was sent, when each token came back, and what it said."""

    sent: float
    times: list[float]
    text: str
    tokens: int


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def summary(runs: list[Run], seconds: float) -> dict:
    """tokens/s (over the `seconds` the runs were measured in), TTFT p50, per-token latency p50/p99 (ms, between
    two pieces of a stream) and decode p50 (ms a token after a request's first: its last piece's time less its
    first's, over its other tokens; a piece may hold a turn's tokens) of one load level's runs."""
    gaps = [1e3 * (b - a) for r in runs for a, b in zip(r.times, r.times[1:])]
    decode = [1e3 * (r.times[-1] - r.times[0]) / (r.tokens - 1) for r in runs if r.tokens > 1 and len(r.times) > 1]
    return dict(requests=len(runs), tokens=sum(r.tokens for r in runs),
                tokens_per_s=sum(r.tokens for r in runs) / seconds,
                ttft_p50_ms=percentile([1e3 * (r.times[0] - r.sent) for r in runs if r.times], 50),
                token_p50_ms=percentile(gaps, 50), token_p99_ms=percentile(gaps, 99),
                decode_p50_ms=percentile(decode, 50))


def whole_characters(tokenizer, vocab: int) -> list[int]:
    """The ids below `vocab` that decode to whole characters (not a part of a UTF-8 sequence, shown as
    U+FFFD). A prompt of ids that ends inside a character makes max serve 26.7 stream part of the
    prompt's text back with the completion (the same tokens, other text), so the bench's prompts avoid it."""
    return [i for i in range(vocab) if "\ufffd" not in tokenizer.decode([i])]


def prompts(ids: list[int], count: int, length: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` ids drawn from `ids`."""
    rng = np.random.default_rng(seed)
    return rng.choice(np.asarray(ids), size=(count, length)).tolist()


# --- transformers ----------------------------------------------------------------------------------


def transformers_level(model, vocab: int, batches: list[list[list[int]]], new_tokens: int
                       ) -> tuple[dict, list[list[int]]]:
    """Each batch through generate(); (its summary, the new ids of every prompt in order)."""
    import torch
    from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList, StoppingCriteria

    class TokenizerIds(LogitsProcessor):  # the argmax over the tokenizer's ids, as max serve's sampler
        def __call__(self, input_ids, scores):
            scores[:, vocab:] = -float("inf")
            return scores

    class Clock(StoppingCriteria):  # called once per generated position, after its token is chosen
        def __init__(self):
            self.times = []

        def __call__(self, input_ids, scores, **kwargs):
            self.times.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
    runs, ids, began = [], [], time.perf_counter()
    for batch in batches:
        clock, sent = Clock(), time.perf_counter()
        x = torch.tensor(batch)
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=config,
                                 logits_processor=LogitsProcessorList([TokenizerIds()]), stopping_criteria=[clock])
        new = out[:, x.shape[1]:].tolist()
        ids += new
        runs += [Run(sent, clock.times, "", len(row)) for row in new]
    return summary(runs, time.perf_counter() - began), ids


# --- the served side ---------------------------------------------------------------------------------


async def _request(client, prompt: list[int], new_tokens: int) -> Run:

    sent, times, text, tokens = time.perf_counter(), [], [], 0
    stream = await client.completions.create(model=MODEL, prompt=prompt, max_tokens=new_tokens, temperature=0,
                                             stream=True, stream_options={"include_usage": True},
                                             extra_body={"ignore_eos": True})
    async for chunk in stream:  # a chunk a token, or a turn's tokens (gpt2_arch/pipeline.py), its text maybe empty
        # (a part of a character, an id past the tokenizer's); and a last one that only says why it stopped
        if chunk.choices and (chunk.choices[0].text or chunk.choices[0].finish_reason is None):
            times.append(time.perf_counter())
            text.append(chunk.choices[0].text)
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    return Run(sent, times, "".join(text), tokens or len(times))  # a server without usage: a token a chunk


def _client(url: str):
    """An OpenAI client of the server at `url` that opens a connection per request: llama-server may close a
    kept-alive connection as the next request goes out on it."""
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600,
                       default_headers={"Connection": "close"})


async def _served_runs(url: str, streams: int, requests: list[list[int]], new_tokens: int, warm: int
                       ) -> tuple[list[Run], float]:
    gate = asyncio.Semaphore(streams)

    async def one(prompt):
        async with gate:
            return await _request(client, prompt, new_tokens)

    async with _client(url) as client:
        await asyncio.gather(*(one(p) for p in requests[:warm]))  # warm-up round
        began = time.perf_counter()
        runs = await asyncio.gather(*(one(p) for p in requests[warm:]))
        return runs, time.perf_counter() - began


def served_runs(url: str, streams: int, requests: list[list[int]], new_tokens: int, warm: int = 0
                ) -> tuple[list[Run], float]:
    """The first `warm` requests warm up; the rest are measured, `streams` in flight at any time: their runs, and
    the seconds they took."""
    return asyncio.run(_served_runs(url, streams, requests, new_tokens, warm))


def served_level(url: str, streams: int, requests: list[list[int]], new_tokens: int) -> tuple[dict, list[Run]]:
    """The first `streams` requests warm up; the rest are measured, `streams` in flight at any time."""
    runs, seconds = served_runs(url, streams, requests, new_tokens, warm=streams)
    return summary(runs, seconds), runs


async def _scored(url: str, streams: int, requests: list[list[int]]) -> tuple[float, list[list[float | None]]]:
    gate = asyncio.Semaphore(streams)

    async def one(prompt):
        async with gate:
            answer = await client.completions.create(model=MODEL, prompt=prompt, max_tokens=0, echo=True,
                                                     logprobs=1, temperature=0)
            return answer.choices[0].logprobs.token_logprobs

    async with _client(url) as client:
        began = time.perf_counter()
        got = await asyncio.gather(*(one(p) for p in requests))
        return time.perf_counter() - began, got


def prompt_logprobs(model, requests: list[list[int]]) -> list[np.ndarray]:
    """transformers' log-probability of each prompt token after the first (log_softmax of the row before)."""
    import torch

    out = []
    for ids in requests:
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1).numpy()
        out.append(np.array([lp[i - 1, ids[i]] for i in range(1, len(ids))]))
    return out


# --- both, side by side ------------------------------------------------------------------------------


def measure(checkpoint, load: Load = FULL) -> dict:
    """Every figure of the serving bench for `checkpoint` (a runtime.checkpoints.Checkpoint)."""
    import torch
    from transformers import AutoTokenizer, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(checkpoint.path)
    vocab = min(len(tokenizer), checkpoint.config()["vocab_size"])
    ids = whole_characters(tokenizer, vocab)
    work = {s: prompts(ids, (load.rounds + 1) * s, load.prompt_tokens, seed=s) for s in load.streams}
    torch.set_grad_enabled(False)
    hf = GPT2LMHeadModel.from_pretrained(checkpoint.path, dtype=torch.float32).eval()
    scored = prompts(ids, SCORED if load is FULL else 4, load.prompt_tokens, seed=64)
    scored_want = prompt_logprobs(hf, scored)
    theirs = {}
    for s in load.streams:  # the first round of prompts warms up
        transformers_level(hf, vocab, [work[s][:s]], load.new_tokens)
        rest = work[s][s:]
        theirs[s] = transformers_level(hf, vocab, [rest[i:i + s] for i in range(0, len(rest), s)], load.new_tokens)
        print(f"transformers, {s} streams: {theirs[s][0]['tokens_per_s']:.1f} tokens/s", file=sys.stderr, flush=True)
    del hf
    levels = []
    with Server(REPO / "solutions" / "solution_14.py", checkpoint.path, max_batch_size=max(load.streams)) as server:
        for s in load.streams:
            ours, runs = served_level(server.url, s, work[s], load.new_tokens)
            expected = [tokenizer.decode(new, skip_special_tokens=True) for new in theirs[s][1]]  # as served
            same = sum(map(same_text, (r.text for r in runs), expected))
            exact = sum(r.tokens == load.new_tokens for r in runs)
            levels.append(dict(streams=s, served=ours, transformers=theirs[s][0], same_text=same, exact_length=exact))
            print(f"max serve, {s} streams: {ours['tokens_per_s']:.1f} tokens/s", file=sys.stderr, flush=True)
        seconds, got = asyncio.run(_scored(server.url, max(load.streams), scored))
        started = server.started_in
    whole = all(g[0] is None and len(g) == len(w) + 1 for g, w in zip(got, scored_want))
    worst = max(float(np.abs(np.array(g[1:], dtype=np.float64) - w).max()) for g, w in zip(got, scored_want)) \
        if whole else float("nan")
    scoring = dict(prompts=len(scored), prompt_tokens=load.prompt_tokens, in_flight=max(load.streams), seconds=seconds,
                   max_abs_diff=worst, every_token_scored=whole)
    return dict(load=asdict(load), server_start_s=started, levels=levels, scoring=scoring)


def report(result: dict) -> str:
    """The serving figures as a Markdown table, with the goals and the token comparison."""
    m, load = result["machine"], result["load"]
    lines = [f"{m['processor']} ({', '.join(m['vector_extensions']) or 'no vector extensions listed'}), {m['cpus']} "
             f"CPUs (torch threads {m['torch_threads']}); {result['model']}, float32",
             f"Each request: {load['prompt_tokens']} prompt tokens, {load['new_tokens']} new tokens, greedy; "
             f"{load['rounds']} x streams requests per row after a warm-up round",
             "", "| streams | served tokens/s | transformers tokens/s | served / transformers | "
                 "TTFT p50 served / transformers | per-token p50 | per-token p99 | same tokens |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in result["levels"]:
        s, t = row["served"], row["transformers"]
        lines.append(f"| {row['streams']} | {s['tokens_per_s']:.1f} | {t['tokens_per_s']:.1f} | "
                     f"{s['tokens_per_s'] / t['tokens_per_s']:.2f}x | "
                     f"{s['ttft_p50_ms']:.0f} / {t['ttft_p50_ms']:.0f} ms | "
                     f"{s['token_p50_ms']:.0f} / {t['token_p50_ms']:.0f} ms | {s['token_p99_ms']:.0f} / "
                     f"{t['token_p99_ms']:.0f} ms | {row['same_text']}/{s['requests']} |")
    first, last = result["levels"][0], result["levels"][-1]
    scaling = last["served"]["tokens_per_s"] / first["served"]["tokens_per_s"]
    against = last["served"]["tokens_per_s"] / last["transformers"]["tokens_per_s"]
    lines += ["", f"Per-token columns: served / transformers. At {last['streams']} streams the server makes "
                  f"{scaling:.2f}x the tokens/s of {first['streams']} stream (goal >= {GOALS['scaling']:g}x) and "
                  f"{against:.2f}x transformers' (goal >= {GOALS['against_transformers']:g}x).",
              f"Every request made exactly {load['new_tokens']} tokens (server usage): "
              f"{'yes' if all(r['exact_length'] == r['served']['requests'] for r in result['levels']) else 'NO'}. "
              f"max serve was ready after {result['server_start_s']:.0f} s."]
    sc = result["scoring"]
    lines += ["", f"Scoring (echo, max_tokens 0, logprobs 1): {sc['prompts']} prompts of {sc['prompt_tokens']} tokens, "
                  f"{sc['in_flight']} in flight, in {sc['seconds']:.1f} s "
                  f"({sc['prompts'] / sc['seconds']:.1f} prompts/s); "
                  f"every prompt token scored: {'yes' if sc['every_token_scored'] else 'NO'}; largest difference "
                  f"from transformers' log_softmax {sc['max_abs_diff']:.1e}."]
    return "\n".join(lines)


def same_tokens(result: dict) -> bool:
    """Every request's text is transformers', and every scored prompt's log-probabilities are (to 1e-3)."""
    scoring = result["scoring"]
    return all(r["same_text"] == r["served"]["requests"] == r["exact_length"] for r in result["levels"]) and \
        scoring["every_token_scored"] and scoring["max_abs_diff"] < 1e-3


def main(checkpoint, machine: dict, json_path: Path, load: Load = FULL) -> int:


    result = dict(model=checkpoint.describe(), machine=machine, **measure(checkpoint, load))
    print(report(result))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(result, indent=1))
    print(f"\nFigures written to {shown(json_path)}")
    return 0 if same_tokens(result) else 1
