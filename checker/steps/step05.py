"""Step 05: the learner's token embedding against Hugging Face's `wte` on the check's token ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.reporting.compare import ONE_LAYER, Mistake
from checker.running.loading import hf_state
from checker.diagnosis.localise import rows
from checker.references.reference import activations, token_ids
from checker.reporting.report import Report
from checker.harness.runner import StepRun
from checker.running.tensors import int_tensor
from checker.references.weights import Checkpoint
from checker.registry import Step, register
from checker.diagnosis.compiled import BATCH, SEQ, Probe, table_module

TOKEN_MISTAKES = [
    Mistake("embedding-scaled", "the embeddings were multiplied by sqrt(n_embd), as in 'Attention is all you need'",
            "GPT-2 uses the table's rows as they are", lambda table, ids: table[ids] * np.sqrt(table.shape[1])),
    Mistake("embedding-off-by-one", "each token got the row after its own", "row i belongs to token id i",
            lambda table, ids: table[np.minimum(ids + 1, len(table) - 1)]),
    Mistake("embedding-flattened", "the ids were flattened and the result was not reshaped back: [B*T, C]",
            "gather with the [B, T] ids as they are; the rows come back as [B, T, C]",
            lambda table, ids: table[ids.reshape(-1)]),
    Mistake("embedding-first-sequence", "only the first sequence was looked up (input_ids[0]): [T, C]",
            "keep the batch axis: every sequence gets its own rows", lambda table, ids: table[ids[0]]),
]
CATALOGUE = TOKEN_MISTAKES
# The online book's step 05 (Jan 2026): the table is an Embedding held as `wte`, called with the ids.
BOOK = ("GPT2Embeddings", "GPT2Embeddings(config), an Embedding in self.wte, called with the ids")


def load_table(run: StepRun, cls, config, name: str, state, try_forward) -> object | None:
    """The learner's embedding module with GPT-2's table loaded, or None after finishing the report."""
    rows, cols = next(iter(state.values())).shape
    module = run.construct(lambda: cls(config), state, f"weight [{rows}, {cols}]; GPT-2's transformer.{name} loaded",
                           try_forward=try_forward)
    if module is None:
        run.finish("needs construction to pass (the weights must load)")
    return module


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    refs = activations(checkpoint)
    _, inputs = token_ids(checkpoint)
    config = checkpoint.learner_config()
    state = hf_state(checkpoint, "transformer.wte.", ["weight"])
    run = StepRun("05", "GPT2TokenEmbedding", path, checkpoint, f"{inputs}; float32, {ONE_LAYER}",
                  ["construction", "forward"], timeout=timeout)
    cls = (step := run.import_step()) and run.need(step, "GPT2TokenEmbedding", BOOK)
    if cls is None:
        return run.finish("needs GPT2TokenEmbedding")
    ids = refs["ids"]
    table = state["weight"].astype(np.float64)
    if run.book:  # adapter: the same table, one level down
        state = {f"wte.{k}": v for k, v in state.items()}
    module = load_table(run, cls, config, "wte", state, lambda m: m(int_tensor(ids)))
    if module is None:
        return run.report
    run.run_part("forward", lambda: module(int_tensor(ids)), (), refs["wte"], ("sequences", "positions", ""),
                 TOKEN_MISTAKES, (table, ids), localise=lambda got: rows(got, table, ids, "wte"))
    return run.finish()

PROBE = Probe("05", "GPT2TokenEmbedding", table_module("GPT2TokenEmbedding", "wte"),
              lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["wte"], ("sequences", "positions", ""))


register(Step("05", check, CATALOGUE, reads=("GPT2TokenEmbedding", "GPT2Embeddings"), probe=PROBE))
