"""pixi.toml and pyproject.toml describe the same environment, and every pixi
task is a plain command that runs unchanged in the pip venv."""

import re
import tomllib

from checker.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PIXI = tomllib.loads((REPO / "pixi.toml").read_text())


def _name(name: str) -> str:
    return name.lower().replace("_", "-")


def _pins(requirements: list[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """"max[serve]==26.7.0" -> {"max": ("26.7.0", ("serve",))}"""
    pins = {}
    for req in requirements:
        name, extras, ver = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([\w,]+)\])?==([\w.]+)", req).groups()
        pins[_name(name)] = (ver, tuple(sorted(extras.split(","))) if extras else ())
    return pins


def _pixi_pins() -> dict[str, tuple[str, tuple[str, ...]]]:
    pins = {}
    for name, spec in PIXI["pypi-dependencies"].items():
        if isinstance(spec, str):
            pins[_name(name)] = (spec.removeprefix("=="), ())
        elif "version" in spec:
            pins[_name(name)] = (spec["version"].removeprefix("=="), tuple(sorted(spec.get("extras", ()))))
    return pins


def test_same_packages_versions_and_extras():
    assert _pixi_pins() == _pins(PYPROJECT["project"]["dependencies"])


def test_the_serving_stack_is_installed():
    """Step 14 serves with `max serve`: MAX's `serve` extra, with the transformers it accepts."""
    assert _pins(PYPROJECT["project"]["dependencies"])["max"][1] == ("serve",)


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
