"""The learner's GPT2Paged on MAX's paged KV cache: compiled as max serve compiles it with each block's
pieces recorded (Probed), run through SCENARIO's batches, and a difference placed in the first piece that
differs from Hugging Face's (place).
"""

from __future__ import annotations

import contextlib

import numpy as np

from checker.reporting.compare import CORRECT_MARGIN, WHOLE_MODEL
from checker.steps.step14.reference import PAGE_SIZE, PAGED_LAYERS, SCENARIO

# MAX is imported inside the functions that use it: importing it takes seconds.


def paged_params(config, layers: int):
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(dtype=DType.float32, n_kv_heads=config.n_head, head_dim=config.n_embd // config.n_head,
                            num_layers=layers, page_size=PAGE_SIZE, devices=[DeviceRef.CPU()])


PROBED = ("ln_1", "ln_2", "mlp")  # each block's modules the probe records; and the body's ln_f


class Probed:
    """The learner's GPT2Paged in the check's compiled graph, returning beside every row's logits what its
    model's LayerNorms and MLPs were given or gave as its forward ran (the stream at each half of each
    block), so that a model that is off can be placed piece by piece without a second compile.

    `names` lists the recorded tensors, in order, once the graph is traced: "h.i.ln_1" (block i's input),
    "h.i.ln_2" (after its attention half), "h.i.mlp" (its MLP's output), "ln_f" (the stream at the end),
    "ln_f out"; a piece the learner's forward does not call through its module is simply not there."""

    def __init__(self, paged, kv_params):
        from max.experimental.nn import Module

        self.names: list[str] = []
        probe = self

        class _Graph(Module):
            def __init__(self):
                self.paged = paged

            def forward(self, tokens, return_n_logits, input_row_offsets, *kv_inputs):
                from max import tree
                from max.nn.kv_cache import KVCacheInputsPerDevice

                del return_n_logits
                flat = iter(x._graph_value for x in kv_inputs)
                (kv,) = tree.leaves(kv_params.unflatten_kv_inputs(flat), leaf=KVCacheInputsPerDevice)
                recorded = []
                with probe._recording(recorded, self.paged):  # the copy Module.compile traces, not `paged`
                    logits = self.paged(tokens, kv, input_row_offsets)
                probe.names = [name for name, _ in recorded]
                return (logits, *(value for _, value in recorded))

        self.graph = _Graph()

    @staticmethod
    @contextlib.contextmanager
    def _recording(recorded: list, paged):
        t = getattr(paged, "transformer", None)
        watched = [(f"h.{i}.{name}", getattr(block, name)) for i, block in enumerate(getattr(t, "h", []) or [])
                   for name in PROBED if hasattr(block, name)]
        if t is not None and hasattr(t, "ln_f"):
            watched.append(("ln_f", t.ln_f))
        for name, module in watched:
            forward = module.forward

            def record(x, *args, name=name, forward=forward, **kwargs):
                y = forward(x, *args, **kwargs)
                if name.endswith(".mlp"):
                    recorded.append((name, y))
                else:
                    recorded.append((name, x))
                    if name == "ln_f":
                        recorded.append(("ln_f out", y))
                return y

            object.__setattr__(module, "forward", record)
        try:
            yield
        finally:
            for _, module in watched:
                if "forward" in vars(module):
                    object.__delattr__(module, "forward")


def compile_probed(paged_model, kv_params) -> tuple[object, Probed]:
    """The learner's GPT2Paged compiled with MAX's ragged inputs, its pieces recorded (Probed)."""
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    probed = Probed(paged_model, kv_params)
    types = modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=[DeviceRef.CPU()])
    return probed.graph.compile(*types), probed


