"""Step 14's catalogue: positions, rows and models a learner may write instead of the right ones, each with
what it computes (a Variant of Hugging Face's run, or a rule of checker.references.ragged) and the edit
that makes it in the solution."""

from __future__ import annotations

from checker.reporting.compare import Edit, Mistake
from checker.steps.step14.reference import Variant

MISTAKES = [
    (Mistake("positions-not-offset", "each request's positions start at 0 in every batch: its cached positions "
             "are not added, so decode steps embed position 0", "A decoding request's one new token sits after "
             "all it has cached: kv_collection.cache_lengths says how many.",
    edit=Edit('    return rows - first_row + cached', '    return rows - first_row')), Variant(positions="not-offset")),
    (Mistake("positions-batch-rows", "positions count rows of the whole batch, not of each request: a request's "
             "first row gets the rows before it", "Subtract where the row's own request starts "
             "(input_row_offsets).",
    edit=Edit('    return rows - first_row + cached', '    return rows + cached')), Variant(positions="batch-rows")),
    (Mistake("attention-unscaled", "the attention scores are not divided by sqrt(head_dim) (scale 1)",
             "flash_attention_ragged takes the scale: GPT-2's is 1 / sqrt(head_dim).",
    edit=Edit('scale=1 / math.sqrt(attn.head_dim)', 'scale=1.0')), Variant(scaled=False)),
    (Mistake("probabilities-not-logits", "the model hands back probabilities (softmax of the logits), not the "
             "logits: greedy text is the same, but every log-probability the server reports is wrong",
             "The server computes log_softmax itself, for echo and logprobs: return what the tied head gives.",
    edit=Edit('return t.ln_f(x) @ t.wte.weight.T', 'return F.softmax(t.ln_f(x) @ t.wte.weight.T)')),
     Variant(output="probabilities")),
]
ROW_MISTAKES = [
    (Mistake("last-rows-first", "each request's first new row is taken, not its last: a prompt's next token "
             "comes from its first token", "input_row_offsets[b + 1] is where request b ends: its last row is "
             "the one before.",
    edit=Edit("return F.cast(input_row_offsets[1:], DType.int64) - 1",
              "return F.cast(input_row_offsets[:-1], DType.int64)")), "first"),
    (Mistake("last-rows-past", "each request's row is where the next request starts, one past its last: the "
             "last request's is past the batch", "Request b owns rows input_row_offsets[b] .. "
             "input_row_offsets[b + 1] - 1.",
    edit=Edit("return F.cast(input_row_offsets[1:], DType.int64) - 1",
              "return F.cast(input_row_offsets[1:], DType.int64)")), "past"),
]
CATALOGUE = [m for m, _ in MISTAKES] + [m for m, _ in ROW_MISTAKES]
