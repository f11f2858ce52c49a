"""Runs a learner's code and turns whatever goes wrong into a short message.

Nothing here changes the learner's files: a step file is imported from its
path under a private module name, and every call into it goes through
`call`, which catches exceptions, captures printed output, enforces a time
limit and reports the learner's own line rather than a MAX or MLIR traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import io
import linecache
import os
import re
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from checker.running import compat
from checker.paths import REPO, shown

_OURS = (REPO / "checker", REPO / ".venv")


class LearnerError(Exception):
    """The learner's code failed; `str()` is the message to show."""

    def __init__(self, message: str, *, todo: bool = False, where: str | None = None):
        super().__init__(message)
        self.todo = todo  # raised NotImplementedError: a part not written yet
        self.where = where  # "steps/step_07.py:42" when known


def is_learner_file(filename: str) -> bool:
    """A file the learner wrote (a step file, wherever it lives), not ours, MAX's or Python's."""
    path = Path(filename)
    if not path.is_absolute() or not path.exists():
        return False
    path = path.resolve()
    if path.is_relative_to(REPO):
        return not any(path.is_relative_to(p) for p in _OURS)
    # A step file checked from elsewhere (the test suite's copies) is not in site-packages.
    return "site-packages" not in path.parts and not path.is_relative_to(Path(sys.base_prefix))


def _learner_line(tb) -> tuple[str, str] | None:
    """The deepest frame in learner code: ('steps/step_07.py:42', source line)."""
    frames = [f for f in traceback.extract_tb(tb) if is_learner_file(f.filename)]
    if not frames:
        return None
    f = frames[-1]
    return f"{shown(Path(f.filename))}:{f.lineno}", (f.line or "").strip()


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
    if op == "SliceOp" and (m := re.search(r"(start|stop) index (-?\d+) out of range for dimension size (\d+)", reason)):
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
    name = _OP_NAMES.get(op.group(1)) or (f"'{_ELEMENTWISE[op.group(1)]}'" if op.group(1) in _ELEMENTWISE else op.group(1))
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
    (r'^An error occurred in kernel entry point named "([^"]*)":\n(?:An error occurred in kernel named "[^"]*":\n)*'
     r"(.+)",
     lambda m: f"MAX's kernel {m.group(1).strip('_')} stopped: {m.group(2).strip()}"),
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


def _first_line(e: BaseException) -> str:
    """An exception's message without MLIR dumps or stack noise, on one line; a long one is cut at a
    word, never inside one."""
    text = str(e).strip()
    line = _max_op_error(text) or _translated(text) or (text.splitlines()[0] if text else "")
    line = re.sub(r"\s+", " ", line)
    if len(line) <= 600:
        return line
    return line[:600].rsplit(" ", 1)[0] + " ..."


def _step_of(where: str | None) -> str | None:
    m = re.search(r"step_(\d\d)\.py", where or "")
    return m.group(1) if m else None


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
    more = f"\n    (and {len(errors) - 3} more errors)" if len(errors) > 3 else ""
    return "your Mojo does not compile: " + "\n".join(errors[:3]) + more


# MAX's words when custom_extensions names something that is not a Mojo package (steps 15-16)
_EXTENSION = re.compile(r"custom extension to Graph must be a Mojo source or binary package: (.+)$", re.M)


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


def explain(e: BaseException, *, checking: Path | None = None) -> LearnerError:
    """Turns an exception raised by learner code into a LearnerError."""
    if isinstance(e, LearnerError):
        return e
    loc = _learner_line(e.__traceback__)
    where, source = loc if loc else (None, "")
    at = f"\n    at {where}: {source}" if where else ""
    if isinstance(e, NotImplementedError) and where is None:
        last = traceback.extract_tb(e.__traceback__)[-1]
        if "max" in Path(last.filename).parts and last.name == "forward":
            return LearnerError("your class defines no forward(): MAX's Module calls forward, so name the method "
                                "exactly that")
    if isinstance(e, NotImplementedError):
        other = _step_of(where)
        mine = _step_of(str(checking)) if checking else None
        if other and mine and other != mine:
            return LearnerError(
                f"needs step {other}, which is not finished ({where} raises NotImplementedError): "
                f"finish step {other} first (pixi run s{other})",
                todo=True,
                where=where,
            )
        return LearnerError(f"not implemented yet ({where or 'NotImplementedError'})", todo=True, where=where)
    if isinstance(e, ModuleNotFoundError) and (e.name or "").startswith("max."):
        return LearnerError(f"MAX {compat.VERSION} has no module {e.name}: a name of an earlier MAX that the check "
                            f"cannot map. This course uses {compat.VERSION}'s max.experimental.nn, "
                            f"max.experimental.tensor and max.experimental.functional{at}", where=where)
    if isinstance(e, ImportError) and (e.name or "").startswith("max.") and e.name_from:
        return LearnerError(f"MAX {compat.VERSION}'s {e.name} has no {e.name_from}: a name of an earlier MAX, "
                            f"renamed or removed since{at}", where=where)
    if type(e).__name__ == "MojoCompilationError":  # a custom op's Mojo package (step 15)
        return LearnerError(mojo_compile_error(str(e)), where=where)
    if isinstance(e, ValueError) and (found := _EXTENSION.search(str(e))):
        return LearnerError(kernel_package_problem(Path(found[1])) + at, where=where)
    if isinstance(e, RecursionError):
        return LearnerError(f"infinite recursion: a method calls itself{at}", where=where)
    return LearnerError(f"{type(e).__name__}: {_first_line(e)}{at}", where=where)


