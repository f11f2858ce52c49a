"""Step 12: from text to text. Tokenize, generate, decode.

    "The cat sat" -> encode -> ids -> model -> logits of the last position
      -> pick the next id (greedy, or sampled with temperature and top-k) -> append -> repeat
      -> decode -> "The cat sat on the mat..."

`model` is your GPT2LMHeadModel (step 11), usually compiled: it takes int64
token ids as a MAX tensor [1, T] and returns logits [1, T, V]; only the last
position's logits matter for the next token. `tokenizer` is a
`tokenizers.Tokenizer`.

Sampling: divide the logits by the temperature (a low one sharpens the
distribution), keep only the top_k largest (exactly k), softmax, draw with the
numpy generator you are given. `generate` makes one generator from `seed` for
the whole generation, yields each new id as soon as it is chosen, and stops
right after yielding `eos_token_id` (None: never stops early).

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/12/; or book/docs/steps/12.md).
Check: pixi run s12        Then: pixi run gpt2 "Your prompt"        Stuck? pixi run s12 --hint
"""

from collections.abc import Iterator

import numpy as np
from max.experimental.tensor import Tensor  # noqa: F401


def encode(tokenizer, text: str) -> list[int]:
    """Text -> GPT-2 token ids."""
    # TODO: what does the tokenizer's encode return, and where in it are the ids?
    raise NotImplementedError("step 12: encode")


def decode(tokenizer, ids: list[int]) -> str:
    """GPT-2 token ids -> text."""
    # TODO: the tokenizer turns byte-level tokens back into text.
    raise NotImplementedError("step 12: decode")


def next_token(logits: np.ndarray, *, temperature: float = 0.0, top_k: int | None = None,
               rng: np.random.Generator | None = None) -> int:
    """The next token id from the last position's logits [V].

    temperature 0: greedy (the highest logit). Otherwise sample from
    softmax(logits / temperature), keeping only the top_k highest when given.
    """
    # TODO: greedy when the temperature is 0; otherwise temperature, top_k, softmax, one draw.
    #   - With ties at the k-th largest logit, how many survive? (the check uses none)
    #   - Why subtract the largest logit before exponentiating?
    raise NotImplementedError("step 12: next_token")


def generate(model, input_ids: list[int], max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, seed: int | None = None,
             eos_token_id: int | None = None) -> Iterator[int]:
    """Yields up to `max_new_tokens` new token ids, one at a time, stopping after `eos_token_id`."""
    # TODO: the loop of the docstring: the model on all the ids so far, the last position's
    #   logits to next_token, the new id appended and yielded.
    #   What changes if you make the generator inside the loop?
    raise NotImplementedError("step 12: generate")
