"""Shared fixtures: the stand-in checkpoints, warm kernels, and a way to check a copy of a step.

The suite uses the stand-ins only (GPT2_WEIGHTS=synthetic by default), so its
results do not depend on what a machine has downloaded: `checkpoint` is the
default stand-in, `checkpoints[standin]` either of the two: the solutions run on
both, and the catalogued mistakes, held-out mistakes and styles on each in turn
(`alternating`). `tier` puts each test in one of the three tiers.
"""

import contextlib
import fcntl
import gc
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

os.environ["GPT2_WEIGHTS"] = "synthetic"
# step 14's served part: one server per session (tests/test_step14.py), not one per check
os.environ["GPT2_CHECK_SERVE"] = "0"

import runtime  # noqa: E402
from checker import registry, warmup  # noqa: E402
from checker.reporting.compare import CORRECT_MARGIN  # noqa: E402
from checker.reporting.report import PASS, Part  # noqa: E402
from runtime.checkpoints import find_checkpoint  # noqa: E402
from runtime.paths import REPO, finished_step  # noqa: E402

runtime.setup()  # before any test imports MAX


STANDINS = ("synthetic", "scale")


def alternating(cases: list[tuple], step_of=lambda case: case[0]) -> list[tuple]:
    """Each case with one stand-in, the two taken in turn within each step: every case runs once, and
    each step's cases are run on both stand-ins (the catalogue, the held-out mistakes, the other styles).
    The solutions themselves run on both (tests/test_mutations.py)."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for case in cases:
        step = step_of(case)
        out.append((*case, STANDINS[seen[step] % len(STANDINS)]))
        seen[step] += 1
    return out


# --- the three tiers --------------------------------------------------------------------------------
# `python -m pytest` runs the default tier, what a contributor runs before a commit (<= 15 min from a cold
# cache on 2 cores): every test of steps 01-08 and every test that runs no check of a later step.
# `python -m pytest -m slow` runs the cases of steps 09-17 (a block's first compile
# is ~2 min cold; later steps run the learner's whole model eagerly, compile a model or a Mojo kernel:
# 10-90 s a case), the uncatalogued mistakes and the other styles (each brings ops of its own, 20-150 s
# to compile on a cold cache), the end-to-end workflow runs, real servers, the benches.
# `python -m pytest -m heavy` runs the rest (each up to ~100 s, 17 min in all on 2 cores): the uncatalogued
# mistakes and other styles of steps 13-16, the kernels' messages and the solutions of steps 15-16, step 16's
# Mojo mistakes after its first, whole-model compile-only faults, the online book's layouts, the head
# ablation, the serving bench. CI (.ci/run) runs the default tier and a 32nd of the other two (--share).
SLOW_FROM_STEP = 9
HEAVY_FROM_STEP = 13
SLOW_FILES = {"test_bench.py", "test_gpt2.py", "test_package_imports.py", "test_serving.py", "test_step14.py",
              "test_unseen.py", "test_variants.py"}
HEAVY_FILES = {"test_book_contracts.py", "test_book_feb.py", "test_compiled.py", "test_step15.py"}
HEAVY_BY_STEP = {"test_unseen.py", "test_variants.py"}  # heavy from HEAVY_FROM_STEP on
_STEP_ID = re.compile(r"^(?:step_?)?(\d\d)(?!\d)")
_STEP_TEST = re.compile(r"^test_(?:step_?)?(\d\d)_")


SERVED = "served"  # the xdist_group of every test that starts a server (one worker runs them: memory)


def tier(item) -> str:
    """"default", "slow" or "heavy": by its file, its marker, or its step (its parameters' first field, or its
    name: test_12_..., test_step14_...)."""
    callspec = getattr(item, "callspec", None)
    found = (_STEP_ID.match(callspec.id) if callspec else None) or _STEP_TEST.match(item.originalname)
    step = int(found.group(1)) if found else 0
    name = item.path.name
    if name in HEAVY_FILES or item.get_closest_marker("heavy") or (name in HEAVY_BY_STEP and step >= HEAVY_FROM_STEP):
        return "heavy"
    if name in SLOW_FILES or item.get_closest_marker("slow") or step >= SLOW_FROM_STEP:
        return "slow"
    return "default"


def pytest_addoption(parser):
    parser.addoption("--share", metavar="K/N", type=_share, default=None,
                     help="run share K of N (0 <= K < N) of the selected tests, the N of about the same time by "
                          "tests/durations.json; CI runs a share of the slow and heavy tiers a commit (.ci/run)")
    parser.addini("share_durations", default="tests/durations.json",
                  help="the JSON file of each test's seconds --share deals by, from the rootdir")
    parser.addoption("--record-durations", metavar="PATH", type=Path, default=None,
                     help="add each test's seconds (set-up, call and tear-down) to the JSON file PATH, which "
                          "--share deals by (tests/durations.json)")


def _share(text: str) -> tuple[int, int]:
    import argparse

    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
        raise argparse.ArgumentTypeError(f"--share {text}: K/N with 0 <= K < N, e.g. 0/32")
    return int(k), int(n)


def pytest_configure(config):
    """Before pytest-xdist starts its workers, which import MAX side by side: MAX's Mojo-built modules,
    built once (runtime.mojo_modules; a fresh venv's two workers once failed at collection)."""
    from runtime.mojo_modules import build_once

    build_once()
    if config.getoption("share"):
        config.pluginmanager.register(_Share(*config.getoption("share")), "share")
    if config.getoption("record_durations"):
        config.pluginmanager.register(_Durations(config.getoption("record_durations")), "record-durations")


class _Share:
    """--share K/N: after -m has selected (trylast: after pytest's own deselection), the K-th of N shares of
    about the same time. What goes to a share whole is a unit (`_unit`: the tests that share a module's fixture
    or an xdist_group, else one test); a unit weighs its tests' seconds (`_weight`) in the `share_durations`
    file (tests/durations.json, written by --record-durations), a test not in it the mean of its file's. The
    heaviest unit goes first, each to the share with the fewest seconds so far (ties: the lowest K); with no
    seconds known, each test weighs 1."""

    def __init__(self, k: int, n: int):
        self.k, self.n = k, n

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        known = _known_seconds(config)
        seconds = _estimates([_test_key(item.nodeid) for item in items], known)
        units: dict[str, list[int]] = defaultdict(list)  # in their first test's order
        for i, item in enumerate(items):
            units[_unit(item)].append(i)
        weights = {unit: _weight([seconds[i] for i in tests]) for unit, tests in units.items()}
        loads, share = [0.0] * self.n, {}
        for unit in sorted(units, key=lambda unit: -weights[unit]):
            k = min(range(self.n), key=lambda k: loads[k])
            loads[k] += weights[unit]
            share.update(dict.fromkeys(units[unit], k))
        left = [item for i, item in enumerate(items) if share[i] != self.k]
        if left:
            config.hook.pytest_deselected(items=left)
        items[:] = [item for i, item in enumerate(items) if share[i] == self.k]
        self.told = (f"~{loads[self.k] / 60:.0f} min of tests by {config.getini('share_durations')}" if known
                     else f"every {self.n}-th test: no {config.getini('share_durations')}")

    def pytest_report_collectionfinish(self, config):  # where this process collected (not xdist's controller)
        return f"share {self.k}/{self.n}: {self.told}"


def _weight(seconds: list[float]) -> float:
    """A unit's seconds: what its fixture costs is paid once, by its first test, and each run of the file
    measured it on another test: the heaviest test's seconds, then the lightest's for each of the others."""
    return max(seconds) + (len(seconds) - 1) * min(seconds)


def _unit(item) -> str:
    """The tests a share takes together: those that share a fixture of their module (made once a module in a
    process: split between shares, each would make it), then those of one xdist_group (a step's solution on
    both stand-ins, where the second reuses the first's compiles; SERVED is for memory, not shared work),
    else the test alone."""
    if _uses_module_fixture(item):
        return str(item.path)
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")} - {SERVED})
    return "group " + "_".join(groups) if groups else item.nodeid


def _known_seconds(config) -> dict[str, float]:
    path = config.rootpath / config.getini("share_durations")
    return json.loads(path.read_text()) if path.exists() else {}


def _estimates(keys: list[str], known: dict[str, float]) -> list[float]:
    """Each test's seconds: as measured, else the mean of its file's measured tests, else of all, else 1. The
    mean, not the median: a file's seconds are a few first compiles and many short tests, and the median
    weighs only the short ones, putting a share at about half its time."""
    import statistics

    by_file = defaultdict(list)
    for key, value in known.items():
        by_file[_file(key)].append(value)
    means = {file: statistics.fmean(values) for file, values in by_file.items()}
    overall = statistics.fmean(known.values()) if known else 1.0
    return [known.get(key, means.get(_file(key), overall)) for key in keys]


def _file(key: str) -> str:
    return key.split("::", 1)[0]


class _Durations:
    """--record-durations PATH: each test's seconds, merged into PATH at the end (under xdist, the controller
    sees every worker's reports)."""

    def __init__(self, path: Path):
        self.path, self.seconds = path, defaultdict(float)

    def pytest_runtest_logreport(self, report):
        self.seconds[_test_key(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session):
        if not self.seconds or hasattr(session.config, "workerinput"):
            return
        known = json.loads(self.path.read_text()) if self.path.exists() else {}
        known.update({key: round(value, 1) for key, value in self.seconds.items()})
        self.path.write_text(json.dumps(dict(sorted(known.items())), indent=0) + "\n")


def _test_key(nodeid: str) -> str:
    """A test's id without the xdist group _group adds ("...::test_x[a]@served" -> "...::test_x[a]")."""
    return nodeid.split("@", 1)[0]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if (which := tier(item)) != "default":
            item.add_marker(getattr(pytest.mark, which))
        if "server_slot" in item.fixturenames:  # every test that starts a server on one worker: none waits idle
            item.add_marker(pytest.mark.xdist_group(SERVED))  # for the slot while the other holds it
        elif _uses_module_fixture(item) and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))  # its module's fixture made once a run
    _group(config, items)


