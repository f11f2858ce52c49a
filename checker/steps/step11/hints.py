"""Step 11's hints, a ladder per part (`pixi run s11 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import COMPILED, EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "loading": ["Hugging Face's Conv1D stores weights [in, out]; Linear wants [out, in].",
                f"Module.load_state_dict ({api('nn.Module')}) takes {{name: array}}; numpy's .T transposes.",
                "Transpose the weights of c_attn, c_proj and c_fc (not their biases, not the LayerNorms), "
                "then load the whole dict at once."],
    "loading the original": ["Older GPT-2 files have no `transformer.` prefix, store the causal mask as "
                             "attn.bias / attn.masked_bias, and store lm_head.weight.",
                             f"Module.load_state_dict ({api('nn.Module')}) refuses names the model lacks; the "
                             "check's message lists them.",
                             "Skip the mask buffers and lm_head.weight; add the prefix where it is missing."],
    "logits": ["The head is tied: the same wte table turns vectors back into token scores.",
               f"`@` is matmul; .T ({api('Tensor.T')}) turns [V, C] into [C, V].",
               "The hidden states times wte's weight, transposed: [B, T, C] @ [C, V]; no softmax."],
    "compiled": COMPILED + ["The lines under the part name the step whose piece changes when compiled: "
                             "run that step's check."],
}

SOURCES: dict[str, str] = {"loading": "load_hf_weights", "loading the original": "load_hf_weights",
       "logits": "GPT2LMHeadModel.forward", "compiled": "GPT2LMHeadModel.forward"}
