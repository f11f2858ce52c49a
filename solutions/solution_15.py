"""Step 15 solution: decode's weight products through your own Mojo kernel.

At decode a step runs one position: every weight product is a matrix times a vector, y = W x + b,
and each of W's floats is read from memory once and used once (two flops per four bytes). The
step's time is the time to read the weights; MAX's general product reads them more slowly than the
memory can deliver. solution_15_kernel/matvec.mojo streams W once, in bands of rows over the CPU's
threads, and registers itself as the custom op `gpt2_matvec`; this file declares it to MAX and puts
it in place of every product of step 13's decode:

    matvec        x [N, K], weight [M, K], bias [M] -> x @ weight.T + bias [N, M]
    KernelLinear  a Linear [out, in]: x [B, 1, in] -> [B, 1, out] by the kernel (only decode runs it:
                  the prompt goes through step 13's graph, compiled before the kernel goes in)
    GPT2WithKernel step 13's GPT2WithCache, its Linears KernelLinears and its tied head the kernel
"""

from functools import cache
from pathlib import Path

from max.dtype import DType
from max.experimental import custom
from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_13 import GPT2WithCache, attention_with_cache

KERNEL = Path(__file__).with_name("solution_15_kernel")  # the Mojo package (its matvec.mojo)


@cache
def matvec_op():
    """The custom op, declared once: MAX compiles the Mojo package here (seconds when unchanged)."""
    n, k, m = custom.Symbols("n", "k", "m")
    return custom.declare("gpt2_matvec",
                          inputs={"x": custom.TemplateType(DType.float32, [n, k]),
                                  "w": custom.TemplateType(DType.float32, [m, k]),
                                  "b": custom.TemplateType(DType.float32, [m])},
                          outputs=[custom.TemplateType(DType.float32, [n, m])], custom_extensions=[KERNEL])


def matvec(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, K], weight [M, K], bias [M] or None -> x @ weight.T + bias [N, M], by the kernel."""
    if bias is None:  # the tied head has none: the kernel adds zeros
        bias = F.broadcast_to(Tensor(0.0, dtype=x.dtype, device=x.device), [weight.shape[0]])
    return matvec_op()(x, weight, bias)


class KernelLinear(Module):
    """A Linear's weight [out, in] and bias [out], the same tensors; one position goes through the kernel."""

    def __init__(self, linear: Linear):
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x: Tensor) -> Tensor:
        """x [B, 1, in] -> [B, 1, out]"""
        rows = x.reshape([-1, x.shape[-1]])  # [B, in]: one row per sequence
        return matvec(rows, self.weight, self.bias).reshape([*x.shape[:-1], self.weight.shape[0]])


def use_kernel(model: Module) -> None:
    """Replaces, in place, every Linear inside `model` by a KernelLinear sharing its weights."""
    for _, module in [("", model), *model.descendants]:
        for name, child in list(module.children):
            if isinstance(child, Linear):
                setattr(module, name, KernelLinear(child))


class GPT2WithKernel(GPT2WithCache):
    """Step 13's GPT2WithCache with every weight product of a decode step through the kernel."""

    def __init__(self, model):
        super().__init__(model)
        use_kernel(self.transformer)

    def forward(self, input_ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """input_ids [B, 1], cache 2L x [B, H, P, D] -> (logits [B, V], *cache 2L x [B, H, P+1, D])

        Step 13's forward: its Linears are the kernel's now; only the tied head is written here."""
        t = self.transformer
        x = t.wte(input_ids) + t.wpe(input_ids.shape[-1], cache[0].shape[-2])  # [B, 1, C]
        new_cache = []
        for i, block in enumerate(t.h):
            attended, key, value = attention_with_cache(block.attn, block.ln_1(x), cache[2 * i], cache[2 * i + 1])
            x = x + attended
            x = x + block.mlp(block.ln_2(x))
            new_cache += [key, value]
        last = t.ln_f(x[:, -1, :])  # [B, C]
        return (matvec(last, t.wte.weight), *new_cache)  # the tied head [B, V]: wte [V, C] read once
