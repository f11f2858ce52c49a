"""The checker's imports go only down, and a new step's check needs nothing but its own module.

The contracts live in pyproject.toml ([tool.importlinter]); `lint-imports` checks them. These
tests run it on the checker as it is, on a copy with an import that goes up (it must fail and
name the modules), and look for import circles with grimp, the graph import-linter reads.
"""

import shutil
import subprocess
import tomllib

from checker.paths import REPO
from tests.conftest import run_python

LINT = ["-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
        "--no-cache"]


def _copy(tmp_path) -> dict:
    """A copy of the checker package and pyproject.toml; run_python's arguments to run from it first."""
    shutil.copytree(REPO / "checker", tmp_path / "checker", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return dict(cwd=tmp_path, timeout=300, env={"PYTHONPATH": str(tmp_path)})


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _lint_with(tmp_path, module: str, line: str) -> subprocess.CompletedProcess:
    """`lint-imports` on a copy of the checker where `line` is added at the end of `module`."""
    run = _copy(tmp_path)
    path = tmp_path / f"{module.replace('.', '/')}.py"
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402\n")
    return run_python(*LINT, **run)


def test_the_contracts_hold():
    done = run_python(*LINT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(_contracts()) == 5 and "5 kept, 0 broken" in done.stdout


def test_an_import_that_goes_up_breaks_the_contract(tmp_path):
    done = _lint_with(tmp_path, "checker.reporting.compare", "from checker.steps import step07")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "checker.reporting.compare -> checker.steps.step07" in done.stdout
    assert "the checker's imports go only down BROKEN" in done.stdout


def test_an_earlier_step_importing_a_later_one_breaks_the_contract(tmp_path):
    done = _lint_with(tmp_path, "checker.steps.step03", "from checker.steps.step09 import CATALOGUE")
    assert done.returncode == 1 and "checker.steps.step03 -> checker.steps.step09" in done.stdout, done.stdout


def test_int8_importing_serving_breaks_the_contract(tmp_path):
    done = _lint_with(tmp_path, "checker.steps.step16", "from checker.steps.step14 import PAGE_SIZE")
    assert done.returncode == 1 and "builds on the kernel (step 15), not on serving (step 14) BROKEN" in done.stdout, \
        done.stdout


def test_every_step_module_has_its_place_in_the_step_order():
    """A new module in checker/steps/ must be placed in the step-order contract, or that contract
    would not hold it."""
    import pkgutil

    import checker.steps

    contract = next(c for c in _contracts() if c.get("containers") == ["checker.steps"])
    placed = {name.strip() for layer in contract["layers"] for name in layer.replace("|", ":").split(":")}
    modules = {m.name for m in pkgutil.iter_modules(checker.steps.__path__)}
    assert modules == placed, f"place {sorted(modules - placed)} in pyproject.toml's step-order contract"


def test_step_15_importing_step_14_breaks_their_independence(tmp_path):
    done = _lint_with(tmp_path, "checker.steps.step15", "from checker.steps.step14 import CATALOGUE as _")
    assert done.returncode == 1 and "checker.steps.step15 -> checker.steps.step14" in done.stdout, done.stdout


def test_no_import_circles():
    import grimp

    graph = grimp.build_graph("checker", cache_dir=None)
    cycles = [(m, n) for m in graph.modules for n in graph.find_modules_directly_imported_by(m)
              if graph.chain_exists(importer=n, imported=m)]
    assert not cycles, cycles


THROWAWAY = '''"""A throwaway step: its check passes a file that defines `answer` as 42."""

from checker.harness.layout import defined
from checker.registry import Step, register
from checker.reporting.compare import Mistake
from checker.reporting.report import FAIL, PASS, Part, Report

CATALOGUE = [Mistake("answer-wrong", "answer is not 42", "set answer = 42")]


def check(path, checkpoint, *, timeout=300.0):
    report = Report("Step 17 · the answer", [])
    namespace = {}
    exec(path.read_text(), namespace)
    ok = "answer" in defined(path) and namespace["answer"] == 42
    report.parts.append(Part("answer", PASS if ok else FAIL, "42" if ok else "not 42"))
    return report


register(Step("17", check, CATALOGUE, reads=("answer",)))
'''

USE = """
import sys
from pathlib import Path
import checker.steps
from checker import registry
from checker.harness import layout
from checker.catalogue import markdown
print(list(registry.steps()))
print(markdown(["17"]))
for name, text in (("step_17.py", "answer = 42"), ("other.py", "answer = 41")):
    Path(name).write_text(text)
    print(name, layout.place(Path(name), "17").step, layout.check("17", Path(name), None, timeout=10).ok)
"""


def test_a_new_step_is_its_module_alone(tmp_path):
    """checker/steps/step17.py registers itself; the registry, the catalogue and the layout (which
    step a file is, and its check) all find it, and no machinery module changed."""
    run = _copy(tmp_path)
    (tmp_path / "checker" / "steps" / "step17.py").write_text(THROWAWAY)
    done = run_python("-c", USE, **run)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("'16', '17']") and "| `answer-wrong` | answer is not 42 | set answer = 42 |" in done.stdout
    assert "step_17.py 17 True" in lines and "other.py 17 False" in lines
    assert run_python(*LINT, **run).returncode == 0
