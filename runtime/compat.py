"""The MAX names of earlier releases, as a learner of Modular's online book wrote them, resolved
to this course's MAX (26.7) inside a check.

The online book followed MAX's Python API as it moved:

    MAX 25.7  max.nn.module_v3 (Module, Linear, Embedding, Sequential)  max.experimental.tensor
    MAX 26.1  max.nn (Module, Linear, Embedding, Sequential)  max.tensor  max.functional
    MAX 26.7  max.experimental.nn  max.experimental.tensor  max.experimental.functional

and in 26.7 `max.nn` is a different, layer-based API whose `Module` and `Linear` are other classes.
The book's skeletons also import earlier steps from its own `solutions.solution_NN`; here a
learner's steps build on the learner's own, so in steps/ those imports get `steps.step_NN`. Its
February 2026 layout imports them as plain `step_NN` (its own numbers, run from its steps/ folder):
that is the file step_NN.py beside the importing one (`steps.step_NN` in this course's steps/).

`install(is_learner_file)` puts a hook in front of `import` that acts only on imports written in a learner's file
(not this course's solutions): the names of 25.7 and 26.1 resolve to their 26.7 modules, and
`advice(path)` says which lines to change to run the file outside the check. MAX's own imports
are never touched.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from runtime.paths import REPO

VERSION = "26.7"  # the MAX this course pins
# Old module -> the 26.7 module that holds the same names.
MODULES = {
    "max.nn.module_v3": "max.experimental.nn",  # MAX 25.7
    "max.tensor": "max.experimental.tensor",  # MAX 26.1
    "max.functional": "max.experimental.functional",  # MAX 26.1
}
# MAX 26.1's `max.nn` held the module API that 26.7 keeps in max.experimental.nn.
NN_26_1 = {"Module", "Linear", "Embedding", "Sequential", "ModuleList"}
SOLUTION = re.compile(r"^solutions\.solution_(\d\d)$")
SIBLING = re.compile(r"^step_(\d\d)$")  # the online book's February 2026 layout: from step_NN import ...

_original_import = builtins.__import__
_is_learner_file = None  # runtime.learner.is_learner_file, set by install()
_learner_files: dict[str, bool] = {}  # file -> written by the learner (not this course's solutions)


def _from_learner(globals_: dict | None) -> bool:
    file = (globals_ or {}).get("__file__")
    if not file:
        return False
    if file not in _learner_files:
        _learner_files[file] = _is_learner_file(file) and not Path(file).resolve().is_relative_to(REPO / "solutions")
    return _learner_files[file]


def _in_steps(file: str) -> bool:
    """A learner's workspace file, steps/step_NN.py, where the book's solutions.solution_NN imports
    mean the learner's own steps (a copy elsewhere, as the test suite makes, keeps its imports)."""
    return Path(file).parent.name == "steps"


def sibling(name: str, file: str) -> str | None:
    """`import step_NN` written in `file`: the name of the module of step_NN.py in the same folder, imported
    now (`steps.step_NN` for this course's steps/, else a name of its own per folder); None when the
    folder has no such file."""
    path = Path(file).resolve().parent / f"{name}.py"
    if not path.exists():
        return None
    if path.parent == REPO / "steps":
        return f"steps.{name}"
    module_name = f"{name}__{hashlib.sha256(str(path.parent).encode()).hexdigest()[:12]}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return module_name


class _Mixed(ModuleType):
    """26.7's `max.nn` with 26.1's module API names taken from max.experimental.nn."""

    def __init__(self):
        super().__init__("max.nn")
        self._nn = importlib.import_module("max.nn")
        self._new = importlib.import_module("max.experimental.nn")

    def __getattr__(self, name):
        return getattr(self._new if name in NN_26_1 else self._nn, name)


_mixed: _Mixed | None = None


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and _from_learner(globals):
        if (solution := SOLUTION.match(name)) and _in_steps(globals["__file__"]):
            name = f"steps.step_{solution.group(1)}"
        elif SIBLING.match(name) and (found := sibling(name, globals["__file__"])):
            return importlib.import_module(found)
        new = MODULES.get(name)
        if new is not None:
            module = importlib.import_module(new)
            if fromlist:
                return module
            # `import max.tensor as T` binds through sys.modules["max.tensor"] after this returns.
            sys.modules.setdefault(name, module)
            return _original_import("max", globals, locals, (), 0)
        if name == "max.nn" and fromlist and NN_26_1.intersection(fromlist):
            global _mixed
            _mixed = _mixed or _Mixed()
            return _mixed
    return _original_import(name, globals, locals, fromlist, level)


def install(is_learner_file) -> None:
    """Resolve the old names in learner files from now on (idempotent); `is_learner_file(filename)`
    says which files are the learner's."""
    global _is_learner_file
    _is_learner_file = is_learner_file
    builtins.__import__ = _import


def advice(path: Path) -> list[str]:
    """What to change in `path` to run it with MAX 26.7 outside the check, one line per import;
    empty when the file already uses 26.7's names."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [a.name for a in node.names]
            if (solution := SOLUTION.match(node.module)) and _in_steps(str(path)):
                lines.append(f"line {node.lineno}: from {node.module} import ... is your "
                             f"steps/step_{solution.group(1)}.py here (this course's steps build on your own)")
            elif node.module in MODULES:
                lines.append(f"line {node.lineno}: from {node.module} import ... -> "
                             f"from {MODULES[node.module]} import ...")
            elif node.module == "max.nn" and NN_26_1.intersection(names):
                lines.append(f"line {node.lineno}: from max.nn import {', '.join(sorted(NN_26_1.intersection(names)))} "
                             "(MAX 26.1) -> from max.experimental.nn import ...")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES:
                    lines.append(f"line {node.lineno}: import {a.name} -> import {MODULES[a.name]}")
    return lines
