"""The online book's February 2026 step 11, run_model: a main program, with no check of its own here.

run_model loads GPT-2 from the Hugging Face hub (GPT2LMHeadModel.from_pretrained("gpt2")), copies its
state dict into the book's MaxGPT2LMHeadModel and then transposes the Conv1D weights, compiles the
model and reads prompts from the keyboard, each passed to generate_text. The check does not run it:
it needs the hub and a keyboard, and MAX 26.7's load_state_dict refuses a tensor whose shape is not
its parameter's, which the book's load-then-transpose order gives it (Conv1D weights are [in, out]).
What it runs is checked, on numbers: its MaxGPT2LMHeadModel as step 11 (loaded as the book's main.py
loads it, logits, compiled) and generate_text as step 12, with the steps they use. What it calls is
read from its source.

Parts:
  earlier steps  the learner's files run_model imports, each checked as its course step
  run_model      takes no required argument; its source builds the model, loads a state dict,
                 transposes the Conv1D weights, compiles the model and calls generate_text
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from checker.harness.deps import earlier_steps_part
from checker.harness.runner import StepRun
from checker.reporting.report import FAIL, PASS, Part, Report
from runtime.checkpoints import Checkpoint

NOT_RUN = ("Not run: run_model loads GPT-2 from the Hugging Face hub and reads prompts from the keyboard, and "
           "MAX 26.7's load_state_dict refuses a weight of another shape (transpose each Conv1D weight before "
           "loading it, as this course's step 11 does, not after); checked: the steps it runs, on numbers, "
           "and what it calls, from its source")
# What run_model's source must use -> what that does, as the book's step 11 lists it.
CALLS = {
    "MaxGPT2LMHeadModel": "builds the book's model (step 08)",
    "load_state_dict": "loads the Hugging Face weights into it",
    "compile": "compiles it for int64 ids of shape (batch, seqlen)",
    "generate_text": "generates from each prompt (step 10)",
}
CONV1D = ("c_attn", "c_proj", "c_fc")  # the layers whose weights Hugging Face stores [in, out]


def _used(function: ast.FunctionDef) -> set[str]:
    """The names, attributes and string constants in a function's body."""
    used = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)
    return used


def _calls_part(path: Path, run_model) -> Part:
    """run_model's signature and what its source calls (it is read, not run)."""
    required = [p.name for p in inspect.signature(run_model).parameters.values()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required:
        return Part("run_model", FAIL, f"run_model has required parameters {required}: a main program takes none")
    tree = ast.parse(path.read_text())
    function = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and n.name == "run_model")
    used = _used(function)
    missing = [f"{name} ({what})" for name, what in CALLS.items() if name not in used]
    if not ({"T", "transpose", "permute"} & used and set(CONV1D) <= used):
        missing.append(f"a transpose of the {', '.join(CONV1D)} weights (Conv1D stores them [in, out])")
    if missing:
        return Part("run_model", FAIL, f"run_model never uses {missing[0]}", [f"nor {m}" for m in missing[1:]])
    return Part("run_model", PASS, "takes no argument; builds MaxGPT2LMHeadModel, loads the weights, transposes "
                f"{', '.join(CONV1D)}, compiles, calls generate_text (read from its source, not run)")


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    run = StepRun("11", "run_model", path, checkpoint, "the steps run_model runs, each checked as its course step; "
                  "run_model's source", ["earlier steps", "run_model"], timeout=timeout)
    run.report.header.append(NOT_RUN)
    run_model = (step := run.import_step()) and run.need(step, "run_model")
    if run_model is None:
        return run.finish("needs run_model")
    run.add(earlier_steps_part(step, checkpoint, timeout=timeout))
    run.add(_calls_part(path, run_model))
    return run.finish()
