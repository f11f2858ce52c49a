"""Step 16: 8-bit weights, and your own int8 Mojo kernel for decode.

Decode reads every weight once per token, so its speed is the memory's speed divided by the bytes
read. Step 15 read float32: 4 bytes a weight. Here each weight becomes one signed byte, q, and
every 32 neighbouring weights of a row share one float32 scale: 1.125 bytes a weight, 3.6x fewer
bytes per token for the same products. You write the quantisation (numpy, once, when the model
loads), a Mojo kernel that multiplies by the bytes (step_16_kernel/matvec_q8.mojo), and the decode
that uses it.

The rule (llama.cpp's Q8_0), per row of a Linear's weight [M, K] (out, in), in blocks of BLOCK = 32
columns along K; the last block of a row has K % 32 columns when K is no multiple of 32:

    scale = max |w| over the block / 127          (float32; 0 for a block of zeros)
    q     = w / scale rounded to the nearest, ties to even (np.rint), as int8 in -127..127
            (0 where the scale is 0)
    w    ~= q * scale                              (dequantize)

Shapes, with N = rows (the batch at decode), K = in, M = out, KB = ceil(K / 32):

    quantize         w [M, K] float32 (a numpy array) -> (q [M, K] int8, scales [M, KB] float32)
    dequantize       q [M, K] int8, scales [M, KB] -> w [M, K] float32
    matvec_q8        x [N, K], q [M, K] int8, scales [M, KB], bias [M] or None
                       -> x @ dequantize(q, scales).T + bias [N, M], by your kernel
    QuantizedLinear  wraps a Linear: its weight quantised; x [B, 1, in] -> [B, 1, out] by your kernel
    GPT2Quantized    your step 13 GPT2WithCache, decode only: input_ids [B, 1], cache 2L x [B, H, P, D]
                       -> (logits [B, V], *cache), every product int8 (the tied head's too)

The check (and `pixi run gpt2 --int8`) loads your model with the weights already through
dequantize(quantize(w)), so that the prompt, run by your step 13 model with MAX's float products,
sees the same numbers as your int8 decode; quantising those weights again gives the same q and
scales. It compares with transformers loaded with the same dequantised weights.

Facts you cannot guess (MAX 26.7), beside step 15's:
- `custom.TemplateType(DType.int8, [m, k])` declares an int8 input; `Tensor.from_dlpack(array)` makes
  a Tensor of a numpy array (int8 included) and `np.from_dlpack(tensor)` a numpy array of a Tensor.
- `tensor.to(device)` moves a Tensor; a Linear's weight is on `linear.weight.device`.
- Trying quantize on the checkpoint yourself: model.safetensors keeps GPT-2's c_attn, c_proj and c_fc
  weights as [in, out] (Hugging Face's Conv1D); the Linear's [out, in], the layout to quantise along
  its input, is their transpose. Your step 11 model's Linears already hold [out, in].

Read: the book's page for this step (book/docs/steps/16.md); once this passes, its "Faster still"
section (optional: the cache grown by a second kernel of yours, a quarter off each decode step).
Check: pixi run s16        Then: pixi run gpt2 --int8 "Your prompt"        Stuck? pixi run s16 --hint
"""

from pathlib import Path

import numpy as np
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from steps.step_11 import GPT2LMHeadModel, load_hf_weights  # noqa: F401  (the check loads your model with them)
from steps.step_13 import GPT2WithCache

KERNEL = Path(__file__).with_name("step_16_kernel")  # your Mojo package: matvec_q8.mojo registers gpt2_matvec_q8
BLOCK = 32  # columns of a row that share one scale

# TODO (imports): what else will you need? MAX's custom op module, DType, its functional ops, and
#   pieces of your step 13.


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """w [M, K] float32 -> q [M, K] int8, scales [M, KB] float32, KB = ceil(K / BLOCK)"""
    # TODO: one scale per block of BLOCK columns of each row (the last block may be narrower).
    #   - How do you get each block's max |w| without a Python loop over rows?
    #   - What do you divide by when a block is all zeros?
    raise NotImplementedError("step 16: quantize")


def dequantize(q: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """q [M, K] int8, scales [M, KB] float32 -> w [M, K] float32"""
    # TODO: column k of row m is scaled by scales[m, k // BLOCK].
    raise NotImplementedError("step 16: dequantize")


def matvec_q8(x: Tensor, q: Tensor, scales: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, K], q [M, K] int8, scales [M, KB], bias [M] or None -> x @ dequantize(q, scales).T + bias [N, M]"""
    # TODO: call the op `gpt2_matvec_q8` declared from KERNEL (once, not on every call), as step 15's matvec.
    raise NotImplementedError("step 16: matvec_q8")


class QuantizedLinear(Module):
    """A Linear's weight [out, in] as int8 and scales, its bias [out] as it is; one position, by the kernel."""

    def __init__(self, linear: Linear):
        # TODO: quantize the Linear's weight (a Tensor: numpy needs it as an array, and the kernel needs
        #   q and scales as Tensors on the weight's device); keep its bias.
        raise NotImplementedError("step 16: QuantizedLinear.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """x [B, 1, in] -> [B, 1, out]"""
        raise NotImplementedError("step 16: QuantizedLinear.forward")


class GPT2Quantized(GPT2WithCache):
    """Your step 13 GPT2WithCache with every weight product of a decode step int8, through your kernel."""

    def __init__(self, model: GPT2LMHeadModel):
        # TODO: as step 15's GPT2WithKernel, with QuantizedLinears; and the tied head, which has no Linear?
        raise NotImplementedError("step 16: GPT2Quantized.__init__")

    def forward(self, input_ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """input_ids [B, 1], cache 2L x [B, H, P, D] -> (logits [B, V], *cache 2L x [B, H, P+1, D])"""
        raise NotImplementedError("step 16: GPT2Quantized.forward")
