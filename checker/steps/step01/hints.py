"""Step 01's hints, a ladder per part (`pixi run s01 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import HF_CONFIG


def _field(idea: str, code: str) -> list[str]:
    return [idea, f"Hugging Face documents every field of GPT-2's config: {HF_CONFIG}", code]


HINTS: dict[str, list[str]] = {
    "vocab_size": _field("How many different tokens can GPT-2 read? Its tokenizer's vocabulary decides.",
                         "Byte-level BPE: 256 byte tokens, 50,000 merges, and one <|endoftext|>: 256 + 50,000 + 1."),
    "n_positions": _field("The longest sequence GPT-2 small attends over: the rows of its position table.",
                          "A power of two between 512 and 2048: GPT-2 small's context is 1024 tokens."),
    "n_embd": _field("The width of the residual stream: each token is a vector this long.",
                     "12 heads of 64 channels each: 768."),
    "n_layer": _field("How many transformer blocks are stacked in GPT-2 small?",
                      "The checkpoint has blocks h.0 to h.11: 12."),
    "n_head": _field("How many attention heads per block?", "n_embd / n_head = 64 channels per head: 12 heads."),
    "n_inner": _field("The width of the MLP's hidden layer.", "GPT-2's MLP widens each token 4x: 4 * 768 = 3072."),
    "layer_norm_epsilon": _field("The small number LayerNorm adds to the variance so it never divides by zero.",
                                 "It is in the checkpoint's config.json: 1e-5."),
}

SOURCES: dict[str, str] = {field: f"GPT2Config.{field}" for field in HINTS}
