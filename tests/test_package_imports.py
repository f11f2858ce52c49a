"""Step files that import their earlier steps relatively (`from .step_01 import GPT2Config`: the online
book's package layout, the steps folder a package) are read unchanged by every command: a check, with
its earlier steps found through those imports, `progress`, `gpt2` and `serve`; and so is a folder of
such files checked with --file."""

import re
import shutil

import pytest

from runtime.paths import REPO, finished_step
from tests.conftest import course_clone, run_python

pytestmark = pytest.mark.slow


def relative(step: int) -> str:
    """The finished step, its earlier steps imported relatively."""
    source = finished_step(f"{step:02d}")
    return re.sub(r"^from steps\.(step_\d\d) import", r"from .\1 import", source, flags=re.M)


@pytest.fixture
def package_repo(tmp_path):
    """A clone of the course whose steps/ is a package of finished steps importing each other relatively."""
    repo = course_clone(tmp_path, {f"step_{s:02d}.py": relative(s) for s in range(1, 15)})
    shutil.copytree(REPO / "gpt2_arch", repo / "gpt2_arch", ignore=shutil.ignore_patterns("__pycache__"))
    assert "from .step_11 import" in (repo / "steps" / "step_14.py").read_text()
    return repo


def test_check_progress_and_gpt2_read_relative_imports(checkpoint, package_repo):
    broken = (package_repo / "steps" / "step_03.py")
    broken.write_text(broken.read_text().replace("F.sqrt(var + self.eps)", "F.sqrt(var)"))
    nine = run_python("-m", "checker", "09", cwd=package_repo, timeout=1200)
    assert (nine.returncode == 1 and "03 FAILS" in nine.stdout
            and "attempted relative import" not in nine.stdout + nine.stderr)
    broken.write_text(relative(3))
    eleven = run_python("-m", "checker", "11", cwd=package_repo, timeout=1200)
    assert eleven.returncode == 0 and "All" in eleven.stdout, eleven.stdout[-2000:] + eleven.stderr[-2000:]
    for step in range(12, 16):
        (package_repo / "steps" / f"step_{step}.py").unlink(missing_ok=True)
    progress = run_python("-m", "checker.progress", cwd=package_repo, timeout=1800)
    assert progress.returncode == 0 and "| 11 | steps/step_11.py | pass |  |" in progress.stdout, progress.stdout
    (package_repo / "steps" / "step_12.py").write_text(relative(12))
    written = run_python("-m", "gpt2", "The cat sat", "--max-new-tokens", "4", cwd=package_repo, timeout=1200)
    assert written.returncode == 0 and "Traceback" not in written.stderr, written.stdout + written.stderr


def test_a_folder_of_relative_steps_is_checked_with_file(checkpoint, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for step in range(1, 10):
        (folder / f"step_{step:02d}.py").write_text(relative(step))
    done = run_python("-m", "checker", "09", "--file", str(folder / "step_09.py"), timeout=1200)
    assert done.returncode == 0 and "01 ok, 02 ok, 03 ok, 04 ok, 07 ok, 08 ok" in done.stdout, done.stdout + done.stderr


def test_serve_reads_relative_imports(checkpoint, package_repo, server_slot):
    from runtime.server import Server

    with Server(package_repo / "steps" / "step_14.py", checkpoint.path, quiet=True) as server:
        answer = server.client().completions.create(model="gpt2", prompt="Hello", max_tokens=3, temperature=0)
    assert answer.usage.completion_tokens == 3
