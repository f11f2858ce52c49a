"""Step 01 solution: GPT-2 small's hyperparameters.

The names are the ones in Hugging Face's `config.json` for
`openai-community/gpt2`, so a config loaded from the checkpoint and this one
can be compared field by field.
"""

from dataclasses import dataclass


@dataclass
class GPT2Config:
    vocab_size: int = 50257  # byte-level BPE tokens
    n_positions: int = 1024  # the longest sequence GPT-2 can attend over
    n_embd: int = 768  # width of the residual stream, d_model
    n_layer: int = 12  # transformer blocks
    n_head: int = 12  # attention heads per block; head_dim = 768 / 12 = 64
    n_inner: int = 3072  # MLP hidden width, 4 * n_embd
    layer_norm_epsilon: float = 1e-5
