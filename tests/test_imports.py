"""The house holds: the runtime imports nothing of the grader or the commands, the commands use only
the grader's public surface, the grader's imports go only down, a step's check builds on earlier steps'
checks only, and a new step is its folder alone.

The contracts live in pyproject.toml ([tool.importlinter]); `lint-imports` checks them. These tests run
it on the house as it is and on copies with an import that breaks a contract (it must fail and name the
modules); the step order and import circles are read with grimp, the graph import-linter reads.
"""

import re
import shutil
import subprocess
import tomllib

import grimp
import pytest

from checker import registry
from runtime.paths import REPO
from tests.conftest import run_python

LINT = ["-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
        "--no-cache"]
PACKAGES = ("runtime", "checker", "gpt2", "gpt2_arch", "bench", "explore", "book")


def _copy(tmp_path) -> dict:
    """A copy of the house's packages and pyproject.toml; run_python's arguments to run from it first."""
    for name in PACKAGES:
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "generated", "docs"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return dict(cwd=tmp_path, timeout=300, env={"PYTHONPATH": str(tmp_path)})


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _with_line(root, module: str, line: str) -> None:
    path = root / f"{module.replace('.', '/')}.py"
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    path.write_text(path.read_text() + f"\n{line}  # noqa: E402\n")


def _lint_with(tmp_path, module: str, line: str) -> subprocess.CompletedProcess:
    """`lint-imports` on a copy of the house where `line` is added at the end of `module`."""
    run = _copy(tmp_path)
    _with_line(tmp_path, module, line)
    return run_python(*LINT, **run)


def test_the_contracts_hold():
    done = run_python(*LINT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    n = len(_contracts())
    assert n == 9 and f"{n} kept, 0 broken" in done.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("runtime.compiling", "from checker import registry", "the runtime stands on its own"),
    ("runtime.server", "import bench.serve", "the runtime stands on its own"),
    ("gpt2.__main__", "from checker.harness import verdicts", "outside the grader, only its public surface"),
    ("bench.serve", "from checker.steps.step14 import served", "outside the grader, only its public surface"),
    ("checker.reporting.compare", "from checker.steps import step07", "the grader's imports go only down"),
    ("checker.steps.step16.check", "from checker.steps.step14 import reference", "int8 (step 16) builds on the kernel"),
    ("checker.steps.step15.check", "from checker.steps.step14 import mistakes", "serving (step 14) and the kernels"),
    ("checker.diagnosis.localise_attention", "from checker.diagnosis import compiled",
     "attention's sub-part probes stand apart"),
])
def test_an_import_that_breaks_a_contract_is_named(tmp_path, module, line, broken):
    done = _lint_with(tmp_path, module, line)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(re.escape(broken) + r"[^\n]*(\n[^\n]*)?BROKEN", done.stdout), done.stdout[-3000:]
    assert module in done.stdout, done.stdout[-3000:]


def _step_order_problems(root) -> list[str]:
    """Each import, direct or not, of a step's check by an earlier step's (checker/steps/stepNN/), and of
    the online book's checks by any step: the steps' folders in the order of their numbers."""
    graph = grimp.build_graph("checker", cache_dir=None)
    folders = sorted(p.name for p in (root / "checker" / "steps").iterdir() if re.fullmatch(r"step\d\d", p.name))
    problems = []
    for i, earlier in enumerate(folders):
        for later in [*folders[i + 1:], "online_book"]:
            if graph.chain_exists(importer=f"checker.steps.{earlier}", imported=f"checker.steps.{later}",
                                  as_packages=True):
                problems.append(f"checker.steps.{earlier} -> checker.steps.{later}")
    return problems


def test_a_step_builds_on_earlier_steps_only():
    assert _step_order_problems(REPO) == []


