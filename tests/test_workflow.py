"""The learner's workflow: verdicts cached by content, `progress`, `reset`, and `watch` driven in tmux
as a person would use it (a file saved, the screen read with capture-pane)."""

import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from checker import registry
from checker.harness import verdicts
from runtime.paths import REPO
from tests.conftest import _MOJO_ENV, run_python

SKELETON = {step: (REPO / "steps" / f"step_{step}.py").read_text() for step in ("03", "04")}


def test_a_verdict_is_kept_until_a_file_it_depends_on_changes(checkpoint, learner_repo):
    nine, eight = learner_repo / "steps" / "step_09.py", learner_repo / "steps" / "step_08.py"
    done = run_python("-m", "checker", "09", cwd=learner_repo, timeout=1200)  # stores its verdict
    assert done.returncode == 0, done.stdout + done.stderr
    entry = verdicts.lookup("09", nine, checkpoint)
    assert entry and entry["ok"]
    assert {Path(f).name for f in entry["files"]} >= {"step_03.py", "step_04.py", "step_07.py", "step_08.py"}
    eight.write_text(eight.read_text() + "\n# an edit\n")  # a step that 09 uses
    assert verdicts.lookup("09", nine, checkpoint) is None
    eight.write_text(eight.read_text().removesuffix("\n# an edit\n"))  # undone: the verdict holds again
    assert verdicts.lookup("09", nine, checkpoint)["ok"]
    nine.write_text(nine.read_text() + "\n")  # the step itself
    assert verdicts.lookup("09", nine, checkpoint) is None


def test_a_verdict_is_kept_until_a_kernel_beside_the_step_changes(tmp_path, monkeypatch):
    """Steps 15-18 reach their Mojo kernels by a path, not an import: an edited kernel is checked afresh
    (`pixi run gpt2 --int8` must not say a broken kernel passes), an untouched one keeps its verdict, and
    so does step 16's beside an edit of step 18's kernel (step 18's check would run step 16's again)."""
    monkeypatch.setattr(verdicts, "STORE", tmp_path / "verdicts.json")
    step = tmp_path / "steps" / "step_16.py"
    (step.parent / "step_16_kernel").mkdir(parents=True)
    kernel = step.parent / "step_16_kernel" / "matvec_q8.mojo"
    step.write_text("KERNEL = 'step_16_kernel'\n")
    kernel.write_text("fn matvec_q8(): pass\n")
    checkpoint = SimpleNamespace(sha256="weights")
    verdicts.store("16", step, checkpoint, SimpleNamespace(files=[], ok=True, parts=[], cut_short=False))
    assert verdicts.lookup("16", step, checkpoint)["ok"]
    later = step.parent / "step_18.py", step.parent / "step_18_kernel" / "matmul_q8.mojo"
    later[1].parent.mkdir()
    later[0].write_text("KERNEL = 'step_18_kernel'\n")
    later[1].write_text("fn matmul_q8(): pass\n")
    verdicts.store("16", step, checkpoint, SimpleNamespace(files=[], ok=True, parts=[], cut_short=False))
    later[1].write_text("fn matmul_q8(): return\n")  # a later step's kernel: not step 16's
    assert verdicts.lookup("16", step, checkpoint)["ok"]
    kernel.write_text("fn matvec_q8(): return\n")
    assert verdicts.lookup("16", step, checkpoint) is None


def test_each_checkpoint_keeps_its_own_verdict(tmp_path, monkeypatch):
    """A file checked on one checkpoint, then on the other (GPT2_WEIGHTS, or the suite's two stand-ins), keeps
    both verdicts: the second check does not make the first's earlier steps run again."""
    monkeypatch.setattr(verdicts, "STORE", tmp_path / "verdicts.json")
    step = tmp_path / "step_09.py"
    step.write_text("# step 09\n")
    real, standin = SimpleNamespace(sha256="real"), SimpleNamespace(sha256="standin")
    verdicts.store("09", step, real, SimpleNamespace(files=[], ok=True, parts=[], cut_short=False))
    assert verdicts.lookup("09", step, standin) is None
    verdicts.store("09", step, standin, SimpleNamespace(files=[], ok=False, parts=[], cut_short=False))
    assert verdicts.lookup("09", step, real)["ok"] and not verdicts.lookup("09", step, standin)["ok"]


@pytest.mark.slow  # checks of every step in a clone of the course: minutes on a cold cache
def test_a_check_cut_short_by_the_time_limit_keeps_no_verdict(checkpoint, learner_repo):
    """A right but slow step 10 under step 11's --timeout: step 11 says the limit stopped step 10 (not that
    10 is wrong), and neither verdict is kept, so the next check without the limit is not misled."""
    ten, eleven = learner_repo / "steps" / "step_10.py", learner_repo / "steps" / "step_11.py"
    source = ten.read_text()
    line = "        seq_len = input_ids.shape[-1]\n"
    ten.write_text(source.replace(line, "        __import__('time').sleep(15)  # slow, still right\n" + line, 1))
    assert ten.read_text() != source
    cut = run_python("-m", "checker", "11", "--timeout", "10", cwd=learner_repo, timeout=1200)
    assert cut.returncode == 1 and "10 stopped at the time limit" in cut.stdout, cut.stdout + cut.stderr
    assert "ran past the time limit of 10 s (--timeout)" in cut.stdout
    assert verdicts.lookup("10", ten, checkpoint) is None and verdicts.lookup("11", eleven, checkpoint) is None
    full = run_python("-m", "checker", "10", cwd=learner_repo, timeout=1200)
    assert full.returncode == 0, full.stdout + full.stderr
    assert verdicts.lookup("10", ten, checkpoint)["ok"]


