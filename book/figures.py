"""The book's figures, drawn with matplotlib at build time (book/hooks.py): FIGURES names each file in
book/docs/img/generated/ and what draws it.

    book/figures_model.py     steps 01-12: the model's shapes, structure and numbers
    book/figures_decoding.py  steps 13-17: the cache, the served batch, the roofline, FlashAttention
    book/drawing.py           what both draw with
"""

from __future__ import annotations

from pathlib import Path

from book.figures_decoding import (
    decode_roofline,
    flash_decoding,
    kv_cache_cost,
    kv_cache_mask,
    online_softmax_row,
    paged_batch,
)
from book.figures_model import (
    activations,
    attention_shapes,
    block,
    causal_mask,
    layer_norm,
    lookup,
    model,
    parameters,
    residual,
    sampling,
)

FIGURES = {
    "attention-shapes.svg": attention_shapes,
    "causal-mask.svg": causal_mask,
    "parameters.svg": parameters,
    "layer-norm.svg": layer_norm,
    "activations.svg": activations,
    "token-lookup.svg": lambda p: lookup(p, [2, 0, 4, 2], 6, "token id"),
    "position-lookup.svg": lambda p: lookup(p, [2, 3, 4], 8, "position"),
    "residual.svg": residual,
    "block.svg": block,
    "model.svg": model,
    "sampling.svg": sampling,
    "kv-cache.svg": kv_cache_cost,
    "kv-cache-mask.svg": kv_cache_mask,
    "paged-batch.svg": paged_batch,
    "decode-roofline.svg": decode_roofline,
    "online-softmax.svg": online_softmax_row,
    "flash-decoding.svg": flash_decoding,
}


def draw_all(folder: Path) -> None:
    """Draws every figure of FIGURES into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, draw in FIGURES.items():
        draw(folder / name)
