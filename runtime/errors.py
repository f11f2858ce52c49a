"""MAX's and Mojo's errors in a learner's words, one line each (a Mojo compile error: its file, line, message
and source line). runtime.learner.explain uses them for whatever a learner's code raises.

    first_line(e)              "MAX could not build gather: input float32 [1024, 768], indices float32 [10]. ..."
    mojo_compile_error(text)   "your Mojo does not compile: steps/step_15_kernel/matvec.mojo line 54: ..."
    kernel_package_problem(p)  why MAX cannot load p as a custom op's Mojo package
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from runtime.paths import shown


def _dims(text: str) -> str:
    """'[Dim(2), Dim(3)]' -> '[2, 3]'"""
    return re.sub(r"Dim\(([^()]*)\)", r"\1", text)


_ELEMENTWISE = {"AddOp": "+", "SubOp": "-", "MulOp": "*", "DivOp": "/", "PowOp": "**", "MaxOp": "max", "MinOp": "min",
                "GreaterOp": ">", "GreaterEqualOp": ">=", "EqualOp": "==", "NotEqualOp": "!=", "SelectOp": "where"}
_OP_NAMES = {"MoGatherOp": "gather", "GatherOp": "gather", "MatmulOp": "a matmul (@)", "ReshapeOp": "reshape",
             "ConcatOp": "concat", "BroadcastToOp": "broadcast_to", "TransposeOp": "transpose",
             "SliceOp": "an index or slice (x[...])"}


def _operands(text: str) -> list[tuple[str, str, str]]:
    """(name, dtype, shape) of each TensorValue input in MAX's "Failed to create op" dump."""
    inputs = text.partition("Inputs:")[2].partition("Diagnostics:")[0]
    found = []
    for name, value in re.findall(r"^\s+(\w+) = (.*)$", inputs, flags=re.M):
        tensor = re.match(r"TensorValue\(dtype=(\w+), shape=(\[[^\]]*\])", value)
        if tensor:
            found.append((name, tensor.group(1), _dims(tensor.group(2))))
        elif name == "new_shape":
            found.append((name, "", _dims(value.strip())))
    return found


def _needs(op: str, operands: list[tuple[str, str, str]], reason: str) -> str:
    """What the op needs that its operands lack, in the learner's terms; '' when unknown."""
    dtypes = {dtype for _, dtype, _ in operands if dtype}
    if op in ("MoGatherOp", "GatherOp") and "integer" in reason:
        index = next((d for n, d, _ in operands if n == "indices"), "?")
        return (f"gather needs integer indices (int32 or int64), these are {index}: make them with "
                "dtype=DType.int64 (Tensor.arange and Tensor(...) give float32 unless told)")
    if "Unsafe cast" in reason or "dtype" in reason.lower() and len(dtypes) > 1:
        return (f"{_OP_NAMES.get(op) or _ELEMENTWISE.get(op, op)} needs operands of one dtype, these are "
                f"{' and '.join(sorted(dtypes))}: look for the tensor made without dtype=, or cast one "
                "(x.cast(DType.float32))")
    if op == "MatmulOp":
        return "a matmul needs the left operand's last axis to equal the right operand's second-to-last"
    if op == "SliceOp" and (m := re.search(r"(start|stop) index (-?\d+) out of range for dimension size (\d+)",
                                           reason)):
        size = int(m.group(3))
        return (f"index {m.group(2)} is past the end of an axis of size {size} (its entries are 0 to {size - 1}, "
                f"or -{size} to -1 from the end)")
    if op == "ReshapeOp":
        sizes = [str(int(np.prod([int(d) for d in re.findall(r"-?\d+", shape)]))) if re.fullmatch(r"\[[\d, ]*\]", shape)
                 else "?" for _, _, shape in operands]
        return f"reshape keeps the number of elements: {' vs '.join(sizes)}"
    symbols = re.search(r"\(value ([A-Za-z_]\w*)\).*\(value ([A-Za-z_]\w*)\)", reason)
    if op in _ELEMENTWISE and symbols:
        a, b = symbols.groups()
        return (f"compiled, the sizes {a!r} and {b!r} are two different symbols: they may be equal when it runs, "
                f"but MAX cannot know it. Derive one tensor's size from the other's (take both from one input), "
                f"or state it with F.rebind(x, [...]) naming the other's size, checked when it runs")
    if op in _ELEMENTWISE:
        return ("an elementwise op lines the shapes up from the last axis: each pair of sizes must be equal, or one "
                "of them 1")
    return ""


