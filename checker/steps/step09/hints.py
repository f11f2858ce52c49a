"""Step 09's hints, a ladder per part (`pixi run s09 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "construction": ["A block holds ln_1, attn, ln_2 and mlp, named as in the checkpoint (h.0.ln_1...).",
                     f"Sub-modules are attributes of a Module ({api('nn.Module')}); your LayerNorm (step 03) "
                     "takes the width and eps, your attention and MLP the config.",
                     "LayerNorm(config.n_embd, eps=config.layer_norm_epsilon) twice, GPT2MultiHeadAttention(config), "
                     "GPT2MLP(config)."],
    "forward": ["Two residual halves: attention, then the MLP.",
                f"Call the sub-modules ({api('nn.Module')}) through residual_step (step 08): ln_1 goes "
                "with attn, ln_2 with mlp.",
                "The second half reads the first half's output."],
}

SOURCES: dict[str, str] = {"construction": "GPT2Block.__init__", "forward": "GPT2Block.forward"}
