"""gpt2_arch/pipeline.py without a server: a plainly greedy batch's tokens are its logits' argmax, a decoding
batch takes steps in one call until its turn is over, a request finishes or the cache has no page, and within a
turn each step's inputs are the last step's advanced in place, equal to what MAX would build for it.

The model's forward and MAX's batch preparation are stand-ins (each step's logits chosen here); the contexts
are MAX's own TextContext, whose token buffer and status the pipeline advances as the scheduler will read them.
The inputs' test runs on MAX's own paged cache manager (one layer, one head).
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
from runtime.kv_inputs import staged

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
    made._advanced = lambda model_inputs, batch, tokens: False  # no inputs here (test_a_turns_inputs_...)
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


def _inputs(manager, batch: list[TextContext]):
    """What MAX's prepare_batch gives the model for `batch` (its ragged batch processor's fields), the paged cache's
    inputs from MAX's own manager."""
    from max.driver import Buffer
    from max.pipelines.architectures.llama3_modulev3.inputs import Llama3Inputs

    return Llama3Inputs(tokens=Buffer.from_numpy(np.concatenate([c.tokens.active for c in batch]).astype(np.int64)),
                        input_row_offsets=Buffer.from_numpy(np.cumsum([0] + [c.tokens.active_length for c in batch],
                                                                      dtype=np.uint32)),
                        return_n_logits=Buffer.from_numpy(np.array([1], np.int64)),
                        kv_cache_inputs=staged(manager, [batch]))


def _values(model_inputs) -> list[np.ndarray]:
    return [np.array(buffer.to_numpy()) for buffer in model_inputs.buffers]


def test_a_turns_inputs_are_advanced_in_place_as_max_would_build_them(monkeypatch):
    """Two requests decoding across a page's end (pages of 128 positions): MAX's preparation runs at the turn's first
    step and at the step whose new position starts a page; every step's inputs, advanced or built, equal those MAX
    builds for that step's batch."""
    from max.driver import CPU
    from max.dtype import DType
    from max.engine import InferenceSession
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams
    from max.pipelines.kv_cache import PagedKVCacheManager

    params = MHAKVCacheParams(dtype=DType.float32, n_kv_heads=1, head_dim=64, num_layers=1, page_size=128,
                              devices=[DeviceRef.CPU()])
    manager = PagedKVCacheManager(params=params, session=InferenceSession(devices=[CPU()]), total_num_pages=8,
                                  max_batch_size=4)
    made, steps = pipeline()
    made._kv_manager = manager
    monkeypatch.setattr(served_pipeline, "TURN", 60.0)  # the turn ends when request 0 is done, 11 steps on
    batch = [request(list(range(1, 125)), max_length=136, decoding=False),
             request(list(range(1, 60)), max_length=200, decoding=False)]
    for context in batch:  # each prompt's step: its positions in the cache, its first token taken
        manager.claim(context)
        manager.alloc(context)
        context.update(0)
        manager.step(context)
        context.to_generation_output()
    built, seen, expected = [], [], []

    def prepare(batches):
        built.append(len(seen))
        flat = [c for b in batches for c in b]
        return _inputs(manager, flat), None, flat

    forward = made._launch_forward_pass

    def checked(model_inputs, flat_batch, step):
        seen.append(_values(model_inputs))  # before MAX builds the same step's inputs (into the same buffers)
        expected.append(_values(_inputs(manager, flat_batch)))
        return forward(model_inputs, flat_batch, step)

    made.prepare_batch, made._launch_forward_pass = prepare, checked
    del made._advanced  # the pipeline's own
    run(made, batch)
    assert steps == list(range(11)) and batch[0].is_done and not batch[1].is_done
    assert built == [0, 4]  # request 0's step 4 writes position 124 + 4, a new page's first
    for step, (got, want) in enumerate(zip(seen, expected)):
        assert len(got) == len(want) == 10  # 3 of the batch, 7 of the paged cache (its blocks among them)
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g, w, err_msg=f"step {step}'s input {i}")
