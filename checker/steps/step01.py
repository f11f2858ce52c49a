"""Step 01: the learner's GPT2Config against the checkpoint's config.json.

One part per field. `config.json` is what Hugging Face's `GPT2Config`
serialises; its `n_inner: null` means 4 * n_embd.
"""

from __future__ import annotations

from pathlib import Path

from checker.reporting.compare import Mistake
from checker.running.learner import LearnerError
from checker.reporting.report import FAIL, PASS, TODO, Part, Report
from checker.harness.runner import StepRun
from checker.references.weights import Checkpoint
from checker.registry import Step, register

CLASS = "GPT2Config"

def _wrong(field: str, value, what: str, hint: str) -> tuple[object, Mistake]:
    return value, Mistake(f"{field}-{value}", f"{field} = {value!r} is {what}", hint)


# field -> {wrong value: the mistake it shows}
MISTAKES: dict[str, dict[object, Mistake]] = {
    "vocab_size": dict([
        _wrong("vocab_size", 50256, "one short of GPT-2's vocabulary",
               "50,000 BPE merges + 256 byte tokens + 1 <|endoftext|>"),
        _wrong("vocab_size", 50000, "the number of BPE merges, not of tokens",
               "add the 256 byte tokens and <|endoftext|>"),
        _wrong("vocab_size", 50304, "nanoGPT's padded vocabulary (a multiple of 64, for speed)",
               "the checkpoint's embedding has one row per real token"),
    ]),
    "n_positions": dict([
        _wrong("n_positions", 2048, "GPT-3's context length", "GPT-2 small attends over at most 1024 tokens"),
        _wrong("n_positions", 512, "BERT's context length", "GPT-2 small attends over at most 1024 tokens"),
    ]),
    "n_embd": dict([
        _wrong("n_embd", 1024, "GPT-2 medium's width", "GPT-2 small is the 124M model"),
        _wrong("n_embd", 64, "the width of one head", "n_embd is the whole residual stream: 12 heads x 64"),
    ]),
    "n_layer": dict([_wrong("n_layer", 24, "GPT-2 medium's depth", "GPT-2 small is the 124M model")]),
    "n_head": dict([
        _wrong("n_head", 64, "head_dim, the size of one head", "n_head counts the heads: 768 / 64"),
        _wrong("n_head", 16, "GPT-2 medium's head count", "GPT-2 small is the 124M model"),
    ]),
    "n_inner": dict([
        _wrong("n_inner", 768, "n_embd: the MLP's hidden layer is wider than that", "GPT-2's MLP expands by 4x"),
        _wrong("n_inner", None, "what Hugging Face reads as 4 * n_embd", "write the number so your MLP can use it"),
    ]),
    "layer_norm_epsilon": dict([
        _wrong("layer_norm_epsilon", 1e-12, "BERT's epsilon", "GPT-2's LayerNorms use 1e-5"),
        _wrong("layer_norm_epsilon", 1e-6, "a common default, but not GPT-2's",
               "look for layer_norm_epsilon in config.json"),
    ]),
}
CATALOGUE = [m for wrong in MISTAKES.values() for m in wrong.values()]
FIELDS = list(MISTAKES)


def expected(checkpoint: Checkpoint) -> dict[str, object]:
    return {f: getattr(checkpoint.learner_config(), f) for f in FIELDS}


def _same(got, want) -> bool:
    if isinstance(want, float):
        return isinstance(got, (int, float)) and abs(got - want) <= 1e-9 * abs(want)
    return type(got) is int and got == want


def prepare(checkpoint: Checkpoint) -> None:
    """Nothing to compute: the reference is the checkpoint's config.json."""


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    want = expected(checkpoint)
    run = StepRun("01", CLASS, path, checkpoint, f"GPT2Config() against {checkpoint.path.name}/config.json",
                  FIELDS, timeout=timeout)
    step = run.import_step()
    cls = step and run.need(step, CLASS)
    if cls is None:
        return run.finish(f"needs {CLASS}")
    try:
        config = run.call(cls)
    except LearnerError as e:
        run.add(Part.from_error(FIELDS[0], e))
        return run.finish(f"needs {CLASS}() to construct")
    for field in FIELDS:
        if not hasattr(config, field):
            run.add(Part(field, FAIL, f"GPT2Config has no field {field} (use Hugging Face's names)"))
            continue
        got = getattr(config, field)
        if _same(got, want[field]):
            run.add(Part(field, PASS, f"{got!r}", margin=0.0))
        elif got in (0, 0.0) and not isinstance(got, bool):
            run.add(Part(field, TODO, f"still {got!r}: fill in GPT-2 small's value"))
        else:
            known = next((m for value, m in MISTAKES[field].items() if _same(got, value) or got is value), None)
            run.add(Part(field, FAIL, f"{got!r}, expected {want[field]!r}", mistake=known))
    return run.finish()


register(Step("01", check, CATALOGUE, reads=("GPT2Config",), prepare=prepare))