@pytest.mark.slow  # checks of every step in a clone of the course: minutes on a cold cache
def test_earlier_steps_come_from_the_cache(checkpoint, learner_repo):
    """s11 re-runs none of steps 01-10 when they did not change: the second run is much faster."""
    first = run_python("-m", "checker", "11", cwd=learner_repo, timeout=1200)
    assert first.returncode == 0, first.stdout + first.stderr
    started = time.perf_counter()
    again = run_python("-m", "checker", "11", cwd=learner_repo, timeout=1200)
    assert again.returncode == 0 and "01 ok, 02 ok" in again.stdout
    assert time.perf_counter() - started < 30  # measured ~6 s warm on 2 CPUs; uncached it re-runs ten checks


@pytest.mark.slow  # checks of every step in a clone of the course: minutes on a cold cache
def test_progress_shows_each_step(checkpoint, learner_repo):
    (learner_repo / "steps" / "step_04.py").write_text(SKELETON["04"])
    done = run_python("-m", "checker.progress", cwd=learner_repo, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "| 03 | steps/step_03.py | pass |  |" in lines
    assert "| 04 | steps/step_04.py | not started | construction |" in lines
    assert "| 09 | steps/step_09.py | fail | earlier steps |" in lines
    # 01-03, 05-08 and 12 (which drives the course's own model)
    assert f"8/{len(registry.steps())} steps pass" in done.stdout
    assert "Next: pixi run s04" in done.stdout
    started = time.perf_counter()
    again = run_python("-m", "checker.progress", cwd=learner_repo, timeout=600)
    assert again.stdout == done.stdout and time.perf_counter() - started < 15  # all from the cache


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=learner", "-c", "user.email=l@example.org", *args], cwd=repo,
                          capture_output=True, text=True, check=True)


def test_reset_saves_your_file_and_puts_the_skeleton_back(learner_repo):
    (learner_repo / ".cache").unlink()  # a clone of its own: backups go into its .cache
    (learner_repo / ".cache").mkdir()
    mine = (learner_repo / "steps" / "step_03.py").read_text()
    (learner_repo / "steps" / "step_03.py").write_text(SKELETON["03"])
    _git(learner_repo, "init", "-q")
    _git(learner_repo, "add", "steps")
    _git(learner_repo, "commit", "-q", "-m", "the course")
    (learner_repo / "steps" / "step_03.py").write_text(mine)
    done = run_python("-m", "checker.reset", "3", cwd=learner_repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (learner_repo / "steps" / "step_03.py").read_text() == SKELETON["03"]
    backups = list((learner_repo / ".cache" / "backups").glob("step_03-*.py"))
    assert any(b.read_text() == mine for b in backups), done.stdout
    assert "Saved your steps/step_03.py as .cache/backups/step_03-" in done.stdout
    again = run_python("-m", "checker.reset", "03", cwd=learner_repo)
    assert again.returncode == 0 and "already the skeleton" in again.stdout


def test_reset_without_git_changes_nothing(learner_repo):
    before = (learner_repo / "steps" / "step_03.py").read_text()
    done = run_python("-m", "checker.reset", "03", cwd=learner_repo, env={"GIT_DIR": str(learner_repo / "none")})
    assert done.returncode == 1 and "Nothing was changed" in done.stderr
    assert (learner_repo / "steps" / "step_03.py").read_text() == before


@pytest.fixture
def tmux():
    if shutil.which("tmux") is None:
        pytest.skip("no tmux on this machine (apt-get install tmux)")
    name = f"watch-{time.time_ns()}"
    yield name
    subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def _screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session, "-S", "-300"], capture_output=True,
                          text=True).stdout


def _until(session: str, text: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = _screen(session)
        if text in screen:
            return screen
        time.sleep(0.5)
    raise AssertionError(f"{text!r} never showed; the screen:\n{_screen(session)}")


def test_watch_rechecks_on_save_and_moves_on(checkpoint, learner_repo, tmux):
    """In tmux, as a learner: watch shows step 03 (a skeleton), the solution is saved into it,
    watch shows it passing and moves on to step 04 (also a skeleton)."""
    three, four = learner_repo / "steps" / "step_03.py", learner_repo / "steps" / "step_04.py"
    solution = three.read_text()
    three.write_text(SKELETON["03"])
    four.write_text(SKELETON["04"])
    unset = " ".join(f"-u {name}" for name in _MOJO_ENV)
    command = f"cd {learner_repo} && env {unset} GPT2_WEIGHTS=synthetic {sys.executable} -m checker.watch"
    subprocess.run(["tmux", "new-session", "-d", "-s", tmux, "-x", "220", "-y", "60", command], check=True)
    screen = _until(tmux, "Stuck? pixi run s03 --hint")
    assert "Step 03 · LayerNorm" in screen and "TODO" in screen and f"2/{len(registry.steps())} steps pass" in screen
    three.write_text(solution)  # the learner saves a finished step 03
    screen = _until(tmux, "Stuck? pixi run s04 --hint")
    assert "Step 03 passes: on to the next one." in screen and "Step 04 · GPT2MLP" in screen
    assert f"3/{len(registry.steps())} steps pass" in screen
