"""Step 14 solution: serving. Many requests in one batch, their keys and values in MAX's paged cache.

Step 13 ran one request: its cache a list of [1, H, P, D] tensors, grown by concat. A server runs
many requests at once, each at its own point (one just arrived with its prompt, another deep into
its answer), and requests come and go between steps. So MAX's serving stack:

- packs the batch *ragged*: the new tokens of every request, end to end, with no padding,
  `tokens` [T], and `input_row_offsets` [B+1] saying where each request's rows start and end
  (request b owns rows offsets[b] .. offsets[b+1]-1; a decoding request owns one row);
- keeps keys and values in a *paged* cache: fixed-size pages from one pool, a table per request
  saying which pages are its own (`kv_collection`: its pages, `cache_lengths` [B] = how many
  positions each request already has there, and the page table). Nothing is copied as a request
  grows; a finished request's pages go back to the pool.

Shapes, with T = new tokens in the whole batch, B = requests, C = n_embd, H = n_head, D = head_dim:

    tokens [T] -> wte [T, C] + wpe[positions] [T, C]      positions: per request, after its cache
      -> n_layer x (ln_1 -> paged attention -> + ; ln_2 -> mlp -> +)   [T, C]
      -> ln_f -> tied head -> logits [T, V]: every new row's, as step 11's model gives every position's

The server takes each request's last row (`last_rows`) for its next token, and every row for the
log-probabilities of a prompt (`echo` with `logprobs`: row t's logits score token t + 1), computing
log_softmax itself: so the model hands back raw logits, every row, in row order.

Paged attention, per layer: c_attn -> q, k, v [T, H, D]; k and v are written into the request's
pages (after its cached positions), then every query attends over its own request's positions
0 .. its own, in the cache: one kernel, `flash_attention_ragged`, with the causal mask.
"""

import math

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from max.nn.attention import MHAMaskVariant
from max.nn.kernels import flash_attention_ragged, store_k_cache_ragged, store_v_cache_ragged

from solutions.solution_07 import GPT2MultiHeadAttention
from solutions.solution_11 import GPT2LMHeadModel

store_k = F.functional(store_k_cache_ragged)
store_v = F.functional(store_v_cache_ragged)
paged_flash_attention = F.functional(flash_attention_ragged)


def ragged_positions(num_tokens, input_row_offsets: Tensor, cache_lengths: Tensor) -> Tensor:
    """Each row's position in its own request: after its request's cached positions, 0, 1, ...

    num_tokens T (symbolic), input_row_offsets [B+1] uint32, cache_lengths [B] uint32 -> positions [T] int64
    """
    offsets = F.cast(input_row_offsets, DType.int64)
    starts, ends = offsets[:-1], offsets[1:]  # [B] each
    rows = Tensor.arange(num_tokens, dtype=DType.int64, device=offsets.device)  # [T]: 0 .. T-1
    # Row t belongs to request b when starts[b] <= t < ends[b]: count the requests that end at or before t.
    request = F.sum(F.cast(rows[:, None] >= ends[None, :], DType.int64), axis=-1)  # [T, 1]
    request = request.reshape([-1])  # [T]
    first_row = F.gather(starts, request, axis=0)  # [T]: where the row's request starts
    cached = F.gather(F.cast(cache_lengths, DType.int64), request, axis=0)  # [T]
    return rows - first_row + cached


def last_rows(input_row_offsets: Tensor) -> Tensor:
    """Each request's last new row: the one whose logits choose its next token.

    input_row_offsets [B+1] uint32 -> rows [B] int64
    """
    return F.cast(input_row_offsets[1:], DType.int64) - 1  # request b ends where b + 1 starts


def paged_attention(attn: GPT2MultiHeadAttention, hidden_states: Tensor, kv_collection, kv_params,
                    input_row_offsets: Tensor, layer: int) -> Tensor:
    """Step 07's attention for a ragged batch, keys and values in the paged cache.

    hidden_states [T, C] -> [T, C]; writes this layer's new keys and values into each request's pages.
    """
    query, key, value = F.split(attn.c_attn(hidden_states), [attn.split_size] * 3, axis=-1)  # 3 x [T, C]
    heads = [-1, attn.num_heads, attn.head_dim]
    query, key, value = query.reshape(heads), key.reshape(heads), value.reshape(heads)  # [T, H, D]

    layer_idx = Tensor(layer, dtype=DType.uint32, device=hidden_states.device)
    store_k(kv_collection, key, input_row_offsets, layer_idx)  # after each request's cached positions
    store_v(kv_collection, value, input_row_offsets, layer_idx)
    attended = paged_flash_attention(
        kv_params, query, input_row_offsets, kv_collection, layer_idx,
        MHAMaskVariant.CAUSAL_MASK, scale=1 / math.sqrt(attn.head_dim),
    )  # [T, H, D]: each query over its own request's positions up to its own
    return attn.c_proj(attended.reshape([-1, attn.num_heads * attn.head_dim]))  # [T, C]


class GPT2Paged(Module):
    """A loaded GPT2LMHeadModel (step 11) that runs a ragged batch over MAX's paged KV cache."""

    def __init__(self, model: GPT2LMHeadModel, kv_params):
        self.transformer = model.transformer
        self.kv_params = kv_params

    def forward(self, tokens: Tensor, kv_collection, input_row_offsets: Tensor) -> Tensor:
        """tokens [T], input_row_offsets [B+1] -> logits [T, V]: every new row's next-token scores"""
        t = self.transformer
        positions = ragged_positions(tokens.shape[0], input_row_offsets, kv_collection.cache_lengths)  # [T]
        x = t.wte(tokens) + F.gather(t.wpe.weight, positions, axis=0)  # [T, C]
        for i, block in enumerate(t.h):
            x = x + paged_attention(block.attn, block.ln_1(x), kv_collection, self.kv_params,
                                    input_row_offsets, i)
            x = x + block.mlp(block.ln_2(x))
        return t.ln_f(x) @ t.wte.weight.T  # tied head: [T, V]
