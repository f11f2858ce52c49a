"""What the machine or the files lack: weights, network, write access, the right
Python, a package, the repository as the current folder. Each case is a row of
tests/breakage.py's MACHINE table (and of the book's troubleshooting page)."""

import sys

import numpy as np
import pytest

from checker.__main__ import main
from checker.references import reference
from runtime import checkpoints as weights
from runtime.checkpoints import WeightsError
from runtime.paths import INSTALL
from tests.breakage import MACHINE
from tests.conftest import run_python


def says(name: str) -> str:
    return MACHINE[name].says


def test_no_weights_and_no_network_fall_back_to_the_synthetic_checkpoint(checkpoint, tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(weights, "DOWNLOADED", tmp_path / "gpt2")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = weights.find_checkpoint("auto")
    assert found.kind == "synthetic" and says("no weights downloaded, no network") in found.describe()


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_damaged_or_truncated_weights_are_caught(checkpoint, tmp_path, monkeypatch, damage):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    data = (checkpoint.path / weights.MODEL_FILE).read_bytes()[:4096]
    (folder / weights.MODEL_FILE).write_bytes(data)
    weights.write_sums(folder, [weights.MODEL_FILE])
    broken = data[:100] + bytes([data[100] ^ 1]) + data[101:] if damage == "flipped byte" else data[:1000]
    (folder / weights.MODEL_FILE).write_bytes(broken)
    monkeypatch.setattr(weights, "DOWNLOADED", folder)
    monkeypatch.setattr(weights, "_STAMPS", tmp_path / "verified.json")
    with pytest.raises(WeightsError) as e:
        weights.find_checkpoint("auto")
    assert says("a damaged or truncated weights file") in str(e.value) and "pixi run weights --force" in str(e.value)


def test_download_offline_says_so_and_changes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(weights, "DOWNLOADED", tmp_path / "gpt2")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert weights.download() == 1
    err = capsys.readouterr().err
    assert says("`pixi run weights` offline") in err and "synthetic" in err
    assert not (tmp_path / "gpt2").exists()


class _Hub:
    """Stands in for the hub: model_info answers; the first download of the model drops mid-file
    (hf_hub_download keeps the part in local_dir/.cache), the next finishes."""

    def __init__(self, source):
        self.source, self.calls = source, 0

    def model_info(self, *args, **kwargs):
        from types import SimpleNamespace

        return SimpleNamespace(siblings=[])

    def download(self, repo, name, *, local_dir, force_download):
        self.calls += 1
        if name == weights.MODEL_FILE and self.calls == 2:
            (local_dir / ".cache").mkdir(exist_ok=True)
            (local_dir / ".cache" / f"{name}.incomplete").write_bytes(b"half a file")
            raise ConnectionError("connection reset by peer")
        (local_dir / name).write_bytes((self.source / name).read_bytes())
        return str(local_dir / name)


def test_stopped_download_says_so_and_the_next_run_finishes(checkpoint, tmp_path, monkeypatch, capsys):
    import huggingface_hub

    hub = _Hub(checkpoint.path)
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: hub)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub.download)
    monkeypatch.setattr(weights, "DOWNLOADED", tmp_path / "gpt2")
    monkeypatch.setattr(weights, "DOWNLOAD_FILES", ("config.json", weights.MODEL_FILE))
    monkeypatch.setattr(weights, "_STAMPS", tmp_path / "verified.json")
    assert weights.download() == 1
    err = capsys.readouterr().err
    assert says("a download that stopped") in err and "resumes where it stopped" in err
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert weights.find_checkpoint("auto").kind == "synthetic"  # the checks go on meanwhile
    assert weights.download() == 0
    assert weights.find_checkpoint("auto").sha256 == checkpoint.sha256


def test_unfinished_download_is_reported(tmp_path, monkeypatch):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / weights.MODEL_FILE).write_bytes(b"partial")  # no sums file: the download never finished
    monkeypatch.setattr(weights, "DOWNLOADED", folder)
    with pytest.raises(WeightsError, match=says("a download that never finished")):
        weights.find_checkpoint("auto")


def test_read_only_weights_folder(tmp_path, monkeypatch):
    """(Tests may run as root, which ignores permissions: the write fails as it would for a learner.)"""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(weights, "SYNTHETIC", tmp_path / "synthetic-gpt2")
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    with pytest.raises(WeightsError, match=says("a read-only weights/ folder")):
        weights.find_checkpoint("synthetic")


def test_read_only_cache_folder_still_checks(checkpoint, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(reference, "CACHE", tmp_path / "no-cache")
    monkeypatch.setattr(np, "savez", refuse)
    refs = reference.activations(checkpoint)
    assert refs["logits"].shape[-1] == 50257 and not list((tmp_path / "no-cache").rglob("*.npz"))


def test_old_python_is_refused_with_what_to_do(monkeypatch, capsys):
    monkeypatch.setattr(sys, "version_info", (3, 12, 1))
    assert main(["07"]) == 2
    assert says("Python older than 3.13") in capsys.readouterr().err


def test_missing_package_says_what_to_install(tmp_path):
    fake = tmp_path / "tokenizers"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named tokenizers')\n")
    run = run_python("-m", "checker", "01", env={"PYTHONPATH": str(tmp_path)})
    assert run.returncode == 2 and says("a missing package") in run.stderr and INSTALL in run.stderr
    assert "Traceback" not in run.stderr


def test_runs_from_another_folder(checkpoint, tmp_path):
    run = run_python("-m", "checker", "01", "--check-solution", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "All 7 parts match" in run.stdout
