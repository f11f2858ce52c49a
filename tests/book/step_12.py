"""Step 12 to the online book's contract, with MAX 25.7's names: the next token (greedy or sampled
with numpy's global generator, as the book's page says), and a loop that appends it."""

import numpy as np
from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor


def generate_next_token(model, input_ids, temperature=1.0, do_sample=True):
    logits = model(input_ids)[0, -1, :]  # [vocab]
    if do_sample and temperature > 0:
        probs = F.softmax(logits / Tensor.constant(temperature, dtype=logits.dtype, device=logits.device))
        probs = np.from_dlpack(probs.to(CPU())).astype(np.float64)
        token = np.random.choice(len(probs), p=probs / probs.sum())
        return Tensor.constant(token, dtype=DType.int64, device=input_ids.device)
    return F.argmax(logits)


def generate_tokens(model, input_ids, max_new_tokens=10, temperature=1.0, do_sample=True):
    for _ in range(max_new_tokens):
        token = generate_next_token(model, input_ids, temperature=temperature, do_sample=do_sample)
        input_ids = F.concat([input_ids, token.reshape([1, -1])], axis=1)
    return input_ids
