"""Step 13: generation with a KV cache.

Your step 12 `generate` runs the whole sequence through the model for every
new token. But attention is causal: a position's key and value never change
once computed, and attention is the only place where positions meet. Keep
them (the cache), run the prompt once ("prefill"), then each new token alone
("decode"), its query attending to every cached key.

Shapes, with P = positions already cached, T = new positions (the prompt's
length at prefill, 1 at decode), L = n_layer, H = n_head, D = head_dim:

    cache        2L x [B, H, P, D]   layer by layer: keys of block 0, values of block 0, keys of block 1, ...
    input_ids    [B, T]              the tokens at positions P .. P+T-1
    logits       [B, V]              the last position's only: the next token's scores
    new cache    2L x [B, H, P+T, D]

Facts you cannot guess: in a compiled graph P is a symbolic dimension (one
graph serves prefill and decode), and step 02's causal_mask(T, P) cannot be
built then (F.band_part needs its band width as a Python int); what the mask
must hold is causal_mask(T, P)'s values. The caches' order and layout are the
contract with the check and with `pixi run gpt2`: keep them as above.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/13/; or book/docs/steps/13.md).
Check: pixi run s13        Then: pixi run gpt2 "Your prompt"        Stuck? pixi run s13 --hint
"""

from collections.abc import Iterator

from max.experimental.nn import Module
from max.experimental.tensor import Tensor

from steps.step_07 import GPT2MultiHeadAttention
from steps.step_11 import GPT2LMHeadModel, load_hf_weights  # noqa: F401
from steps.step_12 import next_token  # noqa: F401

# TODO (imports): what else will you need? numpy, MAX's functional ops, your step 02 mask, a square root.


def empty_cache(config, batch_size: int) -> list[Tensor]:
    """2L empty caches [B, H, 0, D], float32: the cache before the prompt."""
    # TODO: one tensor per layer for the keys and one for the values, with no positions yet.
    #   Can a tensor have an axis of length 0? (numpy can make one; MAX can take it from numpy.)
    raise NotImplementedError("step 13: empty_cache")


def attention_with_cache(attn: GPT2MultiHeadAttention, hidden_states: Tensor, past_key: Tensor,
                         past_value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Your step 07 attention `attn`, over the cached positions and the new ones.

    hidden_states [B, T, C], past_key and past_value [B, H, P, D]
      -> output [B, T, C], key and value [B, H, P+T, D] (the cache, grown)
    """
    # TODO: the new positions' query, key and value as in step 07 (attn's layers and helpers).
    #   - Where do the new keys and values go relative to the cached ones?
    #   - Which keys may new query i see: how many cached ones, and which new ones?
    #   - The scores are [B, H, T, P+T]: what shape must the mask have, and how do you build it
    #     when P is only known when the graph runs?
    raise NotImplementedError("step 13: attention_with_cache")


class GPT2WithCache(Module):
    """A loaded GPT2LMHeadModel (step 11) that reads and grows a KV cache; its modules, shared."""

    def __init__(self, model: GPT2LMHeadModel):
        # TODO: keep the model's body, so the weights already loaded are the ones used.
        self.transformer = None

    def forward(self, input_ids: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        """input_ids [B, T], cache 2L x [B, H, P, D] -> (logits [B, V], *cache 2L x [B, H, P+T, D])"""
        # TODO: step 10's forward, with the cache threaded through the blocks.
        #   - At which positions do the new tokens sit, and how does your step 06 take that?
        #   - A block is two residual halves; only the attention half meets the cache.
        #   - Which position's logits predict the next token?
        raise NotImplementedError("step 13: GPT2WithCache.forward")


def generate_with_cache(model, config, input_ids: list[int], max_new_tokens: int, *,
                        temperature: float = 0.0, top_k: int | None = None, seed: int | None = None,
                        eos_token_id: int | None = None) -> Iterator[int]:
    """Step 12's generate, with the cache: the prompt runs once, then one position per new token.

    `model` is a GPT2WithCache, usually compiled: (ids [1, T], *cache) -> (logits [1, V], *cache).
    """
    # TODO: as step 12's generate (one generator, yield each id, stop after eos), but each call
    #   gets only what the cache does not hold yet, and the cache it returns goes into the next.
    raise NotImplementedError("step 13: generate_with_cache")
