"""Step 07: multi-head attention.

Attention lets every token gather information from the tokens before it.
GPT-2 runs 12 attentions ("heads") side by side, each on its own 64 of the
768 channels, then mixes their results.

Shapes, with B = batch, T = tokens, C = n_embd (768), H = n_head (12) and
D = head_dim (C / H = 64):

    hidden_states [B, T, C]
      -> c_attn            [B, T, 3C]   one matmul makes Q, K and V
      -> split             3 x [B, T, C]
      -> _split_heads      3 x [B, H, T, D]
      -> _attn             [B, H, T, D] softmax(Q K^T / sqrt(D) + mask) V
      -> _merge_heads      [B, T, C]
      -> c_proj            [B, T, C]

Use the names of Hugging Face's GPT2Attention (`c_attn`, `c_proj`) so that
GPT-2's weights load by name.

Check: pixi run s07
"""

# TODO (imports): you will need
#   math                                    for math.sqrt
#   max.experimental.functional as F        for F.split and F.softmax
#   Linear and Module from max.experimental.nn
#   Tensor from max.experimental.tensor     for type hints
#   causal_mask from steps.step_02          your mask from step 02
from max.experimental.nn import Module

from steps.step_01 import GPT2Config


class GPT2MultiHeadAttention(Module):
    def __init__(self, config: GPT2Config):
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim

        # TODO (layers): two Linear layers, both with bias=True:
        #   self.c_attn maps n_embd -> 3 * n_embd (query, key and value at once)
        #   self.c_proj maps n_embd -> n_embd (mixes the heads' outputs)
        # Hint: Linear(in_dim, out_dim, bias=True)
        self.c_attn = None
        self.c_proj = None

    def _split_heads(self, tensor, num_heads, attn_head_size):
        """[B, T, C] -> [B, H, T, D]"""
        # TODO (split):
        #   1. reshape the last axis C into (num_heads, attn_head_size): [B, T, H, D]
        #      Hint: list(tensor.shape[:-1]) + [num_heads, attn_head_size]
        #   2. swap the token and head axes: [B, H, T, D]
        #      Hint: tensor.transpose(-3, -2)
        raise NotImplementedError("step 07: _split_heads")

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        """[B, H, T, D] -> [B, T, C]: undo _split_heads"""
        # TODO (merge):
        #   1. swap the head and token axes back: [B, T, H, D]
        #   2. reshape the last two axes into num_heads * attn_head_size: [B, T, C]
        raise NotImplementedError("step 07: _merge_heads")

    def _attn(self, query, key, value):
        """Causal attention per head: [B, H, T, D] x 3 -> [B, H, T, D]"""
        # TODO (attention):
        #   1. scores = query @ key^T                       [B, H, T, T]
        #      Hint: key.transpose(-1, -2)
        #   2. divide by sqrt(head_dim); the head size is value.shape[-1]
        #      Hint: math.sqrt(int(value.shape[-1]))
        #   3. add causal_mask(seq_len, 0, dtype=query.dtype, device=query.device);
        #      seq_len is query.shape[-2]
        #   4. softmax over the last axis (the keys): F.softmax(scores, axis=-1)
        #   5. weights @ value                              [B, H, T, D]
        raise NotImplementedError("step 07: _attn")

    def forward(self, hidden_states):
        """[B, T, C] -> [B, T, C]"""
        # TODO (forward):
        #   1. query, key, value = F.split(self.c_attn(hidden_states), [self.split_size] * 3, axis=-1)
        #   2. _split_heads each of them
        #   3. _attn, then _merge_heads
        #   4. return self.c_proj(...) of the merged heads
        raise NotImplementedError("step 07: forward")