def run_scenario(compiled, kv_params, tokens: dict[str, list[int]]) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """The compiled probe (compile_probed) through SCENARIO on a real PagedKVCacheManager: per batch, every
    row's logits [rows, V], and per batch the recorded tensors [rows, C]."""
    from max import tree
    from max.driver import CPU, Buffer
    from max.engine import InferenceSession
    from max.pipelines.context import TextContext, TokenBuffer
    from max.pipelines.kv_cache import PagedKVCacheManager
    from max.pipelines.modeling.types import RequestID

    manager = PagedKVCacheManager(params=kv_params, session=InferenceSession(devices=[CPU()]),
                                  total_num_pages=32, max_batch_size=8)
    contexts, done, out, recorded = {}, {name: 0 for name in tokens}, [], []
    for batch in SCENARIO:
        for name, n in batch:
            if name not in contexts:
                contexts[name] = TextContext(request_id=RequestID(), max_length=1024,
                                             tokens=TokenBuffer(np.array(tokens[name][:n], dtype=np.int64)))
                manager.claim(contexts[name])
            else:  # the request's next token, as the server appends the one it chose
                contexts[name].update(tokens[name][done[name]])
                manager.step(contexts[name])
            done[name] += n
        ctxs = [contexts[name] for name, _ in batch]
        for c in ctxs:
            manager.alloc(c)
        ids = np.concatenate([c.tokens.active for c in ctxs]).astype(np.int64)
        offsets = np.cumsum([0] + [len(c.tokens.active) for c in ctxs]).astype(np.uint32)
        logits, *pieces = compiled(Buffer.from_numpy(ids), Buffer.from_numpy(np.array([1], np.int64)),
                                   Buffer.from_numpy(offsets), *tree.leaves(manager.runtime_inputs([ctxs])))
        out.append(np.from_dlpack(logits).astype(np.float64))
        recorded.append([np.from_dlpack(p).astype(np.float64) for p in pieces])
    return out, recorded


