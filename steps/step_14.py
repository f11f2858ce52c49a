"""Step 14: serving. Many requests in one batch, their keys and values in MAX's paged cache.

Your step 13 runs one request, its cache a list of [1, H, P, D] tensors grown by concat. A server
runs many requests at once, each at its own point (one just arrived with its prompt, another deep
into its answer), and requests come and go between steps. MAX's serving stack (`max serve`)
hands your model each batch in its own form:

- *ragged*: the new tokens of every request end to end, no padding: `tokens` [T], and
  `input_row_offsets` [B+1] uint32: request b owns rows offsets[b] .. offsets[b+1]-1 (a request
  that is decoding owns one row; one that just arrived owns its whole prompt);
- *paged*: keys and values live in fixed-size pages of one pool, a table per request saying which
  pages are its own. `kv_collection` carries it all; `kv_collection.cache_lengths` [B] uint32 says
  how many positions each request already holds there.

Shapes, with T = new tokens in the whole batch, B = requests, C = n_embd, H = n_head, D = head_dim:

    tokens [T] -> wte + wpe(positions) [T, C] -> n_layer blocks [T, C] -> ln_f -> tied head
      -> logits [T, V]: every new row's next-token scores, as step 11's model gives every position's

What the server does with them: for each request it takes its last row's logits (your `last_rows`)
to choose the next token; and for `echo` with `logprobs` (how evaluation harnesses score a text: the
log-probability of every prompt token) it reads every prompt row, row t's logits scoring token t + 1.
The server computes log_softmax itself, so it needs the raw logits of every row, in row order: not
probabilities, not only the last rows.

MAX operations this step needs (from max.nn.kernels, wrapped for Tensors by F.functional, as
below): store_k_cache_ragged(kv_collection, key [T, H, D], input_row_offsets, layer_idx) and
store_v_cache_ragged(...) write the new keys and values after each request's cached positions;
flash_attention_ragged(kv_params, query [T, H, D], input_row_offsets, kv_collection, layer_idx,
mask_variant, scale) -> [T, H, D] attends each query over its own request's cached positions
(layer_idx: a uint32 scalar Tensor on the graph's device, Tensor(i, dtype=..., device=...); the
mask: MHAMaskVariant from max.nn.attention).

Read: the book's page for this step (book/docs/steps/14.md).
Check: pixi run s14        Then: pixi run serve        Stuck? pixi run s14 --hint
"""

from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from max.nn.kernels import flash_attention_ragged, store_k_cache_ragged, store_v_cache_ragged

from steps.step_07 import GPT2MultiHeadAttention
from steps.step_11 import GPT2LMHeadModel, load_hf_weights  # noqa: F401  (load_hf_weights: the server loads with it)

store_k = F.functional(store_k_cache_ragged)
store_v = F.functional(store_v_cache_ragged)
paged_flash_attention = F.functional(flash_attention_ragged)

# TODO (imports): what else will you need? MAX's dtypes, the mask variant, a square root.


def ragged_positions(num_tokens, input_row_offsets: Tensor, cache_lengths: Tensor) -> Tensor:
    """Each row's position in its own request: after its request's cached positions, 0, 1, ...

    num_tokens T (symbolic), input_row_offsets [B+1] uint32, cache_lengths [B] uint32 -> positions [T] int64
    """
    # TODO: for every row 0 .. T-1, which request owns it, where that request's rows start, and how
    #   many positions it has cached. All of it in MAX operations: T and B are known only when the
    #   graph runs. Comparing every row with every request's end is one way to find the owner.
    raise NotImplementedError("step 14: ragged_positions")


def last_rows(input_row_offsets: Tensor) -> Tensor:
    """Each request's last new row: the one whose logits choose its next token.

    input_row_offsets [B+1] uint32 -> rows [B] int64
    """
    # TODO: request b owns rows offsets[b] .. offsets[b+1]-1.
    raise NotImplementedError("step 14: last_rows")


def paged_attention(attn: GPT2MultiHeadAttention, hidden_states: Tensor, kv_collection, kv_params,
                    input_row_offsets: Tensor, layer: int) -> Tensor:
    """Your step 07 attention for a ragged batch, keys and values in the paged cache.

    hidden_states [T, C] -> [T, C]; writes this layer's new keys and values into each request's pages.
    """
    # TODO: q, k, v from attn.c_attn, as [T, H, D] each; store k and v for this layer; attend with
    #   the kernel (which mask? which scale?); merge the heads and project with attn.c_proj.
    raise NotImplementedError("step 14: paged_attention")


class GPT2Paged(Module):
    """A loaded GPT2LMHeadModel (step 11) that runs a ragged batch over MAX's paged KV cache."""

    def __init__(self, model: GPT2LMHeadModel, kv_params):
        # TODO: keep the model's body (its weights are loaded) and kv_params for the kernel.
        self.transformer = None

    def forward(self, tokens: Tensor, kv_collection, input_row_offsets: Tensor) -> Tensor:
        """tokens [T], input_row_offsets [B+1] -> logits [T, V]: every new row's next-token scores"""
        # TODO: step 13's forward, ragged: the position embeddings at ragged_positions (rows of wpe's
        #   weight: step 06's module takes a range, not a list of positions), the blocks with
        #   paged_attention (layer i is layer_idx i), and every row's logits.
        raise NotImplementedError("step 14: GPT2Paged.forward")