def _step_order_in(tmp_path, run: dict) -> str:
    """_step_order_problems of the copy of the house in `tmp_path`, read by a process of its own."""
    shutil.copytree(REPO / "tests", tmp_path / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", "book*", "variants"))
    script = ("import sys; sys.path.insert(0, '.'); from pathlib import Path; "
              "from tests.test_imports import _step_order_problems; print(_step_order_problems(Path('.')))")
    done = run_python("-c", script, **run)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_an_earlier_step_importing_a_later_one_is_named(tmp_path):
    run = _copy(tmp_path)
    _with_line(tmp_path, "checker.steps.step03.check", "from checker.steps.step09 import mistakes")
    assert "checker.steps.step03 -> checker.steps.step09" in _step_order_in(tmp_path, run)


def test_no_import_circles():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = [(m, n) for m in graph.modules for n in graph.find_modules_directly_imported_by(m)
              if graph.chain_exists(importer=n, imported=m)]
    assert not cycles, cycles


def test_no_command_stands_on_a_step_module():
    """Outside the grader, nothing reaches a step's folder, even through the public surface: the commands
    ask the registry (checker.api, checker.registry), which finds the folders by name."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    reached = [(source, step) for source in ("gpt2", "gpt2_arch", "bench", "explore", "book") for step in
               graph.find_children("checker.steps")
               if graph.chain_exists(importer=source, imported=step, as_packages=True)]
    assert not reached, reached


THROWAWAY = '''"""Step 19: a throwaway step, whose check passes a file that defines `answer` as 42."""

from checker.harness.layout import defined
from checker.registry import Step
from checker.reporting.compare import Edit, Mistake
from checker.reporting.report import FAIL, PASS, Part, Report

CATALOGUE = [Mistake("answer-wrong", "answer is not 42", "set answer = 42", edit=Edit("42", "41"))]


def check(path, checkpoint, *, timeout=300.0):
    report = Report("Step 19 · the answer", [])
    namespace = {}
    exec(path.read_text(), namespace)
    ok = "answer" in defined(path) and namespace["answer"] == 42
    report.parts.append(Part("answer", PASS if ok else FAIL, "42" if ok else "not 42"))
    return report


STEP = Step("19", check, CATALOGUE, reads=("answer",), hints={"answer": ["the idea", "the API", "the code"]},
            sources={"answer": "answer"})
'''

USE = """
from pathlib import Path
from checker import hints, registry
from checker.harness import layout
from checker.catalogue import markdown
print(list(registry.steps()))
print(markdown(["19"]))
print(hints.hints_for("19", "answer"))
for name, text in (("step_19.py", "answer = 42"), ("other.py", "answer = 41")):
    Path(name).write_text(text)
    print(name, layout.place(Path(name), "19").step, layout.check("19", Path(name), None, timeout=10).ok)
"""


def test_a_new_step_is_its_folder_alone(tmp_path):
    """checker/steps/step19/ declares its STEP; the registry, the catalogue, the hints and the layout (which
    step a file is, and its check) all find it, the contracts and the step order hold, and no machinery
    module changed."""
    run = _copy(tmp_path)
    folder = tmp_path / "checker" / "steps" / "step19"
    folder.mkdir()
    (folder / "__init__.py").write_text(THROWAWAY)
    done = run_python("-c", USE, **run)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("'17', '18', '19']")
    assert "| `answer-wrong` | answer is not 42 | set answer = 42 |" in done.stdout
    assert "['the idea', 'the API', 'the code']" in done.stdout
    assert "step_19.py 19 True" in lines and "other.py 19 False" in lines
    assert run_python(*LINT, **run).returncode == 0
    assert _step_order_in(tmp_path, run).strip() == "[]"


def test_the_registry_says_how_to_add_a_step():
    """registry.py's docstring says in one line what a new step is; every registered step has all of it."""
    doc = registry.__doc__
    assert "A new step is a new folder `checker/steps/stepNN/`, beside its skeleton, solution and book page." in doc
    for number, step in registry.steps().items():
        assert (REPO / "checker" / "steps" / f"step{number}" / "__init__.py").exists(), number
        assert ((REPO / "steps" / f"step_{number}.py").exists()
                and (REPO / "solutions" / f"solution_{number}.py").exists())
        assert (REPO / "book" / "docs" / "steps" / f"{number}.md").exists(), number
        assert step.hints and step.catalogue is not None, number