def _max_op_error(text: str) -> str | None:
    """MAX's "Failed to create op" dump, as the operands the learner's code made and what the op needs.

    'MAX could not build gather: input float32 [1024, 768], indices float32 [10]. gather needs integer
    indices (int32 or int64), these are float32: ...'
    MAX's own advice (a rebind) is kept only where it applies: both sizes in question symbolic.
    """
    op = re.match(r"Failed to create op '(\w+)'", text)
    if not op:
        return None
    operands = _operands(text)
    shown = ", ".join(f"{name} {dtype} {shape}".replace("  ", " ") for name, dtype, shape in operands)
    diagnostics = text.partition("Diagnostics:")[2] or text.partition("Inputs:")[2].split("\n\n", 1)[-1]
    reason = next((line.strip() for line in diagnostics.splitlines() if line.strip()), "")
    reason = re.sub(r"#mosh<ape(\[[^\]]*\])> : !mosh.ape", r"\1", reason)
    rebind = re.search(r"\(value (\w+)\).*\(value (\w+)\)", reason)
    symbolic = rebind and not (rebind.group(1).isdigit() or rebind.group(2).isdigit())
    if not symbolic:
        reason = re.sub(r"\s*(Insert an explicit|If you are confident|Insert an explicit cast).*$", "", reason)
    elementwise = f"'{_ELEMENTWISE[op.group(1)]}'" if op.group(1) in _ELEMENTWISE else op.group(1)
    name = _OP_NAMES.get(op.group(1)) or elementwise
    needs = _needs(op.group(1), operands, reason)
    return f"MAX could not build {name}: {shown}. {needs + ' (MAX: ' + reason + ')' if needs else reason}"


_TRANSLATED = [
    (r"^Concat inputs must all have the same rank\. vals=(.*)$",
     lambda m: "F.concat needs inputs of one rank, these are "
               + ", ".join(f"{_dims(s)} (rank {_dims(s).count(',') + 1 if _dims(s) != '[]' else 0})"
                           for s in re.findall(r"shape=(\[[^\]]*\])", m.group(1)))),
    (r"^int\(Dim\('(\w+)'\)\): Int conversions only supported for static dims",
     lambda m: f"int() of the symbolic dimension {m.group(1)!r}: compiled, the length is a symbol, not a number; "
               "pass the Dim itself to MAX ops (reshape, arange, broadcast_to take it)"),
    (r'^An error occurred in kernel entry point named "[^"]*":\nAn error occurred in kernel named "__custom__(\w+)":'
     r"\n(.*?)\n\n",
     lambda m: f"your Mojo kernel {m.group(1)} raised: {m.group(2).strip()}"),
    # an index out of range met while a kernel runs: MAX's kernel error, with its own message kept
    (r'^An error occurred in kernel entry point named "[^"]*":\n(?:An error occurred in kernel named "[^"]*":\n)*'
     r"gather index (-?\d+) is out of bounds for axis \d+ with size (\d+)",
     lambda m: f"F.gather was given index {m.group(1)}, but the axis it reads has {m.group(2)} entries (0 to "
               f"{int(m.group(2)) - 1}): look at how the indices are made (an id past the table, a position past "
               f"n_positions, an offset off by one)"),
    # a compiled graph called with inputs that disagree on one of its symbols
    (r'^An error occurred in kernel entry point named "[^"]*":\n(?:An error occurred in kernel named "[^"]*":\n)*'
     r"symbolic dimension '(\w+)' for input (\d+) does not match prior uses",
     lambda m: f"the compiled model was called with inputs that disagree on its symbolic dimension {m.group(1)!r}: "
               f"its input {m.group(2)} (counting from 0) has another {m.group(1)} than the inputs before it; every "
               f"input must have the same {m.group(1)} (a cache made for another number of sequences?)"),
    (r'^An error occurred in kernel entry point named "([^"]*)":\n(?:An error occurred in kernel named "[^"]*":\n)*'
     r"(.+)",
     lambda m: f"MAX's kernel {m.group(1).strip('_')} stopped: {m.group(2).strip()}"),
    # numpy's choice given weights that are not a distribution
    (r"^[Pp]robabilities do not sum to 1",
     lambda m: "numpy's choice was given probabilities that do not sum to 1 (p must be a distribution): after "
               "keeping some of them (top_k), divide by their sum, or take the softmax of the kept logits alone"),
    (r"^[Pp]robabilities are not non-negative",
     lambda m: "numpy's choice was given negative probabilities: pass it probabilities (a softmax of the logits), "
               "not the logits themselves"),
    (r"^when using dims to index into a list or NumPy array",
     lambda m: "a symbolic dimension (Dim) used where a Python int is needed (a list or numpy array): compiled, "
               "the length is a symbol; build the tensor with MAX ops, which take a Dim, not with numpy"),
]


