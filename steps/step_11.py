"""Step 11: the language-model head, and loading GPT-2's checkpoint.

The head turns each final hidden state into a score (logit) for every token
of the vocabulary. GPT-2 ties it to the token embedding: the same [V, C]
table that turned tokens into vectors turns vectors back into token scores.

    input_ids [B, T] -> transformer [B, T, C] -> @ wte.weight^T -> logits [B, T, V]

Then `load_hf_weights` puts a Hugging Face GPT-2 checkpoint (a dict of name ->
numpy array, as read from model.safetensors) into your model.

Check: pixi run s11
"""

import numpy as np
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config
from steps.step_10 import GPT2Model  # noqa: F401


class GPT2LMHeadModel(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the body, named `transformer` as in Hugging Face: GPT2Model(config).
        # There is no separate lm_head: it reuses the body's wte table.
        self.transformer = None

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, V] logits"""
        # TODO: the body's hidden states, then multiply by the token table transposed.
        # Hint: self.transformer.wte.weight is [V, C]; .T makes it [C, V]
        raise NotImplementedError("step 11: GPT2LMHeadModel.forward")


def load_hf_weights(model: GPT2LMHeadModel, hf_tensors: dict[str, np.ndarray]) -> None:
    """Loads a Hugging Face GPT-2 state dict (name -> numpy array) into `model`."""
    # TODO: build {your parameter name: array} and call model.load_state_dict(...). Watch for:
    #   - Conv1D weights (c_attn, c_proj, c_fc) are stored [in, out]; Linear wants [out, in]: .T
    #   - names ending in .attn.bias or .attn.masked_bias are the causal mask, not weights: skip
    #   - lm_head.weight, when present, is the tied wte.weight: skip
    #   - some files name the body's tensors without the "transformer." prefix: add it
    # Hint: np.ascontiguousarray(value) after a transpose
    raise NotImplementedError("step 11: load_hf_weights")
