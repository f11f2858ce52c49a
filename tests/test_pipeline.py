"""gpt2_arch/pipeline.py without a server: a plainly greedy batch's tokens are its logits' argmax, and a
decoding batch takes steps in one call until its turn is over, a request finishes or the cache has no page.

The model's forward and MAX's batch preparation are stand-ins (each step's logits chosen here); the contexts
are MAX's own TextContext, whose token buffer and status the pipeline advances as the scheduler will read them.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from max.pipelines.context import SamplingParams, TextContext, TokenBuffer
from max.pipelines.context.eos_tracking import EOSTracker
from max.pipelines.kv_cache import InsufficientBlocksError

from gpt2_arch import pipeline as served_pipeline
from gpt2_arch.pipeline import GPT2Pipeline

VOCAB = 16


class Cache:
    """The paged cache's calls the pipeline makes: `pages` more allocations succeed, then none."""

    def __init__(self, pages: int):
        self.pages, self.allocs, self.steps = pages, 0, 0

    def alloc(self, context):
        if self.pages == self.allocs:
            raise InsufficientBlocksError("no free page")
        self.allocs += 1

    def step(self, context):
        self.steps += 1


class Logits:
    def __init__(self, rows: np.ndarray):
        self.rows = rows

    def to_numpy(self) -> np.ndarray:
        return self.rows


def pipeline(pages: int = 1000) -> tuple[GPT2Pipeline, list[int]]:
    """A GPT2Pipeline whose step s gives request b the token (3 * s + b) % VOCAB (a tie with the token
    after it, which argmax must not take) over VOCAB + 2 logits (the 2 past the tokenizer's ids larger)."""
    made = object.__new__(GPT2Pipeline)
    made.vocab_size, made._kv_manager = VOCAB, Cache(pages)
    steps = []

    def forward(model_inputs, flat_batch, step):
        steps.append(step)
        logits = np.zeros((len(flat_batch), VOCAB + 2), np.float32)
        logits[:, VOCAB:] = 100.0
        for b in range(len(flat_batch)):
            token = (3 * step + b) % VOCAB
            logits[b, token] = logits[b, (token + 1) % VOCAB] = 1.0
        return SimpleNamespace(next_token_logits=Logits(logits))

    made.prepare_batch = lambda batches: (None, None, [c for batch in batches for c in batch])
    made._launch_forward_pass = forward
    return made, steps


def request(prompt: list[int], max_length: int = 64, decoding: bool = True, eos: int | None = None,
            **sampling) -> TextContext:
    """A greedy request (ending at the token `eos`, if given), after its prompt's step (one new token, at 0) when
    `decoding`."""
    context = TextContext(max_length=max_length, tokens=TokenBuffer(np.array(prompt, np.int64)),
                          sampling_params=SamplingParams(**{"temperature": 0, **sampling}),
                          eos_tracker=EOSTracker(eos_token_ids=set() if eos is None else {eos}))
    if decoding:
        context.update(0)
        context.to_generation_output()
    return context


def run(made: GPT2Pipeline, batch: list[TextContext]) -> dict:
    """Request b's tokens in the answer to one call, by b."""
    answer = made._execute(SimpleNamespace(flat_batch=batch, batches=[batch], enable_log_probs=False))
    return {b: list(answer[c.request_id].tokens) for b, c in enumerate(batch) if c.request_id in answer}


def test_a_decoding_batch_steps_until_a_request_is_done():
    made, steps = pipeline()
    batch = [request([1, 2], max_length=64), request([3, 4, 5], max_length=9)]  # the second: 5 more tokens
    answers = run(made, batch)
    assert steps == [0, 1, 2, 3, 4]
    assert answers == {0: [0, 3, 6, 9, 12], 1: [1, 4, 7, 10, 13]}  # each step's argmax, the first of a tie
    assert batch[1].is_done and not batch[0].is_done
    assert made._kv_manager.steps == 10 and made._kv_manager.allocs == 8  # a page asked for before each next step


def test_a_turn_ends_at_a_requests_end_of_sequence():
    made, steps = pipeline()
    batch = [request([1, 2]), request([3], eos=7)]
    assert run(made, batch) == {0: [0, 3, 6], 1: [1, 4, 7]} and steps == [0, 1, 2]
    assert batch[1].is_done and not batch[0].is_done


def test_a_turn_ends_when_the_cache_has_no_page_for_the_next_token():
    made, steps = pipeline(pages=5)  # two steps' pages for the two requests, one over
    answers = run(made, [request([1, 2]), request([3])])
    assert steps == [0, 1, 2] and answers == {0: [0, 3, 6], 1: [1, 4, 7]}


def test_a_turn_ends_when_its_time_is_over(monkeypatch):
    monkeypatch.setattr(served_pipeline, "TURN", 0.0)
    made, steps = pipeline()
    assert run(made, [request([1, 2])]) == {0: [0]} and steps == [0]


def test_a_prompt_takes_its_step_alone():
    """A batch with a prompt (its rows not yet in the cache) answers after one step: its first token streams at
    once. The decoding request beside it gets one token too."""
    made, steps = pipeline()
    answers = run(made, [request([1, 2]), request([7, 8, 9], decoding=False)])
    assert steps == [0] and answers == {0: [0], 1: [1]}


@pytest.mark.parametrize("sampling", [{"temperature": 0.7}, {"temperature": 0, "frequency_penalty": 0.5}])
def test_a_batch_that_is_not_plainly_greedy_is_maxs_own_step(monkeypatch, sampling):
    made, steps = pipeline()
    monkeypatch.setattr(served_pipeline.TextGenerationPipeline, "_execute", lambda self, inputs: "MAX's step")
    inputs = SimpleNamespace(flat_batch=[request([1, 2]), request([3], **sampling)], enable_log_probs=False)
    assert made._execute(inputs) == "MAX's step" and steps == []
