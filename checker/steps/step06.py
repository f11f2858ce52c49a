"""Step 06: the learner's position embedding against Hugging Face's `wpe`, with and without cached tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.reporting.compare import ONE_LAYER, Mistake
from checker.running.loading import hf_state
from checker.diagnosis.localise import rows
from checker.references.reference import OFFSET, activations
from checker.reporting.report import Report
from checker.harness.runner import StepRun
from checker.running.tensors import int_tensor
from checker.steps.step05 import load_table
from checker.references.weights import Checkpoint
from checker.registry import Step, register
from checker.diagnosis.compiled import BATCH, SEQ, Probe, table_module


MISTAKES = [
    Mistake("positions-ignore-past", "the positions start at 0 even after cached tokens",
            "with past_length cached tokens, the first new token is at position past_length",
            lambda table, T, past: table[:T]),
    Mistake("positions-off-by-one", "the positions start one too late (at past_length + 1)",
            "positions count from 0", lambda table, T, past: table[past + 1:past + T + 1]),
    Mistake("positions-end-is-seq-len", "the positions end at seq_len instead of past_length + seq_len",
            "arange's second argument is where it stops: past_length + seq_len",
            lambda table, T, past: table[past:T]),
    Mistake("positions-whole-table", "the whole table was returned, one row per possible position",
            "return only the rows of the positions asked for", lambda table, T, past: table),
    Mistake("positions-batch-axis", "a batch axis was added: [1, T, C] instead of [T, C]",
            "return [seq_len, n_embd]; it broadcasts over the batch when added to the token embeddings",
            lambda table, T, past: table[None, past:past + T]),
    Mistake("embedding-scaled", "the embeddings were multiplied by sqrt(n_embd)",
            "GPT-2 uses the table's rows as they are",
            lambda table, T, past: table[past:past + T] * np.sqrt(table.shape[1])),
]
CATALOGUE = MISTAKES
# The online book's step 06 (Jan 2026): an Embedding held as `wpe`, called with the position ids
# (the caller makes them, past_length included).
BOOK = ("GPT2PositionEmbeddings", "GPT2PositionEmbeddings(config), an Embedding in self.wpe, called with "
        "the position ids")


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    config = checkpoint.learner_config()
    T = refs["ids"].shape[1]
    state = hf_state(checkpoint, "transformer.wpe.", ["weight"])
    parts = {f"positions 0..{T - 1}": (0, refs["wpe"]), f"after {OFFSET} cached tokens": (OFFSET, refs["wpe_offset"])}
    run = StepRun("06", "GPT2PositionEmbedding", path, checkpoint,
                  f"forward(seq_len={T}, past_length=0 and {OFFSET}); float32, {ONE_LAYER}",
                  ["construction", *parts], timeout=timeout)
    cls = (step := run.import_step()) and run.need(step, "GPT2PositionEmbedding", BOOK)
    if cls is None:
        return run.finish("needs GPT2PositionEmbedding")
    table = state["weight"].astype(np.float64)
    if run.book:  # adapter: the table one level down, called with the positions themselves
        state = {f"wpe.{k}": v for k, v in state.items()}

        def forward(m, T, past):
            return m(int_tensor(np.arange(past, past + T)))
    else:
        def forward(m, T, past):
            return m(T, past)
    module = load_table(run, cls, config, "wpe", state, lambda m: forward(m, T, 0))
    if module is None:
        return run.report
    for name, (past, want) in parts.items():
        run.run_part(name, lambda past=past: forward(module, T, past), (), want, ("positions", ""),
                     MISTAKES, (table, T, past), what="forward",
                     localise=lambda got, past=past: rows(got, table, np.arange(past, past + T), "wpe"))
    return run.finish()

PROBE = Probe("06", "GPT2PositionEmbedding", table_module("GPT2PositionEmbedding", "wpe"),
              lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["wpe"], ("positions", ""))


register(Step("06", check, CATALOGUE, reads=("GPT2PositionEmbedding", "GPT2PositionEmbeddings"), probe=PROBE))
