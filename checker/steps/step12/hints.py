"""Step 12's hints, a ladder per part (`pixi run s12 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import (
    NUMPY_RANDOM,
    NUMPY_SORT,
    PYTHON_YIELD,
    TOKENIZER,
    api,
)

HINTS: dict[str, list[str]] = {
    "encode/decode": ["The tokenizer does the work: encode gives an Encoding, decode gives text.",
                      f"tokenizers.Tokenizer ({TOKENIZER}): encode returns an Encoding with .ids.",
                      "The Encoding's ids; decode(ids) for the text."],
    "greedy": ["Run the model on all ids so far, take the last position's logits, pick the largest.",
               f"Tensor.from_dlpack ({api('Tensor.from_dlpack')}) turns a numpy array of ids into a tensor; "
               "np.from_dlpack turns the logits back.",
               "Logits [1, T, V]: take [0, -1], np.argmax, append, yield, repeat."],
    "eos": ["generate stops when the model produces the end-of-text token, after handing it out.",
            f"A generator function ({PYTHON_YIELD}) ends with return; yield hands a value out first.",
            "Yield the token first, then return if it equals eos_token_id (None: never stop early)."],
    "top_k=1": ["Keep only the k highest logits before sampling: with k = 1 that is greedy.",
                f"numpy's sort ({NUMPY_SORT}) gives the k-th largest value as the threshold.",
                "Set every logit below the k-th largest to -inf."],
    "seeded": ["Make one generator per generate call: the same seed gives the same tokens.",
               f"numpy's random Generator ({NUMPY_RANDOM}): np.random.default_rng(seed).",
               "Make it once, before the loop, and draw every token from it, passing it to next_token."],
    "top_k": ["Exactly k logits survive: the k-th largest is the threshold, and it is kept.",
              f"np.sort ({NUMPY_SORT}) ascending: the k-th largest is k from the end.",
              "Everything below it becomes -inf before the softmax."],
    "distribution": ["Sample from softmax(logits / temperature) over the top k.",
                     f"Generator.choice ({NUMPY_RANDOM}) draws an index with given probabilities p.",
                     "Divide by the temperature, mask below the k-th best, softmax (minus the max first), "
                     "then rng.choice(V, p=probs)."],
}

SOURCES: dict[str, str] = {"encode/decode": "encode", "greedy": "generate", "eos": "generate", "top_k=1": "next_token",
       "seeded": "generate", "top_k": "next_token", "distribution": "next_token"}
