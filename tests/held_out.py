"""Mistakes the catalogue does not list, for steps whose parts have sub-parts.

step -> {name: (text in solutions/solution_NN.py, what replaces it, words the failing part's
lines must hold)}. No catalogued mistake computes these outputs, so the check cannot name
one; `tests/test_localise.py` requires it to fail and to say which sub-part is wrong
(checker/diagnosis/localise.py).
"""

_LN_RETURN = "return centered / F.sqrt(var + self.eps) * self.weight + self.bias"
_MLP_GELU = 'hidden_states = F.gelu(hidden_states, approximate="tanh")'
_MLP_RETURN = "return self.c_proj(hidden_states)  # [B, T, C]"
_GATHER_WTE = "return F.gather(self.weight, input_ids, axis=0)"
_ARANGE_WPE = "Tensor.arange(past_length, past_length + seq_len, dtype=DType.int64, device=self.weight.device)"
_RESIDUAL = "return residual + sublayer(ln(hidden_states))"
_BLOCK = ("hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
          "        return residual_step(hidden_states, self.ln_2, self.mlp)")
_LOOP = "for block in self.h:\n            hidden_states = block(hidden_states)"

HELD_OUT: dict[str, dict[str, tuple[str, str, str]]] = {
    "03": {
        "variance doubled": ("var = (centered * centered).mean(axis=-1)",
                             "var = 2 * (centered * centered).mean(axis=-1)",
                             "division by the standard deviation: with weight 1 and bias 0 its rows spread"),
        "half the mean subtracted": ("centered = x - mean", "centered = x - 0.5 * mean", "centring: with weight 1"),
        "weight squared": (_LN_RETURN,
                           "return centered / F.sqrt(var + self.eps) * self.weight * self.weight + self.bias",
                           "scale by weight: with bias 0 the result is not"),
        "bias added twice": (_LN_RETURN, "return centered / F.sqrt(var + self.eps) * self.weight + 2 * self.bias",
                             "shift by bias: with weight 1 the result is not"),
    },
    "04": {
        "SiLU": (_MLP_GELU, "hidden_states = F.silu(hidden_states)", "(that is SiLU)"),
        "GELU twice": (_MLP_GELU, f"{_MLP_GELU}\n        hidden_states = F.gelu(hidden_states, approximate=\"tanh\")",
                       "the activation between them (read through c_fc and c_proj): at x = -2, -1, 0, 1, 2"),
        "a constant added after c_proj": (_MLP_RETURN, "return self.c_proj(hidden_states) + 0.5",
                                          "something is added around them"),
        "c_proj before the activation": (("hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]\n"
                                          "        " + _MLP_GELU,
                                          _MLP_RETURN),
                                         ("hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]",
                                          'return F.gelu(self.c_proj(hidden_states), approximate="tanh")'),
                                         "each piece is right alone: what forward does around them is not"),
    },
    "05": {
        "ids shifted by two": (_GATHER_WTE, "return F.gather(self.weight, input_ids + 2, axis=0)",
                               "every position holds a row of wte, each +2 from the right one"),
        "rows halved": (_GATHER_WTE, "return F.gather(self.weight, input_ids, axis=0) * 0.5",
                        "the right rows of wte, multiplied by 0.5"),
        "every token the first one's row": (_GATHER_WTE, "return F.gather(self.weight, input_ids * 0 + 464, axis=0)",
                                            "every position holds a row of wte"),
    },
    "06": {
        "positions from 3": (_ARANGE_WPE, _ARANGE_WPE.replace("arange(past_length,", "arange(past_length + 3,").replace(
            "past_length + seq_len,", "past_length + seq_len + 3,"), "each +3 from the right one"),
        "positions backwards": (_ARANGE_WPE, "Tensor.arange(past_length + seq_len - 1, past_length - 1, -1, "
                                "dtype=DType.int64, device=self.weight.device)", "the wrong one: rows"),
        "rows scaled": ("return F.gather(self.weight, positions, axis=0)",
                        "return F.gather(self.weight, positions, axis=0) * 1.5", "multiplied by 1.5"),
    },
    "07": {
        "scores scaled by a quarter": ("attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))",
                                       "attn_weights = attn_weights / 4.0", "scale: the weights follow softmax"),
        "weights halved": ("return attn_weights @ value  # [B, H, T, D]", "return (attn_weights * 0.5) @ value",
                           "normalisation: each query weights sum to 0.5"),
        "a soft mask": ("attn_weights = attn_weights + mask  # future positions -> -inf",
                        "attn_weights = attn_weights + (F.exp(mask) - 1.0) * 3.0  # -3 instead of -inf",
                        "mask: future keys get weight up to"),
        "the heads' output projected twice": ("return self.c_proj(attn_output)  # [B, T, C]",
                                              "return self.c_proj(self.c_proj(attn_output))",
                                              "c_attn alone right; c_proj alone right"),
    },
    "08": {
        "the stream doubled": (_RESIDUAL, "return 2 * residual + sublayer(ln(hidden_states))",
                               "with a sub-layer that returns 0, the stream passes through: no"),
        "the sub-layer halved": (_RESIDUAL, "return residual + 0.5 * sublayer(ln(hidden_states))",
                                 "the sub-layer's output is added to the stream (ln passing x on, the sub-layer "
                                 "doubling it): no"),
        "ln after the sub-layer too": (_RESIDUAL, "return residual + ln(sublayer(ln(hidden_states)))",
                                       "the sub-layer reads ln(x) (ln doubling x, the sub-layer adding 1: "
                                       "x + (2x + 1)): no"),
    },
    "09": {
        "the MLP half without its residual": (_BLOCK,
                                              "hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
                                              "        return self.mlp(self.ln_2(hidden_states))",
                                              "the MLP half alone (the attention silenced): is not"),
        "the attention half doubled": (_BLOCK,
                                       "hidden_states = hidden_states + 2 * self.attn(self.ln_1(hidden_states))\n"
                                       "        return residual_step(hidden_states, self.ln_2, self.mlp)",
                                       "the attention half alone (the MLP silenced): is not"),
        "the MLP half added to the block's input": (
            _BLOCK, "x = hidden_states\n        hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
            "        return x + self.mlp(self.ln_2(hidden_states))",
            "the attention half alone (the MLP silenced): is not"),
        "the MLP reading the attention twice": (
            _BLOCK, "attn_output = self.attn(self.ln_1(hidden_states))\n"
            "        hidden_states = hidden_states + attn_output\n"
            "        return hidden_states + self.mlp(self.ln_2(hidden_states + attn_output))",
            "each half is right alone: how they are chained"),
    },
    "10": {
        "block 5 skipped": (_LOOP, "for i, block in enumerate(self.h):\n            if i != 5:\n"
                            "                hidden_states = block(hidden_states)", "the blocks ran in the order"),
        "positions added after h.0": (
            ("hidden_states = self.wte(input_ids) + self.wpe(seq_len)", _LOOP),
            ("hidden_states = self.wte(input_ids)",
             "for i, block in enumerate(self.h):\n            hidden_states = block(hidden_states)\n"
             "            if i == 0:\n                hidden_states = hidden_states + self.wpe(seq_len)"),
            "the input of h.0 is not wte(ids) + wpe(positions)"),
        "ln_f twice": ("return self.ln_f(hidden_states)", "return self.ln_f(self.ln_f(hidden_states))",
                       "every block's input and output are right; what follows h.11 is not"),
        "half of h.3's output": (_LOOP, "for i, block in enumerate(self.h):\n"
                                 "            hidden_states = block(hidden_states)\n            if i == 3:\n"
                                 "                hidden_states = hidden_states * 0.5",
                                 "h.0 to h.3 are right, but h.4's input is not h.3's output"),
    },
    "11": {
        "logits doubled": ("return hidden_states @ self.transformer.wte.weight.T  # tied lm_head: [B, T, V]",
                           "return 2 * (hidden_states @ self.transformer.wte.weight.T)",
                           "the body (self.transformer) gives the right last hidden state; the head after it"),
        "one hidden channel added to every logit": (
            "return hidden_states @ self.transformer.wte.weight.T  # tied lm_head: [B, T, V]",
            "return hidden_states @ self.transformer.wte.weight.T + hidden_states[:, :, :1]",
            "the head after it (hidden_states @ wte.weight.T) is not"),
        "an extra ln_f": ("hidden_states = self.transformer(input_ids)  # [B, T, C]",
                          "hidden_states = self.transformer.ln_f(self.transformer(input_ids))",
                          "the head after it"),
    },
}
