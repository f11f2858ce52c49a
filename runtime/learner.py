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

from runtime import compat
from runtime.errors import EXTENSION, first_line, kernel_package_problem, mojo_compile_error
from runtime.paths import REPO, shown

# The course's own code and the installed packages: a frame there is never the learner's.
_OURS = tuple(REPO / name for name in ("checker", "runtime", "gpt2_arch", "bench", "explore", "book", "gpt2", ".venv"))


class LearnerError(Exception):
    """The learner's code failed; `str()` is the message to show."""

    def __init__(self, message: str, *, todo: bool = False, where: str | None = None, not_run: bool = False):
        super().__init__(message)
        self.todo = todo  # raised NotImplementedError: a part not written yet
        self.where = where  # "steps/step_07.py:42" when known
        self.not_run = not_run  # the code was not called (it ran out of time in an earlier part)


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


def _step_of(where: str | None) -> str | None:
    m = re.search(r"(?:step|solution)_(\d\d)\.py", where or "")
    return m.group(1) if m else None


def _held(value) -> str | None:
    """'[1, 50257]' for an array or a tensor, 'a list of 10' for a list; None for anything else."""
    if (shape := getattr(value, "shape", None)) is not None and hasattr(value, "dtype"):
        return str([int(d) for d in shape])
    return f"a list of {len(value)}" if isinstance(value, list) else None


def _called_from(tb, checking: Path) -> str:
    """When the error is raised inside another step's function, the line of the checked file that called it and
    what that call handed it (its arguments' shapes): that step passes its own check, so the call is suspect."""
    entries = list(traceback.walk_tb(tb))
    ours = [i for i, (frame, _) in enumerate(entries) if Path(frame.f_code.co_filename).resolve() == checking]
    if not ours or ours[-1] + 1 >= len(entries):
        return ""
    (caller, line), (callee, _) = entries[ours[-1]], entries[ours[-1] + 1]
    other = _step_of(callee.f_code.co_filename)
    if other in (None, _step_of(str(checking))):
        return ""
    code = callee.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    handed = ", ".join(f"{n} {held}" for n in names if (held := _held(callee.f_locals.get(n))))
    source = linecache.getline(caller.f_code.co_filename, line).strip()
    return (f"\n    called from {shown(checking)}:{line}: {source}\n    step {other}'s {code.co_name} raised it"
            + (f", handed {handed}" if handed else "") + f": is that what step {other} takes?")


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
    if isinstance(e, ValueError) and (found := EXTENSION.search(str(e))):
        return LearnerError(kernel_package_problem(Path(found[1])) + at, where=where)
    if isinstance(e, RecursionError):
        return LearnerError(f"infinite recursion: a method calls itself{at}", where=where)
    called = _called_from(e.__traceback__, checking.resolve()) if checking else ""
    return LearnerError(f"{type(e).__name__}: {first_line(e)}{at}{called}", where=where)


def package_of(folder: Path) -> str:
    """The package a step file's folder is, for its relative imports (`from .step_01 import GPT2Config`,
    the online book's layout, its steps folder a package): `steps` or `solutions` for the course's own,
    else a package of its own per folder, made now, whose modules are that folder's files."""
    folder = folder.resolve()
    for known in ("steps", "solutions"):
        if folder == REPO / known:
            return known
    name = f"steps__{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}"  # imported_steps reads it
    if name not in sys.modules:
        package = ModuleType(name)
        package.__path__ = [str(folder)]
        package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        package.__spec__.submodule_search_locations = [str(folder)]
        sys.modules[name] = package
    return name


# steps.step_NN, solutions.solution_NN, the online book's February layout's plain step_NN (compat), and a
# step imported relatively from a folder of its own (package_of)
_STEP = re.compile(r"^(?:steps(?:__[0-9a-f]+)?\.step|solutions\.solution|step)_(\d\d)(?:__[0-9a-f]+)?$")


