"""Putting GPT-2's weights into a learner's module, with messages for what is off.

Hugging Face stores `c_attn`, `c_proj` and `c_fc` as Conv1D, with weights of
shape [in, out]; MAX's Linear, like torch's, stores [out, in]. `hf_state`
transposes them, so a module that uses Hugging Face's names loads GPT-2 by
name. `load_module` builds the learner's module without computing its random
initialisation, checks that it holds every parameter with the right shape,
and loads the weights.
"""

from __future__ import annotations

import re

import numpy as np

from runtime.checkpoints import Checkpoint
from runtime.files import MODEL_FILE
from runtime.learner import LearnerError

# MAX and safetensors are imported inside the functions that use them: importing them takes seconds.

CONV1D = ("c_attn", "c_proj", "c_fc")
_MISSING = object()


def is_conv1d_weight(name: str) -> bool:
    """A weight Hugging Face stores as Conv1D, [in, out] ('transformer.h.0.attn.c_attn.weight')."""
    return name.endswith(".weight") and name.split(".")[-2] in CONV1D


def linear_layout(name: str, value: np.ndarray) -> np.ndarray:
    """The stored tensor `name` as the model holds it: float32, Conv1D weights transposed to [out, in]."""
    return np.ascontiguousarray(value.T if is_conv1d_weight(name) else value, dtype=np.float32)


def hf_state(checkpoint: Checkpoint, prefix: str, names: list[str]) -> dict[str, np.ndarray]:
    """`prefix + name` for each name, as the model holds it (see linear_layout)."""
    tensors = checkpoint.tensors([prefix + n for n in names])
    return {n: linear_layout(prefix + n, tensors[prefix + n]) for n in names}


def _walk(module, path: str) -> tuple[object, str]:
    """The object at dotted `path` below `module`, or _MISSING/None and the path where the walk stopped."""
    obj, walked = module, []
    for part in filter(None, path.split(".")):
        walked.append(part)
        obj = obj[int(part)] if part.isdigit() and hasattr(obj, "__getitem__") else getattr(obj, part, _MISSING)
        if obj is _MISSING or obj is None:
            break
    return obj, ".".join(walked)


def _problem(module, name: str, want: tuple, params: dict, expected) -> tuple[str, bool] | None:
    """What is wrong with parameter `name`, and whether it is a TODO; None if nothing."""
    if name in params:
        got = params[name]
        if got == want:
            return None
        if len(want) == 2 and got == want[::-1]:
            from max.experimental.nn import Linear

            why = ("Linear(in_dim, out_dim) stores its weight as [out, in]; the arguments look swapped"
                   if isinstance(_walk(module, name.rpartition(".")[0])[0], Linear) else "its two axes are swapped")
            return f"{name} is {list(got)}, expected {list(want)}: {why}", False
        return f"{name} is {list(got)}, expected {list(want)}", False
    owner_path, _, leaf = name.rpartition(".")
    owner, stopped = _walk(module, owner_path)
    if owner is _MISSING:
        return f"no self.{stopped}: name it as GPT-2's checkpoint does ({stopped}.*)", False
    if owner is None:
        return f"self.{stopped} is still None: create it in __init__", True
    value = getattr(owner, leaf, _MISSING)
    if value is None:
        return f"self.{name} is still None: create it in __init__", True
    if value is _MISSING:
        others = [f"{n} {list(params[n])}" for n in params if n not in expected and n.rpartition(".")[0] == owner_path]
        holds = f" (it holds {', '.join(others)})" if others else ""
        return f"no parameter {name}{holds}: name it as GPT-2's checkpoint does", False
    if leaf == "bias":
        return f"{owner_path} has no bias: GPT-2's has one (bias=True)", False
    return f"{name} is not a tensor parameter", False


def require_module(module):
    """`module`, or a LearnerError if the learner's class does not subclass MAX's Module."""
    from max.experimental.nn import Module

    if not isinstance(module, Module):
        raise LearnerError(f"{type(module).__name__} is not a max.experimental.nn.Module: subclass Module")
    return module


def load_module(run, build, state: dict[str, np.ndarray]):
    """Calls `build()` (the learner's constructor), checks its parameters against `state`, loads them."""
    from max.experimental import functional as F

    with F.lazy():  # no random initialisation is computed; the real weights replace it
        module = require_module(run.call(build))
    params = {name: tuple(int(d) for d in t.shape) for name, t in module.parameters}
    found = [p for n, v in state.items() if (p := _problem(module, n, tuple(v.shape), params, state))]
    if found:
        messages = list(dict.fromkeys(m for m, _ in found))
        more = f"; and {len(messages) - 4} more like these" if len(messages) > 4 else ""
        raise LearnerError("; ".join(messages[:4]) + more, todo=all(todo for _, todo in found))
    if shared := shared_parameters(module, state):
        raise LearnerError(shared)
    extra = {name: t for name, t in module.parameters if name not in state}  # e.g. a stored mask
    run.call(module.load_state_dict, {**state, **extra})
    return module