def _translated(text: str) -> str | None:
    for pattern, say in _TRANSLATED:
        m = re.match(pattern, text, flags=re.S)
        if m:
            return say(m)
    return None


def first_line(e: BaseException) -> str:
    """An exception's message without MLIR dumps or stack noise, on one line; a long one is cut at a
    word, never inside one."""
    text = str(e).strip()
    line = _max_op_error(text) or _translated(text) or (text.splitlines()[0] if text else "")
    line = re.sub(r"\s+", " ", line)
    if len(line) <= 600:
        return line
    return line[:600].rsplit(" ", 1)[0] + " ..."


_DIAGNOSTIC = re.compile(r"^(?P<file>/[^:\n]+\.mojo):(?P<line>\d+):(?P<col>\d+): (?P<kind>error|warning|note): "
                         r"(?P<message>.*)$")


def mojo_compile_error(text: str) -> str:
    """'steps/step_15_kernel/matvec.mojo line 54: unknown declaration 'bq'' and the source line under it,
    for each error Mojo printed (at most 3); the text's last line when it printed none."""
    lines = text.splitlines()
    errors = []
    for i, line in enumerate(lines):
        found = _DIAGNOSTIC.match(line.strip())
        if found and found["kind"] == "error":
            source = [s.rstrip() for s in lines[i + 1:i + 3] if s.strip() and not _DIAGNOSTIC.match(s.strip())]
            where = f"{shown(Path(found['file']))} line {found['line']}"
            errors.append(f"{where}: {found['message']}" + "".join(f"\n    {s}" for s in source))
    if not errors:
        meaningful = [line for line in lines if line.strip() and "Crashpad" not in line]
        return meaningful[-1] if meaningful else text.strip()
    more = f"\n    (and {len(errors) - 3} more error{'s' * (len(errors) > 4)})" if len(errors) > 3 else ""
    return "your Mojo does not compile: " + "\n".join(errors[:3]) + more


# MAX's words when custom_extensions names something that is not a Mojo package (steps 15-16)
EXTENSION = re.compile(r"custom extension to Graph must be a Mojo source or binary package: (.+)$", re.M)


def kernel_package_problem(path: Path) -> str:
    """Why MAX cannot load `path` as a custom op's Mojo package: a folder holding an __init__.mojo."""
    if not path.exists():
        why = "there is no such folder"
    elif path.is_file():
        why = "it is a file: custom_extensions takes the folder that holds your .mojo files"
    else:
        why = "the folder has no __init__.mojo, which makes a folder of .mojo files a Mojo package"
    return (f"MAX cannot load your kernel from {shown(path)}: {why} (your kernel's folder, steps/step_NN_kernel, "
            "holds __init__.mojo and your kernel's .mojo file)")