def imported_steps(module: ModuleType) -> dict[str, ModuleType]:
    """{"03": module, ...}: the step files `module` uses, directly or through each other, by each file's
    own number, read from the names the modules hold (a class, a function, a module)."""
    found: dict[str, ModuleType] = {}
    todo = [module]
    while todo:
        mod = todo.pop()
        for value in vars(mod).values():
            name = getattr(value, "__module__", None) or (value.__name__ if isinstance(value, ModuleType) else None)
            m = _STEP.match(name or "")
            if m and m.group(1) not in found and name in sys.modules:
                found[m.group(1)] = sys.modules[name]
                todo.append(sys.modules[name])
    return found


def import_step(path: Path, name: str, *, timeout: float = 0) -> ModuleType:
    """Imports a step file from its path, reporting syntax and import errors briefly. The file is a
    module of its folder's package (package_of), so relative imports of its sibling steps work."""
    if not path.exists():
        raise LearnerError(f"{shown(path)} does not exist")
    compat.install(is_learner_file)
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))  # so `from steps.step_01 import ...` resolves
    spec = importlib.util.spec_from_file_location(f"{package_of(path.parent)}.{name}", path)
    if spec is None or not path.is_file():
        raise LearnerError(f"{shown(path)} is not a Python file: a step is a .py file (steps/step_NN.py)")
    module = importlib.util.module_from_spec(spec)
    linecache.checkcache(str(path))
    try:
        with _quiet(), _time_limit(timeout, f"importing {shown(path)}"):
            spec.loader.exec_module(module)
    except SyntaxError as e:  # includes IndentationError
        text = (e.text or "").rstrip()
        pointer = (f"\n    {text}\n    {' ' * max((e.offset or 1) - 1 - (len(text) - len(text.lstrip())), 0)}^"
                   if text else "")
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


_limits_hit = 0  # time limits reached in this process so far (a verdict cut short is not kept)


def limits_hit() -> int:
    """How many times a call into learner code ran past its time limit in this process."""
    return _limits_hit


def limit_hit() -> None:
    """Counts a time limit reached outside `call` (learner code run in a child process, stopped by its limit),
    so that the verdict is cut short and not kept, as for code stopped here: on a loaded machine a right kernel
    can take longer than the limit, and the check inside a later step's must not remember it as failing."""
    global _limits_hit
    _limits_hit += 1


GRACE = 5.0  # seconds past the time limit before the watchdog stops a check stuck in native code


def _give_up(doing: str, timeout: float) -> None:
    """The last resort when code stuck outside Python (inside a MAX compile or kernel) ignores the alarm."""
    print(f"\n{doing}: no result after {timeout:g} s, and it could not be interrupted: stuck inside MAX "
          "(compiling or running a kernel)? Stopped the check. Raise the limit with --timeout.",
          file=sys.__stdout__, flush=True)  # sys.stdout may be capturing the learner's prints
    os._exit(1)


def _why_slow(tb) -> str:
    """What a call stopped at its time limit was doing, as far as its stack and the machine tell: MAX compiling
    (slow on a busy machine, said with its load), or an infinite loop."""
    inside_max = any("/max/" in frame.filename and re.search(r"compile|load", frame.name)
                     for frame in traceback.extract_tb(tb))
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    busy = f"; the machine is busy (load {load:.1f} on {cores} cores)" if load > 1.5 * cores else ""
    if inside_max:
        return f"still inside MAX's compile{busy or ' (a compile takes minutes on a busy or small machine)'}"
    return f"an infinite loop?{busy}"


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
        limit_hit()
        tb = sys.exc_info()[2]
        loc = _learner_line(tb)
        at = f"\n    at {loc[0]}: {loc[1]}" if loc else ""
        raise LearnerError(f"{doing}: no result after {timeout:g} s: {_why_slow(tb)} (raise the limit with --timeout)"
                           f"{at}", where=loc[0] if loc else None) from None
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
