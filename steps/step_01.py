"""Step 01: GPT-2's configuration.

Every later step reads its sizes from this config. Fill in GPT-2 small's
values; the names are the ones in Hugging Face's `config.json` for
`openai-community/gpt2`, so the two can be compared field by field.

Check: pixi run s01
"""

from dataclasses import dataclass


@dataclass
class GPT2Config:
    # TODO: GPT-2 small's hyperparameters. Hint: the vocabulary has 50257
    # byte-level BPE tokens; the model is 768 wide with 12 layers of 12 heads.
    vocab_size: int = 0
    n_positions: int = 0  # the longest sequence GPT-2 can attend over
    n_embd: int = 0  # width of the residual stream
    n_layer: int = 0
    n_head: int = 0
    n_inner: int = 0  # MLP hidden width: 4 * n_embd
    layer_norm_epsilon: float = 0.0
