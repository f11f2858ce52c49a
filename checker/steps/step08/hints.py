"""Step 08's hints, a ladder per part (`pixi run s08 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import api

HINTS: dict[str, list[str]] = {
    "attention": ["GPT-2 is pre-norm: the sub-layer reads a normalised copy, the stream is left as it is.",
                  f"ln and sublayer are Modules ({api('nn.Module')}): call them like functions.",
                  "Add the sub-layer's output, on ln of the stream, to the stream that came in."],
    "MLP": ["The MLP half is wired exactly like the attention half.",
            f"The same residual_step serves both halves: what differs is the ln and the Module "
            f"({api('nn.Module')}) passed in.",
            "The stream that came in, plus sublayer of ln of it."],
}

SOURCES: dict[str, str] = {"attention": "residual_step", "MLP": "residual_step"}
