"""Step 18's model part: the learner's GPT2PagedQ8 (PAGED_LAYERS blocks) compiled as max serve compiles it, run on
MAX's paged KV cache through step 14's SCENARIO (prompts and decodes mixed, a request sitting a batch out), every
row asked for, the last first, against transformers on the same dequantised weights (every product weight and wte).
A matmul_q8 that rounds x (it passed its own part) is swapped, in the learner's module, for the same product in
float32 while the model is built and compiled (`float_products`): the model's wiring is then held to float32's
tolerance, as step 14's is, and the kernel's rounding inside the model is the served part's to hold. (Held to the
rounded reference instead, within what float32's noise moves it, checker.steps.step18.rounded, the tolerance is so
wide that an MLP normalised by ln_1, or wte's float rows embedded, passed.) Where the module reaches its product
otherwise, the rounded reference stays. A model that is off while both kernels pass is placed at the first piece of
its stream that differs (the embeddings, a block's attention or MLP half, ln_f, the head), from what its LayerNorms
and MLPs were handed (step 14's Probed), and read there as the reference with a parameter that feeds the piece left
out (a Linear's bias, a LayerNorm's weight or bias) when one computes it (`without_parameter`); a forward that
ignores the rows it is handed is told so.
"""

from __future__ import annotations

import copy
import sys
from contextlib import contextmanager, nullcontext

import numpy as np

from checker.diagnosis.stream import embedding_rows, first_difference, row_margins
from checker.harness.runner import StepRun
from checker.reporting.compare import WHOLE_MODEL, compare
from checker.reporting.report import FAIL, Part
from checker.steps.step14.paged import compile_probed, learner_paged, off_rows, paged_params, rows_differ, run_scenario
from checker.steps.step14.reference import (
    PAGED_LAYERS,
    SCENARIO,
    hf_model,
    scenario_logits,
    scenario_places,
    scenario_rows,
    scenario_stream,
    scenario_tokens,
)
from checker.steps.step18.rounded import MARGIN, NOISE, reach, rounded_hf, widened
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError
from runtime.quantize import BLOCK, dequantize_hf

# MAX is imported inside the functions that use it: importing it takes seconds.

EMBEDDINGS = ("wte's rows as the int8 table holds them (each q times its block's scale: the model is GPT-2 on "
              "dequantised weights, its embedding too) plus wpe's row at each row's position")


def every_row(paged):
    """The learner's GPT2PagedQ8 asked for every row's logits, last row first (rows = T-1, ..., 0: a forward that
    answers every row in order, whatever rows it is handed, is seen here and not only by the server, which asks for
    each request's last row): forward(tokens, kv, offsets) -> [T, V], as step 14's GPT2Paged, so step 14's probe and
    scenario run it. `in_order` puts its answer back in the rows' order."""
    from max.dtype import DType
    from max.experimental.nn import Module
    from max.experimental.tensor import Tensor

    class EveryRow(Module):
        def __init__(self):
            self.paged = paged
            self.transformer = paged.transformer  # the probe records its blocks' pieces

        def forward(self, tokens, kv_collection, input_row_offsets):
            last = Tensor.arange(tokens.shape[0], dtype=DType.int64, device=tokens.device)  # [T]
            return self.paged(tokens, kv_collection, input_row_offsets, (tokens.shape[0] - 1) - last)

    return EveryRow()


def in_order(handed: list[np.ndarray]) -> list[np.ndarray]:
    """every_row's answers [T, V] per batch, last row first, put back in the rows' order."""
    return [batch[::-1] for batch in handed]


ROWS_IGNORED = ("your forward answered every row in the order of the tokens, not the rows it was handed (asked for "
                "the last row first here): gather x at `rows` before ln_f and the head. The server asks for each "
                "request's last row only, so a forward that ignores rows serves the wrong logits")


