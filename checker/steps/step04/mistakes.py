"""Step 04's catalogue: MLPs a learner may write instead of GPT-2's, as numpy computes them
(checker.references.gpt2_np), and the edit that makes each in the solution."""

from __future__ import annotations

from functools import partial

from checker.references import gpt2_np as ref
from checker.reporting.compare import Edit, Mistake

MISTAKES = [
    Mistake("gelu-exact", "the exact (erf) GELU was used; GPT-2 uses its tanh approximation",
            "F.gelu takes an `approximate` argument", partial(ref.mlp, act="gelu_exact"),
            edit=Edit('approximate="tanh"', 'approximate="none"')),
    Mistake("relu", "ReLU was used instead of GELU", "GPT-2's activation is GELU (tanh approximation)",
            partial(ref.mlp, act="relu"),
            edit=Edit('F.gelu(hidden_states, approximate="tanh")', 'F.relu(hidden_states)')),
    Mistake("no-activation", "there is no activation between c_fc and c_proj",
            "without a non-linearity the two layers collapse into one", partial(ref.mlp, act="none"),
            edit=Edit('F.gelu(hidden_states, approximate="tanh")', 'hidden_states')),
    Mistake("mlp-no-c-proj", "c_proj was not applied: the output is the 3072-wide hidden layer",
            "finish with self.c_proj(...)", partial(ref.mlp, c_proj=False),
            edit=Edit('return self.c_proj(hidden_states)  # [B, T, C]', 'return hidden_states')),
    Mistake("mlp-no-fc-bias", "c_fc's bias was not added", "call the layer, self.c_fc(x), which adds it",
            partial(ref.mlp, fc_bias=False),
            edit=Edit("hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]",
                      "hidden_states = hidden_states @ self.c_fc.weight.T")),
    Mistake("mlp-no-proj-bias", "c_proj's bias was not added", "call the layer, self.c_proj(x), which adds it",
            partial(ref.mlp, proj_bias=False),
            edit=Edit('return self.c_proj(hidden_states)  # [B, T, C]', 'return hidden_states @ self.c_proj.weight.T')),
]

CATALOGUE = MISTAKES
