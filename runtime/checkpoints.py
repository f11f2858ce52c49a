"""GPT-2 checkpoints: find one, verify it, download the real one, or generate a stand-in.

The checks look, in order, for:
  1. `weights/gpt2/`            the real `openai-community/gpt2`, from `pixi run weights`
  2. the Hugging Face cache     the same checkpoint, if `transformers` already fetched it
  3. `weights/synthetic-gpt2/`  a deterministic GPT-2-shaped stand-in, generated once
                                locally with `transformers` (no network needed)

GPT2_WEIGHTS=synthetic skips 1 and 2; GPT2_WEIGHTS=scale uses the second
stand-in, `weights/gpt2-scale-synthetic/`, whose numbers have real GPT-2's
magnitudes (see runtime/standins.py). All are Hugging Face checkpoints (`config.json` + `model.safetensors`)
and load through the same code. The sha256 of `model.safetensors` is recorded
when a checkpoint is written and verified when it is used; a verified file is
remembered by size and modification time, so the hash is not recomputed on
every run.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from runtime.files import MODEL_FILE, SUMS_FILE, read_sums, sha256_file, write_sums
from runtime.paths import CACHE, WEIGHTS, save, shown
from runtime.standins import SCALE_LAYER, generate, write_tokenizer

# safetensors and huggingface_hub are imported inside the functions that use them: importing them takes seconds.

HF_REPO_ID = "openai-community/gpt2"
DOWNLOADED = WEIGHTS / "gpt2"
SYNTHETIC = WEIGHTS / "synthetic-gpt2"
SCALE = WEIGHTS / "gpt2-scale-synthetic"
STANDINS = ("synthetic", "scale")  # GPT2_WEIGHTS values that choose a stand-in
DOWNLOAD_FILES = (
    "config.json",
    "generation_config.json",
    MODEL_FILE,
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
)


class WeightsError(Exception):
    """A checkpoint problem, with a message written for the learner."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path  # folder holding config.json and model.safetensors
    kind: str  # "downloaded", "hf-cache", or a stand-in: "synthetic" or "scale"
    sha256: str  # of model.safetensors

    @property
    def is_real(self) -> bool:
        return self.kind not in STANDINS

    @property
    def layer(self) -> int:
        """The block whose sub-modules the step checks look at: the first one whose input
        carries the massive activations on the GPT-2-scale stand-in, h[0] otherwise."""
        return SCALE_LAYER if self.kind == "scale" else 0

    def describe(self) -> str:
        where = {
            "downloaded": f"GPT-2 ({HF_REPO_ID}) from {shown(self.path)}",
            "hf-cache": f"GPT-2 ({HF_REPO_ID}) from the Hugging Face cache",
            "synthetic": (
                f"SYNTHETIC GPT-2-shaped checkpoint in {shown(self.path)} (offline stand-in, "
                "random weights; `pixi run weights` fetches the real one)"
            ),
            "scale": (
                f"GPT-2-SCALE SYNTHETIC checkpoint in {shown(self.path)} (offline stand-in with real GPT-2's "
                "magnitudes: massive activations ~3000 on the first token, logits around -100 +- 150)"
            ),
        }[self.kind]
        return f"{where}, sha256 {self.sha256[:12]}"

    def config(self) -> dict:
        return json.loads((self.path / "config.json").read_text())

    def learner_config(self) -> SimpleNamespace:
        """config.json as an object with GPT-2's attribute names, to construct a learner's modules.

        It is not the learner's GPT2Config, so a step's check does not depend on step 01.
        """
        return learner_config(self.config())

    def tensors(self, names: list[str]) -> dict[str, np.ndarray]:
        """The named tensors, as float32 numpy arrays in the checkpoint's layout."""
        from safetensors import safe_open

        try:
            with safe_open(self.path / MODEL_FILE, framework="np") as f:
                keys = set(f.keys())
                # Hugging Face saves GPT-2 with or without the `transformer.` prefix.
                def key(name: str) -> str:
                    return name if name in keys else name.removeprefix("transformer.")

                return {n: f.get_tensor(key(n)).astype(np.float32) for n in names}
        except Exception as e:  # corrupt header, missing tensor, ...
            raise WeightsError(
                f"Could not read {', '.join(names)} from {shown(self.path / MODEL_FILE)}: {e}\n"
                "The file may be damaged: run `pixi run weights --force` to fetch it again."
            ) from e


def learner_config(c: dict) -> SimpleNamespace:
    """A Hugging Face GPT-2 config.json (a dict) as an object with GPT-2's attribute names."""
    return SimpleNamespace(
        vocab_size=c["vocab_size"], n_positions=c["n_positions"], n_embd=c["n_embd"],
        n_layer=c["n_layer"], n_head=c["n_head"], n_inner=c.get("n_inner") or 4 * c["n_embd"],
        layer_norm_epsilon=c["layer_norm_epsilon"],
    )


_STAMPS = CACHE / "verified.json"


REDOWNLOAD = "Fetch it again with `pixi run weights --force`."


def verify(path: Path, expected: str, remedy: str = REDOWNLOAD) -> str:
    """Checks `path` against its recorded sha256; returns the digest.

    A file already verified at the same size and modification time is
    trusted without hashing it again (hashing GPT-2 takes ~2 s).
    """
    st = path.stat()
    fingerprint = [st.st_size, st.st_mtime_ns, expected]
    try:
        stamps = json.loads(_STAMPS.read_text())
    except (OSError, ValueError):
        stamps = {}
    if stamps.get(str(path)) == fingerprint:
        return expected
    actual = sha256_file(path)
    if actual != expected:
        raise WeightsError(
            f"{shown(path)} is damaged: its sha256 is {actual[:12]}..., "
            f"but {expected[:12]}... was recorded when it was written.\n{remedy}"
        )
    stamps[str(path)] = fingerprint
    save(_STAMPS, lambda tmp: tmp.write_text(json.dumps(stamps, indent=1)))  # read-only: hashed every time
    return actual


