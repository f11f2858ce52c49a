"""Step 07: multi-head attention.

Attention lets every token gather information from the tokens before it.
GPT-2 runs 12 attentions ("heads") side by side, each on its own 64 of the
768 channels, then mixes their results.

Shapes, with B = batch, T = tokens, C = n_embd (768), H = n_head (12) and
D = head_dim (C / H = 64):

    hidden_states [B, T, C]
      -> c_attn            [B, T, 3C]   one linear layer makes Q, K and V
      -> three parts       3 x [B, T, C]
      -> _split_heads      3 x [B, H, T, D]
      -> _attn             [B, H, T, D] each query's weighted average of the values
      -> _merge_heads      [B, T, C]
      -> c_proj            [B, T, C]

Facts you cannot guess: c_attn's output holds the query, the key and the
value in that order, each C wide; head h owns channels h*D .. (h+1)*D - 1
(contiguous); the scores are scaled by 1/sqrt(D), the head size; the mask is
your step 02's, added before softmax. Use the names of Hugging Face's
GPT2Attention (`c_attn`, `c_proj`, both with a bias) so GPT-2's weights load.

Read: the book's page for this step (pixi run book-serve, then
http://127.0.0.1:8000/steps/07/; or book/docs/steps/07.md).
Check: pixi run s07        Stuck? pixi run s07 --hint
"""

# TODO (imports): what else will you need? MAX's tensor operations
# (max.experimental.functional), its Linear layer, your causal_mask from
# steps.step_02, and a square root.
from max.experimental.nn import Module

from steps.step_01 import GPT2Config


class GPT2MultiHeadAttention(Module):
    def __init__(self, config: GPT2Config):
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim

        # TODO (layers): self.c_attn makes query, key and value at once from n_embd numbers;
        #   self.c_proj mixes the heads' outputs back into n_embd numbers. Both have a bias.
        #   How wide is each one's output?
        self.c_attn = None
        self.c_proj = None

    def _split_heads(self, tensor, num_heads, attn_head_size):
        """[B, T, C] -> [B, H, T, D]"""
        # TODO (split): give each head its own contiguous channels, then put the head axis
        #   in front of the tokens, so that each head sees all its tokens together.
        #   Why can a single reshape straight to [B, H, T, D] not do it?
        raise NotImplementedError("step 07: _split_heads")

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        """[B, H, T, D] -> [B, T, C]: undo _split_heads"""
        # TODO (merge): the inverse of _split_heads: in which order do its two moves undo?
        raise NotImplementedError("step 07: _merge_heads")

    def _attn(self, query, key, value):
        """Causal attention per head: [B, H, T, D] x 3 -> [B, H, T, D]"""
        # TODO (attention): every query against every key of its head, scaled; the causal
        #   mask; softmax; then each query's weighted sum of the values.
        #   - What shape do the scores have, and which axis holds the keys?
        #   - Over which axis must each query's weights sum to 1?
        #   - Why scale by the square root of the head size, and where do you read it?
        raise NotImplementedError("step 07: _attn")

    def forward(self, hidden_states):
        """[B, T, C] -> [B, T, C]"""
        # TODO (forward): c_attn; its output cut into query, key and value along the last
        #   axis; the heads split; attention; the heads merged; c_proj.
        raise NotImplementedError("step 07: forward")
