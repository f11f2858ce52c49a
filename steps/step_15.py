"""Step 15: your own Mojo kernel for decode's weight products.

At decode a step runs one position, so every weight product is a matrix times a vector: y = W x + b.
Each float of W is read from memory once and used once (two flops per four bytes), so the step's
time is the time to read the weights, and a kernel that reads them faster makes decode faster.
You write that kernel in Mojo (step_15_kernel/matvec.mojo), declare it to MAX here, and put it in
place of every product of your step 13 model's decode steps.

Shapes, with N = rows (the batch at decode), K = in, M = out:

    matvec          x [N, K], weight [M, K], bias [M] or None -> x @ weight.T + bias [N, M]
    KernelLinear    wraps a Linear: x [B, 1, in] -> [B, 1, out] through your kernel
    GPT2WithKernel  your step 13 GPT2WithCache, decode only: input_ids [B, 1], cache 2L x [B, H, P, D]
                      -> (logits [B, V], *cache 2L x [B, H, P+1, D]), every product the kernel's

A prompt of T positions still runs through your step 13 model with MAX's products: a kernel made for
one row would read W once per row. The check (and `pixi run gpt2`) compiles your step 13 model for
the prompt first, then GPT2WithKernel for one position (input_ids [B, 1]).

Facts you cannot guess (MAX 26.7):
- `custom.declare` (from max.experimental) declares a Mojo op to MAX: its registered name; its inputs,
  a dict from a name to a `custom.TemplateType` (a dtype and a shape, each size a number or one of
  `custom.Symbols`, names MAX binds from the inputs you pass); its outputs, a list of them; and
  `custom_extensions`, a list holding the Mojo package's folder. It builds the package (seconds
  when unchanged), so declare once, not at every call. The op is then called like a function on
  Tensors, in the same order as the inputs, and returns the output Tensor.
- A Module's attributes may be replaced with setattr; `module.children` gives the (name, child)
  pairs of a module, `module.descendants` those of every module inside it.

Read: the book's page for this step (book/docs/steps/15.md).
Check: pixi run s15        Then: pixi run gpt2 "Your prompt"        Stuck? pixi run s15 --hint
"""

from pathlib import Path

from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from steps.step_11 import GPT2LMHeadModel, load_hf_weights  # noqa: F401  (the check loads your model with them)
from steps.step_13 import GPT2WithCache

KERNEL = Path(__file__).with_name("step_15_kernel")  # your Mojo package: matvec.mojo registers gpt2_matvec

# TODO (imports): what else will you need? MAX's custom op module, DType, its functional ops, and
#   pieces of your step 13.


def matvec(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, K], weight [M, K], bias [M] or None -> x @ weight.T + bias [N, M], by your kernel."""
    # TODO: call the op `gpt2_matvec` declared from KERNEL (declared once, not on every call).
    #   - Your kernel always adds a bias: what do you hand it when there is none (the tied head)?
    raise NotImplementedError("step 15: matvec")


class KernelLinear(Module):
    """A Linear's weight [out, in] and bias [out], the same tensors; one position goes through the kernel."""

    def __init__(self, linear: Linear):
        # TODO: keep the Linear's weight and bias (the tensors themselves, so nothing is copied).
        raise NotImplementedError("step 15: KernelLinear.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """x [B, 1, in] -> [B, 1, out]"""
        # TODO: the kernel takes [N, K]: how do [B, 1, in] rows become that, and come back?
        raise NotImplementedError("step 15: KernelLinear.forward")


class GPT2WithKernel(GPT2WithCache):
    """Your step 13 GPT2WithCache with every weight product of a decode step through your kernel."""

    def __init__(self, model: GPT2LMHeadModel):
        # TODO: as step 13's (the same model, its weights shared), and then every Linear inside the
        #   blocks becomes a KernelLinear holding the same weights.
        raise NotImplementedError("step 15: GPT2WithKernel.__init__")

    def forward(self, input_ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """input_ids [B, 1], cache 2L x [B, H, P, D] -> (logits [B, V], *cache 2L x [B, H, P+1, D])"""
        # TODO: your step 13 forward; its Linears are kernels now. What is left that multiplies by a
        #   weight without a Linear?
        raise NotImplementedError("step 15: GPT2WithKernel.forward")
