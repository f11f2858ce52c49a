"""pixi.toml and pyproject.toml describe the same environment, and every pixi
task is a plain command that runs unchanged in the pip venv."""

import re
import tomllib

from checker.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PIXI = tomllib.loads((REPO / "pixi.toml").read_text())


def _pins(requirements: list[str]) -> dict[str, str]:
    pins = {}
    for req in requirements:
        name, op, ver = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(==)\s*([\w.]+)", req).groups()
        pins[name.lower().replace("_", "-")] = ver
    return pins


def test_same_packages_and_versions():
    pyproject = _pins(PYPROJECT["project"]["dependencies"])
    pixi = {
        name.lower().replace("_", "-"): spec.removeprefix("==")
        for name, spec in PIXI["pypi-dependencies"].items()
        if isinstance(spec, str)
    }
    assert pixi == pyproject


def test_same_python():
    assert PIXI["dependencies"]["python"] == "3.13.*"
    assert PYPROJECT["project"]["requires-python"] == ">=3.13,<3.14"


PINNED_TOOLS = ("pytest", "mkdocs")  # run as modules of pinned packages


def test_tasks_are_plain_python_commands():
    for name, task in PIXI["tasks"].items():
        command = task if isinstance(task, str) else task["cmd"]
        assert command.startswith("python -m "), f"task {name}: {command}"
        module = command.split()[2]
        assert (REPO / module.replace(".", "/")).with_suffix(".py").exists() or (
            REPO / module / "__main__.py"
        ).exists() or module in PINNED_TOOLS, f"task {name} runs a missing module {module}"
