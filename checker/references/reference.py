"""Reference activations from Hugging Face `transformers`, cached on disk.

Computing them needs torch and transformers (~5 s to import, more to run), so
each reference is computed once per checkpoint and library versions and kept
in `.cache/reference/` as an `.npz`. A warm check reads that file with numpy
and never imports torch.

The inputs are real: two different token sequences of the same length run
through the whole Hugging Face model, with forward hooks capturing what one
layer's sub-modules see and produce.
"""

from __future__ import annotations

import hashlib
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

from runtime.checkpoints import Checkpoint
from runtime.hf import load_hf_model
from runtime.paths import CACHE, save

# torch and tokenizers are imported inside the functions that use them: importing them takes seconds.

FORMAT = 5  # bump when what is captured changes
TEXTS = (
    "The cat sat on the mat because it was tired and wanted to sleep",
    "Attention lets every token look back at the tokens that came before it",
)
TOKENS_PER_TEXT = 10
# Without a tokenizer (the synthetic checkpoint ships none) the inputs are
# fixed token ids; any ids are as meaningful to random weights as real text.
FALLBACK_IDS = np.random.default_rng(7).integers(0, 50257, size=(len(TEXTS), TOKENS_PER_TEXT))


def token_ids(checkpoint: Checkpoint) -> tuple[np.ndarray, str]:
    """[B, T] int64 token ids, and a line saying what they are."""
    tokenizer = checkpoint.path / "tokenizer.json"
    if tokenizer.exists():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer))
        ids = np.array([tok.encode(t).ids[:TOKENS_PER_TEXT] for t in TEXTS], dtype=np.int64)
        shown = " | ".join(repr(tok.decode(list(row))) for row in ids)
        return ids, f"{len(TEXTS)} sequences x {TOKENS_PER_TEXT} tokens: {shown}"
    return FALLBACK_IDS.astype(np.int64), (
        f"{len(TEXTS)} sequences x {TOKENS_PER_TEXT} fixed token ids (no tokenizer with this checkpoint)"
    )


def _cache_file(name: str, checkpoint: Checkpoint, ids: np.ndarray) -> Path:
    key = "|".join(
        [str(FORMAT), checkpoint.sha256, version("transformers"), version("torch"), ids.tobytes().hex()]
    )
    return CACHE / "reference" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.npz"


def _cached(path: Path, what: str, compute) -> dict[str, np.ndarray]:
    """The arrays stored at `path`, or `compute()`'s (saying `what` it computes) stored there first;
    a read-only checkout recomputes them next time."""
    if path.exists():
        with np.load(path) as data:
            return dict(data)
    print(f"Computing {what} with transformers (once)...", file=sys.stderr, flush=True)
    refs = compute()
    save(path, lambda tmp: np.savez(tmp, **refs))
    return refs


