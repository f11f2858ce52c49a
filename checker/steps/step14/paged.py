"""The learner's GPT2Paged on MAX's paged KV cache: compiled as max serve compiles it with each block's
pieces recorded (Probed), run through SCENARIO's batches, and a difference placed in the first piece that
differs from Hugging Face's (place).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from checker.diagnosis.stream import first_difference, recording, row_margins
from checker.reporting.compare import CORRECT_MARGIN
from checker.steps.step14.reference import PAGE_SIZE, PAGED_LAYERS, SCENARIO
from runtime.compiling import session
from runtime.kv_inputs import staged
from runtime.loading import stored_tensors

# MAX is imported inside the functions that use it: importing it takes seconds.


def paged_params(config, layers: int):
    from max.dtype import DType
    from max.graph import DeviceRef
    from max.nn.kv_cache import MHAKVCacheParams

    return MHAKVCacheParams(dtype=DType.float32, n_kv_heads=config.n_head, head_dim=config.n_embd // config.n_head,
                            num_layers=layers, page_size=PAGE_SIZE, devices=[DeviceRef.CPU()])


def learner_paged(run, GPT2Paged, eleven, config, checkpoint, kv_params):
    """The learner's GPT2Paged (or step 18's GPT2PagedQ8) around their step 11 model, built with PAGED_LAYERS
    blocks and loaded by their load_hf_weights with those blocks' tensors."""
    from max.experimental import functional as F

    small = SimpleNamespace(**{**vars(config), "n_layer": PAGED_LAYERS})
    tensors = {n: v for n, v in stored_tensors(checkpoint).items()
               if ".h." not in n or int(n.split(".h.")[1].split(".")[0]) < PAGED_LAYERS}
    with F.lazy():
        model = run.call(eleven.GPT2LMHeadModel, small)
    run.call(eleven.load_hf_weights, model, tensors)
    return run.call(GPT2Paged, model, kv_params)


class Probed:
    """The learner's GPT2Paged in the check's compiled graph, returning beside every row's logits what its
    model's LayerNorms and MLPs were given or gave as its forward ran (the stream at each half of each
    block), so that a model that is off can be placed piece by piece without a second compile.

    `names` lists the recorded tensors, in order, once the graph is traced: "h.i.ln_1" (block i's input),
    "h.i.ln_2" (after its attention half), "h.i.mlp" (its MLP's output), "ln_f" (the stream at the end),
    "ln_f out", and each block's norms' outputs ("h.i.ln_1 out", "h.i.ln_2 out"); a piece the learner's forward
    does not call through its module is simply not there."""

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
                with recording(recorded, self.paged):  # the copy Module.compile traces, not `paged`
                    logits = self.paged(tokens, kv, input_row_offsets)
                probe.names = [name for name, _ in recorded]
                return (logits, *(value for _, value in recorded))

        self.graph = _Graph()


def compile_probed(paged_model, kv_params) -> tuple[object, Probed]:
    """The learner's GPT2Paged compiled with MAX's ragged inputs, its pieces recorded (Probed)."""
    from max.graph import DeviceRef
    from max.pipelines.lib.interfaces.batch_processor import modulev3_ragged_kv_symbolic_inputs

    probed = Probed(paged_model, kv_params)
    types = modulev3_ragged_kv_symbolic_inputs(kv_params=kv_params, device_refs=[DeviceRef.CPU()])
    return probed.graph.compile(*types, session=session()), probed


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
                                   Buffer.from_numpy(offsets), *tree.leaves(staged(manager, [ctxs])))
        out.append(np.from_dlpack(logits).astype(np.float64))
        recorded.append([np.from_dlpack(p).astype(np.float64) for p in pieces])
    return out, recorded


def rows_differ(got: list[np.ndarray], want: list[np.ndarray], rows: list[list[tuple[str, bool]]]) -> list[str]:
    """Which requests are right in which batch, in words: prompt rows and decode rows apart.

    A request counts as right only within a tenth of the tolerance (where correct code stays, the
    margin rule): one within the tolerance but nearer its edge is off like the others, just less."""
    right, off = {"prompt": [], "decode": []}, {"prompt": [], "decode": []}
    near = []
    flat_want = np.concatenate(want)  # [rows, V]: allowed as the part's verdict allows it
    margins = iter(row_margins(np.concatenate(got), flat_want))
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


def off_rows(margins: np.ndarray, rows: list[tuple[str, bool]]) -> str | None:
    """Which rows are off (margin above 1), in words: "every row", or the requests' prompt / decode rows; None
    when none is."""
    off = margins > 1
    if not off.any():
        return None
    if off.all():
        return "every row"
    kinds = {("prompt" if is_prompt else "decode", name) for (name, is_prompt), bad in zip(rows, off) if bad}
    prompts = sorted(n for k, n in kinds if k == "prompt")
    decodes = sorted(n for k, n in kinds if k == "decode")
    said = [f"{', '.join(prompts)}'s prompt rows" if prompts else "",
            f"{', '.join(decodes)}'s decode rows" if decodes else ""]
    return " and ".join(s for s in said if s) + (" (prompts right: what a decode step reads back from the cache)"
                                                 if decodes and not prompts else "")


def place(names: list[str], recorded: list[list[np.ndarray]], stream: dict[str, np.ndarray], got_logits: np.ndarray,
          want_logits: np.ndarray, rows: list[tuple[str, bool]]) -> list[str]:
    """The first piece of the learner's paged model that differs from Hugging Face on the scenario's rows,
    from what the probe recorded (Probed): the embeddings, each block's attention half and MLP half, ln_f,
    the head. One line; it names paged_attention only when an attention half is the first to differ."""
    got = {}
    for i, name in enumerate(names):
        got.setdefault(name, np.concatenate([batch[i] for batch in recorded]))
    placed = first_difference(
        names, got, stream, PAGED_LAYERS, lambda margins: off_rows(margins, rows),
        embeddings="wte(tokens) + wpe's row at each row's position (ragged_positions passes, above: look at how "
                   "forward uses it)",
        attention=lambda i: f"what forward hands the attention (ln_1's output), paged_attention (the keys and "
                            f"values it stores under layer_idx {i} and reads back, the mask, the scale, how its heads "
                            "are merged for c_proj)")
    if placed is not None:
        return [placed.line]
    which = off_rows(row_margins(got_logits, want_logits), rows)
    return [f"where: the whole stream and ln_f's output match Hugging Face; the head does not: every row's logits "
            f"are ln_f's output @ wte.weight.T (tied); off on {which}"] if which else []
