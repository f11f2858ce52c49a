"""Step 07's catalogue: what a learner's split, merge, attention and whole layer may compute instead of
GPT-2's, as numpy computes it (checker.references.attention_np), and the edit that makes each in the solution."""

from __future__ import annotations

from functools import partial

from checker.references import attention_np as ref
from checker.reporting.compare import Edit, Mistake


def _reshape_head_dim_first(t, H):
    B, T, C = t.shape
    return t.reshape(B, T, C // H, H).transpose(0, 3, 1, 2)


SPLIT_MISTAKES = [
    Mistake(
        "split-no-transpose",
        "the heads were split off but not moved in front of the tokens: [B, T, H, D]",
        "after the reshape, swap the token and head axes so each head holds all its tokens",
        lambda t, H: t.reshape(*t.shape[:2], H, -1),
        edit=Edit('return tensor.transpose(-3, -2)  # [B, H, T, D]', 'return tensor')),
    Mistake(
        "split-heads-last",
        "the channels were reshaped as [head_dim, n_head] instead of [n_head, head_dim], "
        "so each head got every 12th channel",
        "the channels of one head are contiguous: reshape the last axis to (num_heads, attn_head_size)",
        _reshape_head_dim_first,
        edit=Edit("[num_heads, attn_head_size]\n"
                  "        tensor = tensor.reshape(new_shape)  # [B, T, H, D]\n"
                  "        return tensor.transpose(-3, -2)  # [B, H, T, D]",
                  "[attn_head_size, num_heads]\n        return tensor.reshape(new_shape).permute([0, 3, 1, 2])")),
    Mistake(
        "split-heads-last-shape",
        "the channels were reshaped as [head_dim, n_head] and then transposed: [B, D, T, H]",
        "the channels of one head are contiguous: reshape the last axis to (num_heads, attn_head_size)",
        lambda t, H: t.reshape(*t.shape[:2], -1, H).transpose(0, 2, 1, 3),
        edit=Edit("[num_heads, attn_head_size]\n        tensor = tensor.reshape(new_shape)  # [B, T, H, D]",
                  "[attn_head_size, num_heads]\n        tensor = tensor.reshape(new_shape)")),
    Mistake(
        "split-reshape-only",
        "the tensor was reshaped straight to [B, H, T, D], which cuts the sequence into pieces "
        "instead of cutting each token's channels",
        "reshape to [B, T, H, D] first, then transpose; a reshape alone never moves data between axes",
        lambda t, H: t.reshape(t.shape[0], H, t.shape[1], -1),
        edit=Edit("tensor = tensor.reshape(new_shape)  # [B, T, H, D]\n"
                  "        return tensor.transpose(-3, -2)  # [B, H, T, D]",
                  "return tensor.reshape([tensor.shape[0], num_heads, tensor.shape[1], attn_head_size])")),
    Mistake(
        "split-batch-axis",
        "the batch axis was swapped with the heads ([H, T, B, D]), so attention would run across the "
        "sequences of the batch instead of across the tokens",
        "swap the token and head axes (1 and 2 of [B, T, H, D]); the batch axis stays first",
        lambda t, H: t.reshape(*t.shape[:2], H, -1).swapaxes(0, 2),
        edit=Edit('return tensor.transpose(-3, -2)  # [B, H, T, D]', 'return tensor.transpose(-4, -2)')),
]

MERGE_MISTAKES = [
    Mistake(
        "merge-no-transpose",
        "[B, H, T, D] was reshaped to [B, T, C] without moving the heads back behind the tokens",
        "undo _split_heads in reverse order: transpose first, then reshape",
        lambda t: t.reshape(t.shape[0], t.shape[2], -1),
        edit=Edit("tensor = tensor.transpose(-3, -2)  # [B, T, H, D]\n        new_shape = list(tensor.shape[:-2])",
                  "new_shape = [tensor.shape[0], tensor.shape[2]]")),
    Mistake(
        "merge-wrong-order",
        "the heads were flattened as [head_dim, n_head], interleaving the channels of different heads",
        "flatten [B, T, H, D] so that each head's channels stay together",
        lambda t: t.transpose(0, 2, 3, 1).reshape(t.shape[0], t.shape[2], -1),
        edit=Edit('tensor = tensor.transpose(-3, -2)  # [B, T, H, D]', 'tensor = tensor.permute([0, 2, 3, 1])')),
    Mistake(
        "merge-no-reshape",
        "the heads were moved back behind the tokens but not flattened: [B, T, H, D]",
        "finish with a reshape to [B, T, num_heads * attn_head_size]",
        lambda t: t.transpose(0, 2, 1, 3),
        edit=Edit('return tensor.reshape(new_shape)  # [B, T, C]', 'return tensor')),
]

ATTN_MISTAKES = [
    Mistake(
        "no-causal-mask",
        "there is no causal mask: every token also attends to the tokens after it",
        "add causal_mask(...) to the scores before softmax; the last position matches because "
        "it has no future to see",
        partial(ref.attend, mask="none"),
        edit=Edit('attn_weights = attn_weights + mask  # future positions -> -inf', 'pass')),
    Mistake(
        "scale-sqrt-n-embd",
        "the scores were divided by sqrt(n_embd) = sqrt(768) instead of sqrt(head_dim)",
        "each score is a dot product over one head's channels: scale by the head size",
        partial(ref.attend, scale="sqrt_c"),
        edit=Edit('math.sqrt(int(value.shape[-1]))', 'math.sqrt(self.embed_dim)')),
    Mistake(
        "no-scale",
        "the scores were not scaled before softmax",
        "divide q.k by the square root of the head size, as in 'Attention is all you need'",
        partial(ref.attend, scale="none"),
        edit=Edit('attn_weights = attn_weights / math.sqrt(int(value.shape[-1]))', 'pass')),
    Mistake(
        "scale-head-dim",
        "the scores were divided by head_dim instead of its square root",
        "the scale is 1/sqrt(head_dim): use math.sqrt",
        partial(ref.attend, scale="d"),
        edit=Edit('math.sqrt(int(value.shape[-1]))', 'int(value.shape[-1])')),
    Mistake(
        "softmax-wrong-axis",
        "softmax ran over the query axis (-2), so columns sum to 1 instead of rows",
        "each query's weights over the keys must sum to 1: softmax over the last axis",
        partial(ref.attend, axis=-2),
        edit=Edit('F.softmax(attn_weights, axis=-1)', 'F.softmax(attn_weights, axis=-2)')),
    Mistake(
        "mask-after-softmax",
        "the mask was applied after softmax: future weights are zeroed but the rows no longer sum to 1",
        "mask the scores, then softmax: -inf scores become exactly 0 weight",
        partial(ref.attend, mask="after_softmax"),
        edit=Edit("        attn_weights = attn_weights + mask  # future positions -> -inf\n\n"
                  "        attn_weights = F.softmax(attn_weights, axis=-1)  # each row sums to 1\n",
                  "        attn_weights = F.softmax(attn_weights, axis=-1)\n"
                  "        attn_weights = attn_weights * F.band_part(F.broadcast_to(Tensor(1.0, dtype=query.dtype, "
                  "device=query.device), [seq_len, seq_len]), num_lower=None, num_upper=0)\n")),
    Mistake(
        "mask-added-after-softmax",
        "the -inf mask was added after softmax, so -inf reached the weighted sum and made NaN/inf",
        "add the mask to the scores before softmax, which turns -inf into a weight of exactly 0",
        partial(ref.attend, mask="-inf_after_softmax"),
        edit=Edit("        attn_weights = attn_weights + mask  # future positions -> -inf\n\n"
                  "        attn_weights = F.softmax(attn_weights, axis=-1)  # each row sums to 1\n",
                  "        attn_weights = F.softmax(attn_weights, axis=-1)\n"
                  "        attn_weights = attn_weights + mask\n")),
    Mistake(
        "mask-zero-one",
        "the mask holds 0/1 instead of 0/-inf, so future tokens still get weight",
        "a masked score must be -inf (or very negative) for softmax to give it 0",
        partial(ref.attend, mask="0/1"),
        edit=Edit("attn_weights = attn_weights + mask  # future positions -> -inf",
                  "attn_weights = attn_weights + F.band_part(F.broadcast_to(Tensor(1.0, dtype=query.dtype, "
                  "device=query.device), [seq_len, seq_len]), num_lower=None, num_upper=0, exclude=True)")),
    Mistake(
        "mask-multiplied",
        "the scores were multiplied by a 0/1 mask: a future score of 0 still gets weight after softmax",
        "add the mask (0 or -inf) to the scores instead of multiplying",
        partial(ref.attend, mask="multiply"),
        edit=Edit("attn_weights = attn_weights + mask  # future positions -> -inf",
                  "attn_weights = attn_weights * F.band_part(F.broadcast_to(Tensor(1.0, dtype=query.dtype, "
                  "device=query.device), [seq_len, seq_len]), num_lower=None, num_upper=0)")),
]

def _inverse(order: str) -> str:
    """`key, value, query = split(...)` ("kvq") takes q from the third third: attention_np's order "vqk"."""
    return "".join("qkv"[order.index(name)] for name in "qkv")


SPLIT = "query, key, value = F.split("
_NAMES = {"q": "query", "k": "key", "v": "value"}
_ORDERS = {"qvk": "query, value, key", "kqv": "key, query, value", "kvq": "key, value, query",
           "vqk": "value, query, key", "vkq": "value, key, query"}

FORWARD_MISTAKES = [
    *(
        Mistake(
            f"split-order-{order}",
            f"c_attn's output was used as ({_ORDERS[order]}); it holds (query, key, value) in that order",
            "split c_attn's output into three along the last axis and keep the order q, k, v",
            partial(ref.forward, order=_inverse(order)),
            edit=Edit(SPLIT, ", ".join(_NAMES[c] for c in order) + " = F.split("),
        )
        for order in _ORDERS
    ),
    Mistake(
        "no-c-proj",
        "forward returned the merged heads without the output projection c_proj",
        "the layer ends with self.c_proj(...)",
        partial(ref.forward, c_proj="missing"),
        edit=Edit('return self.c_proj(attn_output)  # [B, T, C]', 'return attn_output')),
    Mistake(
        "c-proj-untransposed",
        "c_proj's weight was used as x @ W: Linear stores [out, in] (Hugging Face's Conv1D "
        "stores [in, out]), so the weight was effectively not transposed",
        "call the layer, self.c_proj(x), rather than multiplying by its weight",
        partial(ref.forward, c_proj="untransposed"),
        edit=Edit("return self.c_proj(attn_output)  # [B, T, C]",
                  "return attn_output @ self.c_proj.weight + self.c_proj.bias")),
    Mistake(
        "c-attn-no-bias",
        "c_attn's bias was not added",
        "call the layer, self.c_attn(x), which adds the bias for you",
        partial(ref.forward, attn_bias=False),
        edit=Edit("self.c_attn(hidden_states), [self.split_size]",
                  "hidden_states @ self.c_attn.weight.T, [self.split_size]")),
    Mistake(
        "c-proj-no-bias",
        "c_proj's bias was not added",
        "call the layer, self.c_proj(x), which adds the bias for you",
        partial(ref.forward, proj_bias=False),
        edit=Edit('return self.c_proj(attn_output)  # [B, T, C]', 'return attn_output @ self.c_proj.weight.T')),
]


CATALOGUE = [*SPLIT_MISTAKES, *MERGE_MISTAKES, *ATTN_MISTAKES, *FORWARD_MISTAKES]
