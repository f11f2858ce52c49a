"""Step 06's hints, a ladder per part (`pixi run s06 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import api, table

HINTS: dict[str, list[str]] = {
    "construction": table("position"),
    "positions": ["Positions are 0, 1, ..., seq_len - 1 when nothing is cached.",
                  f"Tensor.arange ({api('Tensor.arange')}) makes the positions (int64, on the table's "
                  f"device); F.gather ({api('F.gather')}) takes their rows.",
                  "positions = Tensor.arange(start, stop, dtype=DType.int64, device=self.weight.device)."],
    "after": ["After past_length cached tokens, the new tokens sit at positions past_length onwards.",
              f"Tensor.arange ({api('Tensor.arange')}): its second argument is where it stops, not a count.",
              "Start at past_length, stop at past_length + seq_len."],
}

SOURCES: dict[str, str] = {"construction": "GPT2PositionEmbedding.__init__",
       "positions": "GPT2PositionEmbedding.forward", "after": "GPT2PositionEmbedding.forward"}
