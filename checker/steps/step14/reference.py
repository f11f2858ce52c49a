"""Step 14's references: Hugging Face run batch by batch through the paged-model part's SCENARIO, right
and as each known mistake would (Variant: its positions, its attention's scale, what it hands back).

    scenario_tokens(vocab)              {request: the tokens it feeds, in order}
    scenario_logits(model, tokens)      [rows, V] per batch: every new row's logits
    scenario_stream(model, tokens)      each block's inputs and outputs per batch, for placing a difference
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from checker.diagnosis.stream import hooked
from checker.references.ragged import positions
from runtime.checkpoints import Checkpoint

# torch and transformers are imported inside the functions that use them: importing them takes seconds.

PAGED_LAYERS = 2  # blocks compiled for the paged-model part: two tell layer 0's cache pages from layer 1's
PAGE_SIZE = 16

# The paged-model part's batches: (request, new tokens) in batch order.
SCENARIO = [
    [("A", 5), ("B", 3), ("C", 7)],  # three prompts
    [("C", 1), ("A", 1), ("D", 4)],  # two decodes, and a prompt arriving
    [("B", 1), ("D", 1), ("A", 1), ("C", 1)],  # B back after sitting a batch out
]

@dataclass(frozen=True)
class Variant:
    """How a mistaken model differs: its positions rule, the attention's scale, what it hands back."""

    positions: str = "right"
    scaled: bool = True
    output: str = "logits"  # or "probabilities"


def hf_model(checkpoint: Checkpoint, layers: int | None, scaled: bool = True):
    """Hugging Face's GPT-2 on `checkpoint`: its first `layers` blocks (all: None), scaled attention or not."""
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging

    logging.set_verbosity_error()  # the blocks left out of a truncated model are expected
    logging.disable_progress_bar()  # "Loading weights" would land in the middle of a report

    extra = {"n_layer": layers} if layers else {}
    return GPT2LMHeadModel.from_pretrained(checkpoint.path, scale_attn_weights=scaled, **extra).eval()


def scenario_tokens(vocab: int) -> dict[str, list[int]]:
    """The tokens each request of SCENARIO feeds, in order: fixed, drawn below the tokenizer's size."""
    rng = np.random.default_rng(14)
    total: dict[str, int] = {}
    for batch in SCENARIO:
        for name, n in batch:
            total[name] = total.get(name, 0) + n
    return {name: rng.integers(0, vocab, size=n).tolist() for name, n in total.items()}


def scenario_rows(tokens: dict[str, list[int]]) -> list[list[tuple[str, bool]]]:
    """Per batch, each new row's (request, whether it is a prompt row)."""
    seen: set[str] = set()
    out = []
    for batch in SCENARIO:
        rows = []
        for name, n in batch:
            rows += [(name, name not in seen)] * n
            seen.add(name)
        out.append(rows)
    return out


def scenario_places(tokens: dict[str, list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every new row of SCENARIO in batch order: its token id, its position, and its request's cache length
    before the batch, each [rows]."""
    done = {name: 0 for name in tokens}
    ids, places, cached = [], [], []
    for batch in SCENARIO:
        for name, n in batch:
            ids += tokens[name][done[name]:done[name] + n]
            places += range(done[name], done[name] + n)
            cached += [done[name]] * n
            done[name] += n
    return np.array(ids), np.array(places), np.array(cached)


def scenario_stream(model, tokens: dict[str, list[int]]) -> dict[str, np.ndarray]:
    """Hugging Face through SCENARIO, every row's stream where the learner's model is probed (Probed):
    {"h.i.ln_1": the input of block i, "h.i.ln_2": after its attention half, "h.i.mlp": its MLP's output,
    "h.i.ln_1 out" and "h.i.ln_2 out": what its norms gave, "ln_f": ln_f's input, "ln_f out": its output},
    each [all rows of all batches, C] in batch order."""
    import torch

    with hooked(model) as seen, torch.no_grad():
        scenario_logits(model, tokens)
    return {name: np.concatenate(rows) for name, rows in seen.items()}


def scenario_logits(model, tokens: dict[str, list[int]], variant: Variant = Variant()) -> list[np.ndarray]:
    """Hugging Face through SCENARIO as `variant` computes it: per batch, every new row's [rows, V] logits.

    Each request keeps its own Hugging Face cache, so keys and values are those computed at the
    variant's positions, as a learner's cache would hold them."""
    import torch

    caches: dict[str, object] = {}
    done = {name: 0 for name in tokens}
    out = []
    for batch in SCENARIO:
        offsets = np.cumsum([0] + [n for _, n in batch])
        cached = np.array([done[name] for name, _ in batch])
        pos = positions(offsets, cached, variant.positions)
        rows = []
        for b, (name, n) in enumerate(batch):
            ids = torch.tensor([tokens[name][done[name]:done[name] + n]])
            with torch.no_grad():
                result = model(ids, past_key_values=caches.get(name), position_ids=torch.from_numpy(
                    pos[None, offsets[b]:offsets[b + 1]]), use_cache=True)
            caches[name] = result.past_key_values
            logits = result.logits[0].double()
            rows.append((torch.softmax(logits, -1) if variant.output == "probabilities" else logits).numpy())
            done[name] += n
        out.append(np.concatenate(rows))
    return out
