"""Step 07, written differently: attention computed one head at a time.

Correct: the check must pass it.
"""

import math

from max.experimental import functional as F
from max.experimental.nn import Linear, Module

from solutions.solution_02 import causal_mask


class GPT2MultiHeadAttention(Module):
    def __init__(self, config):
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = Linear(config.n_embd, config.n_embd)

    def _split_heads(self, tensor, num_heads, attn_head_size):
        batch, seq = tensor.shape[0], tensor.shape[1]
        return F.permute(tensor.reshape([batch, seq, num_heads, attn_head_size]), [0, 2, 1, 3])

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        batch, seq = tensor.shape[0], tensor.shape[2]
        return F.permute(tensor, [0, 2, 1, 3]).reshape([batch, seq, num_heads * attn_head_size])

    def _attn(self, query, key, value):
        seq, head_dim = query.shape[-2], int(query.shape[-1])
        mask = causal_mask(seq, 0, dtype=query.dtype, device=query.device)
        heads = []
        for h in range(int(query.shape[1])):
            q, k, v = query[:, h], key[:, h], value[:, h]  # [B, T, D]
            scores = F.matmul(q, k.transpose(1, 2)) / math.sqrt(head_dim) + mask
            heads.append(F.matmul(F.softmax(scores), v))
        return F.stack(heads, axis=1)

    def forward(self, x):
        head_dim = self.n_embd // self.n_head
        q, k, v = F.split(self.c_attn(x), [self.n_embd, self.n_embd, self.n_embd], axis=2)
        q, k, v = (self._split_heads(t, self.n_head, head_dim) for t in (q, k, v))
        return self.c_proj(self._merge_heads(self._attn(q, k, v), self.n_head, head_dim))
