"""Step 12, written differently: top-k with np.argpartition, greedy through the same path.
Correct: the check must pass it."""

import numpy as np
from max.experimental.tensor import Tensor


def encode(tokenizer, text):
    return list(tokenizer.encode(text).ids)


def decode(tokenizer, ids):
    return tokenizer.decode(list(ids))


def next_token(logits, *, temperature=0.0, top_k=None, rng=None):
    if temperature == 0.0 or top_k == 1:
        return int(logits.argmax())
    keep = np.argpartition(logits, -top_k)[-top_k:] if top_k else np.arange(len(logits))
    z = logits[keep].astype(np.float64) / temperature
    p = np.exp(z - z.max())
    return int(keep[rng.choice(len(keep), p=p / p.sum())])


def generate(model, input_ids, max_new_tokens, *, temperature=0.0, top_k=None, seed=None, eos_token_id=None):
    rng = np.random.default_rng(seed)
    ids = list(input_ids)
    while len(ids) < len(input_ids) + max_new_tokens:
        logits = np.from_dlpack(model(Tensor.from_dlpack(np.asarray([ids], dtype=np.int64))))
        ids.append(next_token(logits[0, -1], temperature=temperature, top_k=top_k, rng=rng))
        yield ids[-1]
        if ids[-1] == eos_token_id:
            break
