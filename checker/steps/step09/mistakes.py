"""Step 09's catalogue: blocks wired wrongly, each computed from the block's input x and the numpy
Block b (checker.references.block_np), and the edit that makes it in the solution."""

from __future__ import annotations

from functools import partial

from checker.references.block_np import WIRING_CODE, WIRING_MISTAKES, Block, half
from checker.reporting.compare import Edit, Mistake


def _both(x, b: Block, wiring: str):
    return half(half(x, b.ln_1, b.attn, wiring=wiring), b.ln_2, b.mlp, wiring=wiring)


# The solution's forward, both halves through residual_step.
RIGHT = ("hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
         "        return residual_step(hidden_states, self.ln_2, self.mlp)")


def _written(attn_half: str, mlp_half: str) -> str:
    """The block's forward written out, each half as `x = ...` in terms of x, ln and f."""
    def line(code: str, ln: str, f: str) -> str:
        return "hidden_states = " + code.replace("ln(", f"self.{ln}(").replace("f(", f"self.{f}(").replace(
            "x", "hidden_states")
    return f"{line(attn_half, 'ln_1', 'attn')}\n        {line(mlp_half, 'ln_2', 'mlp')}\n        return hidden_states"


# Wiring mistakes of a whole block, each computed from its input x and the numpy Block b.
CATALOGUE = [
    *(Mistake(f"residual-{w}", says, hint, partial(_both, wiring=w),
              Edit(RIGHT, _written(WIRING_CODE[w], WIRING_CODE[w])))
      for w, (says, hint) in WIRING_MISTAKES.items()),
    Mistake("block-ln-swapped", "ln_2 was used before the attention and ln_1 before the MLP",
            "ln_1 goes with attn, ln_2 with mlp", lambda x, b: half(half(x, b.ln_2, b.attn), b.ln_1, b.mlp),
    edit=Edit(RIGHT,
              "hidden_states = hidden_states + self.attn(self.ln_2(hidden_states))\n"
              "        hidden_states = hidden_states + self.mlp(self.ln_1(hidden_states))\n"
              "        return hidden_states")),
    Mistake("block-ln-1-twice", "ln_1 was used before both the attention and the MLP",
            "each half has its own LayerNorm: ln_2 goes before the MLP",
            lambda x, b: half(half(x, b.ln_1, b.attn), b.ln_1, b.mlp),
    edit=Edit("residual_step(hidden_states, self.ln_2, self.mlp)",
              "residual_step(hidden_states, self.ln_1, self.mlp)")),
    Mistake("block-mlp-first", "the MLP ran before the attention", "attention first, then the MLP",
            lambda x, b: half(half(x, b.ln_2, b.mlp), b.ln_1, b.attn),
    edit=Edit(RIGHT,
              "hidden_states = residual_step(hidden_states, self.ln_2, self.mlp)\n"
              "        return residual_step(hidden_states, self.ln_1, self.attn)")),
    Mistake("block-no-mlp", "the MLP half is missing", "the block ends with x + mlp(ln_2(x))",
            lambda x, b: half(x, b.ln_1, b.attn),
    edit=Edit('return residual_step(hidden_states, self.ln_2, self.mlp)', 'return hidden_states')),
    Mistake("block-parallel", "attention and MLP both read the block's input (in parallel)",
            "the MLP reads the stream after the attention was added",
            lambda x, b: x + b.attn(b.ln_1(x)) + b.mlp(b.ln_2(x)),
    edit=Edit(RIGHT, "return residual_step(hidden_states, self.ln_1, self.attn) + self.mlp(self.ln_2(hidden_states))")),
]
