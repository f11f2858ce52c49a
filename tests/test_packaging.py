"""pixi.toml and pyproject.toml describe the same environment, and every pixi
task is a plain command that runs unchanged in the pip venv."""

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from runtime.paths import REPO
from tests.conftest import child_env

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


# --- requirements.lock: the whole tree, pinned with hashes ---------------------------------------------

LOCK = REPO / "requirements.lock"
COMPILE = "uv pip compile pyproject.toml --universal --python-version 3.13 --generate-hashes -o requirements.lock"


def _lock() -> dict[str, tuple[str, str, list[str]]]:
    """name -> (version, marker, hashes) for every package requirements.lock pins."""
    entries, current = {}, None
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)\s*(?:;\s*(.*?))?\s*\\?$", line):
            current = _name(m[1])
            entries[current] = (m[2], m[3] or "", [])
        elif m := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line):
            entries[current][2].append(m[1])
    return entries


def test_the_lock_is_made_by_the_documented_command():
    """The lock's header (uv writes the command it ran), pyproject.toml's comment and the book's set-up page
    (which the README links to for the lock) name one command."""
    assert f"#    {COMPILE}" in LOCK.read_text().splitlines()[:3]
    assert COMPILE in (REPO / "pyproject.toml").read_text()
    assert COMPILE in (REPO / "book" / "docs" / "setup.md").read_text()


def test_every_direct_dependency_is_locked_at_its_pin():
    lock = _lock()
    for name, (version, _extras) in _pins(PYPROJECT["project"]["dependencies"]).items():
        assert name in lock and lock[name][0] == version, f"{name}: pinned {version}, locked {lock.get(name)}"


def test_every_locked_package_is_pinned_with_hashes():
    lock = _lock()
    assert len(lock) > 100, f"only {len(lock)} packages: not the whole tree"
    assert all(hashes for _, _, hashes in lock.values()), [n for n, (_, _, h) in lock.items() if not h]


def test_max_core_needs_shmem_on_linux_x86_64():
    """uv reads one wheel's metadata per release: max-core's Linux x86-64 wheel alone needs max-shmem-libs,
    which pyproject.toml's [tool.uv.dependency-metadata] declares (without it pip refuses the lock)."""
    version, marker, _ = _lock()["max-shmem-libs"]
    assert version == _lock()["max-core"][0]
    assert "x86_64" in marker and "linux" in marker


def test_the_build_backend_is_the_locked_setuptools():
    assert PYPROJECT["build-system"]["requires"] == [f"setuptools=={_lock()['setuptools'][0]}"]


def test_this_environment_is_the_lock():
    """What the suite runs on is what the lock pins: every package whose marker applies here is installed
    at its locked version (a venv made by the README's set-up)."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.markers import Marker

    wrong = []
    for name, (pinned, marker, _) in _lock().items():
        if marker and not Marker(marker).evaluate():
            continue
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != pinned:
            wrong.append(f"{name}: locked {pinned}, installed {installed}")
    assert not wrong, wrong


# --- the README's set-up is what CI runs -----------------------------------------------------------------


def _readme_setup() -> list[str]:
    """The commands of the README's pip set-up block (the fenced block after "With pip")."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Set up"):]
    block = re.search(r"With pip.*?```sh\n(.*?)```", section, re.S)[1]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_setup_is_two_commands_from_the_course():
    from runtime.paths import INSTALL, VENV

    assert _readme_setup() == [VENV, INSTALL]


def test_ci_installs_with_exactly_the_readme_commands():
    """.ci/run runs the README's set-up lines, in order, and installs nothing else with pip."""
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    setup = _readme_setup()
    at = [ci.index(line) for line in setup]
    assert at == sorted(at), "the README's set-up lines run in another order in .ci/run"
    others = [line for line in ci if re.search(r"\bpip\b", line) and line not in setup and not line.startswith("#")]
    assert not others, f".ci/run runs pip commands the README does not: {others}"


