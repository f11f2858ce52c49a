"""Where a GPT-2's residual stream first differs from Hugging Face's, piece by piece, at the same rows (a
row: one position of one sequence, at one call). The learner's pieces are recorded as its model runs (op
by op, or traced into a graph that returns them); Hugging Face's by hooks on the same modules.

    PIECES                            each block's: "ln_1" (its input), "ln_2" (the stream after its attention
                                      half), "mlp" (its MLP's output); then "ln_f" (the stream at the end)
                                      and "ln_f out"; beside them each block's "ln_1 out" and "ln_2 out" (what
                                      its norms gave), which place a half that is off at its norm or past it
    recording(recorded, model)        while the learner's model runs, (name, tensor) appended for each piece
    stacked(recorded)                 {name: [rows, C]}: each piece's rows, call after call
    hooked(hf)                        while Hugging Face runs, {name: [[rows, C], ...]} filled the same way
    hf_stream(hf, ids)                Hugging Face's pieces on one sequence `ids`: {name: [len(ids), C]}
    row_margins(got, want)            [rows, C] -> [rows]: each row's worst difference over what is allowed
    order_problem(names, layers)      what is wrong with the order the pieces were called in, or None
    first_difference(names, got, want, layers, off, embeddings=, attention=)
                                      the first piece off (Placed: its line and block), or None when every
                                      piece through ln_f's output is right (then the head is left)
    place_positions(recorded, hf, sequence, first, prompt_length, layers, attention=, logits=)
                                      that line for a model run on one sequence, its rows said as the
                                      prompt's positions and decode steps; or the head's, or nothing
    first_placed(...)                 the same as a Placed: the line and the block it places, to weigh
                                      against a later finding (a block's cache)
    embedding_rows(got, wte, wpe, ids, positions, cached)
                                      an embedding off read as the rows of wte and wpe it is made of: which
                                      row of wpe (or of wte) each row took, where not its position (token)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from checker.reporting.compare import WHOLE_MODEL

# MAX and torch are imported inside the functions that use them: importing them takes seconds.

PIECES = ("ln_1", "ln_2", "mlp")


def expected_names(layers: int) -> list[str]:
    return [f"h.{i}.{p}" for i in range(layers) for p in PIECES] + ["ln_f", "ln_f out"]


def _norm_out(name: str) -> bool:
    """A block's "h.i.ln_1 out" or "h.i.ln_2 out": recorded beside its norm's input, not a piece of the order."""
    return name.startswith("h.") and name.endswith(" out")


@contextlib.contextmanager
def recording(recorded: list, model):
    """While the block runs, each call of the model's blocks' ln_1, ln_2, mlp and its ln_f appends (name,
    tensor) to `recorded`: the input of ln_1 and ln_2 and ln_f, then their outputs ("h.i.ln_1 out", ...,
    "ln_f out"), the output of mlp. A piece the learner's forward does not call through its module is simply
    not recorded."""
    t = getattr(model, "transformer", None)
    watched = [(f"h.{i}.{name}", getattr(block, name)) for i, block in enumerate(getattr(t, "h", []) or [])
               for name in PIECES if hasattr(block, name)]
    if t is not None and hasattr(t, "ln_f"):
        watched.append(("ln_f", t.ln_f))
    for name, module in watched:
        forward = module.forward

        def record(x, *args, name=name, forward=forward, **kwargs):
            y = forward(x, *args, **kwargs)
            if name.endswith(".mlp"):
                recorded.append((name, y))
            else:
                recorded.extend([(name, x), (f"{name} out", y)])
            return y

        object.__setattr__(module, "forward", record)
    try:
        yield
    finally:
        for _, module in watched:
            if "forward" in vars(module):
                object.__delattr__(module, "forward")


def stacked(recorded: list) -> dict[str, np.ndarray]:
    """(name, tensor) pairs as `recording` leaves them, op by op -> {name: [rows, C]} in call order."""
    rows: dict[str, list[np.ndarray]] = {}
    for name, value in recorded:
        array = np.from_dlpack(value).astype(np.float64)
        rows.setdefault(name, []).append(array.reshape(-1, array.shape[-1]))
    return {name: np.concatenate(r) for name, r in rows.items()}


@contextlib.contextmanager
def hooked(hf):
    """While Hugging Face's GPT2LMHeadModel runs, each piece's rows [rows, C] appended to the yielded
    {name: [...]}, one entry per forward (the first sequence of its batch)."""
    seen: dict[str, list[np.ndarray]] = {}
    hooks = []
    for i, block in enumerate(hf.transformer.h):
        for name, module in ((f"h.{i}.ln_1", block.ln_1), (f"h.{i}.ln_2", block.ln_2)):
            def norm(m, args, out, name=name):
                seen.setdefault(name, []).append(args[0][0].double().numpy())
                seen.setdefault(f"{name} out", []).append(out[0].double().numpy())

            hooks.append(module.register_forward_hook(norm))
        hooks.append(block.mlp.register_forward_hook(
            lambda m, args, out, i=i: seen.setdefault(f"h.{i}.mlp", []).append(out[0].double().numpy())))

    def ln_f(module, args, out):  # a forward hook returning None leaves the output as it is
        seen.setdefault("ln_f", []).append(args[0][0].double().numpy())
        seen.setdefault("ln_f out", []).append(out[0].double().numpy())

    hooks.append(hf.transformer.ln_f.register_forward_hook(ln_f))
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


def hf_stream(hf, ids: list[int]) -> dict[str, np.ndarray]:
    """Hugging Face's pieces on the sequence `ids`, one forward: {name: [len(ids), C]}, row p at position p."""
    import torch

    with hooked(hf) as seen, torch.no_grad():
        hf(torch.tensor([ids]))
    return {name: rows[0] for name, rows in seen.items()}


