"""Step 01 as the online book (Feb 2026 layout) asks for it: GPT-2 small's hyperparameters."""

from dataclasses import dataclass


@dataclass
class GPT2Config:
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int = 3072
    layer_norm_epsilon: float = 1e-5
