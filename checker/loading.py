"""Putting GPT-2's weights into a learner's module, with messages for what is off.

Hugging Face stores `c_attn`, `c_proj` and `c_fc` as Conv1D, with weights of
shape [in, out]; MAX's Linear, like torch's, stores [out, in]. `hf_state`
transposes them, so a module that uses Hugging Face's names loads GPT-2 by
name. `load_module` builds the learner's module without computing its random
initialisation, checks that it holds every parameter with the right shape,
and loads the weights.
"""

from __future__ import annotations

import numpy as np

from checker.learner import LearnerError
from checker.weights import Checkpoint

CONV1D = ("c_attn", "c_proj", "c_fc")
_MISSING = object()


def hf_state(checkpoint: Checkpoint, prefix: str, names: list[str]) -> dict[str, np.ndarray]:
    """`prefix + name` for each name, as float32, Conv1D weights transposed to [out, in]."""
    tensors = checkpoint.tensors([prefix + n for n in names])
    state = {}
    for n in names:
        t = tensors[prefix + n]
        if n.endswith("weight") and (prefix + n).split(".")[-2] in CONV1D:
            t = t.T
        state[n] = np.ascontiguousarray(t, dtype=np.float32)
    return state


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
    extra = {name: t for name, t in module.parameters if name not in state}  # e.g. a stored mask
    run.call(module.load_state_dict, {**state, **extra})
    return module
