"""Step 01: GPT-2's configuration.

Every later step reads its sizes from this config. Fill in GPT-2 small's
values (the 124M-parameter model, `openai-community/gpt2`). The field names
are the ones in Hugging Face's `config.json`, so the two can be compared
field by field.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/01/; or book/docs/steps/01.md).
Check: pixi run s01        Stuck? pixi run s01 --hint
"""

from dataclasses import dataclass


@dataclass
class GPT2Config:
    # TODO: GPT-2 small's hyperparameters. Questions to answer for each:
    #   vocab_size          how many different tokens can its byte-level BPE tokenizer produce?
    #   n_positions         how long is the longest sequence it can attend over?
    #   n_embd              how many numbers describe one token in the residual stream?
    #   n_layer, n_head     how many transformer blocks, and attention heads per block?
    #   n_inner             how wide is the MLP's hidden layer, as a multiple of n_embd?
    #   layer_norm_epsilon  what small number keeps LayerNorm from dividing by zero?
    vocab_size: int = 0
    n_positions: int = 0
    n_embd: int = 0
    n_layer: int = 0
    n_head: int = 0
    n_inner: int = 0
    layer_norm_epsilon: float = 0.0