def activations(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """What Hugging Face's GPT-2 computes on the check inputs, captured with forward hooks.

    Keys (B sequences, T tokens, C = n_embd, H heads, D = C / H, V = vocab_size):
      ids [B, T]               the token ids
      wte [B, T, C]            transformer.wte(ids)
      wpe [T, C]               transformer.wpe(0..T-1)
      wpe_offset [T, C]        transformer.wpe(OFFSET..OFFSET+T-1): positions after OFFSET cached tokens
      block_in [B, T, C]       the input of block L = checkpoint.layer (wte + wpe when L is 0)
      ln_1 [B, T, C]           its ln_1 output: the attention's input
      ln_1_tiny [B, T, C]      ln_1 applied to block_in * TINY, where epsilon matters
      ln_1_shifted [B, T, C]   ln_1 applied to shifted(block_in) (each row moved by a constant), float64
      qkv [B, T, 3C]           c_attn(ln_1): query, key and value side by side
      q, k, v [B, H, T, D]     per-head query, key and value, as Hugging Face lays them out
      heads [B, H, T, D]       softmax(q k^T / sqrt(D) + causal mask) v, per head
      merged [B, T, C]         heads merged back: the input of c_proj
      attn [B, T, C]           the attention's output, c_proj(merged)
      ln_2_in [B, T, C]        block_in + attn: the residual stream after attention
      ln_2 [B, T, C]           ln_2(ln_2_in): the MLP's input
      mlp [B, T, C]            the MLP's output
      block_out [B, T, C]      the block's output: ln_2_in + mlp
      hidden [L + 1, B, T, C]  the input of every block, then the last hidden state (after ln_f)
      last_block_out [B, T, C] the last block's output (ln_f's input)
      last_hidden [B, T, C]    the model's last hidden state, after ln_f
      logits [B, T, V]         lm_head(last_hidden)
    """
    ids, _ = token_ids(checkpoint)
    return _cached(_cache_file("activations", checkpoint, ids), "reference outputs",
                   lambda: _compute_activations(checkpoint, ids))


OFFSET = 5  # cached tokens before the sequence, for position embeddings
TINY = 1e-3  # scales activations so that LayerNorm's epsilon changes the result


def shifted(x: np.ndarray) -> np.ndarray:
    """x [B, T, C] float32 with each row moved by a constant, -1 .. 1 times the row's own standard deviation, as
    float32. GPT-2's residual stream has rows whose mean is not 0 (a few channels grow large in later
    layers): LayerNorm's output does not move with it, a centring that is nearly right does."""
    B, T, _ = x.shape
    k = np.linspace(-1.0, 1.0, B * T).reshape(B, T, 1)
    return (x + k * x.std(-1, keepdims=True)).astype(np.float32)


def _compute_activations(checkpoint: Checkpoint, ids: np.ndarray) -> dict[str, np.ndarray]:
    import torch

    model = load_hf_model(checkpoint)
    block = model.transformer.h[checkpoint.layer]
    attn = block.attn
    seen: dict[str, torch.Tensor] = {}

    def keep(name, which):
        def hook(module, args, kwargs, output):
            value = {"in": args[0] if args else kwargs.get("hidden_states"), "out": output}[which]
            seen[name] = (value[0] if isinstance(value, tuple) else value).detach().clone()

        return hook

    taps = [(block, "block_in", "in"), (block.ln_1, "ln_1", "out"), (attn.c_attn, "qkv", "out"),
            (attn.c_proj, "merged", "in"), (attn, "attn", "out"), (block.ln_2, "ln_2_in", "in"),
            (block.ln_2, "ln_2", "out"), (block.mlp, "mlp", "out"), (block, "block_out", "out"),
            (model.transformer.h[-1], "last_block_out", "out")]
    handles = [module.register_forward_hook(keep(name, which), with_kwargs=True) for module, name, which in taps]
    tokens = torch.from_numpy(ids)
    out = model.transformer(tokens, output_hidden_states=True)
    last_hidden = out.last_hidden_state
    for h in handles:
        h.remove()

    B, T, C = seen["ln_1"].shape
    H, D = attn.num_heads, attn.head_dim
    # Hugging Face's own layout: split on the last axis, view as [B, T, H, D], swap T and H.
    q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in seen["qkv"].split(C, dim=2))
    heads = seen["merged"].view(B, T, H, D).transpose(1, 2)

    # The pieces must recompose into what the model computed, or the references lie.
    scores = q @ k.transpose(-1, -2) / D**0.5
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    assert torch.allclose(scores.softmax(-1) @ v, heads, atol=1e-5), "attention does not recompose"
    assert torch.allclose(attn.c_proj(seen["merged"]), seen["attn"], atol=1e-5)
    assert torch.allclose(seen["block_in"] + seen["attn"], seen["ln_2_in"], atol=1e-5)
    assert torch.allclose(seen["ln_2_in"] + seen["mlp"], seen["block_out"], atol=1e-5)

    wte, wpe = model.transformer.wte, model.transformer.wpe
    refs = seen | {
        "ids": ids, "q": q, "k": k, "v": v, "heads": heads,
        "wte": wte(tokens), "wpe": wpe(torch.arange(T)), "wpe_offset": wpe(torch.arange(OFFSET, OFFSET + T)),
        "ln_1_tiny": block.ln_1(seen["block_in"] * TINY),
        "ln_1_shifted": torch.nn.functional.layer_norm(  # in float64: float32's rounding of it is the learner's
            torch.from_numpy(shifted(seen["block_in"].numpy())).double(), (C,), block.ln_1.weight.double(),
            block.ln_1.bias.double(), block.ln_1.eps),
        "last_hidden": last_hidden, "hidden": torch.stack(out.hidden_states), "logits": model.lm_head(last_hidden),
        "c_attn_weight": attn.c_attn.weight, "c_attn_bias": attn.c_attn.bias,
        "c_proj_weight": attn.c_proj.weight, "c_proj_bias": attn.c_proj.bias,
    }
    return {k: (t.contiguous().numpy() if hasattr(t, "numpy") else t) for k, t in refs.items()}


PROMPT = "The cat sat on the mat because"
NEW_TOKENS = 20


def greedy_continuation(checkpoint: Checkpoint, prompt_ids: list[int]) -> list[int]:
    """Hugging Face `generate`'s greedy continuation of `prompt_ids`: NEW_TOKENS ids, never stopping early."""
    ids = np.array([prompt_ids], dtype=np.int64)

    def compute() -> dict[str, np.ndarray]:
        import torch

        out = load_hf_model(checkpoint).generate(
            torch.from_numpy(ids), attention_mask=torch.ones_like(torch.from_numpy(ids)), max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
        return {"ids": out[0, len(prompt_ids):].numpy()}

    return _cached(_cache_file(f"greedy{NEW_TOKENS}", checkpoint, ids), "the reference continuation",
                   compute)["ids"].tolist()


EXTRA_TOKENS = 16  # step 13: tokens fed one at a time after the check inputs


def long_sequences(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """The check inputs followed by EXTRA_TOKENS fixed ids, and Hugging Face's logits for all of them.

    ids [B, T + EXTRA_TOKENS], logits [B, T + EXTRA_TOKENS, V]: what a model with a KV cache must
    give at every position when it reads the first T tokens at once and the rest one by one.
    """
    short, _ = token_ids(checkpoint)
    extra = np.random.default_rng(13).integers(0, 256, size=(short.shape[0], EXTRA_TOKENS))  # byte tokens
    ids = np.concatenate([short, extra], axis=1).astype(np.int64)

    def compute() -> dict[str, np.ndarray]:
        import torch

        return {"ids": ids, "logits": load_hf_model(checkpoint)(torch.from_numpy(ids)).logits.numpy()}

    return _cached(_cache_file("long", checkpoint, ids), "reference logits for longer sequences", compute)