def _uses_module_fixture(item) -> bool:
    """Whether the test uses a fixture made once a module in a process (a book built, a graph compiled): its
    module's tests go to one worker, which makes it once, not each worker beside the other."""
    fixtures = getattr(item, "_fixtureinfo", None)
    return bool(fixtures) and any(defs[-1].scope == "module" for defs in fixtures.name2fixturedefs.values())


def _group(config, items) -> None:
    """--dist loadgroup's xdist_group, as pytest-xdist 3.8 means it: it marks a grouped test's node id
    ("...::test_x@served") by setting item._nodeid, which pytest 9 no longer reads (the id is item._id), so
    the groups were ignored. Where xdist's own marking took, or pytest's internals differ, nothing is done."""
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:
        return
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")


@pytest.fixture(scope="session")
def checkpoints():
    """{"synthetic": ..., "scale": ...}: both stand-ins, their references computed.

    Under pytest-xdist each worker asks; a lock lets the first make everything while the others wait.
    """
    from checker.harness.runner import prepare
    from runtime.paths import CACHE

    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        workers = warmup.start("suite")  # compiles the kernels the tier needs while the references are computed
        found = {standin: find_checkpoint(standin) for standin in STANDINS}
        for ckpt in found.values():
            prepare("12", ckpt)  # the activations every step uses, and step 12's continuation
        warmup.finish(workers)
    warmup.load("suite")
    warmup.announce_compiles()
    return found


