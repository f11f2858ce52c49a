"""Step 07 to the online book's contract, with MAX 26.1's names: multi-head attention, c_attn and
c_proj, the causal mask written in this file as the book's page does."""

import math

import max.functional as F
from max.driver import Device
from max.dtype import DType
from max.graph import Dim, DimLike
from max.nn import Linear, Module
from max.tensor import Tensor

from solutions.solution_01 import GPT2Config


@F.functional
def causal_mask(sequence_length: DimLike, num_tokens: DimLike, *, dtype: DType, device: Device):
    n = Dim(sequence_length) + num_tokens
    mask = F.broadcast_to(Tensor.constant(float("-inf"), dtype=dtype, device=device), shape=(sequence_length, n))
    return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)


class GPT2MultiHeadAttention(Module):
    def __init__(self, config: GPT2Config):
        super().__init__()
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.c_attn = Linear(self.embed_dim, 3 * self.embed_dim, bias=True)
        self.c_proj = Linear(self.embed_dim, self.embed_dim, bias=True)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.reshape(tensor.shape[:-1] + [num_heads, attn_head_size])
        return tensor.transpose(-3, -2)  # [B, H, T, D]

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.transpose(-3, -2)
        return tensor.reshape(tensor.shape[:-2] + [num_heads * attn_head_size])

    def _attn(self, query, key, value):
        scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_dim)
        scores = scores + causal_mask(query.shape[-2], 0, dtype=query.dtype, device=query.device)
        return F.softmax(scores) @ value

    def __call__(self, hidden_states):
        query, key, value = F.split(self.c_attn(hidden_states), [self.embed_dim] * 3, axis=-1)
        heads = [self._split_heads(t, self.num_heads, self.head_dim) for t in (query, key, value)]
        out = self._merge_heads(self._attn(*heads), self.num_heads, self.head_dim)
        return self.c_proj(out)
