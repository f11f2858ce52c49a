"""The house's habits: ruff's checks as pyproject.toml configures them (import order, unused and
undefined names, line length), and imports at a module's top, but for the modules that take seconds to
import, each module that defers one saying so once at its top."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.paths import REPO

PACKAGES = ("runtime", "checker", "gpt2", "gpt2_arch", "bench", "explore", "book")
# What takes seconds to import, and so may be imported inside a function; a first-party module is never.
SLOW = {"max", "torch", "transformers", "safetensors", "tokenizers", "huggingface_hub", "openai", "matplotlib",
        "watchdog", "llama_cpp", "PIL", "solutions"}
# Where a first-party import must wait: the grader's command, until the interpreter and the packages are known
# good; the book's MkDocs hooks, loaded by path, until the repository is on sys.path; the bench's served split,
# until it is asked for (gpt2_arch imports MAX's serving stack, ~5 s, which every other bench would wait on).
WAITS = {"checker/__main__.py": {"checker"}, "book/hooks.py": {"book"}, "bench/served_split.py": {"gpt2_arch"},
         "bench/again.py": {"gpt2_arch"}}


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", *args], cwd=REPO, capture_output=True, text=True)


def test_ruff_finds_nothing():
    done = _ruff(".")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_finds_an_unused_import(tmp_path):
    """The same command on a module with an unused import and imports out of order fails and names both."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nprint(os.sep)\n")
    done = _ruff("--no-cache", "--config", str(REPO / "pyproject.toml"), str(bad))
    assert done.returncode == 1 and "F401" in done.stdout and "I001" in done.stdout, done.stdout


def _deferred(path: Path) -> set[str]:
    """The top-level names of the modules `path` imports inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom) and not sub.level:
                    found.add(sub.module.split(".")[0])
                elif isinstance(sub, ast.Import):
                    found.update(a.name.split(".")[0] for a in sub.names)
    return found


MODULES = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(REPO)) for p in MODULES])
def test_imports_wait_only_for_what_is_slow_and_say_so(path):
    name = str(path.relative_to(REPO))
    deferred = _deferred(path)
    allowed = SLOW | WAITS.get(name, set())
    assert deferred <= allowed, f"{name} imports {sorted(deferred - allowed)} inside a function: import it at the top"
    if deferred:
        head = "\n".join(path.read_text().splitlines()[:80])
        assert "imported inside" in head, f"{name} defers {sorted(deferred)}: say so once at its top"


def test_the_rule_finds_a_deferred_first_party_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from runtime.paths import REPO\n    return REPO\n")
    assert _deferred(module) == {"runtime"} and not _deferred(module) <= SLOW
