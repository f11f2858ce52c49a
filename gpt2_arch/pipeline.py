"""MAX 26.7's text-generation pipeline, with greedy batches taking their next tokens without its sampler.

MAX samples every step through a compiled sampling graph (temperature, top-k, top-p, penalties, the
structured-output bitmask) fed by per-step buffers it builds in Python: on a 2-core CPU about 2.5 ms
of every step, a tenth of a decode step at one stream. A greedy request (temperature 0: MAX sets top_k
1) needs none of it: its next token is the argmax of the next-token logits [B, V] the model already
returns, over the tokenizer's ids (MAX's sampler bounds its ids the same way).

A batch takes that way only when every request in it is plainly greedy: top_k 1, no penalties, no
minimum of new tokens, no logits processors, no structured output, no candidate labels to score, and no
log-probabilities asked for. Any other batch is MAX's own step, unchanged.

GPT-2 reads no images or video: the scheduler's per-step questions about their encoders get None at once.
"""

from __future__ import annotations

from max.pipelines.context import TextContext
from max.pipelines.lib.pipeline_variants.text_generation import TextGenerationPipeline
from max.pipelines.lib.pipeline_variants.utils import update_context_and_prepare_responses


def plainly_greedy(context: TextContext) -> bool:
    """Whether the argmax of the request's next-token logits is all MAX's sampler would do for it."""
    params = context.sampling_params
    return (params.top_k == 1 and not params.needs_penalties and params.min_new_tokens == 0
            and not params.logits_processors and context.json_schema is None and context.grammar is None
            and not context.label_token_ids)


class GPT2Pipeline(TextGenerationPipeline[TextContext]):
    """MAX's TextGenerationPipeline; a plainly greedy batch's step skips the sampling graph (module docstring)."""

    def _execute(self, inputs):
        batch = inputs.flat_batch
        if not batch or inputs.enable_log_probs or not all(plainly_greedy(c) for c in batch):
            return super()._execute(inputs)
        model_inputs, _, flat_batch = self.prepare_batch(inputs.batches)
        outputs = self._launch_forward_pass(model_inputs, flat_batch, step=0)
        logits = outputs.next_token_logits.to_numpy()[:, :self.vocab_size]  # [B, V]
        tokens = logits.argmax(axis=-1)[:, None]  # [B, 1]: the first of equal largest, as torch.argmax
        responses = update_context_and_prepare_responses(tokens, flat_batch)
        for context in batch:
            self._kv_manager.step(context)
        return responses

    def batch_vision_metrics(self) -> None:
        """None: GPT-2 encodes no images. (The scheduler asks every step; MAX's own answer checks the model
        against a runtime Protocol each time.)"""
        return None

    def batch_video_metrics(self) -> None:
        """None: GPT-2 encodes no video."""
        return None