def row_margins(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """[rows, C] -> [rows]: each row's worst |got - want| / what the whole-model tolerance allows."""
    return np.max(np.abs(got - want) / WHOLE_MODEL.allowed(want), axis=-1)


def _piece(name: str) -> str:
    """"h.0.ln_2" -> "block 0's ln_2"."""
    block, _, module = name.rpartition(".")
    return f"block {block.removeprefix('h.')}'s {module}" if block else name


def order_problem(names: list[str], layers: int) -> str | None:
    """What is wrong with the order the pieces were recorded in (their first calls), or None."""
    expected = expected_names(layers)
    names = [name for name in names if not _norm_out(name)]
    if not names:
        return ("where: the probes could not place it (your forward calls none of the blocks' ln_1, ln_2 and mlp "
                "nor ln_f as modules, so the stream between them is not seen)")
    if missing := [name for name in expected if name not in names and name != "ln_f out"]:
        said = " and ".join(_piece(name) for name in missing[:3]) + (" (and more)" if len(missing) > 3 else "")
        return (f"where: forward never calls {said}: each block is x + attention(ln_1(x)), then x + mlp(ln_2(x)); "
                "ln_f once at the end")
    order = list(dict.fromkeys(names))
    if order != expected:
        return (f"where: forward calls the blocks' modules in the order {', '.join(order)} (expected h.0's ln_1, "
                f"ln_2, mlp, then h.1's, ..., ln_f once at the end)")
    return None


def _matched(got: dict, i: int, what: str, norm: str) -> str:
    """"its input and ln_1's output match" where block i's norm's output was recorded (and so found right), else
    "its input matches"."""
    return f"{what} and {norm}'s output match" if f"h.{i}.{norm} out" in got else f"{what} matches"


def _norm_said(i: int, norm: str) -> str:
    """A block's norm whose output is off on the right input, in words."""
    return (f"block {i}'s {norm}: its input matches, its output does not: block.{norm}(x) is each row less its mean, "
            f"over the square root of its variance plus eps, times {norm}'s weight plus {norm}'s bias (block {i}'s "
            "own)")


class Placed(NamedTuple):
    """Where a stream first differs: the line that says so, the block it is in (-1: the embeddings, before
    block 0; `layers`: ln_f or the head, after the last; None: the pieces were not called in order), and the
    piece whose rows are off first ("h.0.ln_2": block 0's attention half, "h.0.ln_1 out": its ln_1; "" when
    none is)."""

    line: str
    block: int | None
    piece: str = ""

    @property
    def attention(self) -> bool:
        """Placed in a block's attention half."""
        return self.piece.endswith(".ln_2")


def first_difference(names: list[str], got: dict[str, np.ndarray], want: dict[str, np.ndarray], layers: int,
                     off: Callable[[np.ndarray], str | None], *, embeddings: str, attention: Callable[[int], str],
                     ) -> Placed | None:
    """The first piece whose rows are off (`off`: each row's margin [rows] -> which rows are off, in words,
    or None), said as the piece between two that match: the embeddings, block i's ln_1, its attention half
    (`attention(i)` says what it holds), its ln_2, its MLP or its residual add, ln_f. None when every piece through
    ln_f's output is right. `names` are the pieces in the order recorded (order_problem first)."""
    if (problem := order_problem(names, layers)) is not None:
        return Placed(problem, None)
    steps = [("h.0.ln_1", -1, f"the embeddings: the stream into block 0 is not {embeddings}")]
    for i in range(layers):
        after = f"h.{i + 1}.ln_1" if i + 1 < layers else "ln_f"
        steps += [(f"h.{i}.ln_1 out", i, _norm_said(i, "ln_1")),
                  (f"h.{i}.ln_2", i, f"block {i}'s attention half: {_matched(got, i, 'its input', 'ln_1')}, the "
                   f"stream after x + attention(ln_1(x)) does not: {attention(i)}, or how forward adds it to the "
                   "stream"),
                  (f"h.{i}.ln_2 out", i, _norm_said(i, "ln_2")),
                  (f"h.{i}.mlp", i, f"block {i}'s MLP: "
                   f"{_matched(got, i, 'the stream after the attention half', 'ln_2')}, block.mlp(...) does not: "
                   "what forward hands it (ln_2's output)"),
                  (after, i, f"block {i}'s MLP half: the MLP's output matches, the stream after it does not: the "
                   "residual add x + mlp(ln_2(x))")]
    steps.append(("ln_f out", layers, "ln_f: the stream at the end matches, ln_f's output does not"))
    for name, block, said in steps:
        if name in got and (which := off(row_margins(got[name], want[name]))) is not None:
            return Placed(f"where: everything before matches Hugging Face; {said}; off on {which}", block, name)
    return None


def place_positions(recorded: list, hf, sequence: list[int], first: int, prompt_length: int, layers: int, *,
                    attention: Callable[[int], str], logits: tuple[np.ndarray, np.ndarray] | None = None) -> list[str]:
    """Where a model run op by op on one sequence first differs from Hugging Face: `recorded` (recording's
    pairs) holds positions first .. len(sequence) - 1, call after call (a prefill's rows, then a decode step's
    one; or the decode steps alone, first = prompt_length). `logits`: the decode steps' logits [steps, V],
    the learner's and Hugging Face's, for the head when every piece is right. One line, or none."""
    placed = first_placed(recorded, hf, sequence, first, prompt_length, layers, attention=attention, logits=logits)
    return [] if placed is None else [placed.line]


def first_placed(recorded: list, hf, sequence: list[int], first: int, prompt_length: int, layers: int, *,
                 attention: Callable[[int], str], logits: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> Placed | None:
    """place_positions' line with the block it places (Placed), or None."""
    if (problem := order_problem([name for name, _ in recorded], layers)) is not None:
        return Placed(problem, None)  # a piece never called (another called in its place): said before any rows
    got = stacked(recorded)
    want = {name: rows[first:] for name, rows in hf_stream(hf, sequence).items()}
    unlike = {name for name, rows in got.items() if name in want and rows.shape != want[name].shape}
    if any(name.startswith("h.") for name in unlike):
        return None  # the blocks recorded otherwise than one row a position (a batch, a padded cache): not placed
    # ln_f on the last position alone (a model returning the last logits): its rows are not positions
    got = {name: rows for name, rows in got.items() if name not in unlike}

    def said(positions: np.ndarray) -> str:
        def listed(ps: list) -> str:  # positions, not decode steps' indices: the logits' lines count those from 0
            return ", ".join(map(str, ps[:6])) + (", ..." if len(ps) > 6 else "")

        steps = [p for p in positions if p >= prompt_length]
        prompt = [p for p in positions if p < prompt_length]
        return "; ".join(([f"the prompt's positions {listed(prompt)}"] if prompt else [])
                         + ([f"the decode steps at positions {listed(steps)}"] if steps else []))

    def off(margins: np.ndarray) -> str | None:
        bad = np.flatnonzero(margins > 1)
        return None if not len(bad) else said(first + bad)

    placed = first_difference([name for name, _ in recorded], got, want, layers, off, attention=attention,
                              embeddings="wte(token) + wpe's row at the token's position (P + t after P cached)")
    if placed is not None:
        return placed
    if logits is not None and (bad := np.flatnonzero(row_margins(*logits) > 1)).size:
        matched = "the whole stream matches Hugging Face; ln_f or" if unlike else \
            "the whole stream and ln_f's output match Hugging Face;"
        return Placed(f"where: {matched} the head does not: the logits are ln_f's output @ wte.weight.T (tied); off "
                      f"on {said(prompt_length + bad)}", layers)
    return None


def _row_taken(rest: np.ndarray, table: np.ndarray) -> np.ndarray | None:
    """rest [R, C] -> [R]: for each row, the row of `table` [V, C] it equals (to float32's noise), or None when a
    row equals none."""
    distance = (rest * rest).sum(1)[:, None] - 2 * rest @ table.T + (table * table).sum(1)[None, :]  # [R, V]
    taken = distance.argmin(axis=1)
    close = np.abs(rest - table[taken]).max(axis=1) <= 1e-4 * max(np.abs(table).max(), 1e-30)
    return taken if close.all() else None


def embedding_rows(got: np.ndarray, wte: np.ndarray, wpe: np.ndarray, ids: np.ndarray, positions: np.ndarray,
                   cached: np.ndarray) -> str | None:
    """The stream into block 0, got [R, C], as wte's row of a token plus wpe's row of a position: where each row
    is wte[ids] plus some row of wpe (or wpe[positions] plus some row of wte), which it took, in words; None
    when it is neither."""
    got = got.astype(np.float64)
    wte, wpe = wte.astype(np.float64), wpe.astype(np.float64)
    if (taken := _row_taken(got - wte[ids], wpe)) is not None:
        wrong = taken != positions
        if not wrong.any():
            return None
        if (taken[wrong] == (positions - cached)[wrong]).all():
            why = "the row of its place among its request's new rows, not of its position (its request's cache " \
                  "length, cache_lengths[b], not added)"
        elif (taken[wrong] == ids[wrong]).all():
            why = "the row of its token id, not of its position"
        else:
            why = "another row than its position's"
        pairs = ", ".join(f"{p} -> {t}" for p, t in zip(positions[wrong][:6], taken[wrong][:6]))
        return (f"the embeddings, read back: each row is wte's row of its token (right) plus a row of wpe, on "
                f"{int(wrong.sum())} of {len(ids)} rows {why}; position -> wpe's row taken: {pairs}"
                f"{', ...' if wrong.sum() > 6 else ''}")
    if (taken := _row_taken(got - wpe[positions], wte)) is not None and (wrong := taken != ids).any():
        pairs = ", ".join(f"{i} -> {t}" for i, t in zip(ids[wrong][:6], taken[wrong][:6]))
        return (f"the embeddings, read back: each row is wpe's row of its position (right) plus a row of wte, on "
                f"{int(wrong.sum())} of {len(ids)} rows another than its token's; token -> wte's row taken: {pairs}"
                f"{', ...' if wrong.sum() > 6 else ''}")
    return None
