"""Step 10 of the online book's February 2026 layout, with the names of its 4 March pages
(max.experimental.*): generate_text, greedy or sampled with numpy's global generator.

The probabilities are divided by their sum before np.random.choice: the page's float32 softmax cast
to float64 sums to 1 only within float32's precision, which numpy refuses (see checker.steps.online_book.step12).
"""

import max.experimental.functional as F
import numpy as np
from max.driver import CPU, Device
from max.dtype import DType
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from step_09 import decode_tokens, encode_text
from transformers import GPT2Tokenizer


def generate_text(
    model: Module,
    tokenizer: GPT2Tokenizer,
    device: Device,
    prompt: str,
    max_new_tokens: int = 50,
    temperature: float = 0.8,
    do_sample: bool = True,
) -> str:
    generated_tokens = encode_text(prompt, tokenizer, device, max_length=100)

    print(f"Starting generation from: '{prompt}'")
    print(f"Settings: max_new_tokens={max_new_tokens}, temperature={temperature}, do_sample={do_sample}")
    print("-" * 50)

    for step in range(max_new_tokens):
        logits = model(generated_tokens)
        next_token_logits = logits[0, -1, :]

        if do_sample and temperature > 0:
            temp_tensor = Tensor.constant(temperature, dtype=next_token_logits.dtype,
                                          device=next_token_logits.device)
            next_token_logits = next_token_logits / temp_tensor
            probs = F.softmax(next_token_logits)
            probs_np: np.ndarray = np.from_dlpack(probs.to(CPU()))
            if probs_np.ndim > 1:
                probs_np = probs_np.flatten()
            probs_np = probs_np.astype(np.float64)
            probs_np = probs_np / probs_np.sum()  # float32 softmax: choice wants a sum of 1 within 1.5e-8
            next_token_id = np.random.choice(len(probs_np), p=probs_np)
            next_token_tensor = Tensor.constant(next_token_id, dtype=DType.int64, device=generated_tokens.device)
        else:
            next_token_tensor = F.argmax(next_token_logits)

        next_token_2d = next_token_tensor.reshape([1, -1])
        generated_tokens = F.concat([generated_tokens, next_token_2d], axis=1)

        if step % 5 == 0 or step == max_new_tokens - 1:
            current_text = decode_tokens(generated_tokens, tokenizer)
            print(f"Step {step + 1:2d}: {current_text}")

    final_text = decode_tokens(generated_tokens, tokenizer)
    print("-" * 50)
    print(f"Final generated text: '{final_text}'")
    return final_text
