"""Step 02's hints, a ladder per part (`pixi run s02 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import COMPILED, api

HINTS: dict[str, list[str]] = {
    "no": ["Query i may attend to key j only when j is not in its future: a band on and below the diagonal.",
           f"F.band_part ({api('F.band_part')}) keeps a band of diagonals and, with exclude=True, zeroes it "
           f"and keeps the rest; F.broadcast_to ({api('F.broadcast_to')}) makes a [T, N + T] tensor of -inf.",
           "Start from [T, N + T] all -inf and zero the band: num_lower=None (every diagonal below), "
           "num_upper=num_tokens, exclude=True."],
    "with": ["With num_tokens cached keys, the mask has num_tokens + T columns and row i sees keys "
             "0 .. num_tokens + i.",
             f"Dim ({api('graph.Dim')}) adds to an int: Dim(sequence_length) + num_tokens columns.",
             "The allowed band reaches num_tokens diagonals above the main one: num_upper=num_tokens."],
    "compiled": COMPILED,
}

SOURCES: dict[str, str] = {"no": "causal_mask", "with": "causal_mask", "compiled": "causal_mask"}
