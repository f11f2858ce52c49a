"""Progressive hints, and the reference for one part: `--hint` and `--solution`.

    pixi run s07 --hint       the next hint for the first failing part (run again for the next one)
    pixi run s07 --solution   the solution's code for that part only

Each step's folder holds its ladders (checker/steps/stepNN/hints.py): HINTS[part] is a ladder of at
least three rungs: the idea, then the API to use with a link to its reference page, then a line close
to the code (never a whole line of the solution; `--solution` stays the last resort). A part name that
is not a key is matched by its first word (step 06 names its parts after the positions it asks for).
SOURCES[part] names the solution code that part checks: a function, `Class.method`, or `Class.field`.
How far a learner has got in the hints of a part is kept in .cache/hints.json.
"""

from __future__ import annotations

import ast
import json

from checker import registry
from runtime import paths

STATE = paths.REPO / ".cache" / "hints.json"


def _key(table: dict[str, object], part: str) -> str | None:
    """The key of `table` for `part`: the part's name, or the longest key it starts with as words."""
    if part in table:
        return part
    fits = [k for k in table if part.startswith(k + " ") or part.startswith(k + ",")]
    return max(fits, key=len, default=None)


def hints_for(step: str, part: str) -> list[str]:
    hints = registry.step(step).hints
    key = _key(hints, part)
    return hints[key] if key else []


def next_hint(step: str, part: str) -> str:
    """The next hint for `part` (the first, if the learner was on another part), numbered."""
    hints = hints_for(step, part)
    if not hints:
        return f"No hints are written for {part!r}."
    try:
        state = json.loads(STATE.read_text())
    except (OSError, ValueError):
        state = {}
    seen = state.get(step, {})
    level = seen["level"] + 1 if seen.get("part") == part else 1
    if level > len(hints):
        return (f"No more hints for {part} (all {len(hints)} shown above, last: {hints[-1]})\n"
                f"See the reference for this part: pixi run s{step} --solution")
    state[step] = {"part": part, "level": level}
    paths.save(STATE, lambda tmp: tmp.write_text(json.dumps(state, indent=1)))  # read-only: the next hint repeats
    more = ("run again for the next one" if level < len(hints)
            else f"last one; pixi run s{step} --solution shows the code")
    return f"hint {level} of {len(hints)} for {part}: {hints[level - 1]}\n({more})"


def _find(tree: ast.Module, qualname: str) -> ast.AST | None:
    node: ast.AST = tree
    for name in qualname.split("."):
        node = next((n for n in getattr(node, "body", []) if _named(n) == name), None)
        if node is None:
            return None
    return node


def _named(node: ast.AST) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def reference_code(step: str, part: str) -> str | None:
    """The lines of the solution that `part` checks, or None if that part has no single piece of code."""
    sources = registry.step(step).sources
    key = _key(sources, part)
    if key is None:
        return None
    path = paths.step_file(step, solution=True)
    source = path.read_text()
    node = _find(ast.parse(source), sources[key])
    if node is None:
        return None
    lines = source.splitlines()[node.lineno - 1 - len(getattr(node, "decorator_list", [])):node.end_lineno]
    return f"# {paths.shown(path)}, line {node.lineno}: {sources[key]}\n" + "\n".join(lines)
