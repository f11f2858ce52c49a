"""Step 04: GPT-2's MLP (the feed-forward network).

After attention has mixed information between tokens, the MLP processes each
token on its own: it widens the 768 numbers to 3072, applies a non-linearity,
and narrows them back to 768.

    x [B, T, C] -> c_fc -> [B, T, 4C] -> GELU -> c_proj -> [B, T, C]

Facts you cannot guess: GPT-2's non-linearity is GELU in its *tanh
approximation* (Hugging Face calls it "gelu_new"), not the exact erf one;
both layers have a bias; they are named `c_fc` and `c_proj`, as in GPT-2's
checkpoint (`h.0.mlp.c_fc.weight`).

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/04/; or book/docs/steps/04.md).
Check: pixi run s04        Stuck? pixi run s04 --hint
"""

from max.experimental import functional as F  # noqa: F401  (MAX's tensor operations)
from max.experimental.nn import Module

from steps.step_01 import GPT2Config


class GPT2MLP(Module):
    def __init__(self, config: GPT2Config):
        # TODO: two linear layers with a bias, from max.experimental.nn:
        #   self.c_fc widens n_embd to n_inner; self.c_proj narrows n_inner back to n_embd.
        #   Which size comes first when you make one?
        self.c_fc = None
        self.c_proj = None

    def forward(self, hidden_states):
        """[B, T, C] -> [B, T, C]"""
        # TODO: c_fc, the non-linearity, c_proj.
        #   Without the non-linearity, what would two linear layers in a row amount to?
        raise NotImplementedError("step 04: GPT2MLP.forward")