def _row_margins(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """[rows, V] -> [rows]: each row's worst |got - want| / what the whole-model tolerance allows."""
    return np.max(np.abs(got - want) / WHOLE_MODEL.allowed(want), axis=-1)


def rows_differ(got: list[np.ndarray], want: list[np.ndarray], rows: list[list[tuple[str, bool]]]) -> list[str]:
    """Which requests are right in which batch, in words: prompt rows and decode rows apart.

    A request counts as right only within a tenth of the tolerance (where correct code stays, the
    margin rule): one within the tolerance but nearer its edge is off like the others, just less."""
    right, off = {"prompt": [], "decode": []}, {"prompt": [], "decode": []}
    near = []
    flat_want = np.concatenate(want)  # [rows, V]: allowed as the part's verdict allows it
    margins = iter(_row_margins(np.concatenate(got), flat_want))
    for i, batch in enumerate(rows):
        worst: dict[str, float] = {}
        for name, _ in batch:
            worst[name] = max(worst.get(name, 0.0), float(next(margins)))
        for name, margin in worst.items():
            kind = "prompt" if dict(batch)[name] else "decode"
            label = f"{name} (batch {i + 1})"
            (right if margin <= CORRECT_MARGIN else off)[kind].append(label)
            if CORRECT_MARGIN < margin <= 1:
                near.append(f"{label} at {margin:.2f}")
    lines = []
    for kind, what in (("prompt", "prompts (no cached positions)"),
                       ("decode", "decode steps (after cached positions)")):
        if right[kind] or off[kind]:
            lines.append(f"{what}: right for {', '.join(right[kind]) or 'none'}; off for "
                         f"{', '.join(off[kind]) or 'none'}")
    if near:
        lines.append(f"within the tolerance but off (correct code stays under {CORRECT_MARGIN} of it): "
                     f"{', '.join(near)}")
    if not off["prompt"] and off["decode"]:
        lines.append("every prompt is right and decode steps are not: what a request reads back from its "
                     "cache (the keys and values each layer stores, under its own layer_idx), or the positions "
                     "of tokens after it")
    elif off["prompt"] and right["prompt"]:
        lines.append("some prompts are right and others not: look at what differs per request in the batch "
                     "(its rows, its positions)")
    return lines


def _rows_off(got: np.ndarray, want: np.ndarray, rows: list[tuple[str, bool]]) -> tuple[bool, str]:
    """(whether any row is off, which: "every row", or the requests' prompt / decode rows that are)."""
    off = _row_margins(got, want) > 1
    if not off.any():
        return False, ""
    if off.all():
        return True, "every row"
    kinds = {("prompt" if is_prompt else "decode", name) for (name, is_prompt), bad in zip(rows, off) if bad}
    prompts = sorted(n for k, n in kinds if k == "prompt")
    decodes = sorted(n for k, n in kinds if k == "decode")
    said = [f"{', '.join(prompts)}'s prompt rows" if prompts else "",
            f"{', '.join(decodes)}'s decode rows" if decodes else ""]
    return True, " and ".join(s for s in said if s) + (" (prompts right: what a decode step reads back from the cache)"
                                                        if decodes and not prompts else "")


def _piece(name: str) -> str:
    """"h.0.ln_2" -> "block 0's ln_2"."""
    block, _, module = name.rpartition(".")
    return f"block {block.removeprefix('h.')}'s {module}" if block else name


def place(names: list[str], recorded: list[list[np.ndarray]], stream: dict[str, np.ndarray], got_logits: np.ndarray,
          want_logits: np.ndarray, rows: list[tuple[str, bool]]) -> list[str]:
    """The first piece of the learner's paged model that differs from Hugging Face on the scenario's rows,
    from what the probe recorded (Probed): the embeddings, each block's attention half and MLP half, ln_f,
    the head. One line; it names paged_attention only when an attention half is the first to differ."""
    got = {}
    for i, name in enumerate(names):
        got.setdefault(name, np.concatenate([batch[i] for batch in recorded]))
    n = PAGED_LAYERS
    expected = [f"h.{i}.{p}" for i in range(n) for p in PROBED] + ["ln_f", "ln_f out"]
    if not got:
        return ["where: the probes could not place it (your forward calls none of the blocks' ln_1, ln_2 and mlp "
                "nor ln_f as modules, so the stream between them is not seen)"]
    if missing := [name for name in expected if name not in got and name != "ln_f out"]:
        said = " and ".join(_piece(name) for name in missing[:3]) + (" (and more)" if len(missing) > 3 else "")
        return [f"where: forward never calls {said}: each block is x + attention(ln_1(x)), then x + mlp(ln_2(x)); "
                "ln_f once at the end"]
    order = list(dict.fromkeys(names))
    if order != expected:
        return [f"where: forward calls the blocks' modules in the order {', '.join(order)} (expected h.0's ln_1, "
                f"ln_2, mlp, then h.1's, ..., ln_f once at the end)"]
    steps = [("h.0.ln_1", "the embeddings: the stream into block 0 is not wte(tokens) + wpe's row at each row's "
              "position (ragged_positions passes, above: look at how forward uses it)")]
    for i in range(n):
        after = f"h.{i + 1}.ln_1" if i + 1 < n else "ln_f"
        steps += [(f"h.{i}.ln_2", f"block {i}'s attention half: its input matches, the stream after x + "
                   f"paged_attention(...) does not: paged_attention (the keys and values it stores under layer_idx "
                   f"{i} and reads back, the mask, the scale) or how forward adds it to the stream"),
                  (f"h.{i}.mlp", f"block {i}'s MLP: the stream after the attention half matches, block.mlp(...) "
                   "does not: what forward hands it (ln_2 of the stream)"),
                  (after, f"block {i}'s MLP half: the MLP's output matches, the stream after it does not: the "
                   "residual add x + mlp(ln_2(x))")]
    steps.append(("ln_f out", "ln_f: the stream at the end matches, ln_f's output does not"))
    for name, said in steps:
        off, which = _rows_off(got[name], stream[name], rows)
        if off:
            return [f"where: everything before matches Hugging Face; {said}; off on {which}"]
    off, which = _rows_off(got_logits, want_logits, rows)
    return [f"where: the whole stream and ln_f's output match Hugging Face; the head does not: every row's logits "
            f"are ln_f's output @ wte.weight.T (tied); off on {which}"] if off else []
