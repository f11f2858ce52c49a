"""Step 06: the learner's position embedding against Hugging Face's `wpe`, with and without cached tokens."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.diagnosis.compiled import Probe, table_module
from checker.diagnosis.localise import rows
from checker.harness.runner import StepRun
from checker.references.reference import OFFSET, activations
from checker.reporting.compare import ONE_LAYER
from checker.reporting.report import Report
from checker.running.tensors import int_tensor
from checker.steps.step05.check import load_table
from checker.steps.step06.mistakes import MISTAKES
from runtime.checkpoints import Checkpoint
from runtime.compiling import BATCH, SEQ
from runtime.loading import hf_state

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
