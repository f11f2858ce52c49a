"""Step 12 solution: from text to text. Tokenize, generate, decode.

    "The cat sat" -> encode -> [464, 3797, 3332] -> model -> logits of the last token
      -> pick the next id (greedy, or sampled with temperature and top-k) -> append -> repeat
      -> decode -> "The cat sat on the mat..."

`model` is your GPT2LMHeadModel (step 11), usually compiled: it takes int64
token ids [1, T] and returns logits [1, T, V]. Only the last position's
logits matter for the next token.
"""

from collections.abc import Iterator

import numpy as np
from max.experimental.tensor import Tensor


def encode(tokenizer, text: str) -> list[int]:
    """Text -> GPT-2 token ids, with a `tokenizers.Tokenizer`."""
    return tokenizer.encode(text).ids


def decode(tokenizer, ids: list[int]) -> str:
    """GPT-2 token ids -> text."""
    return tokenizer.decode(ids)


def next_token(logits: np.ndarray, *, temperature: float = 0.0, top_k: int | None = None,
               rng: np.random.Generator | None = None) -> int:
    """The next token id from the last position's logits [V].

    temperature 0: greedy (the highest logit). Otherwise sample from
    softmax(logits / temperature), keeping only the top_k highest when given.
    """
    if temperature == 0.0:
        return int(np.argmax(logits))
    logits = logits.astype(np.float64) / temperature
    if top_k is not None:
        kth = np.sort(logits)[-top_k]
        logits = np.where(logits < kth, -np.inf, logits)  # everything below the k-th best is out
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    return int(rng.choice(len(probs), p=probs))


def generate(model, input_ids: list[int], max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, seed: int | None = None,
             eos_token_id: int | None = None) -> Iterator[int]:
    """Yields up to `max_new_tokens` new token ids, one at a time, stopping after `eos_token_id`."""
    rng = np.random.default_rng(seed)
    ids = list(input_ids)
    for _ in range(max_new_tokens):
        logits = model(Tensor.from_dlpack(np.array([ids], dtype=np.int64)))  # [1, T, V]
        token = next_token(np.from_dlpack(logits)[0, -1], temperature=temperature, top_k=top_k, rng=rng)
        ids.append(token)
        yield token
        if token == eos_token_id:
            return
