"""Running files written to the contracts of Modular's online book, which some learners follow.

Its step 11 (January 2026) defines MaxGPT2LMHeadModel, with a bias-free lm_head of its own and no loader
(the book's main.py loads the weights); its step 12 defines generate_next_token and generate_tokens on a
[1, T] Tensor of ids, sampling with numpy's global generator (no tokenizer, eos, top_k or seed).

    model_follows_book(step11_module)      -> bool;  book_load(model, tensors) loads as its main.py does
    generate_follows_book(step12_module)   -> bool
"""

from __future__ import annotations

import numpy as np

from runtime.loading import BUFFERS, linear_layout

MODEL = ("MaxGPT2LMHeadModel", "MaxGPT2LMHeadModel(config) with an lm_head Linear and no loader; the weights "
         "are loaded the way the book's main.py loads them")
GENERATE = ("generate_tokens", "generate_next_token and generate_tokens on a [1, T] Tensor of ids, sampling "
            "with numpy's global generator (no encode/decode, eos, top_k or seed in its contract)")


def model_follows_book(module) -> bool:
    """The file defines the online book's step 11 (MaxGPT2LMHeadModel), not this course's GPT2LMHeadModel."""
    return not hasattr(module, "GPT2LMHeadModel") and hasattr(module, MODEL[0])


def generate_follows_book(module) -> bool:
    """The file defines the online book's step 12 (generate_tokens), not this course's generate."""
    return not hasattr(module, "generate") and hasattr(module, GENERATE[0])


def book_load(model, tensors: dict[str, np.ndarray]) -> None:
    """What the online book's main.py does: every tensor by its name, Conv1D weights transposed for
    Linear, and lm_head.weight (wte's values when the file ties them and leaves it out)."""
    state = {}
    for name, value in tensors.items():
        if name.endswith(BUFFERS):
            continue  # the causal-mask buffers
        if not name.startswith(("transformer.", "lm_head.")):
            name = "transformer." + name
        state[name] = linear_layout(name, value)
    state.setdefault("lm_head.weight", state["transformer.wte.weight"])
    model.load_state_dict(state)
