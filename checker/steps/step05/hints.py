"""Step 05's hints, a ladder per part (`pixi run s05 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import api, table

HINTS: dict[str, list[str]] = {
    "construction": table("token"),
    "forward": ["Each token id selects one row of the table.",
                f"F.gather ({api('F.gather')}) picks entries along an axis by index; the result keeps the "
                "indices' shape and adds the row's.",
                "Gather rows (axis 0) of self.weight with input_ids."],
}

SOURCES: dict[str, str] = {"construction": "GPT2TokenEmbedding.__init__", "forward": "GPT2TokenEmbedding.forward"}
