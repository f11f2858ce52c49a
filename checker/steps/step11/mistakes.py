"""Step 11's catalogue: loaders and heads a learner may write instead of the right ones: the loading
mistakes recognised by what the loader passed, the logits' as the numpy model computes them, and the edit
that makes each in the solution."""

from __future__ import annotations

import numpy as np

from checker.references.attention_np import log_softmax, softmax
from checker.reporting.compare import Edit, Mistake

CONV1D_NOT_TRANSPOSED = Mistake(
    "load-conv1d-not-transposed", "the Conv1D weights were loaded as stored, [in, out]",
    "Conv1D weights (c_attn, c_proj, c_fc) must be transposed for Linear: value.T",
    edit=Edit('if layer in CONV1D_LAYERS and name.endswith(".weight"):', 'if False:'))
CONV1D_PARTLY = Mistake(
    "load-conv1d-partly-transposed", "some Conv1D weights were transposed, others were loaded as stored, [in, out]",
    "every Conv1D layer needs it: c_attn and c_proj in attn, c_fc and c_proj in mlp",
    edit=Edit('CONV1D_LAYERS = ("c_attn", "c_proj", "c_fc")', 'CONV1D_LAYERS = ("c_attn", "c_fc")'))
# What a loader can get wrong with the original layout's differences.
LAYOUT_MISTAKES = {
    "buffers": Mistake("load-buffers-kept", "the causal-mask buffers attn.bias / attn.masked_bias were loaded "
                       "as if they were parameters", "skip names ending in .attn.bias or .attn.masked_bias: "
                       "they are the mask, not weights (careful: c_attn.bias is a weight)",
                       edit=Edit('if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":',
                                 'if name == "lm_head.weight":')),
    "lm_head": Mistake("load-lm-head-kept", "the stored lm_head.weight was loaded, but the model has no lm_head",
                       "the head is tied to wte: skip lm_head.weight",
                       edit=Edit('if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":',
                                 'if name.endswith((".attn.bias", ".attn.masked_bias")):')),
    "prefix": Mistake("load-prefix-assumed", "the loader expects every name to start with `transformer.`; "
                      "the original file has no prefix", "add `transformer.` to names that lack it",
                      edit=Edit('if not name.startswith("transformer."):', 'if False:')),
}


def _logits(model, ids, **switches):
    return model().hidden(ids, **switches) @ model().wte.T.astype(np.float64)


# Each computes the logits [B, T, V] with the mistake from `model` (a function that
# returns the numpy GPT-2, built only when needed) and the ids.
LOGITS_MISTAKES = [
    Mistake("logits-softmax", "forward returned probabilities (softmax), not logits",
            "return the raw scores; sampling applies softmax later", lambda model, ids: softmax(_logits(model, ids)),
            edit=Edit(("from max.experimental.nn import Module",
                       "return hidden_states @ self.transformer.wte.weight.T"),
                      ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
                       "return F.softmax(hidden_states @ self.transformer.wte.weight.T)"))),
    Mistake("logits-log-softmax", "forward returned log-probabilities, not logits",
            "return the raw scores", lambda model, ids: log_softmax(_logits(model, ids)),
            edit=Edit(("from max.experimental.nn import Module",
                       "return hidden_states @ self.transformer.wte.weight.T"),
                      ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
                       "return F.logsoftmax(hidden_states @ self.transformer.wte.weight.T)"))),
    Mistake("logits-before-ln-f", "the head read the hidden states before ln_f",
            "GPT2Model's output already has ln_f applied: use it", lambda model, ids: _logits(model, ids, ln_f=False),
            edit=Edit("hidden_states = self.transformer(input_ids)  # [B, T, C]",
                      "t = self.transformer\n"
                      "        hidden_states = t.wte(input_ids) + t.wpe(input_ids.shape[-1])\n"
                      "        for block in t.h:\n"
                      "            hidden_states = block(hidden_states)")),
]
CATALOGUE = [CONV1D_NOT_TRANSPOSED, CONV1D_PARTLY, *LAYOUT_MISTAKES.values(), *LOGITS_MISTAKES]
