"""Step 06's catalogue: position embeddings a learner may write instead of GPT-2's, as numpy computes
them, and the edit that makes each in the solution."""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Edit, Mistake

MISTAKES = [
    Mistake("positions-ignore-past", "the positions start at 0 even after cached tokens",
            "with past_length cached tokens, the first new token is at position past_length",
            lambda table, T, past: table[:T],
            edit=Edit('Tensor.arange(past_length, past_length + seq_len,', 'Tensor.arange(0, seq_len,')),
    Mistake("positions-off-by-one", "the positions start one too late (at past_length + 1)",
            "positions count from 0", lambda table, T, past: table[past + 1:past + T + 1],
            edit=Edit("Tensor.arange(past_length, past_length + seq_len,",
                      "Tensor.arange(past_length + 1, past_length + seq_len + 1,")),
    Mistake("positions-end-is-seq-len", "the positions end at seq_len instead of past_length + seq_len",
            "arange's second argument is where it stops: past_length + seq_len",
            lambda table, T, past: table[past:T],
            edit=Edit('Tensor.arange(past_length, past_length + seq_len,', 'Tensor.arange(past_length, seq_len,')),
    Mistake("positions-whole-table", "the whole table was returned, one row per possible position",
            "return only the rows of the positions asked for", lambda table, T, past: table,
            edit=Edit('return F.gather(self.weight, positions, axis=0)', 'return self.weight')),
    Mistake("positions-batch-axis", "a batch axis was added: [1, T, C] instead of [T, C]",
            "return [seq_len, n_embd]; it broadcasts over the batch when added to the token embeddings",
            lambda table, T, past: table[None, past:past + T],
            edit=Edit("return F.gather(self.weight, positions, axis=0)",
                      "return F.gather(self.weight, positions, axis=0).reshape([1, seq_len, -1])")),
    Mistake("embedding-scaled", "the embeddings were multiplied by sqrt(n_embd)",
            "GPT-2 uses the table's rows as they are",
            lambda table, T, past: table[past:past + T] * np.sqrt(table.shape[1]),
            edit=Edit("return F.gather(self.weight, positions, axis=0)",
                      "return F.gather(self.weight, positions, axis=0) * (768 ** 0.5)")),
]
CATALOGUE = MISTAKES
# The online book's step 06 (Jan 2026): an Embedding held as `wpe`, called with the position ids
# (the caller makes them, past_length included).
