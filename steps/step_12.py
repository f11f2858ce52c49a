"""Step 12: from text to text. Tokenize, generate, decode.

    "The cat sat" -> encode -> [464, 3797, 3332] -> model -> logits of the last token
      -> pick the next id (greedy, or sampled with temperature and top-k) -> append -> repeat
      -> decode -> "The cat sat on the mat..."

`model` is your GPT2LMHeadModel (step 11), usually compiled: it takes int64
token ids [1, T] and returns logits [1, T, V]. Only the last position's
logits matter for the next token. `tokenizer` is a `tokenizers.Tokenizer`.

Check: pixi run s12        Then: pixi run gpt2 "Your prompt"
"""

from collections.abc import Iterator

import numpy as np
from max.experimental.tensor import Tensor  # noqa: F401


def encode(tokenizer, text: str) -> list[int]:
    """Text -> GPT-2 token ids."""
    # TODO: Hint: tokenizer.encode(text) returns an Encoding; its .ids are the token ids.
    raise NotImplementedError("step 12: encode")


def decode(tokenizer, ids: list[int]) -> str:
    """GPT-2 token ids -> text."""
    # TODO: Hint: tokenizer.decode(ids)
    raise NotImplementedError("step 12: decode")


def next_token(logits: np.ndarray, *, temperature: float = 0.0, top_k: int | None = None,
               rng: np.random.Generator | None = None) -> int:
    """The next token id from the last position's logits [V].

    temperature 0: greedy (the highest logit). Otherwise sample from
    softmax(logits / temperature), keeping only the top_k highest when given.
    """
    # TODO: 1. temperature 0: the index of the largest logit (np.argmax)
    # TODO: 2. otherwise divide the logits by the temperature
    # TODO: 3. with top_k: set every logit below the k-th largest to -inf
    # TODO: 4. softmax (subtract the max first), then draw one id: rng.choice(len(p), p=p)
    raise NotImplementedError("step 12: next_token")


def generate(model, input_ids: list[int], max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, seed: int | None = None,
             eos_token_id: int | None = None) -> Iterator[int]:
    """Yields up to `max_new_tokens` new token ids, one at a time, stopping after `eos_token_id`."""
    # TODO: rng = np.random.default_rng(seed); then max_new_tokens times:
    #   logits = model(Tensor.from_dlpack(np.array([ids], dtype=np.int64)))   [1, T, V]
    #   token = next_token(np.from_dlpack(logits)[0, -1], ...); append it to ids; yield it;
    #   stop after eos_token_id
    raise NotImplementedError("step 12: generate")
