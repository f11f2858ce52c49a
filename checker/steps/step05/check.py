"""Step 05: the learner's token embedding against Hugging Face's `wte` on the check's token ids, then on the
table's first and last ids (0, 1, V - 2 and V - 1, GPT-2's <|endoftext|>), which text rarely holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.diagnosis.compiled import Probe, table_module
from checker.diagnosis.localise import rows
from checker.harness.runner import StepRun
from checker.references.reference import activations, token_ids
from checker.reporting.compare import ONE_LAYER
from checker.reporting.report import Report
from checker.running.tensors import int_tensor
from checker.steps.step05.mistakes import TOKEN_MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import BATCH, SEQ
from runtime.loading import hf_state

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
                  ["construction", "forward", "forward, first and last ids"], timeout=timeout)
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
    V = len(table)
    edges = np.array([[0, 1, V - 2, V - 1], [V - 1, 0, V - 1, 1]], dtype=np.int64)  # [2, 4]
    run.run_part("forward, first and last ids", lambda: module(int_tensor(edges)), (), state_rows(state, edges),
                 ("sequences", "positions", ""), TOKEN_MISTAKES, (table, edges),
                 localise=lambda got: rows(got, table, edges, "wte"))
    return run.finish()


def state_rows(state: dict, ids: np.ndarray) -> np.ndarray:
    """The rows of the loaded table (Hugging Face's wte.weight) at ids [B, T] -> [B, T, C]: what wte(ids) is."""
    return next(iter(state.values()))[ids]


PROBE = Probe("05", "GPT2TokenEmbedding", table_module("GPT2TokenEmbedding", "wte"),
              lambda r: [(r["ids"], (BATCH, SEQ))], lambda r: r["wte"], ("sequences", "positions", ""))
