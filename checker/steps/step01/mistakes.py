"""Step 01's catalogue: each field of GPT2Config set to a value another model uses, and the edit that
writes it into the solution."""

from __future__ import annotations

from checker.reporting.compare import Edit, Mistake

# Each field as the solution writes it: a mistake's edit writes another value in its place.
SOLUTION = {"vocab_size": "vocab_size: int = 50257", "n_positions": "n_positions: int = 1024",
            "n_embd": "n_embd: int = 768", "n_layer": "n_layer: int = 12", "n_head": "n_head: int = 12",
            "n_inner": "n_inner: int = 3072", "layer_norm_epsilon": "layer_norm_epsilon: float = 1e-5"}


def _wrong(field: str, value, what: str, hint: str) -> tuple[object, Mistake]:
    """(value, the mistake of writing it): GPT2Config's `field` set to `value`."""
    name, _, _ = SOLUTION[field].partition(" = ")
    written = f"{name} | None = None" if value is None else f"{name} = {value!r}"
    return value, Mistake(f"{field}-{value}", f"{field} = {value!r} is {what}", hint,
                          edit=Edit(SOLUTION[field], written))


# field -> {wrong value: the mistake it shows}
MISTAKES: dict[str, dict[object, Mistake]] = {
    "vocab_size": dict([
        _wrong("vocab_size", 50256, "one short of GPT-2's vocabulary",
               "50,000 BPE merges + 256 byte tokens + 1 <|endoftext|>"),
        _wrong("vocab_size", 50000, "the number of BPE merges, not of tokens",
               "add the 256 byte tokens and <|endoftext|>"),
        _wrong("vocab_size", 50304, "nanoGPT's padded vocabulary (a multiple of 64, for speed)",
               "the checkpoint's embedding has one row per real token"),
    ]),
    "n_positions": dict([
        _wrong("n_positions", 2048, "GPT-3's context length", "GPT-2 small attends over at most 1024 tokens"),
        _wrong("n_positions", 512, "BERT's context length", "GPT-2 small attends over at most 1024 tokens"),
    ]),
    "n_embd": dict([
        _wrong("n_embd", 1024, "GPT-2 medium's width", "GPT-2 small is the 124M model"),
        _wrong("n_embd", 64, "the width of one head", "n_embd is the whole residual stream: 12 heads x 64"),
    ]),
    "n_layer": dict([_wrong("n_layer", 24, "GPT-2 medium's depth", "GPT-2 small is the 124M model")]),
    "n_head": dict([
        _wrong("n_head", 64, "head_dim, the size of one head", "n_head counts the heads: 768 / 64"),
        _wrong("n_head", 16, "GPT-2 medium's head count", "GPT-2 small is the 124M model"),
    ]),
    "n_inner": dict([
        _wrong("n_inner", 768, "n_embd: the MLP's hidden layer is wider than that", "GPT-2's MLP expands by 4x"),
        _wrong("n_inner", None, "what Hugging Face reads as 4 * n_embd", "write the number so your MLP can use it"),
    ]),
    "layer_norm_epsilon": dict([
        _wrong("layer_norm_epsilon", 1e-12, "BERT's epsilon", "GPT-2's LayerNorms use 1e-5"),
        _wrong("layer_norm_epsilon", 1e-6, "a common default, but not GPT-2's",
               "look for layer_norm_epsilon in config.json"),
    ]),
}
CATALOGUE = [m for wrong in MISTAKES.values() for m in wrong.values()]
CATALOGUE = [m for wrong in MISTAKES.values() for m in wrong.values()]
