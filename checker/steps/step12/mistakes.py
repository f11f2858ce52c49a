"""Step 12's catalogue: tokenizers, greedy loops and samplers a learner may write instead of the right
ones, each with what it computes (a continuation, or the distribution its draws follow) and the edit that
makes it in the solution."""

from __future__ import annotations

import numpy as np

from checker.references.reference import NEW_TOKENS
from checker.reporting.compare import Edit, Mistake
from checker.steps.step12.reference import (
    TEMPERATURE,
    TOP_K,
    expected,
    greedy_with,
    last_logits,
    softmax_over,
)

# Greedy mistakes: each computes the greedy continuation it would give, from the model and the prompt.
GREEDY_MISTAKES = [
    Mistake("greedy-first-position", "the first position's logits were used instead of the last's",
            "the next token comes from logits[0, -1], the last position",
            lambda model, prompt: greedy_with(model, prompt, lambda z, ids: int(np.argmax(z[0]))),
    edit=Edit('next_token(np.from_dlpack(logits)[0, -1]', 'next_token(np.from_dlpack(logits)[0, 0]')),
    Mistake("greedy-argmin", "the smallest logit was picked (argmin)", "greedy picks the highest logit: np.argmax",
            lambda model, prompt: greedy_with(model, prompt, lambda z, ids: int(np.argmax(-z[-1]))),
    edit=Edit('return int(np.argmax(logits))', 'return int(np.argmin(logits))')),
    Mistake("greedy-not-fed-back", "the new tokens were not appended to the input: the model saw only the prompt",
            "append each new id to the sequence before the next call",
            lambda model, prompt: [int(np.argmax(last_logits(model, prompt)))] * NEW_TOKENS,
    edit=Edit('        ids.append(token)\n', '')),
]
EOS_IGNORED = Mistake("eos-ignored", "generation went on after yielding eos_token_id",
                      "after yielding a token equal to eos_token_id, return",
    edit=Edit('        yield token\n        if token == eos_token_id:\n            return', '        yield token'))
EOS_NOT_YIELDED = Mistake("eos-not-yielded", "generation stopped before yielding eos_token_id",
                          "yield the eos token itself, then stop: the caller sees why generation ended",
    edit=Edit("        yield token\n        if token == eos_token_id:\n            return",
              "        if token == eos_token_id:\n            return\n        yield token"))
TOP_K_IGNORED = Mistake("top-k-ignored", "top_k was not applied: tokens outside the k best can be drawn",
                        "set every logit below the k-th largest to -inf before the softmax",
    edit=Edit('    if top_k is not None:\n        kth', '    if False:\n        kth'))
TOP_K_PLUS_ONE = Mistake("top-k-plus-one", "top_k kept k + 1 tokens: the (k+1)-th best was drawn too",
                         "np.sort(logits)[-top_k] is the k-th largest; keep the logits >= it",
    edit=Edit('kth = np.sort(logits)[-top_k]', 'kth = np.sort(logits)[-top_k - 1]'))
TOP_K_MINUS_ONE = Mistake("top-k-minus-one", "top_k kept k - 1 tokens: the k-th best was never drawn",
                          "np.sort(logits)[-top_k] is the k-th largest; keep the logits >= it, not > it",
    edit=Edit('np.where(logits < kth', 'np.where(logits <= kth'))
TOP_K_REVERSED = Mistake("top-k-reversed", "top_k kept the k lowest logits instead of the k highest",
                         "np.argsort sorts ascending: the k largest are its last k",
    edit=Edit("kth = np.sort(logits)[-top_k]\n        logits = np.where(logits < kth",
              "kth = np.sort(logits)[top_k - 1]\n        logits = np.where(logits > kth"))


# top_k mistakes: each computes the distribution its draws follow, from the logits and k (T = 1).
TOP_K_MISTAKES = [
    (TOP_K_IGNORED, lambda z, k: softmax_over(z, np.arange(len(z)))),
    (TOP_K_PLUS_ONE, lambda z, k: softmax_over(z, np.argsort(z)[-(k + 1):])),
    (TOP_K_MINUS_ONE, lambda z, k: softmax_over(z, np.argsort(z)[-(k - 1):])),
    (TOP_K_REVERSED, lambda z, k: softmax_over(z, np.argsort(z)[:k])),
]
# Distribution mistakes: each computes the distribution its draws follow, from the logits (and top_k).
DISTRIBUTION_MISTAKES = [
    Mistake("temperature-multiplied", "the logits were multiplied by the temperature instead of divided",
            "logits / temperature: a low temperature sharpens the distribution",
            lambda z, top_k=TOP_K: expected(z * TEMPERATURE * TEMPERATURE, TEMPERATURE, top_k),
    edit=Edit('logits = logits.astype(np.float64) / temperature', 'logits = logits.astype(np.float64) * temperature')),
    Mistake("temperature-ignored", "the temperature was not applied", "divide the logits by the temperature",
            lambda z, top_k=TOP_K: expected(z, 1.0, top_k),
    edit=Edit('logits = logits.astype(np.float64) / temperature', 'logits = logits.astype(np.float64)')),
]
SEED_IGNORED = Mistake("seed-ignored", "the same seed gave different tokens: the generator is not seeded",
                       "make one np.random.default_rng(seed) per generate call and draw from it",
    edit=Edit('rng = np.random.default_rng(seed)\n    ids', 'rng = np.random.default_rng()\n    ids'))
SEED_FIXED = Mistake("seed-fixed", "seeds 0 and 1 gave the same tokens: the seed argument is not used",
                     "pass the seed argument to np.random.default_rng",
    edit=Edit('rng = np.random.default_rng(seed)\n    ids', 'rng = np.random.default_rng(0)\n    ids'))
SEED_PER_TOKEN = Mistake("seed-per-token", "every token was the same: the generator is made again from the seed "
                         "for each token, so each draw is the seed's first", "make the generator once, before "
                         "the loop, and draw every token from it",
    edit=Edit("    for _ in range(max_new_tokens):\n",
              "    for _ in range(max_new_tokens):\n        rng = np.random.default_rng(seed)\n"))
ENCODING_RETURNED = Mistake("encode-returns-encoding", "encode returned the tokenizer's Encoding object, not its ids",
                            "tokenizer.encode(text) returns an Encoding: its .ids are the token ids",
    edit=Edit('return tokenizer.encode(text).ids', 'return tokenizer.encode(text)'))
RAW_TOKENS = Mistake("decode-raw-tokens", "decode joined the BPE token strings (with Ġ for a space) "
                     "instead of decoding them to text", "tokenizer.decode(ids) turns byte-level tokens back into text",
    edit=Edit('return tokenizer.decode(ids)', 'return "".join(tokenizer.id_to_token(i) for i in ids)'))
CATALOGUE = [ENCODING_RETURNED, RAW_TOKENS, *GREEDY_MISTAKES, EOS_IGNORED, EOS_NOT_YIELDED, TOP_K_IGNORED,
             TOP_K_PLUS_ONE, TOP_K_MINUS_ONE, TOP_K_REVERSED, *DISTRIBUTION_MISTAKES, SEED_IGNORED, SEED_FIXED,
             SEED_PER_TOKEN]
