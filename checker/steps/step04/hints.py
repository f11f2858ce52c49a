"""Step 04's hints, a ladder per part (`pixi run s04 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import TWO_LINEARS, api

HINTS: dict[str, list[str]] = {
    "construction": [*TWO_LINEARS[:2], "c_fc = Linear(n_embd, n_inner, bias=True); c_proj the other way."],
    "forward": ["c_fc, then the activation, then c_proj.",
                f"F.gelu ({api('F.gelu')}) has an `approximate` argument: GPT-2 uses the tanh approximation.",
                'self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")).'],
}

SOURCES: dict[str, str] = {"construction": "GPT2MLP.__init__", "forward": "GPT2MLP.forward"}