def shared_parameters(module, state: dict[str, np.ndarray]) -> str | None:
    """What is wrong when parameters the checkpoint holds apart are one tensor in `module` (one block object put
    in every place of a list: loading each layer overwrites the others, and all hold the last one's), else None."""
    names: dict[int, list[str]] = {}
    for name, t in module.parameters:
        if name in state:
            names.setdefault(id(t), []).append(name)
    groups = [group for group in names.values() if len(group) > 1]
    if not groups:
        return None
    shown = "; ".join(", ".join(group[:3]) + (f" and {len(group) - 3} more" if len(group) > 3 else "")
                      for group in groups[:2])
    return (f"parameters the checkpoint holds apart are one tensor in your model ({shown}): loading each overwrites "
            "the others, and all hold the last one's values. One module object put in every place (a list of the "
            "same block, `[GPT2Block(config)] * n`)? Build a new one for each")


def _shape(value) -> tuple[int, ...]:
    return tuple(int(d) for d in getattr(value, "shape", ()))


def grouped(names: list[str], n_layer: int) -> str:
    """'transformer.h.N.mlp.c_proj.weight (all 12 blocks), transformer.wte.weight': one entry per
    name with its block number taken out, and how many blocks have it."""
    counts: dict[str, set[str]] = {}
    for name in names:
        m = re.search(r"\.h\.(\d+)\.", name)
        key = name.replace(m.group(0), ".h.N.") if m else name
        counts.setdefault(key, set()).add(m.group(1) if m else "")
    out = []
    for key, blocks in counts.items():
        if ".h.N." not in key:
            out.append(key)
        else:
            many = (f"all {n_layer} blocks" if len(blocks) == n_layer
                    else f"{len(blocks)} block{'s' * (len(blocks) > 1)}")
            out.append(f"{key} ({many})")
    return ", ".join(out)


BUFFERS = (".attn.bias", ".attn.masked_bias")  # the causal mask, saved in some GPT-2 files


def state_problems(passed: dict, expected: dict[str, np.ndarray], n_layer: int) -> list[tuple[str, str, list[str]]]:
    """What is wrong with the state a loader passed to load_state_dict, against the model's `expected`
    parameters ([out, in] layout): a list of (kind, line, the names concerned), kinds:

    conv1d       Conv1D weights still in Hugging Face's [in, out] layout (shape or values transposed)
    transposed   another tensor with its axes swapped
    buffers      the causal-mask buffers passed as if they were parameters
    lm_head      lm_head.weight passed, though the head is tied to wte
    prefix       names without `transformer.` (the model's names have it)
    missing      parameters the state does not hold
    extra        names that are no parameter of the model
    values       the right name and shape, other values
    """
    problems = []
    extra = [n for n in passed if n not in expected]
    missing = [n for n in expected if n not in passed]
    unprefixed = [n for n in extra if f"transformer.{n}" in expected]
    buffers = [n for n in extra if n.endswith(BUFFERS)]
    heads = [n for n in extra if n.rsplit(".", 2)[-2:] == ["lm_head", "weight"] or n == "lm_head.weight"]
    others = [n for n in extra if n not in unprefixed + buffers + heads]
    conv1d, swapped, values = [], [], []
    for n, want in expected.items():
        if n not in passed:
            continue
        got = passed[n]
        shape = _shape(got)
        if shape == want.shape:
            array = np.asarray(np.from_dlpack(got) if not isinstance(got, np.ndarray) else got)
            if np.array_equal(array, want):
                continue
            transposed = want.ndim == 2 and np.array_equal(array, want.T)
        else:
            transposed = shape == want.shape[::-1]
        if transposed:
            (conv1d if is_conv1d_weight(n) else swapped).append(n)
        else:
            values.append(n if shape == want.shape else f"{n} is {list(shape)}, expected {list(want.shape)}")
    found = [
        ("conv1d", conv1d, "still in Hugging Face's Conv1D layout [in, out], not transposed to Linear's [out, in]"),
        ("transposed", swapped, "transposed, though they are stored as the model holds them"),
        ("buffers", buffers, "the causal-mask buffers passed as parameters"),
        ("lm_head", heads, "passed, but the model has no such parameter (the head is tied to wte)"),
        ("prefix", unprefixed, f"{len(unprefixed)} names without the `transformer.` prefix that the model's "
                               f"names have, e.g. {unprefixed[0] if unprefixed else ''}"),
        ("extra", others, "no parameter of the model has these names"),
        ("missing", [n for n in missing if n.removeprefix("transformer.") not in unprefixed],
         "missing from what was passed"),
        ("values", values, "other values than the checkpoint's"),
    ]
    for kind, names, what in found:
        if names:
            problems.append((kind, what if kind == "prefix" else f"{what}: {grouped(names, n_layer)}", names))
    return problems


class StateSpy:
    """Records the state dicts passed to `module.load_state_dict` while the learner's loader runs."""

    def __init__(self, module):
        self.states: list[dict] = []
        original = module.load_state_dict

        def load_state_dict(state, *args, **kwargs):
            self.states.append(dict(state))
            return original(state, *args, **kwargs)

        object.__setattr__(module, "load_state_dict", load_state_dict)

    @property
    def state(self) -> dict | None:
        """Everything passed, merged (a loader may load in several calls); None if it never called."""
        if not self.states:
            return None
        merged: dict = {}
        for state in self.states:
            merged.update(state)
        return merged


def stored_tensors(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """Every tensor of model.safetensors, named and laid out as stored."""
    from safetensors.numpy import load_file

    return load_file(checkpoint.path / MODEL_FILE)