def test_ci_runs_the_readme_test_commands():
    """.ci/run runs the README's default tier whole, then the share of the other two the README names."""
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    for command in ("python -m pytest", "python -m pytest -m slow", "python -m pytest -m heavy"):
        assert f"`{command}`" in readme, command
    assert "\npython -m pytest\n" in ci
    share = re.search(r'`python -m pytest -m "slow or heavy" --share K/(\d+)`', readme)
    assert share, "the README names no CI share"
    assert re.search(rf'\npython -m pytest -m "slow or heavy" --share "\$\(\(.+ % {share[1]} \)\)/{share[1]}"\n', ci)


def test_shares_partition_a_selection(tmp_path):
    """--share K/N: the N shares of a selection are disjoint and together the whole of it, each of about the
    same seconds by the durations file --record-durations writes."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_addoption, pytest_configure  # noqa\n")
    (tmp_path / "test_a.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('i', range(7))\n"
                                        "def test_a(i):\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")

    def run(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-c", str(tmp_path / "pytest.ini"), *args, str(tmp_path)],
                              capture_output=True, text=True, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)

    def collect(*args):
        return run("--collect-only", *args)

    def ids(*args):
        done = collect(*args)
        assert done.returncode == 0, done.stdout + done.stderr
        return re.findall(r"test_a\[\d\]", done.stdout)

    whole = ids()
    shares = [ids("--share", f"{k}/3") for k in range(3)]
    assert len(whole) == 7 and sorted(sum(shares, [])) == sorted(whole), shares
    assert [len(s) for s in shares] == [3, 2, 2], shares
    bad = collect("--share", "3/3")
    assert bad.returncode != 0 and "K/N with 0 <= K < N" in bad.stderr, bad.stdout + bad.stderr

    # with seconds known, the shares are of about the same time: the two long tests alone, the short ones
    # together; test_a[6], not measured, counts as its file's mean
    seconds = {f"test_a.py::test_a[{i}]": 10.0 if i == 0 else 9.0 if i == 1 else 1.0 for i in range(6)}
    (tmp_path / "durations.json").write_text(json.dumps(seconds))
    (tmp_path / "pytest.ini").write_text("[pytest]\nshare_durations = durations.json\n")
    shares = [ids("--share", f"{k}/3") for k in range(3)]
    assert shares == [["test_a[0]"], ["test_a[1]"], [f"test_a[{i}]" for i in range(2, 7)]], shares
    # in two shares the unmeasured test's weight shows: the mean (23/6 s) joins it to the 9 s test and the
    # short ones fill the other share; as the median (1 s) it would be one short test among the rest
    shares = [ids("--share", f"{k}/2") for k in range(2)]
    assert shares == [["test_a[0]", "test_a[2]", "test_a[3]", "test_a[4]"],
                      ["test_a[1]", "test_a[5]", "test_a[6]"]], shares

    # --record-durations adds the seconds of the tests it ran to what the file holds
    ran = run("--record-durations", str(tmp_path / "durations.json"), "-k", "test_a and 6").stdout
    recorded = json.loads((tmp_path / "durations.json").read_text())
    assert recorded.keys() == {*seconds, "test_a.py::test_a[6]"} and recorded["test_a.py::test_a[0]"] == 10, ran


@pytest.mark.slow  # two processes building MAX's modules: ~30 s
def test_maxs_mojo_modules_are_built_by_one_process_at_a_time(tmp_path):
    """MAX builds max._kv_cache_ops from Mojo on the first import after an install, writing it in place, and
    a second process importing it meanwhile can load a half-written library (a fresh venv's two pytest
    workers once failed so). build_once builds under a lock, before processes start side by side: on a copy
    of the package, as a fresh install has it, a process that finds the lock held builds nothing until it
    is free, then builds and imports the module."""
    import max._kv_cache_ops

    from runtime.mojo_modules import LOCK

    package = tmp_path / "fresh_ops"
    package.mkdir()
    for name in ("__init__.py", "kv_cache_ops.mojo"):
        shutil.copy(Path(max._kv_cache_ops.__file__).with_name(name), package / name)
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from runtime.mojo_modules import build_once; "
              "build_once(('fresh_ops',)); print('imported')")
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, env=child_env(), text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(5)
        assert child.poll() is None and not (package / "__mojocache__").exists(), child.communicate()
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0 and out.strip() == "imported", out + err
    assert len(list((package / "__mojocache__").glob("kv_cache_ops.hash-*.so"))) == 1


# --- every command answers --help, and does nothing else ------------------------------------------------


def _commands() -> list[str]:
    """The modules the pixi tasks run (`python -m X ...`), and every other module of the course's packages
    that runs as a command (it has `if __name__ == "__main__"`)."""
    modules = {task.split()[2] for task in (t if isinstance(t, str) else t["cmd"] for t in PIXI["tasks"].values())}
    for folder in ("checker", "bench", "explore", "book", "gpt2_arch"):
        for path in (REPO / folder).rglob("*.py"):
            if 'if __name__ == "__main__"' in path.read_text():
                module = path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
                modules.add(module.removesuffix(".__main__"))
    # checker.running's entry points are children the checks start (the guard, the Mojo runner), not commands
    return sorted(m for m in modules - set(PINNED_TOOLS) if not m.startswith("checker.running."))


@pytest.mark.slow  # ~30 commands started one after another: ~50 s
def test_every_command_answers_help_and_touches_nothing(tmp_path):
    """`--help` prints usage and exits 0 for every command, without starting anything (no download, no
    check, no server): run in a copy of the course, no weights/ or .cache/ appears there."""
    import shutil

    from tests.conftest import run_python

    for name in ("runtime", "checker", "bench", "explore", "book", "gpt2", "gpt2_arch", "steps", "solutions"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "generated"))
    for module in _commands():
        run = run_python("-m", module, "--help", cwd=tmp_path, timeout=120, env={"PYTHONPATH": str(tmp_path)})
        assert run.returncode == 0 and "usage:" in run.stdout.lower(), (
            f"{module} --help:\n{run.stdout[-800:]}{run.stderr[-800:]}")
    made = [p.name for p in tmp_path.iterdir() if p.name in ("weights", ".cache")]
    assert not made, f"--help made {made}"


def test_one_worker_at_a_time_runs_servers():
    """tests/conftest.py's server slot: while another process holds it, a test waits; within a process it is
    shared (a module's server and a test's own), so nesting never waits on itself."""
    import time

    from tests.conftest import one_server

    holder = subprocess.Popen([sys.executable, "-c", "import time\nfrom tests.conftest import one_server\n"
                               "with one_server():\n    print('held', flush=True)\n    time.sleep(3)"],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with one_server():
            waited = time.monotonic() - started
            with one_server():  # shared within this process
                pass
    finally:
        holder.kill()
    assert waited > 1.5, waited
    started = time.monotonic()
    with one_server():
        assert time.monotonic() - started < 1


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    """test_serving.py's tests share one server through xdist_group("served"): tests/conftest.py marks their
    node ids as pytest-xdist would, so --dist loadgroup sends them all to one worker. The tests that use a
    fixture of their module (a book built, a graph compiled) go to one worker too, which makes it once."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa\n")
    (tmp_path / "test_grouped.py").write_text("import pytest\n\npytestmark = pytest.mark.xdist_group('g')\n\n\n"
                                              "@pytest.mark.parametrize('i', range(6))\ndef test_a(i):\n    pass\n")
    (tmp_path / "test_made_once.py").write_text("import pytest\n\n\n@pytest.fixture(scope='module')\n"
                                                "def made():\n    return 1\n\n\n"
                                                "@pytest.mark.parametrize('i', range(6))\ndef test_b(made, i):\n"
                                                "    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                           "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    for test in ("test_a", "test_b"):
        workers = re.findall(rf"\[(gw\d)\] .*PASSED .*{test}\[\d\]@", done.stdout)
        assert len(workers) == 6 and len(set(workers)) == 1, done.stdout + done.stderr


def test_each_test_is_in_one_tier():
    """`-m slow` and `-m heavy` select apart: a test marked heavy (a parameter's mark) in a file marked slow
    would run in CI's slow tier anyway."""
    both = subprocess.run([sys.executable, "-m", "pytest", "-m", "slow and heavy", "--collect-only", "-q", "-n", "0",
                           "-p", "no:cacheprovider"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert both.returncode in (0, 5) and not re.findall(r"^tests/\S+::\S+", both.stdout, re.M), both.stdout
