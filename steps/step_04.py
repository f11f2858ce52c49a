"""Step 04: GPT-2's MLP (the feed-forward network).

After attention has mixed information between tokens, the MLP processes each
token on its own: widen 768 -> 3072, apply GELU, narrow 3072 -> 768.

    x [B, T, C] -> c_fc [B, T, 4C] -> GELU (tanh approximation) -> c_proj [B, T, C]

Use Hugging Face's names (`c_fc`, `c_proj`) so GPT-2's `mlp.*` weights load.

Check: pixi run s04
"""

from max.experimental import functional as F  # noqa: F401  (F.gelu)
from max.experimental.nn import Module

from steps.step_01 import GPT2Config


class GPT2MLP(Module):
    def __init__(self, config: GPT2Config):
        # TODO: two Linear layers with bias:
        #   self.c_fc   n_embd -> n_inner (3072)
        #   self.c_proj n_inner -> n_embd
        # Hint: from max.experimental.nn import Linear; Linear(in_dim, out_dim, bias=True)
        self.c_fc = None
        self.c_proj = None

    def forward(self, hidden_states):
        """[B, T, C] -> [B, T, C]"""
        # TODO: c_fc, then GELU, then c_proj.
        # Hint: GPT-2 uses GELU's tanh approximation: F.gelu(x, approximate="tanh")
        raise NotImplementedError("step 04: GPT2MLP.forward")
