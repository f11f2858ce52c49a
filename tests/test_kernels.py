"""runtime.kernels: a Mojo kernel folder reaches MAX at a path named by its content, so the same kernel
in another folder (a fresh clone, a test's copy of the solution) finds its compiled graphs in MAX's cache,
and a compile error still names the learner's own files."""

import shutil

import pytest

from runtime.kernels import _wrapped, content_copy
from runtime.paths import SOLUTIONS


def _kernel(folder, name="step_16_kernel"):
    target = folder / name
    shutil.copytree(SOLUTIONS / "solution_16_kernel", target)
    return target


def test_the_same_files_anywhere_get_one_path_and_an_edit_another(tmp_path):
    root = tmp_path / "cache"
    one, two = _kernel(tmp_path / "clone1"), _kernel(tmp_path / "clone2")
    (two / ".notes.swp").write_text("an editor's file")  # hidden files are not the kernel
    assert content_copy(one, root) == content_copy(two, root)
    assert content_copy(one, root).name == "step_16_kernel"
    assert (content_copy(one, root) / "matvec_q8.mojo").read_text() == (one / "matvec_q8.mojo").read_text()
    (two / "matvec_q8.mojo").write_text((two / "matvec_q8.mojo").read_text() + "\n# edited\n")
    assert content_copy(two, root) != content_copy(one, root)
    assert (content_copy(two, root) / "matvec_q8.mojo").read_text().endswith("# edited\n")


class _CompileError(Exception):
    def __init__(self, path, command, stdout, stderr):
        self.path, self.command, self.stdout, self.stderr = path, command, stdout, stderr


def test_a_compile_error_names_the_learners_files_not_the_copy(tmp_path, monkeypatch):
    monkeypatch.setattr("runtime.kernels.ROOT", tmp_path / "cache")
    folder = _kernel(tmp_path / "steps")
    built = []

    def build(path):
        built.append(path)
        raise _CompileError(path, ["precompile", str(path)], "",
                            f"{path}/matvec_q8.mojo:42:26: error: use of unknown declaration 'BLOCKX'")

    with pytest.raises(_CompileError) as raised:
        _wrapped(build)(folder)
    assert built[0] != folder and built[0].name == folder.name  # MAX was handed the copy
    e = raised.value
    assert e.stderr == f"{folder.resolve()}/matvec_q8.mojo:42:26: error: use of unknown declaration 'BLOCKX'"
    assert e.path == folder and e.command == ["precompile", str(folder.resolve())]


def test_a_package_built_from_a_copy_is_used_again_not_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr("runtime.kernels.ROOT", tmp_path / "cache")
    monkeypatch.setattr("runtime.kernels._built", lambda copy: copy.parent / "built.mojoc")
    built = []

    def build(path):
        built.append(path)
        (path.parent / "built.mojoc").write_bytes(b"package")
        return path.parent / "built.mojoc"

    one, two = _kernel(tmp_path / "clone1"), _kernel(tmp_path / "clone2")
    assert _wrapped(build)(one) == _wrapped(build)(two) and len(built) == 1


def test_the_same_files_under_two_names_get_a_copy_each(tmp_path):
    """A learner's step_16_kernel written as the solution's solution_16_kernel: the same digest, two names."""
    root = tmp_path / "cache"
    solution, learners = _kernel(tmp_path / "solutions", "solution_16_kernel"), _kernel(tmp_path / "steps")
    for folder in (solution, learners):
        copy = content_copy(folder, root)
        assert copy.name == folder.name and (copy / "__init__.mojo").is_file()
