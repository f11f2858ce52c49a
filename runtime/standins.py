"""Deterministic GPT-2-shaped stand-in checkpoints, made locally with `transformers`.

Used when the real GPT-2 is not downloaded (offline, or in CI). Both have GPT-2
small's exact shapes and names, saved with `save_pretrained`, so they load
through the same code as the real checkpoint, with a stand-in GPT-2-format
tokenizer: a byte-level BPE trained with `tokenizers` on
`runtime/data/corpus.txt` (its ids are a subset of the model's 50257).

"synthetic" (`weights/synthetic-gpt2/`, the default stand-in): small random
numbers, chosen so that the checks stay sensitive:

- biases and LayerNorm parameters are non-zero (Hugging Face initialises them
  to 0 and 1, which would hide a dropped bias or a missing scale);
- Q and K weights are large enough that attention is peaked, as in the real
  model, so a wrong mask or scale changes the output visibly.

Its activations stay below ~10, so it cannot show what float32 does to
numbers in the hundreds and thousands. "scale" (`weights/gpt2-scale-synthetic/`)
has real GPT-2 small's magnitudes; see `_gpt2_scale`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from runtime.files import MODEL_FILE, write_sums

# torch, transformers and tokenizers are imported inside the functions that use them: importing them takes seconds.

SEED = 1234
SCALE_SEED = 4321
CORPUS = Path(__file__).parent / "data" / "corpus.txt"
TOKENIZER_VOCAB = 1000  # the 256 bytes, <|endoftext|> and merges learned from the corpus

# Standard deviations, by parameter; LayerNorm weights are 1 + N(0, 0.1).
STD = {"wte": 0.1, "wpe": 0.05, "c_attn.weight": 0.07, "weight": 0.03, "bias": 0.05}

# The GPT-2-scale stand-in's massive activations: the residual channels that carry
# them in real GPT-2 small, their sign there, and their size.
MASSIVE_CHANNELS = (138, 378, 447)
MASSIVE_SIGNS = (1.0, 1.0, -1.0)
MASSIVE = 3000.0
MARKER = 100  # the channel of wpe[0] by which block 1 recognises the first token
SCALE_LAYER = 2  # the first block whose input carries the massive activations


def _std(name: str) -> float:
    for key in ("wte", "wpe", "c_attn.weight"):
        if key in name:
            return STD[key]
    return STD["bias" if name.endswith("bias") else "weight"]


def _small_random(model, gen) -> None:
    """The default stand-in: every parameter N(0, STD), LayerNorm gains 1 + N(0, 0.1)."""
    import torch

    for name, p in model.named_parameters():
        if ".ln_" in name and name.endswith("weight"):
            p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
        else:
            p.copy_(_std(name) * torch.randn(p.shape, generator=gen))


def _gpt2_scale(model, gen) -> None:
    """Random weights arranged so that the activations have real GPT-2 small's magnitudes.

    - Massive activations (Sun et al. 2024, "Massive Activations in Large
      Language Models", Fig. 2 and Sec. 2: in GPT-2 a few fixed feature
      dimensions on the starting token only, ~1000x the median, appearing in
      the early layers and staying constant through the residual stream): one
      hidden unit of block 1's MLP fires on the first token only (it reads a
      marker that only wpe[0] has, as real GPT-2's wpe[0] stands apart from the
      other positions) and writes +-3000 into channels 138, 378 and 447 (the
      dimensions Sun et al. and Timkey & van Schijndel 2021, "All Bark and No
      Bite", report for GPT-2). From h[2] on, the first token's residual holds
      ~3000 there, ~2300x the median |activation| (~1.3).
    - An attention sink on that token (Xiao et al. 2024, "Efficient Streaming
      Language Models with Attention Sinks", Fig. 2: most heads of the later
      layers give the first token most of their weight; Sun et al. Sec. 4: the
      massive activations cause it): from block 1 on, every head's query bias
      points along a direction that the massive channels' key weights also
      point along, so the first token's key matches every query. In blocks
      2-11 a query gives it 30-75% of its weight on average (most on short
      sequences); attention is peaked (the largest weight of a row averages
      ~0.9). Its value is only the value bias (the sink adds a bias, Sun et
      al. Sec. 4.2).
    - Final hidden states in the hundreds (ln_f's gain ~40: up to ~820) and
      logits in the hundreds around a large common negative offset (real GPT-2's
      logits sit around -100, every token's embedding sharing a common
      direction: Ethayarajh 2019 on anisotropy): every wte row has a common
      component of 0.05 per channel, and ln_f's bias points against it, so the
      logits have a mean of -80 to -100 and a spread of ~143 (about -880 to +680).
    - The rest a few times larger than the default stand-in: wte N(0, 0.12),
      LayerNorm gains 1 + N(0, 0.2), Q/K weights N(0, 0.12).
    """
    import torch

    config = model.config
    C, H, V = config.n_embd, config.n_head, config.vocab_size
    D = C // H

    def n(*shape):
        return torch.randn(shape, generator=gen)

    def without_marker(t):  # nothing but wpe[0] writes the marker channel
        t[..., MARKER] = 0.0
        return t

    p = dict(model.named_parameters())
    common = 0.05 * n(C).sign()  # the direction every token embedding shares
    p["transformer.wte.weight"].copy_(without_marker(common + 0.12 * n(V, C)))
    wpe = without_marker(0.08 * n(config.n_positions, C))
    wpe[0, MARKER] = 8.0
    p["transformer.wpe.weight"].copy_(wpe)
    sink = torch.nn.functional.normalize(n(H, D), dim=-1).reshape(C)  # one direction per head
    for i in range(config.n_layer):
        h = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            p[h + ln + ".weight"].copy_(1 + 0.2 * n(C))
            p[h + ln + ".bias"].copy_(without_marker(0.1 * n(C)))
        w, b = 0.12 * n(C, 3 * C), 0.1 * n(3 * C)  # Conv1D: [in, out], out = q | k | v
        w[:, 2 * C:] /= 3  # values smaller than queries and keys
        if i >= 1:
            b[:C] = 3.0 * sink
            for c, sign in zip(MASSIVE_CHANNELS, MASSIVE_SIGNS):
                w[c, C:2 * C] = sign * 0.5 * sink
                w[c, 2 * C:] = 0.0
        p[h + "attn.c_attn.weight"].copy_(w)
        p[h + "attn.c_attn.bias"].copy_(b)
        p[h + "attn.c_proj.weight"].copy_(without_marker(0.02 * n(C, C)) if i <= 1 else 0.02 * n(C, C))
        p[h + "attn.c_proj.bias"].copy_(without_marker(0.05 * n(C)))
        fc, fc_bias, proj = 0.06 * n(C, 4 * C), 0.1 * n(4 * C), 0.01 * n(4 * C, C)
        if i == 0:
            without_marker(proj)
        if i == 1:  # hidden unit 0: ~11 on the first token, ~-5e-5 elsewhere
            fc[:, 0] = 0.0
            fc[MARKER, 0], fc_bias[0] = 2.0, -4.0
            proj[0] = 0.0
            for c, sign in zip(MASSIVE_CHANNELS, MASSIVE_SIGNS):
                proj[0, c] = sign
        p[h + "mlp.c_fc.weight"].copy_(fc)
        p[h + "mlp.c_fc.bias"].copy_(fc_bias)
        p[h + "mlp.c_proj.weight"].copy_(proj)
        p[h + "mlp.c_proj.bias"].copy_(without_marker(0.05 * n(C)))
    p["transformer.ln_f.weight"].copy_(40.0 * (1 + 0.2 * n(C)))
    p["transformer.ln_f.bias"].copy_(-100.0 * common / common.norm() ** 2)

    # Scale unit 0's output so that the first token gets exactly +-MASSIVE.
    seen = {}
    act = model.transformer.h[1].mlp.act.register_forward_hook(lambda m, i, o: seen.update(a=float(o[0, 0, 0])))
    model(torch.tensor([[0, 1]]))
    act.remove()
    p["transformer.h.1.mlp.c_proj.weight"][0] *= MASSIVE / seen["a"]


FILL = {"synthetic": (_small_random, SEED), "scale": (_gpt2_scale, SCALE_SEED)}


def generate(dest: Path, kind: str = "synthetic") -> str:
    """Writes the `kind` stand-in to `dest` (atomically) and returns its model sha256."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    fill, seed = FILL[kind]
    torch.manual_seed(seed)
    config = GPT2Config()  # GPT-2 small: 12 layers, 12 heads, 768 wide, 50257 tokens
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        fill(model, torch.Generator().manual_seed(seed))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".synthetic-", dir=dest.parent))
    tmp.chmod(0o755)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        (tmp / "README.txt").write_text(
            f"A synthetic GPT-2-shaped checkpoint ({kind}, seed {seed}), generated by "
            "runtime/standins.py as an offline stand-in.\nIt is not GPT-2: text generated with it is gibberish.\n"
        )
        write_tokenizer(tmp)
        sums = write_sums(tmp, ["config.json", MODEL_FILE, "tokenizer.json", "vocab.json", "merges.txt"])
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sums[MODEL_FILE]


def write_tokenizer(folder: Path) -> None:
    """A byte-level BPE in GPT-2's formats (tokenizer.json, vocab.json, merges.txt)."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train([str(CORPUS)], vocab_size=TOKENIZER_VOCAB, min_frequency=2,
                    special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    tokenizer.save_model(str(folder))