def float_q8(x, q, scales, bias=None):
    """x [M, K], q [N, K] int8, scales [N, KB], bias [N] or None -> x @ dequantize(q, scales).T + bias [M, N] in
    float32 MAX ops (each column's scale gathered, as solution 18's embedding does)."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.tensor import Tensor

    block = Tensor.arange(q.shape[1], dtype=DType.int64, device=q.device) // BLOCK  # [K]: each column's block
    w = F.cast(q, DType.float32) * F.gather(scales, block, axis=1)  # [N, K]
    y = F.matmul(x, F.transpose(w, 0, 1))  # [M, N]
    return y if bias is None else y + bias


@contextmanager
def float_products(GPT2PagedQ8):
    """While the model is built and compiled, the matmul_q8 of the learner's module (where GPT2PagedQ8 is defined)
    is `float_q8`; yields the calls made to it (a list: empty when the module reaches its product otherwise)."""
    names = getattr(GPT2PagedQ8.forward, "__globals__", {})  # the module's namespace (it is not in sys.modules)
    kept = names.get("matmul_q8")
    calls: list[int] = []
    if not callable(kept):
        yield calls
        return

    def product(x, q, scales, bias=None):
        calls.append(1)
        return float_q8(x, q, scales, bias)

    names["matmul_q8"] = product
    try:
        yield calls
    finally:
        names["matmul_q8"] = kept


def model_part(run: StepRun, GPT2PagedQ8, eleven, checkpoint: Checkpoint, rounding: str | None) -> Part:
    """`rounding`: how matmul_q8 rounds x and w (a key of ROUNDINGS, None: not at all): the model runs on float32
    products in its place (`float_products`), or, where its module reaches its product otherwise, is held to
    transformers whose products round the same way (checker.steps.step18.rounded)."""
    config = checkpoint.learner_config()
    kv_params = paged_params(config, PAGED_LAYERS)
    tokens = scenario_tokens(min(config.vocab_size, 400))
    print(f"(compiling your GPT2PagedQ8 ({PAGED_LAYERS} blocks) as max serve compiles it: about a minute after a "
          "change on 2 cores, seconds when unchanged)", file=sys.stderr, flush=True)
    try:
        with float_products(GPT2PagedQ8) if rounding is not None else nullcontext([]) as calls:
            paged = learner_paged(run, GPT2PagedQ8, eleven, config, checkpoint, kv_params)
            compiled, probed = run.call(compile_probed, every_row(paged), kv_params)
        handed, recorded = run.call(run_scenario, compiled, kv_params, tokens)
    except LearnerError as e:
        return run.add(Part.from_error("paged model", e))
    return run.add(judge_model(in_order(handed), recorded, probed.names, checkpoint, tokens,
                               None if calls else rounding, floated=rounding if calls else None, handed=handed))


def leavable(hf, piece: str) -> list[list[str]]:
    """What a forward can leave out that feeds `piece` (a block's ln_1 "h.i.ln_1 out", its attention half "h.i.ln_2",
    its ln_2 "h.i.ln_2 out", its MLP "h.i.mlp", or "ln_f out"): each Linear's bias and LayerNorm's weight and bias
    there (a block's by its names in block 0, for every block), alone, the Linears' biases together, and each
    LayerNorm's two together."""
    import torch

    halves = {"ln_1 out": ("ln_1",), "ln_2": ("attn",), "ln_2 out": ("ln_2",), "mlp": ("mlp",)}
    parts = piece.split(".")
    if piece == "ln_f out":
        owner, within = hf.transformer, ("ln_f",)
    elif len(parts) == 3 and parts[0] == "h" and parts[2] in halves:
        owner, within = hf.transformer.h[0], halves[parts[2]]
    else:
        return []
    norms, biases = [], []
    for name, _ in owner.named_parameters():
        if name.split(".")[0] not in within:
            continue
        if isinstance(owner.get_submodule(name.rpartition(".")[0]), torch.nn.LayerNorm):
            norms.append(name)
        elif name.endswith(".bias"):
            biases.append(name)
    by_norm: dict[str, list[str]] = {}  # each LayerNorm's weight and bias
    for name in norms:
        by_norm.setdefault(name.rpartition(".")[0], []).append(name)
    together = ([biases] if len(biases) > 1 else []) + list(by_norm.values())
    return [[name] for name in biases + norms] + together


def left_out(hf, names: list[str]):
    """A copy of `hf` with `names` left out (leavable's), in every block: a bias as zeros, a LayerNorm's weight as
    ones."""
    model = copy.deepcopy(hf)
    owners = [model.transformer] if names[0].startswith("ln_f") else list(model.transformer.h)
    for owner in owners:
        for name in names:
            parameter = owner.get_parameter(name)
            parameter.data.fill_(0.0 if name.endswith(".bias") else 1.0)
    return model


def said_left_out(names: list[str]) -> str:
    """leavable's names in words, and what a forward owes each."""
    words = " and ".join(f"{name.rpartition('.')[0]}'s {name.rpartition('.')[2]}" for name in names)
    owed = []
    if any(not name.startswith("ln") for name in names):
        owed.append("each Linear's product adds its own bias (matmul_q8(x, q, scales, bias))")
    if any(name.startswith("ln") for name in names):
        owed.append("each LayerNorm scales the normalised rows by its weight and adds its bias")
    where = "" if names[0].startswith("ln_f") else ", in every block"
    return (f"read from your stream there: it is the reference's with {words} left out{where} (a weight as ones, a "
            f"bias as zeros): {'; '.join(owed)}")


def without_parameter(piece: str, pieces: dict[str, np.ndarray], hf, tokens: dict[str, list[int]], off) -> str | None:
    """The learner's stream at `piece` (the first that differs) read as the reference's with a parameter that feeds
    it left out (leavable's, the first that computes it), said; None when none does."""
    if piece not in pieces:
        return None
    for names in leavable(hf, piece):
        if off(row_margins(pieces[piece], scenario_stream(left_out(hf, names), tokens)[piece])) is None:
            return said_left_out(names)
    return None


def embedding_tables(hf) -> tuple[np.ndarray, np.ndarray]:
    """Hugging Face's wte and wpe as the model holds them ([V, C], [n_positions, C])."""
    t = hf.transformer
    return t.wte.weight.detach().numpy(), t.wpe.weight.detach().numpy()


def judge_model(got: list[np.ndarray], recorded: list[list[np.ndarray]], names: list[str], checkpoint: Checkpoint,
                tokens: dict[str, list[int]], rounding: str | None = None, floated: str | None = None,
                handed: list[np.ndarray] | None = None) -> Part:
    """`rounding`: how the model's products rounded (None: not at all); `floated`: how the learner's matmul_q8
    rounds, when float32 products ran in its place; `handed`: the logits as forward gave them, for rows asked last
    row first (every_row), when `got` is them put back in order."""
    hf = rounded_hf(dequantize_hf(hf_model(checkpoint, PAGED_LAYERS)), rounding)
    want = scenario_logits(hf, tokens)
    flat_got, flat_want = np.concatenate(got), np.concatenate(want)
    if flat_got.shape != flat_want.shape:
        return Part("paged model", FAIL, f"logits of shape {list(flat_got.shape)} over the scenario, expected "
                    f"{list(flat_want.shape)}: forward returns the logits of the rows it is handed (rows [R]), [R, V]")
    tol = WHOLE_MODEL
    if rounding is not None:  # held within what float32's noise alone moves the rounded reference
        _, far = reach(hf, lambda: np.concatenate(scenario_logits(hf, tokens)), WHOLE_MODEL)
        tol = widened(WHOLE_MODEL, far)
    verdict = compare(flat_got, flat_want, axes=("row", "vocab"), mistakes=[], tol=tol)
    if not verdict.ok and handed is not None and compare(np.concatenate(handed), flat_want, axes=("row", "vocab"),
                                                         mistakes=[], tol=tol).ok:
        verdict.details.insert(0, ROWS_IGNORED)
    elif not verdict.ok:
        rows = [row for batch in scenario_rows(tokens) for row in batch]
        stream = scenario_stream(hf, tokens)
        pieces = {}
        for i, name in enumerate(names):
            pieces.setdefault(name, np.concatenate([batch[i] for batch in recorded]))
        placed = first_difference(
            names, pieces, stream, PAGED_LAYERS, lambda margins: off_rows(margins, rows), embeddings=EMBEDDINGS,
            attention=lambda i: "what forward hands c_attn (ln_1's output), c_attn's product with its bias, the "
                                "split into q, k and v, "
                                f"paged_flash_attention (the layer {i} it is told), c_proj's product with its bias")
        if placed is not None:
            verdict.details.append(placed.line)
            if placed.block == -1 and (said := embedding_rows(pieces["h.0.ln_1"], *embedding_tables(hf),
                                                              *scenario_places(tokens))) is not None:
                verdict.details.append(said)
            elif (said := without_parameter(placed.piece, pieces, hf, tokens,
                                            lambda m: off_rows(m, rows))) is not None:
                verdict.details.append(said)
        elif (which := off_rows(row_margins(flat_got, flat_want), rows)) is not None:
            verdict.details.append("where: the whole stream and ln_f's output match; the head does not: the rows' "
                                   f"logits are ln_f's output @ the int8 wte's dequantised rows.T; off on {which}")
        verdict.details += rows_differ(got, want, scenario_rows(tokens))
    part = Part.from_verdict("paged model", verdict)
    part.summary = f"{len(SCENARIO)} batches, {flat_want.shape[0]} rows: {part.summary}"
    if floated is not None:
        part.summary += (f"; with your matmul_q8 (which rounds: {floated}) replaced by the same product in float32 "
                         "while it ran, so the model is held to float32's tolerance (your kernel inside the model is "
                         "the served part's to hold)")
    if rounding is not None:
        part.summary += (f"; against transformers with {rounding} in every product, to "
                         f"{tol.scale / WHOLE_MODEL.scale:.0f}x WHOLE_MODEL: {MARGIN:.0f}x what noise of {NOISE:.0e} "
                         "before each rounding moves it")
    return part