def package_of(folder: Path) -> str:
    """The package a step file's folder is, for its relative imports (`from .step_01 import GPT2Config`,
    the online book's layout, its steps folder a package): `steps` or `solutions` for the course's own,
    else a package of its own per folder, made now, whose modules are that folder's files."""
    folder = folder.resolve()
    for known in ("steps", "solutions"):
        if folder == REPO / known:
            return known
    name = f"steps__{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}"  # checker.harness.deps reads it
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [str(folder)]
        package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        package.__spec__.submodule_search_locations = [str(folder)]
        sys.modules[name] = package
    return name


def import_step(path: Path, name: str, *, timeout: float = 0) -> ModuleType:
    """Imports a step file from its path, reporting syntax and import errors briefly. The file is a
    module of its folder's package (package_of), so relative imports of its sibling steps work."""
    if not path.exists():
        raise LearnerError(f"{shown(path)} does not exist")
    compat.install(is_learner_file)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # so `from steps.step_01 import ...` resolves
    spec = importlib.util.spec_from_file_location(f"{package_of(path.parent)}.{name}", path)
    module = importlib.util.module_from_spec(spec)
    linecache.checkcache(str(path))
    try:
        with _quiet(), _time_limit(timeout, f"importing {shown(path)}"):
            spec.loader.exec_module(module)
    except SyntaxError as e:  # includes IndentationError
        text = (e.text or "").rstrip()
        pointer = f"\n    {text}\n    {' ' * max((e.offset or 1) - 1 - (len(text) - len(text.lstrip())), 0)}^" if text else ""
        raise LearnerError(
            f"{type(e).__name__} in {shown(Path(e.filename or path))} line {e.lineno}: {e.msg}{pointer}",
            where=f"{shown(Path(e.filename or path))}:{e.lineno}",
        ) from None
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        err = explain(e, checking=path)
        raise LearnerError(f"importing {shown(path)} failed: {err}", todo=err.todo, where=err.where) from None
    return module


@dataclass
class Printed:
    """What learner code printed while being checked, kept out of the verdict."""

    text: str = ""


_printed = Printed()


@contextlib.contextmanager
def _quiet():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            yield
        finally:
            _printed.text += out.getvalue()


def printed() -> str:
    """Everything learner code printed so far in this process (and forget it)."""
    text, _printed.text = _printed.text, ""
    return text


class _Timeout(BaseException):
    pass


_limits_hit = 0  # time limits reached in this process so far (checker.harness.verdicts keeps no verdict cut short)


def limits_hit() -> int:
    """How many times a call into learner code ran past its time limit in this process."""
    return _limits_hit


GRACE = 5.0  # seconds past the time limit before the watchdog stops a check stuck in native code


def _give_up(doing: str, timeout: float) -> None:
    """The last resort when code stuck outside Python (inside a MAX compile or kernel) ignores the alarm."""
    print(f"\n{doing}: no result after {timeout:g} s, and it could not be interrupted: stuck inside MAX "
          "(compiling or running a kernel)? Stopped the check. Raise the limit with --timeout.",
          file=sys.__stdout__, flush=True)  # sys.stdout may be capturing the learner's prints
    os._exit(1)


@contextlib.contextmanager
def _time_limit(timeout: float, doing: str):
    """Raises LearnerError if the block runs longer than `timeout` seconds (0: no limit).

    A SIGALRM interrupts Python code; native code only sees it when it returns,
    so a watchdog thread ends the process if that takes a further GRACE.
    """

    def alarm(signum, frame):
        raise _Timeout()

    use_alarm = timeout > 0 and hasattr(signal, "SIGALRM")
    if use_alarm:
        previous = signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        watchdog = threading.Timer(timeout + max(GRACE, timeout / 10), _give_up, (doing, timeout))
        watchdog.daemon = True
        watchdog.start()
    try:
        yield
    except _Timeout:
        global _limits_hit
        _limits_hit += 1
        loc = _learner_line(sys.exc_info()[2])
        at = f"\n    at {loc[0]}: {loc[1]}" if loc else ""
        raise LearnerError(
            f"{doing}: no result after {timeout:g} s: an infinite loop? (raise the limit with --timeout){at}",
            where=loc[0] if loc else None,
        ) from None
    finally:
        if use_alarm:
            watchdog.cancel()
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def call(fn, *args, timeout: float, checking: Path | None = None, **kwargs):
    """Calls learner code: returns its result or raises LearnerError."""
    try:
        with _quiet(), _time_limit(timeout, "your code"):
            return fn(*args, **kwargs)
    except LearnerError:
        raise
    except Exception as e:
        raise explain(e, checking=checking) from None
