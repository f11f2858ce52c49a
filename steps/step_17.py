"""Step 17: attention as runtimes compute it: one pass over the keys, in your own Mojo kernel.

Your step 13 attention builds every score of a head, [T, P + T], masks it, softmaxes it and multiplies
it by the values; and it grows the cache by copying all of it, every step. A serving runtime does
neither: FlashAttention goes over the keys once, keeping for each query only a running maximum, a
running sum and an accumulator (the online softmax), and the cache is allocated once for the whole
context and written in place. You write that kernel in Mojo (step_17_kernel/flash.mojo), declare it to
MAX here, and build your GPT-2 around it.

Shapes, with P = positions cached, T = new positions, N = n_positions, L = n_layer, H = n_head,
D = head_dim:

    flash_attention    q, k, v [B, H, T, D], k_cache, v_cache [B, H, N, D], past [1] int64 (P)
                         -> [B, H, T, D]: each new query over keys 0 .. P + t; the kernel first writes
                         k and v into the caches at positions P .. P+T-1
    empty_flash_cache  config, batch_size -> 2L caches [B, H, N, D] of zeros (keys and values, layer by
                         layer, as step 13's): float32, or float16 (half the bytes a decode step reads,
                         as llama.cpp keeps its cache; the check then runs your kernel on float16
                         caches, and holds what they store to Hugging Face's keys and values)
    GPT2Flash          your step 11 model run as step 13's forward runs it, attention through your kernel:
                         input_ids [B, T], past [1] int64,
                         *cache -> logits [B, V] (the last position's); prefill and decode alike
    generate_flash     step 13's generate_with_cache for GPT2Flash: the prompt once, then one position a
                         call, past counting the positions the caches hold
    GPT2FlashQ8        optional, once step 16 passes: GPT2Flash for decode (T = 1) with step 16's int8
                         products, every Linear and the tied head; a prompt still runs through GPT2Flash,
                         on the same caches. `pixi run gpt2 --fast` runs them

The check (and `pixi run gpt2`) compiles GPT2Flash with input_ids [batch, seq] symbolic, past [1] and
the caches [batch, H, N, D], and calls it with the same cache tensors every time: nothing is returned
but the logits, and nothing is copied.

Facts you cannot guess (MAX 26.7), beside step 15's:
- `custom.TemplateType(DType.int64, [1])` declares an int64 input of one value;
  `custom.TemplateType(custom.DTypeVar("cache"), [b, h, n, d])` an input of either dtype (the inputs
  sharing a DTypeVar must agree at a call).
- `Tensor.arange(0, T, dtype=DType.int64, device=d) + past` is the positions P .. P+T-1 as a tensor;
  `F.gather(table, positions, axis=0)` their rows of a table (your step 06 takes P as a number, which
  a compiled graph does not have here: past is a tensor).

Read: the book's page for this step (book/docs/steps/17.md).
Check: pixi run s17        Then: pixi run gpt2 --fast "Your prompt"        Stuck? pixi run s17 --hint
"""

from collections.abc import Iterator
from pathlib import Path

from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_11 import GPT2LMHeadModel, load_hf_weights  # noqa: F401  (the check loads your model with them)

KERNEL = Path(__file__).with_name("step_17_kernel")  # your Mojo package: flash.mojo registers gpt2_flash_attention

# TODO (imports): what else will you need? MAX's custom op module, DType, its functional ops, numpy,
#   and step 12's next_token.


def flash_attention(q: Tensor, k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, past: Tensor) -> Tensor:
    """q, k, v [B, H, T, D], caches [B, H, N, D], past [1] int64 -> [B, H, T, D], by your kernel."""
    # TODO: call the op `gpt2_flash_attention` declared from KERNEL (declared once, not on every call).
    raise NotImplementedError("step 17: flash_attention")


def empty_flash_cache(config, batch_size: int) -> list[Tensor]:
    """2L caches [B, H, n_positions, D] of zeros, float32 (or float16): allocated once, written in place."""
    # TODO: as step 13's empty_cache, with room for n_positions.
    raise NotImplementedError("step 17: empty_flash_cache")


class GPT2Flash(Module):
    """A loaded GPT2LMHeadModel (step 11) whose attention is your kernel's; its modules, shared."""

    def __init__(self, model: GPT2LMHeadModel):
        # TODO: keep the model's body, as step 13's GPT2WithCache does.
        raise NotImplementedError("step 17: GPT2Flash.__init__")

    def forward(self, input_ids: Tensor, past: Tensor, *cache: Tensor) -> Tensor:
        """input_ids [B, T], past [1] int64, cache 2L x [B, H, N, D] -> logits [B, V]"""
        # TODO: your step 13 forward, with two changes:
        #   - the positions P .. P+T-1 come from `past`, a tensor: where do they meet wpe?
        #   - each block's attention: c_attn, the heads split, your kernel (which stores k and v), the
        #     heads merged, c_proj. What does the block hand back now that the cache is not returned?
        raise NotImplementedError("step 17: GPT2Flash.forward")

    def head(self, last: Tensor) -> Tensor:
        """last [B, C] (ln_f's output at the last position) -> logits [B, V]: the tied head. forward ends
        with it, so that GPT2FlashQ8 changes the head alone."""
        # TODO: as step 11's head.
        raise NotImplementedError("step 17: GPT2Flash.head")


class GPT2FlashQ8(GPT2Flash):
    """Optional, once step 16 passes: GPT2Flash on int8 weights through your step 16's kernel, for decode."""

    def __init__(self, model: GPT2LMHeadModel):
        # TODO: GPT2Flash's, then step 16's GPT2Quantized's: every Linear a QuantizedLinear, the tied head's
        #   weight quantised. Import step 16 here, inside: the float32 path must not need it. The Linears
        #   are swapped in the model you are handed: the check (and gpt2 --fast) hands GPT2Flash and
        #   GPT2FlashQ8 a model each.
        raise NotImplementedError("step 17: GPT2FlashQ8 (optional: once step 16 passes)")

    def head(self, last: Tensor) -> Tensor:
        # TODO: the tied head through step 16's matvec_q8.
        raise NotImplementedError("step 17: GPT2FlashQ8.head")


def generate_flash(model, config, input_ids: list[int], max_new_tokens: int, *, temperature: float = 0.0,
                   top_k: int | None = None, seed: int | None = None,
                   eos_token_id: int | None = None) -> Iterator[int]:
    """Step 13's generate_with_cache for GPT2Flash (usually compiled): model(ids, past, *cache) -> logits."""
    # TODO: as step 13's: the caches made once, the prompt once, then one token a call. What is past at
    #   each call?
    raise NotImplementedError("step 17: generate_flash")
