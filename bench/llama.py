"""llama.cpp's Q8_0 decode of the same checkpoint, for `python -m bench --llama-cpp SOURCE`.

llama.cpp is what a user would pick for fast decode on a CPU, and its Q8_0 is step 16's format:
int8 weights in blocks of 32 along a row, one scale per block (llama.cpp keeps it as float16, and
multiplies against the activations quantised to int8 too). Where `llama-cpp-python` is installed
(`pip install llama-cpp-python` compiles llama.cpp from source) and SOURCE is a llama.cpp source tree
(for its converter, convert_hf_to_gguf.py, and its gguf-py), the checkpoint is converted to GGUF
Q8_0 and decoded greedily at batch 1, one token at a time, with a thread per CPU:

    convert   checkpoint folder -> model-q8_0.gguf (the stand-ins' small tokenizers are declared GPT-2's
              pre-tokenizer: only token ids go in and out)
    decoder   (prompt ids [1, T], steps) -> (new ids [1, steps + 1], seconds of the one-token steps)

Where the CPU has AMX (int8 tile products), llama.cpp repacks Q8_0 weights for them, and that product
crashes on GPT-2 (a segmentation fault in ggml_backend_amx_mul_mat, llama.cpp's issue 20824; seen with
0.3.36 on a Xeon with AMX): there llama.cpp runs with its repacking off (`NO_REPACK`, llama-server's
--no-repack), its AVX-512 VNNI products. Elsewhere on x86 Q8_0 is never repacked: the setting changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.machine import cpu

# llama_cpp is imported inside the functions that use it: importing it takes seconds.

_CONVERT = """
import sys
source = sys.argv.pop(1)
sys.path[:0] = [source, source + "/gguf-py"]
import conversion.base as base
for cls in [c for c in vars(base).values() if isinstance(c, type) and hasattr(c, "get_vocab_base_pre")]:
    cls.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
import convert_hf_to_gguf
convert_hf_to_gguf.main()
"""


NO_REPACK = "amx_int8" in cpu()[1]  # llama.cpp's repacking off: its AMX product crashes (above)
REPACK_NOTE = ("llama.cpp ran with its weight repacking off (llama-server's --no-repack): on this CPU it would "
               "repack Q8_0 for AMX, whose product crashes on GPT-2 (llama.cpp's issue 20824)")


def missing(source: Path | None) -> str | None:
    """Why llama.cpp cannot be measured here, or None when it can."""
    try:
        import llama_cpp  # noqa: F401
    except ModuleNotFoundError as e:
        if e.name == "llama_cpp":
            return "llama-cpp-python is not installed (pip install llama-cpp-python compiles llama.cpp)"
        return f"llama-cpp-python is installed but cannot be imported: {e}, a package it depends on"
    except (ImportError, OSError) as e:  # its compiled library missing, or built for another CPU
        return f"llama-cpp-python is installed but cannot be imported: {type(e).__name__}: {e}"
    if source is None or not (Path(source) / "convert_hf_to_gguf.py").exists():
        return f"{source} holds no convert_hf_to_gguf.py: give a llama.cpp source tree"
    return None


def convert(folder: Path, source: Path, out: Path) -> Path:
    """The checkpoint in `folder` as GGUF Q8_0 in `out`/model-q8_0.gguf (its config given n_ctx, which the
    converter reads for GPT-2)."""
    staged = out / "checkpoint"
    staged.mkdir(parents=True, exist_ok=True)
    for item in folder.iterdir():
        if item.name != "config.json":
            shutil.copy(item, staged / item.name)
    config = json.loads((folder / "config.json").read_text())
    config.setdefault("n_ctx", config["n_positions"])
    (staged / "config.json").write_text(json.dumps(config))
    gguf = out / "model-q8_0.gguf"
    done = subprocess.run([sys.executable, "-c", _CONVERT, str(source), str(staged), "--outtype", "q8_0",
                           "--outfile", str(gguf)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise SystemExit(f"llama.cpp's convert_hf_to_gguf.py failed (exit code {done.returncode}):\n{tail}")
    return gguf


def decoder(gguf: Path):
    """Greedy decode through llama.cpp: (prompt ids [1, T], steps) -> (ids [1, steps + 1], seconds)."""
    from llama_cpp import Llama
    from llama_cpp import llama as wrapper

    defaults = wrapper.llama_cpp.llama_model_default_params

    def without_repacking():  # llama-cpp-python has no argument for it: its default model params, changed
        params = defaults()
        params.use_extra_bufts = False
        return params

    if NO_REPACK:
        wrapper.llama_cpp.llama_model_default_params = without_repacking
    try:
        llm = Llama(model_path=str(gguf), n_ctx=1024, n_threads=os.cpu_count(), n_threads_batch=os.cpu_count(),
                    verbose=False)
    finally:
        wrapper.llama_cpp.llama_model_default_params = defaults

    def last_logits() -> np.ndarray:
        # the last token's logits, as llama.cpp left them (llama-cpp-python 0.3 copies them to `scores` only
        # with logits_all, which makes every step several times slower)
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))

    def run(prompt: np.ndarray, steps: int) -> tuple[np.ndarray, float]:
        llm.reset()
        llm.eval(prompt[0].tolist())
        new = [int(np.argmax(last_logits()))]
        started = time.perf_counter()
        for _ in range(steps):
            llm.eval([new[-1]])
            new.append(int(np.argmax(last_logits())))
        return np.array([new]), time.perf_counter() - started

    return run
