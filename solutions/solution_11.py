"""Step 11 solution: the language-model head, and loading GPT-2's checkpoint.

The head turns each final hidden state into a score (logit) for every token
of the vocabulary. GPT-2 ties it to the token embedding: the same [V, C]
table that turned tokens into vectors turns vectors back into token scores.

    input_ids [B, T] -> transformer [B, T, C] -> @ wte.weight^T -> logits [B, T, V]

`load_hf_weights` puts a Hugging Face GPT-2 checkpoint into the model:
- Conv1D weights (`c_attn`, `c_proj`, `c_fc`) are stored [in, out]; Linear wants [out, in];
- `attn.bias` / `attn.masked_bias` in older files are the causal mask, not weights;
- `lm_head.weight`, when present, is the tied `wte.weight` again;
- older files name the body's tensors without the `transformer.` prefix.
"""

import numpy as np
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_10 import GPT2Model

CONV1D_LAYERS = ("c_attn", "c_proj", "c_fc")


class GPT2LMHeadModel(Module):
    def __init__(self, config: GPT2Config):
        self.transformer = GPT2Model(config)

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, V] logits"""
        hidden_states = self.transformer(input_ids)  # [B, T, C]
        return hidden_states @ self.transformer.wte.weight.T  # tied lm_head: [B, T, V]


def load_hf_weights(model: GPT2LMHeadModel, hf_tensors: dict[str, np.ndarray]) -> None:
    """Loads a Hugging Face GPT-2 state dict (name -> numpy array) into `model`."""
    state = {}
    for name, value in hf_tensors.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":
            continue  # mask buffers, and the tied head
        if not name.startswith("transformer."):
            name = "transformer." + name
        layer = name.split(".")[-2]
        if layer in CONV1D_LAYERS and name.endswith(".weight"):
            value = value.T  # Conv1D [in, out] -> Linear [out, in]
        state[name] = np.ascontiguousarray(value)
    model.load_state_dict(state)
