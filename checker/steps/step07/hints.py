"""Step 07's hints, a ladder per part (`pixi run s07 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import COMPILED, TWO_LINEARS, api

HINTS: dict[str, list[str]] = {
    "construction": [*TWO_LINEARS[:2], "c_attn maps n_embd -> 3 * n_embd; c_proj maps n_embd -> n_embd."],
    "_split_heads": ["Each head owns a contiguous block of head_dim channels.",
                     f"Tensor.reshape ({api('Tensor.reshape')}) splits an axis; Tensor.transpose "
                     f"({api('Tensor.transpose')}) swaps two axes.",
                     "Reshape [B, T, C] to [B, T, H, D], then swap the T and H axes."],
    "_merge_heads": ["_merge_heads undoes _split_heads, in reverse order.",
                     f"Tensor.transpose ({api('Tensor.transpose')}) first, then Tensor.reshape "
                     f"({api('Tensor.reshape')}).",
                     "Transpose [B, H, T, D] back to [B, T, H, D], then reshape to [B, T, H * D]."],
    "_attn": ["Scores: every query against every key of the same head, scaled, masked, softmaxed, then "
              "the weighted sum of the values.",
              f"`@` is matmul; Tensor.transpose ({api('Tensor.transpose')}) turns the keys; F.softmax "
              f"({api('F.softmax')}) takes an axis.",
              "q @ k^T / sqrt(head_dim) + causal_mask(T, 0, ...), softmax over the last axis (the keys), "
              "then @ v."],
    "forward": ["c_attn, split into q, k, v, split the heads, attend, merge, c_proj.",
                f"F.split ({api('F.split')}) cuts a tensor into pieces of given sizes along an axis.",
                "c_attn's output holds q, k and v in that order, each n_embd wide: three pieces of "
                "split_size on the last axis."],
    "compiled": COMPILED,
}

SOURCES: dict[str, str] = {"construction": "GPT2MultiHeadAttention.__init__", **{
    m: f"GPT2MultiHeadAttention.{m}" for m in ("_split_heads", "_merge_heads", "_attn", "forward")},
       "compiled": "GPT2MultiHeadAttention._attn"}
