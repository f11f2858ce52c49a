"""Step 13's catalogue: caches, masks, models and generate loops a learner may write instead of the right
ones, what each computes where it computes something (checker.steps.step13.reference), and the edit that
makes it in the solution."""

from __future__ import annotations

import numpy as np

from checker.reporting.compare import Edit, Mistake
from checker.steps.step13.reference import SPLIT, attention, last_logits

SHARED_ACROSS_BATCH = Mistake(
    "cache-shared-across-batch", "the cache has batch 1 whatever the batch: the sequences of a batch would share one",
    "the cache's first axis is the batch: one [H, 0, D] cache per sequence",
    edit=Edit('np.zeros((batch_size,', 'np.zeros((1,'))
CACHE_NOT_APPENDED = Mistake(
    "cache-not-appended", "the returned keys and values hold only the new positions: the cache was not grown",
    "concatenate the cached keys (values) and the new ones along the positions axis, cached first, and return that",
    edit=Edit('    return output, key, value', '    return output, key[:, :, int(past):], value[:, :, int(past):]'))
CACHE_AFTER_NEW = Mistake(
    "cache-after-new", "the new keys and values were put before the cached ones",
    "positions are in order in the cache: cached first, then the new ones",
    lambda x, pk, pv, p, H: attention(x, pk, pv, p, H, order="new-first"),
    edit=Edit(("F.concat([past_key, key], axis=-2)", "F.concat([past_value, value], axis=-2)"),
              ("F.concat([key, past_key], axis=-2)", "F.concat([value, past_value], axis=-2)")))  # (output, key, value)
KV_SWAPPED = Mistake(
    "cache-keys-values-swapped", "the keys were returned where the values go, and the values where the keys go",
    "return (output, key, value): the model stores them in the cache as layer i's 2i-th and (2i+1)-th",
    edit=Edit('    return output, key, value', '    return output, value, key'))
OUTPUT_MISTAKES = [
    Mistake("mask-hides-cache", "the new queries did not see the cached keys: the mask covers them",
            "a new token may attend to every earlier token: the mask is 0 over all P cached keys",
            lambda x, pk, pv, p, H: attention(x, pk, pv, p, H, mask="hide-cache")[0],
    edit=Edit('seen = F.broadcast_to(Tensor(0.0,', "seen = F.broadcast_to(Tensor(float('-inf'),")),
    Mistake("mask-not-causal", "with the cache, the new positions saw each other's future: no causal mask",
            "among the T new keys the mask is causal_mask(T, 0): query i sees new keys 0..i",
            lambda x, pk, pv, p, H: attention(x, pk, pv, p, H, mask="not-causal")[0],
    edit=Edit("[seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)]",
              "[seen, F.broadcast_to(Tensor(0.0, dtype=query.dtype, device=query.device), [seq_len, seq_len])]")),
    Mistake("mask-cache-last", "the mask's columns were laid out with the new keys first, the cached ones after",
            "the keys are [cached, new]: the mask's columns too, [T, P] of zeros then causal_mask(T, 0)",
            lambda x, pk, pv, p, H: attention(x, pk, pv, p, H, mask="cache-last")[0],
    edit=Edit("[seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)]",
              "[causal_mask(seq_len, 0, dtype=query.dtype, device=query.device), seen]")),
]


POSITIONS_NOT_OFFSET = Mistake(
    "positions-not-offset", "the new tokens got positions 0, 1, ... instead of P, P+1, ...: wpe ignored the cache",
    "the new tokens come after the P cached ones: wpe(T, P), P being the cache's length",
    lambda model, ids: last_logits(model, ids, np.r_[np.arange(SPLIT), np.arange(ids.shape[1] - SPLIT)]),
    edit=Edit('t.wpe(seq_len, past)', 't.wpe(seq_len)'))
CACHE_IGNORED = Mistake(
    "cache-ignored", "the model did not read the cache: the new tokens attended only to each other",
    "pass each block's cached keys and values to its attention: layer i's are cache[2i] and cache[2i+1]",
    lambda model, ids: last_logits(model, ids[:, SPLIT:], np.arange(SPLIT, ids.shape[1])),
    edit=Edit('cache[2 * i], cache[2 * i + 1])', 'cache[2 * i][:, :, :0], cache[2 * i + 1][:, :, :0])'))
MODEL_MISTAKES = [POSITIONS_NOT_OFFSET, CACHE_IGNORED]
MASK_NOT_SYMBOLIC = Mistake(
    "mask-needs-int-past", "the mask cannot be built when the cache length is symbolic (step 02's band_part "
    "needs num_tokens as a Python int; compiled, P is only known when the graph runs)",
    "build the [T, P + T] mask from two pieces: zeros [T, P] for the cached keys, causal_mask(T, 0) for the new",
    edit=Edit("    mask = F.concat([seen, causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)], axis=-1)",
              "    mask = causal_mask(seq_len, past, dtype=query.dtype, device=query.device)"))
PROMPT_BY_TOKEN = Mistake("prompt-one-by-one", "the prompt was fed one token at a time instead of all at once",
                          "the first call gets the whole prompt [1, T] and an empty cache",
    edit=Edit("    ids = np.array([input_ids], dtype=np.int64)  # [1, T]: the whole prompt, once\n",
              "    for t in input_ids[:-1]:\n"
              "        _, *cache = model(Tensor.from_dlpack(np.array([[t]], dtype=np.int64)), *cache)\n"
              "    ids = np.array([input_ids[-1:]], dtype=np.int64)\n"))
RECOMPUTES = Mistake("generate-recomputes", "generate ran more than the new token after the prompt: the model "
                     "computed earlier positions again", "after the prompt, feed only the newest token [1, 1]",
    edit=Edit("        ids = np.array([[token]], dtype=np.int64)",
              "        ids = np.concatenate([ids, [[token]]], axis=1)\n"
              "        cache = empty_cache(config, 1)\n"
              "        ids = ids"))
CACHE_NOT_PASSED = Mistake("cache-not-passed-back", "the cache the model returned was not passed to the next call",
                           "keep the returned cache (everything after the logits) and pass it in the next call",
    edit=Edit('        logits, *cache = model(', '        logits, *_ = model('))
CATALOGUE = [SHARED_ACROSS_BATCH, CACHE_NOT_APPENDED, CACHE_AFTER_NEW, KV_SWAPPED, *OUTPUT_MISTAKES, *MODEL_MISTAKES,
             MASK_NOT_SYMBOLIC, PROMPT_BY_TOKEN, RECOMPUTES, CACHE_NOT_PASSED]
