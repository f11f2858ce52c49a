"""Step 11: the language-model head, and loading GPT-2's checkpoint.

The head turns each final hidden state into a score (logit) for every token
of the vocabulary. GPT-2 ties it to the token embedding: the same [V, C]
table that turned tokens into vectors turns vectors back into token scores,
so there is no separate head to load.

    input_ids [B, T] -> transformer -> [B, T, C] -> logits [B, T, V]

`load_hf_weights` puts a Hugging Face GPT-2 checkpoint (a dict of name ->
numpy array, as read from model.safetensors) into your model. Facts you
cannot guess about those files: the Conv1D layers (c_attn, c_proj, c_fc)
store their weights [in, out], while Linear holds [out, in]; older files
store the causal mask as `h.N.attn.bias` and `h.N.attn.masked_bias` (buffers,
not weights; `c_attn.bias` is a real weight), store `lm_head.weight` (the tied
wte again), and name the body's tensors without the `transformer.` prefix.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/11/; or book/docs/steps/11.md).
Check: pixi run s11        Stuck? pixi run s11 --hint
"""

import numpy as np
from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_01 import GPT2Config
from steps.step_10 import GPT2Model  # noqa: F401


class GPT2LMHeadModel(Module):
    def __init__(self, config: GPT2Config):
        # TODO: the body, named `transformer` as in Hugging Face.
        self.transformer = None

    def forward(self, input_ids: Tensor) -> Tensor:
        """[B, T] token ids -> [B, T, V] logits"""
        # TODO: the body's hidden states, scored against every row of the token table.
        #   Which shapes must meet in the product? Logits, not probabilities: no softmax.
        raise NotImplementedError("step 11: GPT2LMHeadModel.forward")


def load_hf_weights(model: GPT2LMHeadModel, hf_tensors: dict[str, np.ndarray]) -> None:
    """Loads a Hugging Face GPT-2 state dict (name -> numpy array) into `model`."""
    # TODO: make {your model's parameter name: array} from hf_tensors and load it with the
    #   module's load_state_dict. Go through the facts in the docstring one by one: which
    #   names to skip, which to rename, which arrays to turn around. (After a transpose,
    #   numpy may need a contiguous copy.)
    raise NotImplementedError("step 11: load_hf_weights")
