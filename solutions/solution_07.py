"""Step 07 solution: GPT-2's multi-head causal self-attention.

Shapes, with B = batch, T = tokens, C = n_embd (768), H = n_head (12) and
D = head_dim (C / H = 64):

    hidden_states [B, T, C]
      -> c_attn            [B, T, 3C]   one matmul makes Q, K and V
      -> split             3 x [B, T, C]
      -> _split_heads      3 x [B, H, T, D]
      -> _attn             [B, H, T, D] softmax(Q K^T / sqrt(D) + mask) V
      -> _merge_heads      [B, T, C]
      -> c_proj            [B, T, C]

The names follow Hugging Face's `GPT2Attention`, so the checkpoint's
`attn.c_attn.*` and `attn.c_proj.*` weights load by name.
"""

import math

from max.experimental import functional as F
from max.experimental.nn import Linear, Module
from max.experimental.tensor import Tensor

from solutions.solution_01 import GPT2Config
from solutions.solution_02 import causal_mask


class GPT2MultiHeadAttention(Module):
    def __init__(self, config: GPT2Config):
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim

        self.c_attn = Linear(self.embed_dim, 3 * self.embed_dim, bias=True)  # Q, K, V in one
        self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=True)

    def _split_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[B, T, C] -> [B, H, T, D]"""
        new_shape = list(tensor.shape[:-1]) + [num_heads, attn_head_size]
        tensor = tensor.reshape(new_shape)  # [B, T, H, D]
        return tensor.transpose(-3, -2)  # [B, H, T, D]

    def _merge_heads(self, tensor: Tensor, num_heads: int, attn_head_size: int) -> Tensor:
        """[B, H, T, D] -> [B, T, C]"""
        tensor = tensor.transpose(-3, -2)  # [B, T, H, D]
        new_shape = list(tensor.shape[:-2]) + [num_heads * attn_head_size]
        return tensor.reshape(new_shape)  # [B, T, C]

    def _attn(self, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """Causal scaled dot-product attention, per head: [B, H, T, D] x 3 -> [B, H, T, D]"""
        attn_weights = query @ key.transpose(-1, -2)  # [B, H, T, T]
        attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))

        seq_len = query.shape[-2]
        mask = causal_mask(seq_len, 0, dtype=query.dtype, device=query.device)  # [T, T]
        attn_weights = attn_weights + mask  # future positions -> -inf

        attn_weights = F.softmax(attn_weights, axis=-1)  # each row sums to 1
        return attn_weights @ value  # [B, H, T, D]

    def forward(self, hidden_states: Tensor) -> Tensor:
        """[B, T, C] -> [B, T, C]"""
        query, key, value = F.split(
            self.c_attn(hidden_states), [self.split_size] * 3, axis=-1
        )  # 3 x [B, T, C]

        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)

        attn_output = self._attn(query, key, value)  # [B, H, T, D]
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        return self.c_proj(attn_output)  # [B, T, C]
