"""Step 13's hints, a ladder per part (`pixi run s13 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import COMPILED, EARLIER, NUMPY_RANDOM, PYTHON_YIELD, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "empty": ["Before the prompt nothing is cached: each layer's keys and values hold zero positions.",
              f"Tensor.from_dlpack ({api('Tensor.from_dlpack')}) takes a numpy array, and numpy makes "
              "arrays with an axis of length 0.",
              "2 * n_layer float32 arrays of shape (batch_size, n_head, 0, n_embd // n_head), each made a Tensor."],
    "attention": ["The new tokens' keys and values join the cached ones; the new queries attend to all of them.",
                  f"F.concat ({api('F.concat')}) joins tensors along an axis; F.broadcast_to "
                  f"({api('F.broadcast_to')}) makes a [T, P] block from one 0.0, whatever P is.",
                  "Cache first, then new, along the positions axis (-2); mask = concat of zeros [T, P] and "
                  "causal_mask(T, 0), on the last axis; return (c_proj(merged), key, value)."],
    "model": ["Step 10's forward, but the new tokens sit after the cached ones, and each block's attention "
              "reads and returns its layer's cache.",
              f"Your step 06 wpe takes (seq_len, past_length); the cache's length is past_key.shape[-2] "
              f"({api('Tensor.shape')}).",
              "For block i: attention_with_cache(block.attn, block.ln_1(x), cache[2i], cache[2i+1]) gives the "
              "half to add and the two new cache entries; logits from x[:, -1, :] after ln_f."],
    "compiled": COMPILED + ["Compiled, the cache length is a symbol too: a mask built with band_part(..., "
                             "num_upper=P) cannot be; build its cached columns from zeros."],
    "generate": ["The prompt goes through the model once; after that, each call gets only the newest token.",
                 "Python's unpacking (https://docs.python.org/3/reference/expressions.html#expression-lists) "
                 "splits the model's result: the logits, then the cache.",
                 "Start from empty_cache(config, 1); ids = the prompt [1, T]; each turn: logits, *cache = "
                 "model(ids, *cache), pick, yield, then ids = [[token]]."],
    "eos": ["As in step 12: hand the end-of-text token out, then stop.",
            f"A generator function ({PYTHON_YIELD}) ends with return.",
            "Yield the token first, then return if it equals eos_token_id."],
    "seeded": ["As in step 12: one generator for the whole generation.",
               f"numpy's random Generator ({NUMPY_RANDOM}): np.random.default_rng(seed), made once.",
               "Make it before the loop and pass it to next_token for every token."],
}

SOURCES: dict[str, str] = {"empty": "empty_cache", "attention": "attention_with_cache",
       "model": "GPT2WithCache.forward", "compiled": "attention_with_cache", "generate": "generate_with_cache",
       "eos": "generate_with_cache", "seeded": "generate_with_cache"}