def _downloaded() -> Checkpoint | None:
    model = DOWNLOADED / MODEL_FILE
    if not model.exists():
        return None
    expected = read_sums(DOWNLOADED).get(MODEL_FILE)
    if expected is None:
        raise WeightsError(
            f"{shown(DOWNLOADED)} has no {SUMS_FILE}: the download did not finish.\n"
            "Run `pixi run weights` again; it resumes where it stopped."
        )
    return Checkpoint(DOWNLOADED, "downloaded", verify(model, expected))


def _hf_cache() -> Checkpoint | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    model = try_to_load_from_cache(HF_REPO_ID, MODEL_FILE)
    config = try_to_load_from_cache(HF_REPO_ID, "config.json")
    if not (isinstance(model, str) and isinstance(config, str)):
        return None
    # The cache names each large file's blob by its sha256.
    expected = Path(model).resolve().name
    return Checkpoint(Path(model).parent, "hf-cache", verify(Path(model), expected))


def _standin(kind: str) -> Checkpoint:
    folder = {"synthetic": SYNTHETIC, "scale": SCALE}[kind]
    expected = read_sums(folder).get(MODEL_FILE)
    if expected is None or not (folder / MODEL_FILE).exists():

        why = "No GPT-2 weights found: generating" if kind == "synthetic" else "Generating"
        print(f"{why} a synthetic GPT-2-shaped checkpoint ({kind}) in {shown(folder)} (once, ~30 s)...",
              file=sys.stderr, flush=True)
        try:
            expected = generate(folder, kind)
        except OSError as e:
            raise WeightsError(
                f"cannot write the synthetic checkpoint to {shown(folder)}: {e.strerror or e}.\n"
                f"Make {shown(folder.parent)} writable (or work in a writable copy of the repository)."
            ) from None
    if not (folder / "tokenizer.json").exists():  # made by an older version of the course

        write_tokenizer(folder)
    remedy = f"Delete {shown(folder)}; the next check generates it again."
    return Checkpoint(folder, kind, verify(folder / MODEL_FILE, expected, remedy))


def find_checkpoint(standin: str | None = None) -> Checkpoint:
    """The checkpoint the checks use (see the module docstring for the order).

    `standin` ("synthetic" or "scale"), or the environment variable
    GPT2_WEIGHTS set to one of them, skips the real checkpoints: the test
    suite uses it so that its results do not depend on what a machine has
    downloaded.
    """
    wanted = standin or os.environ.get("GPT2_WEIGHTS", "auto")
    if wanted not in (*STANDINS, "auto"):
        raise WeightsError(f"GPT2_WEIGHTS={wanted}: expected auto, {' or '.join(STANDINS)}")
    if wanted == "auto":
        for found in (_downloaded(), _hf_cache()):
            if found is not None:
                return found
        wanted = "synthetic"
    return _standin(wanted)


def checkpoint_for_command() -> Checkpoint | None:
    """find_checkpoint() for a command line tool: None after saying what is wrong (the tool then exits 2)."""
    try:
        return find_checkpoint()
    except WeightsError as e:
        print(f"Weights problem: {e}", file=sys.stderr)
        return None


def download(force: bool = False) -> int:
    """`pixi run weights`: fetches GPT-2 into `weights/gpt2/` with progress bars."""
    from huggingface_hub import HfApi, hf_hub_download

    if force and (DOWNLOADED / SUMS_FILE).exists():
        (DOWNLOADED / SUMS_FILE).unlink()
    try:
        info = HfApi().model_info(HF_REPO_ID, files_metadata=True)
    except Exception as e:
        print(
            f"Could not reach the Hugging Face hub to fetch {HF_REPO_ID}:\n  {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}\n"
            "Are you online (or behind a proxy that needs HTTPS_PROXY)? Nothing was changed.\n"
            "Until then the checks run on a synthetic GPT-2-shaped checkpoint: every check\n"
            "still compares your code with transformers, but generated text will be gibberish.",
            file=sys.stderr,
        )
        return 1
    published = {s.rfilename: s.lfs.sha256 for s in info.siblings if s.lfs is not None}
    try:
        DOWNLOADED.mkdir(parents=True, exist_ok=True)
        for name in DOWNLOAD_FILES:
            # Resumes a partial download; shows a progress bar per file.
            hf_hub_download(HF_REPO_ID, name, local_dir=DOWNLOADED, force_download=force)
    except PermissionError as e:
        print(f"Cannot write to {shown(DOWNLOADED)}: {e.strerror}. Make weights/ writable and run "
              "`pixi run weights` again.", file=sys.stderr)
        return 1
    except Exception as e:  # the connection dropped, the disk filled, Ctrl-C is not caught
        print(f"The download stopped: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}\n"
              "Run `pixi run weights` again; it resumes where it stopped.", file=sys.stderr)
        return 1
    sums = write_sums(DOWNLOADED, list(DOWNLOAD_FILES))
    for name, digest in published.items():
        if name in sums and sums[name] != digest:
            (DOWNLOADED / SUMS_FILE).unlink()
            print(
                f"{name}: sha256 {sums[name][:12]}... does not match the hub's {digest[:12]}...\n"
                "The download is damaged; run `pixi run weights --force`.",
                file=sys.stderr,
            )
            return 1
    print(f"GPT-2 is in {shown(DOWNLOADED)} (sha256 of {MODEL_FILE}: {sums[MODEL_FILE][:12]}...).")
    return 0
