"""A GPT-2 block in numpy from Hugging Face's parameters, with switches for the
mistakes learners make in wiring it (steps 08 and 09). Float64; [B, T, C]."""

from __future__ import annotations

import functools

import numpy as np

from checker.references import attention_np, gpt2_np
from runtime.checkpoints import Checkpoint

NAMES = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
         "mlp.c_proj.weight", "mlp.c_proj.bias"]


class Block:
    """Block `layer` of `checkpoint`, as numpy functions: ln_1, attn, ln_2, mlp."""

    def __init__(self, checkpoint: Checkpoint, layer: int):
        prefix = f"transformer.h.{layer}."
        t = {n: v.astype(np.float64) for n, v in checkpoint.tensors([prefix + n for n in NAMES]).items()}
        p = {n: t[prefix + n] for n in NAMES}  # Conv1D layout, [in, out]
        config = checkpoint.learner_config()
        self.eps, self.H = config.layer_norm_epsilon, config.n_head
        self.p = p
        self.attn_p = {k.removeprefix("attn.").replace(".", "_"): v for k, v in p.items() if k.startswith("attn.")}
        self.mlp_p = {k.removeprefix("mlp.").replace(".", "_"): v for k, v in p.items() if k.startswith("mlp.")}

    def ln_1(self, x):
        return gpt2_np.layer_norm(x, self.p["ln_1.weight"], self.p["ln_1.bias"], self.eps)

    def ln_2(self, x):
        return gpt2_np.layer_norm(x, self.p["ln_2.weight"], self.p["ln_2.bias"], self.eps)

    def attn(self, x):
        return attention_np.forward(x, self.attn_p, self.H)

    def mlp(self, x):
        return gpt2_np.mlp(x, self.mlp_p)


def half(x, ln, sublayer, *, wiring: str = "pre-norm"):
    """One residual half of a block.

    wiring: "pre-norm" (right): x + f(ln(x)); "no-residual": f(ln(x));
    "normed-residual": ln(x) + f(ln(x)); "post-norm": ln(x + f(x)); "no-norm": x + f(x);
    "norm-on-output": x + ln(f(x))
    """
    if wiring == "pre-norm":
        return x + sublayer(ln(x))
    if wiring == "no-residual":
        return sublayer(ln(x))
    if wiring == "normed-residual":
        return ln(x) + sublayer(ln(x))
    if wiring == "post-norm":
        return ln(x + sublayer(x))
    if wiring == "no-norm":
        return x + sublayer(x)
    if wiring == "norm-on-output":
        return x + ln(sublayer(x))
    raise ValueError(wiring)


WIRING_MISTAKES = {
    "no-residual": ("the residual is missing: the output is the sub-layer's alone",
                    "add the sub-layer's output to the stream that came in"),
    "normed-residual": ("the normalised copy was added back instead of the stream itself",
                        "keep the stream before ln and add to that"),
    "post-norm": ("ln was applied after the addition (post-norm, as in the original Transformer)",
                  "GPT-2 normalises the sub-layer's input, not the sum"),
    "no-norm": ("the sub-layer got the stream without ln", "run the sub-layer on ln(stream)"),
    "norm-on-output": ("ln was applied to the sub-layer's output instead of its input",
                       "normalise what goes into the sub-layer: x + sublayer(ln(x))"),
}
# Each wiring as code, in terms of the stream x, its LayerNorm ln and its sub-layer f: a mistake's edit.
WIRING_CODE = {"no-residual": "f(ln(x))", "normed-residual": "ln(x) + f(ln(x))", "post-norm": "ln(x + f(x))",
               "no-norm": "x + f(x)", "norm-on-output": "x + ln(f(x))"}


class Model:
    """The whole GPT-2 body of `checkpoint` in numpy, for the mistakes of steps 10 and 11."""

    def __init__(self, checkpoint: Checkpoint):
        config = checkpoint.learner_config()
        t = checkpoint.tensors(["transformer.wte.weight", "transformer.wpe.weight",
                                "transformer.ln_f.weight", "transformer.ln_f.bias"])
        self.wte, self.wpe = t["transformer.wte.weight"], t["transformer.wpe.weight"]
        self.ln_f_w, self.ln_f_b = t["transformer.ln_f.weight"], t["transformer.ln_f.bias"]
        self.eps = config.layer_norm_epsilon
        self.blocks = [Block(checkpoint, i) for i in range(config.n_layer)]

    def hidden(self, ids, *, positions=True, scale=1.0, order=None, ln_f: bool | str = True):
        """[B, T] -> [B, T, C]; the switches make the mistakes.

        positions: True (0 .. T-1), False (none), or the position of each token [T]
        order: block indices to run; ln_f: True (at the end), False, or "each" (after every block)
        """
        T = ids.shape[1]
        where = np.arange(T) if positions is True else positions
        x = self.wte[ids].astype(np.float64) * scale + (self.wpe[where] if positions is not False else 0)
        for i in order if order is not None else range(len(self.blocks)):
            b = self.blocks[i]
            x = half(half(x, b.ln_1, b.attn), b.ln_2, b.mlp)
            if ln_f == "each":
                x = self.ln_f(x)
        return self.ln_f(x) if ln_f is True else x

    def ln_f(self, x):
        return gpt2_np.layer_norm(x, self.ln_f_w, self.ln_f_b, self.eps)


@functools.cache
def model_of(checkpoint: Checkpoint) -> Model:
    """`checkpoint`'s numpy GPT-2, built once per process (~4 s, ~500 MB of float32 for GPT-2 small): the
    mistakes of steps 10, 11 and 13 are computed from it, check after check."""
    return Model(checkpoint)
