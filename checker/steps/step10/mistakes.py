"""Step 10's catalogue: GPT-2 bodies a learner may write instead of GPT-2's, as the numpy model computes
them (checker.references.block_np.model_of), and the edit that makes each in the solution."""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Edit, Mistake


def _reversed(model) -> range:
    return range(len(model.blocks) - 1, -1, -1)


CATALOGUE = [
    Mistake("model-no-ln-f", "ln_f was not applied at the end", "finish with self.ln_f(...)",
            lambda model, ids: model().hidden(ids, ln_f=False),
            edit=Edit('return self.ln_f(hidden_states)', 'return hidden_states')),
    Mistake("model-ln-f-every-block", "ln_f was applied after every block instead of once at the end",
            "ln_f runs once, after the last block", lambda model, ids: model().hidden(ids, ln_f="each"),
            edit=Edit(("hidden_states = block(hidden_states)", "return self.ln_f(hidden_states)"),
                      ("hidden_states = self.ln_f(block(hidden_states))", "return hidden_states"))),
    Mistake("model-no-positions", "the position embeddings were not added",
            "add self.wpe's [T, C] to the token embeddings", lambda model, ids: model().hidden(ids, positions=False),
            edit=Edit('self.wte(input_ids) + self.wpe(seq_len)', 'self.wte(input_ids)')),
    Mistake("model-embeddings-scaled", "the token embeddings were multiplied by sqrt(n_embd)",
            "GPT-2 adds the table rows as they are",
            lambda model, ids: model().hidden(ids, scale=np.sqrt(model().wte.shape[1])),
            edit=Edit('self.wte(input_ids) + ', 'self.wte(input_ids) * 768 ** 0.5 + ')),
    Mistake("model-blocks-reversed", "the blocks ran from the last down to h.0", "run h.0 first",
            lambda model, ids: model().hidden(ids, order=_reversed(model())),
            edit=Edit('for block in self.h:', 'for block in reversed(list(self.h)):')),
    Mistake("model-one-block", "only the first block ran", "run every block of self.h, in order",
            lambda model, ids: model().hidden(ids, order=[0]),
            edit=Edit('for block in self.h:', 'for block in list(self.h)[:1]:')),
    Mistake("model-last-block-only", "each block read the embeddings, not the previous block's output",
            "feed each block's output to the next",
            lambda model, ids: model().hidden(ids, order=[len(model().blocks) - 1]),
            edit=Edit(("hidden_states = self.wte(", "hidden_states = block(hidden_states)"),
                      ("embeddings = hidden_states = self.wte(", "hidden_states = block(embeddings)"))),
]
