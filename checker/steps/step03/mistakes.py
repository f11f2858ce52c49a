"""Step 03's catalogue: LayerNorms a learner may write instead of GPT-2's, as numpy computes them
(checker.references.gpt2_np), and the edit that makes each in the solution."""

from __future__ import annotations

from functools import partial

from checker.references import gpt2_np as ref
from checker.reporting.compare import Edit, Mistake

MISTAKES = [
    Mistake("ln-unbiased-variance", "the variance divides by n - 1 (unbiased) instead of n",
            "LayerNorm uses the plain mean of squared deviations", partial(ref.layer_norm, ddof=1),
            edit=Edit("var = (centered * centered).mean(axis=-1)",
                      "var = (centered * centered).sum(axis=-1) / (int(x.shape[-1]) - 1)")),
    Mistake("ln-eps-outside-sqrt", "epsilon was added after the square root",
            "epsilon goes inside: sqrt(var + eps)", partial(ref.layer_norm, eps_outside=True),
            edit=Edit('F.sqrt(var + self.eps)', '(F.sqrt(var) + self.eps)')),
    Mistake("ln-no-eps", "epsilon is missing (or far too small)", "divide by sqrt(var + eps), with eps = 1e-5",
            lambda x, w, b, eps: ref.layer_norm(x, w, b, 0.0),
            edit=Edit('F.sqrt(var + self.eps)', 'F.sqrt(var)')),
    Mistake("ln-no-affine", "weight and bias were not applied", "scale by weight, then add bias",
            partial(ref.layer_norm, affine=False),
            edit=Edit(' * self.weight + self.bias\n', '\n')),
    Mistake("ln-swapped-affine", "weight and bias are swapped", "y * weight + bias",
            partial(ref.layer_norm, swap=True),
            edit=Edit(' * self.weight + self.bias\n', ' * self.bias + self.weight\n')),
    Mistake("ln-wrong-axis", "normalised over the tokens (axis -2) instead of each token's channels",
            "each token is normalised on its own: the last axis", partial(ref.layer_norm, axis=-2),
            edit=Edit(("mean = x.mean(axis=-1)", "var = (centered * centered).mean(axis=-1)"),
                      ("mean = x.mean(axis=-2)", "var = (centered * centered).mean(axis=-2)"))),
]

CATALOGUE = MISTAKES