EARLIER_STEPS_LIMIT = 1200.0  # seconds an earlier step's check gets inside a test's check


@pytest.fixture(autouse=True)
def _earlier_steps_given_time(monkeypatch):
    """An earlier step checked inside a test's check (no verdict of it stored yet in the worker's folder) gets
    20 min, whatever limit the test gives its own step: on a cold cache, beside the other worker's compiles,
    step 14's check inside step 18's took over the 300 s a check gives by default, and a test is about its
    own step's verdict. A learner's limit stays the check's own (--timeout); tests/test_workflow.py runs the
    command, this fixture aside, to see it cut a check short."""
    from checker.harness import deps

    verdict = deps._verdict
    monkeypatch.setattr(deps, "_verdict", lambda step, path, checkpoint, timeout:
                        verdict(step, path, checkpoint, max(timeout, EARLIER_STEPS_LIMIT)))


_COLLECT_ABOVE = 3 * 2**30  # bytes of a worker's resident memory


@pytest.fixture(autouse=True)
def _collect_garbage():
    """A check leaves MAX's compiled graphs and sessions in reference cycles, small for Python's collector
    but ~0.5 GB each outside it: a worker running one check after another grew past 9 GB and was killed for
    memory. After a test, above 3 GB resident, collect them (a step 14 check's ~0.5 GB a check: 2.6 -> 4.7
    GB in five checks without, 2.0 -> 2.4 with)."""
    yield
    statm = Path("/proc/self/statm")  # Linux; elsewhere, collect after every test
    if not statm.exists() or int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") > _COLLECT_ABOVE:
        gc.collect()


_held = 0  # how many of this process's tests and fixtures hold the server slot


