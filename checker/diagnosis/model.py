"""Where in a whole model the stream goes wrong, when its logits or last hidden state are off unnamed:

  model   the embeddings, then each block's input and output in turn (recorded as the learner's model
          runs), then what follows the last block (ln_f)
  head    the body's output (model.transformer) against the last hidden state, then the tied head
"""

from __future__ import annotations

import numpy as np

from checker.diagnosis.localise import close
from checker.reporting.compare import WHOLE_MODEL
from checker.running.tensors import int_tensor, to_numpy


def model(run, module, ids: np.ndarray, refs: dict) -> list[str]:
    """The stream as it goes through the learner's model: every block's input and output recorded."""
    blocks = list(getattr(module, "h", []))
    seen: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i, blk in enumerate(blocks):
        forward = blk.forward

        def recording(x, *args, i=i, forward=forward, **kwargs):
            y = forward(x, *args, **kwargs)
            seen.append((i, np.from_dlpack(x).astype(np.float64), np.from_dlpack(y).astype(np.float64)))
            return y

        object.__setattr__(blk, "forward", recording)
    try:
        run.call(module, int_tensor(ids))
    finally:
        for blk in blocks:
            object.__delattr__(blk, "forward")
    if not seen:
        return []
    hidden, n = refs["hidden"], len(blocks)
    wants = [*hidden[1:n], refs["last_block_out"]]  # each block's right output
    order = [i for i, _, _ in seen]
    if order != list(range(n)):
        return [f"where: the blocks ran in the order {', '.join(f'h.{i}' for i in order[:14])}"
                f"{', ...' if len(order) > 14 else ''} (expected h.0 to h.{n - 1}, once each)"]
    if not close(seen[0][1], hidden[0]):
        return ["where: the input of h.0 is not wte(ids) + wpe(positions): the embeddings"]
    for (i, x, y), want in zip(seen, wants):
        if i and not close(x, seen[i - 1][2], WHOLE_MODEL):
            return [f"where: h.0 to h.{i - 1} are right, but h.{i}'s input is not h.{i - 1}'s output"]
        if not close(y, want, WHOLE_MODEL):
            return [f"where: the stream is right up to h.{i}'s input; h.{i}'s output is not"]
    return [f"where: every block's input and output are right; what follows h.{n - 1} is not (ln_f?)"]


def head(run, module, ids: np.ndarray, refs: dict) -> list[str]:
    """The body's output (model.transformer) against the last hidden state."""
    body = getattr(module, "transformer", None)
    if body is None:
        return []
    hidden = to_numpy(run.call(body, int_tensor(ids)), "transformer")
    if close(hidden, refs["last_hidden"], WHOLE_MODEL):
        return ["where: the body (self.transformer) gives the right last hidden state; the head after it "
                "(hidden_states @ wte.weight.T) is not"]
    return ["where: the body (self.transformer) already differs from the last hidden state: run step 10's check"]
