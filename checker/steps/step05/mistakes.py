"""Step 05's catalogue: token embeddings a learner may write instead of GPT-2's, as numpy computes them,
and the edit that makes each in the solution."""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Edit, Mistake

TOKEN_MISTAKES = [
    Mistake("embedding-scaled", "the embeddings were multiplied by sqrt(n_embd), as in 'Attention is all you need'",
            "GPT-2 uses the table's rows as they are", lambda table, ids: table[ids] * np.sqrt(table.shape[1]),
            edit=Edit("return F.gather(self.weight, input_ids, axis=0)",
                      "return F.gather(self.weight, input_ids, axis=0) * (768 ** 0.5)")),
    Mistake("embedding-off-by-one", "each token got the row after its own", "row i belongs to token id i",
            lambda table, ids: table[np.minimum(ids + 1, len(table) - 1)],
            edit=Edit('F.gather(self.weight, input_ids, axis=0)', 'F.gather(self.weight, input_ids + 1, axis=0)')),
    Mistake("embedding-flattened", "the ids were flattened and the result was not reshaped back: [B*T, C]",
            "gather with the [B, T] ids as they are; the rows come back as [B, T, C]",
            lambda table, ids: table[ids.reshape(-1)],
            edit=Edit("F.gather(self.weight, input_ids, axis=0)",
                      "F.gather(self.weight, input_ids.reshape([-1]), axis=0)")),
    Mistake("embedding-first-sequence", "only the first sequence was looked up (input_ids[0]): [T, C]",
            "keep the batch axis: every sequence gets its own rows", lambda table, ids: table[ids[0]],
            edit=Edit('F.gather(self.weight, input_ids, axis=0)', 'F.gather(self.weight, input_ids[0], axis=0)')),
]
CATALOGUE = TOKEN_MISTAKES
# The online book's step 05 (Jan 2026): the table is an Embedding held as `wte`, called with the ids.
