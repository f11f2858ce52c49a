"""MAX 26.7's text-generation pipeline, with greedy batches taking their next tokens without its sampler.

MAX samples every step through a compiled sampling graph (temperature, top-k, top-p, penalties, the
structured-output bitmask) fed by per-step buffers it builds in Python: on a 2-core CPU about 2.5 ms
of every step, a tenth of a decode step at one stream. A greedy request (temperature 0: MAX sets top_k
1) needs none of it: its next token is the argmax of the next-token logits [B, V] the model already
returns, over the tokenizer's ids (MAX's sampler bounds its ids the same way).

A batch takes that way only when every request in it is plainly greedy: top_k 1, no penalties, no
minimum of new tokens, no logits processors, no structured output, no candidate labels to score, and no
log-probabilities asked for. Any other batch is MAX's own step, unchanged.

Such a batch, when every request in it is decoding, also takes its next steps in the same call, a turn
of up to TURN seconds: between two calls MAX's scheduler builds the next batch and sends each token to
the API process, which wakes and streams it, 1-3 ms on a 2-core CPU whose two cores also run the graph
(solution 18 on a 2-core AVX-512 EPYC, one stream of 32-token prompts: 93-106 tokens/s at a step a
call, 126-144 at eight; `bench --serve --fast` and what streaming pays: the performance page's
"Decoding in turns").
A turn ends early when a request finishes (EOS, max_tokens, the context), or when the cache has no page
for a next token; a new request, or a cancelled one, waits at most a turn for the scheduler. A prompt's
step runs alone, so its first token streams at once. (MAX 26.7's pipeline has no multi-step decoding.)
Within a turn a step's inputs are the last step's, advanced in place: each request's next token and cache
length, and the batch's longest cache (which MAX's attention reads to choose its kernel). MAX's
prepare_batch, which builds them all again, page tables included, runs at a turn's first step and when a
request's next position starts a page (its page table then changes): at one stream it took 0.50 ms of a
7.5 ms step, the advance 0.11 (p50 of 10206 steps, the same 2-core EPYC).

The paged cache's pool holds, when POOL is set (runtime.server sets it), that many positions shared by
every request, instead of MAX's max_batch_size x max_length: one cache every request draws pages from,
however long each is. The scheduler admits a prompt when its pages are free and takes a decoding request
out (to run again later) when none is left for its next token; a request at max_length always fits.

A batch MAX prepares (a turn's first step, a page's start, MAX's own step) waits for the copies of its
cache inputs to land before the graph runs: on the CPU MAX 26.7 does not (runtime.kv_inputs).

GPT-2 reads no images or video: the scheduler's per-step questions about their encoders get None at once.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time

from max import tree
from max.nn.kv_cache import KVCacheInputsPerDevice
from max.nn.kv_cache.utils import MHAAttnKey
from max.pipelines.context import TextContext
from max.pipelines.kv_cache import InsufficientBlocksError
from max.pipelines.lib.pipeline_variants.text_generation import TextGenerationPipeline

from gpt2_arch.config import GPT2ArchConfig
from runtime.kv_inputs import settle
from runtime.server import POOL

TURN = 0.05  # seconds: a decoding batch's steps run back to back in one call until this much has passed


def plainly_greedy(context: TextContext) -> bool:
    """Whether the argmax of the request's next-token logits is all MAX's sampler would do for it."""
    params = context.sampling_params
    return (params.top_k == 1 and not params.needs_penalties and params.min_new_tokens == 0
            and not params.logits_processors and context.json_schema is None and context.grammar is None
            and not context.label_token_ids)


def pooled(memory_plan, pipeline_config, positions: int):
    """MAX's memory plan with the cache's bytes cut to `positions` (whole pages, and MAX's null page)."""
    longest = memory_plan.planned_max_length  # max_length: the longest request the server takes
    if positions < longest:
        raise ValueError(f"a pool of {positions} positions cannot hold one request of max_length {longest}: "
                         f"give it at least {longest}")
    kv = GPT2ArchConfig.initialize(pipeline_config, max_seq_len=longest).get_kv_params()
    pages = -(-positions // kv.page_size) + 1
    return dataclasses.replace(memory_plan, available_cache_memory=min(memory_plan.available_cache_memory,
                                                                       pages * kv.bytes_per_block))


class GPT2Pipeline(TextGenerationPipeline[TextContext]):
    """MAX's TextGenerationPipeline; a plainly greedy batch's step skips the sampling graph, the pool holds
    POOL positions when set (module docstring)."""

    def __init__(self, pipeline_config, pipeline_model, weight_adapters, tokenizer, memory_plan):
        if positions := os.environ.get(POOL):
            memory_plan = pooled(memory_plan, pipeline_config, int(positions))
        super().__init__(pipeline_config, pipeline_model, weight_adapters, tokenizer, memory_plan)

    def prepare_batch(self, batches):
        """MAX's, with its copies of the cache's inputs landed before the step reads them (runtime.kv_inputs)."""
        prepared = super().prepare_batch(batches)
        settle(self._devices)
        return prepared

    def _execute(self, inputs):
        batch = inputs.flat_batch
        if not batch or inputs.enable_log_probs or not all(plainly_greedy(c) for c in batch):
            return super()._execute(inputs)
        decoding = all(context.tokens.active_length == 1 for context in batch)
        ends = time.perf_counter() + TURN
        model_inputs = flat_batch = tokens = None
        for step in itertools.count():
            if not (step and self._advanced(model_inputs, flat_batch, tokens)):
                model_inputs, _, flat_batch = self.prepare_batch(inputs.batches)
            outputs = self._launch_forward_pass(model_inputs, flat_batch, step=step)
            logits = outputs.next_token_logits.to_numpy()[:, :self.vocab_size]  # [B, V]
            tokens = logits.argmax(axis=-1).tolist()  # [B]: the first of equal largest, as torch.argmax
            for context, token in zip(flat_batch, tokens):
                context.update(token)
                self._kv_manager.step(context)
            if not (decoding and self._another_step(batch, ends)):
                break
        return {c.request_id: out for c in flat_batch if (out := c.to_generation_output()).tokens}

    def _advanced(self, model_inputs, batch: list[TextContext], tokens: list[int]) -> bool:
        """The last step's inputs made this step's in place, each request having taken one token since: False, and
        nothing written, when a request's next position starts a page or the inputs are of a kind not expected."""
        lengths = [context.tokens.processed_length for context in batch]  # [B]: positions in the cache
        if any(length % self._kv_manager.params.page_size == 0 for length in lengths):  # the new row starts a page
            return False
        leaves = tree.leaves(model_inputs.kv_cache_inputs, leaf=KVCacheInputsPerDevice)
        longest = max(lengths) + 1  # the cache this step reads, its new row's position included
        key = self._kv_manager.params.resolve_attn_key(len(batch), 1, longest)
        if len(leaves) != 1 or not isinstance(key, MHAAttnKey) or leaves[0].attention_dispatch_metadata is None:
            return False
        (kv,) = leaves
        model_inputs.tokens.to_numpy()[:] = tokens  # [B]: a row a request
        kv.cache_lengths.to_numpy()[:] = lengths
        kv.max_cache_length.to_numpy()[:] = longest
        key.pack_into(kv.attention_dispatch_metadata.to_numpy(), longest)
        return True

    def _another_step(self, batch: list[TextContext], ends: float) -> bool:
        """Whether the turn goes on: time left, no request done, and a page for each next token (allocated here,
        as the scheduler does before a step)."""
        if time.perf_counter() > ends or any(c.is_done for c in batch):
            return False
        try:
            for context in batch:
                self._kv_manager.alloc(context)
        except InsufficientBlocksError:
            return False
        return True

    def batch_vision_metrics(self) -> None:
        """None: GPT-2 encodes no images. (The scheduler asks every step; MAX's own answer checks the model
        against a runtime Protocol each time.)"""
        return None

    def batch_video_metrics(self) -> None:
        """None: GPT-2 encodes no video."""
        return None