@contextlib.contextmanager
def one_server():
    """Held while real `max serve` processes run: one worker at a time runs them. A served model takes ~3.5 GB;
    a server on each worker beside the workers' own ~5 GB left a 24 GB machine without memory. The tests that
    take it (the server_slot fixture, test_serving.py's module server) are all in one xdist_group, so they run
    on one worker and the other never waits; the lock stays for a run without that grouping. Within a worker the
    slot is shared: a module's server and a test's own may run together."""
    from runtime.paths import CACHE

    global _held
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "server.lock", "w") as lock:
        if _held == 0:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        _held += 1
        try:
            yield
        finally:
            _held -= 1


@pytest.fixture
def server_slot():
    """one_server() for the length of a test."""
    with one_server():
        yield


@pytest.fixture(scope="session")
def checkpoint(checkpoints):
    """The default stand-in (synthetic)."""
    return checkpoints["synthetic"]


_held_folder = None  # the open lock file of this worker's step folder, held for the session


def _worker_folder(tmp_path_factory) -> Path:
    """This worker's step folder: .cache/step_folders/<worker>, the same path in every session of this clone,
    so what is kept per file (the checker's verdicts of its earlier steps) is found by the next tier. A
    session that finds it locked by another of this clone's sessions running at once takes a folder of its
    own in its temporary directory."""
    global _held_folder
    from runtime.paths import CACHE

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    folder = CACHE / "step_folders" / worker
    if _held_folder is None:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = open(folder.parent / f"{worker}.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _held_folder = (lock, folder)
        except OSError:
            lock.close()
            _held_folder = (None, tmp_path_factory.getbasetemp() / "step_folder")
    return _held_folder[1]


@pytest.fixture
def step_folder(tmp_path_factory) -> Path:
    """An empty folder for a test's step files: the same folder for every test of this worker, emptied first
    and its modules forgotten. A kernel written here unchanged from one compiled before (the solution's, in
    another test or tier) is not built and compiled again: MAX is handed it at a path named by its content
    (runtime/kernels.py)."""
    from runtime.learner import package_of

    folder = _worker_folder(tmp_path_factory)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    package = package_of(folder)
    for name in [name for name in sys.modules if name.startswith(f"{package}.")]:
        del sys.modules[name]
    return folder


@pytest.fixture
def write_step(step_folder):
    """Writes step source text to a file in the test's step folder; returns its path."""

    def write(source: str, name: str = "step_07.py") -> Path:
        path = step_folder / name
        path.write_text(source)
        return path

    return write


# Set in this process by MAX's Mojo runtime once it loads; a child Python must not inherit them
# (PYTHONEXECUTABLE points at the system python3, which makes the child lose the venv).
_MOJO_ENV = ("PYTHONEXECUTABLE", "MOJO_PYTHON_LIBRARY", "PYTHONPATH")


def child_env() -> dict[str, str]:
    """This process's environment, less what MAX's Mojo runtime set in it: for a child Python."""
    return {k: v for k, v in os.environ.items() if k not in _MOJO_ENV}


def run_python(*args: str, cwd: Path = REPO, timeout: float = 900, env: dict | None = None):
    """`python -m ...` in a child process, as a learner would run it, on the synthetic checkpoint."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env={**child_env(), "GPT2_WEIGHTS": "synthetic", **(env or {})}, timeout=timeout)


def solution_source(step: str) -> str:
    return (REPO / "solutions" / f"solution_{step}.py").read_text()


# Steps with a Mojo kernel: its file in solution_NN_kernel/.
KERNELS = {"15": "matvec.mojo", "16": "matvec_q8.mojo", "17": "flash.mojo", "18": "paged_flash.mojo"}


def add_kernel(path: Path, step: str) -> None:
    """The solution's Mojo package beside step file `path`, when step `step` has one (KERNELS)."""
    if step in KERNELS:
        shutil.copytree(REPO / "solutions" / f"solution_{step}_kernel", path.parent / f"solution_{step}_kernel")


def write_kernel_step(folder: Path, mojo: str, step: str = "15") -> Path:
    """The solution of `step` in `folder`, with `mojo` as its kernel's file; returns the step file's path."""
    path = folder / f"step_{step}.py"
    path.write_text(solution_source(step))
    add_kernel(path, step)
    (folder / f"solution_{step}_kernel" / KERNELS[step]).write_text(mojo)
    return path


def kernel_source(step: str = "15") -> str:
    return (REPO / "solutions" / f"solution_{step}_kernel" / KERNELS[step]).read_text()


def mutate(source: str, old: str | tuple, new: str | tuple) -> str:
    """`source` with `old` replaced by `new` (or each of several in turn); each must occur exactly once."""
    if isinstance(old, tuple):
        for o, n in zip(old, new, strict=True):
            source = mutate(source, o, n)
        return source
    assert source.count(old) == 1, f"mutation target occurs {source.count(old)} times: {old!r}"
    return source.replace(old, new)


def catalogued(step: str, mistake: str):
    """Step `step`'s catalogued Mistake `mistake` (its id), with the edit that makes it in the solution."""
    return next(m for m in registry.step(step).catalogue if m.id == mistake)


def with_mistake(step: str, mistake: str) -> str:
    """Step `step`'s solution with a catalogued mistake of its Python made."""
    edit = catalogued(step, mistake).edit
    assert not edit.file, f"{mistake} is made in {edit.file}, not in the step's Python"
    return mutate(solution_source(step), edit.old, edit.new)


def write_mistake(folder: Path, step: str, mistake: str) -> Path:
    """The solution of `step` in `folder` with the catalogued mistake made, in its Python or its kernel's Mojo
    (and the kernel beside it); returns the step file's path."""
    edit = catalogued(step, mistake).edit
    if edit.file:
        return write_kernel_step(folder, mutate(kernel_source(step), edit.old, edit.new), step)
    path = folder / f"step_{step}.py"
    path.write_text(mutate(solution_source(step), edit.old, edit.new))
    add_kernel(path, step)
    return path


def course_clone(parent: Path, steps: dict[str, str]) -> Path:
    """A clone of the course in parent/clone whose steps/ hold `steps` (file name -> source); the
    checkpoints and cached references are the suite's own."""
    repo = parent / "clone"
    repo.mkdir()
    for name in ("runtime", "checker", "explore", "gpt2", "solutions"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "steps").mkdir()
    (repo / "steps" / "__init__.py").write_text("")
    for name, source in steps.items():
        (repo / "steps" / name).write_text(source)
    for name in ("weights", ".cache"):
        (REPO / name).mkdir(exist_ok=True)
        (repo / name).symlink_to(REPO / name)
    return repo


def check_reports(repo: Path, steps, *, timeout: float) -> dict[str, str]:
    """Each step's report from `python -m checker NN` run in `repo` as a learner runs it, all in one process."""
    script = ("import sys\nfrom checker.__main__ import main\n"
              "for step in sys.argv[1:]:\n    print(f'=== {step}', flush=True)\n    main([step])\n")
    out = run_python("-c", script, *steps, cwd=repo, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return dict(part.split("\n", 1) for part in out.stdout.split("=== ")[1:])

@pytest.fixture
def untimed(monkeypatch):
    """Steps 15-17's checks without their timing part (a report, never a verdict, and tens of seconds): for
    tests that hold a correct implementation to the verdicts; the solutions' own tests read the timing."""
    def report(*args, **kwargs):
        return Part("timing", PASS, "a report, not a verdict: not timed in this test")

    for step in ("15", "16", "17"):  # by name: the check modules are imported only by the tests that use them
        monkeypatch.setattr(f"checker.steps.step{step}.check.timing_part", report)


@pytest.fixture
def learner_repo(tmp_path):
    """A clone of the course whose steps/ hold finished steps (the solutions, importing each other as
    steps.step_NN)."""
    return course_clone(tmp_path, {f"step_{s:02d}.py": finished_step(f"{s:02d}") for s in range(1, 14)})


# step -> {(mistake id, stand-in): (caught, named)}, filled by tests/test_catalogue.py
MUTATION_RESULTS: dict[str, dict[tuple[str, str], tuple[bool, bool]]] = defaultdict(dict)
# step -> (solution tokens given away in the skeleton's comments, solution tokens to write), from test_skeletons.py
GIVEAWAY: dict[str, tuple[int, int]] = {}
# (step, part) -> {stand-in: the worst margin (max |diff| / allowed) of a correct implementation}
MARGINS: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
MARGIN_LIMIT = CORRECT_MARGIN
# step -> {mutation: (failed, placed, misleading)}, filled by tests/test_unseen.py and, for the kernels' held-out
# mistakes, tests/test_held_out_kernels.py
UNSEEN_RESULTS: dict[str, dict[str, tuple[bool, bool, bool]]] = defaultdict(dict)
HELD_KERNEL_RESULTS: dict[str, dict[str, tuple[bool, bool, bool]]] = defaultdict(dict)


def assert_passes_with_margin(report, step: str, standin: str, record_property) -> None:
    """Every part passes, each with max |diff| at most a tenth of what its tolerance allows; the
    margins go into the table printed at the end (through `record_property`, so that they reach the
    summary from pytest-xdist's workers too)."""
    __tracebackhide__ = True
    assert report.ok, report.render()
    record_property("margins", [[step, p.name, standin, float(p.margin)] for p in report.parts if p.margin is not None])
    over = [f"{p.name}: {p.margin:.2f}" for p in report.parts if p.margin is not None and p.margin > MARGIN_LIMIT]
    assert not over, f"margin above {MARGIN_LIMIT} ({', '.join(over)}):\n{report.render()}"


def pytest_runtest_logreport(report):
    """Collects what tests recorded for the closing tables: mistakes caught and named, uncatalogued mistakes
    placed, margins, giveaway."""
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == "mutation":
            step, mistake, standin, caught, named = value
            MUTATION_RESULTS[step][(mistake, standin)] = (caught, named)
        elif name == "margins":
            for step, part, standin, margin in value:
                MARGINS[(step, part)][standin] = max(MARGINS[(step, part)].get(standin, 0.0), margin)
        elif name in ("unseen", "held_out_kernels"):
            step, mutation, failed, _all_right, placed, misleading = value
            (UNSEEN_RESULTS if name == "unseen" else HELD_KERNEL_RESULTS)[step][mutation] = (failed, placed, misleading)
        elif name == "giveaway":
            step, given, total = value
            GIVEAWAY[step] = (given, total)


def _table(write, columns: list[str], rows: dict[str, list[int]]) -> None:
    """A Markdown table: one row of counts per step, in step order, then their sums ("all")."""
    write("| " + " | ".join(["step", *columns]) + " |")
    write("|" + "---|" * (len(columns) + 1))
    for step in sorted(rows):
        write("| " + " | ".join([step, *map(str, rows[step])]) + " |")
    write("| " + " | ".join(["all", *(str(sum(col)) for col in zip(*rows.values()))]) + " |")


def pytest_terminal_summary(terminalreporter):
    """The mutation suite's table (per step: mistakes injected, on which stand-in, caught, named) and the
    margin table (per part and stand-in: the worst max |diff| / allowed of a correct implementation)."""
    write = terminalreporter.write_line
    if MUTATION_RESULTS:
        terminalreporter.section("mistake catalogue: injected into the solutions")
        rows = {step: [len(results), *(sum(k == standin for _, k in results) for standin in STANDINS),
                       sum(c for c, _ in results.values()), sum(n for _, n in results.values())]
                for step, results in MUTATION_RESULTS.items()}
        _table(write, ["mistakes", "on synthetic", "on GPT-2-scale", "caught", "named"], rows)
    for results, title in ((UNSEEN_RESULTS, "uncatalogued mistakes (tests/unseen.py)"),
                           (HELD_KERNEL_RESULTS, "the kernels' held-out mistakes (tests/held_out_kernels.py)")):
        if results:
            terminalreporter.section(f"{title}: failed, placed, misleading")
            _table(write, ["mutations", "failed", "placed", "misleading"],
                   {step: [len(r), *(sum(x[i] for x in r.values()) for i in range(3))] for step, r in results.items()})
    if GIVEAWAY:
        terminalreporter.section("skeletons: how much of each solution their comments and docstrings give away")
        write("| step | given away | of tokens to write | share |")
        write("|---|---|---|---|")
        for step, (given, total) in sorted(GIVEAWAY.items()):
            write(f"| {step} | {given} | {total} | {given / max(total, 1):.0%} |")
        given, total = (sum(v[i] for v in GIVEAWAY.values()) for i in (0, 1))
        write(f"| all | {given} | {total} | {given / max(total, 1):.0%} |")
    if MARGINS:
        terminalreporter.section("margins: worst max|diff| / allowed of a correct implementation "
                                 f"(limit {MARGIN_LIMIT})")
        write("| step | part | synthetic | GPT-2-scale |")
        write("|---|---|---|---|")
        for (step, part), worst in sorted(MARGINS.items()):
            write(f"| {step} | {part} | " + " | ".join(f"{worst[k]:.3f}" if k in worst else "-" for k in STANDINS)
                  + " |")
