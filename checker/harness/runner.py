"""What every step's check does: import the learner's file, run each part,
compare it with the reference, and collect the verdicts into a Report.

A step's check module builds a `StepRun`, imports the learner's file with
`import_step` and takes what it needs with `need`, then calls `run_part` once
per part with the learner's callable, its inputs and the reference output
(inputs that are numpy arrays become MAX tensors; the result must come back as
a MAX tensor). A part that is not one tensor against a reference calls the
learner's code through `call` (time limit, errors worded for the learner) and
records its verdict with `add(Part(...))`. `finish` closes the report.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import sys
import types
from pathlib import Path
from types import ModuleType

import numpy as np

from checker import registry
from checker.diagnosis.compiled import SYMBOLIC, probe
from checker.diagnosis.localise import unplaced
from checker.harness.deps import earlier_steps_part, used_steps
from checker.harness.layout import book_number
from checker.references.reference import activations
from checker.reporting.compare import ONE_LAYER, Tolerance, compare
from checker.reporting.report import FAIL, PASS, SKIP, Part, Report
from checker.running.tensors import tensor, to_numpy
from runtime import compat, learner
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError
from runtime.loading import load_module
from runtime.paths import shown

# MAX is imported inside the functions that use it: importing it takes seconds.


def _key(value):
    """A hashable stand-in for a mistake's input, equal only for equal inputs: arrays by their bytes, values,
    frozen dataclasses (a Checkpoint), functions; TypeError for anything else (a tensor, a learner's module),
    which is not kept."""
    if isinstance(value, np.ndarray):
        return value.shape, value.dtype.str, hashlib.sha1(np.ascontiguousarray(value).tobytes()).digest()
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if isinstance(value, functools.partial):
        return value.func, _key(value.args), tuple(sorted((k, _key(v)) for k, v in value.keywords.items()))
    if value is None or isinstance(value, (bool, int, float, str, types.FunctionType)) or \
            (dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen):
        return value
    raise TypeError(f"no key for {type(value).__name__}")


_OUTPUTS: dict = {}  # (mistake, inputs' key) -> output: a process checks one learner file after another (tests)
_OUTPUTS_BYTES = 256 * 2**20  # what the outputs kept may hold in all
_kept_bytes = 0


def mistake_outputs(mistakes, *inputs):
    """Each mistake with its output on `inputs`, computed only when asked for (comparing stops at the
    first that matches: a model's mistakes each cost a whole forward pass) and once per process; one whose
    shapes cannot compose is left out."""
    global _kept_bytes
    for m in mistakes:
        try:
            key = (m, _key(inputs))
        except TypeError:
            key = None
        try:
            out = _OUTPUTS[key] if key in _OUTPUTS else m.compute(*inputs)
        except ValueError:  # e.g. a split mistake that changes the shape, inside forward
            continue
        if key is not None and key not in _OUTPUTS and isinstance(out, np.ndarray) and \
                _kept_bytes + out.nbytes <= _OUTPUTS_BYTES:
            _OUTPUTS[key] = out
            _kept_bytes += out.nbytes
        yield m, out


def prepare(step: str, checkpoint: Checkpoint) -> None:
    """What step `step`'s check compares with, computed now (with torch, once; then cached): the
    step's own `prepare` where it registered one, otherwise the shared activations."""
    (registry.step(step).prepare or activations)(checkpoint)


class StepRun:
    """One check of one step file: its parts, in order, and the report they make.

    step, what   the report's title: "Step 07 · GPT2MultiHeadAttention · steps/step_07.py"
    checkpoint   the weights the references come from (named in the report's first line)
    inputs       the report's "Input:" line: what the check feeds the learner's code
    parts        every part's name, in order: those never reached are reported as skipped
    """

    def __init__(self, step: str, what: str, path: Path, checkpoint: Checkpoint, inputs: str,
                 parts: list[str], *, timeout: float):
        self.path, self.timeout, self.names = path, timeout, parts
        self.report = Report(
            title=f"Step {step} · {what} · {shown(path)}",
            header=[f"Weights: {checkpoint.describe()}", f"Input:   {inputs}"],
        )
        self.step = step
        self.limits_hit = learner.limits_hit()  # so finish() knows whether a time limit cut this check short
        self.out_of_time = False  # a call into the learner's code ran past the time limit
        self.book = False  # the file follows the online book's contract for this step

    def import_step(self) -> ModuleType | None:
        """The learner's module, or None after recording why it did not import."""
        try:
            module = learner.import_step(self.path, f"_learner_step{self.step}_{abs(hash(str(self.path)))}",
                                         timeout=self.timeout)
        except LearnerError as e:
            self.add(Part.from_error(self.names[0], e))
            return None
        self.report.files = list(used_steps(module).values())
        for path in [self.path, *self.report.files]:
            lines = compat.advice(path)
            if lines:
                self.report.header.append(f"Imports: {path.name} was written for an earlier MAX or the online book's "
                                          f"layout; the check resolved them. To run it outside the check: "
                                          f"{'; '.join(lines)}")
        return module

    def import_functions(self, names: tuple[str, ...], checkpoint: Checkpoint) -> tuple[ModuleType, dict] | None:
        """The learner's module and {name: what it defines} for each of `names`, then the "earlier
        steps" part (checker.harness.deps); None when the file does not import or lacks one of them,
        each reason recorded (the check then finishes: "needs ...")."""
        step = self.import_step()
        fns = step and {name: self.need(step, name) for name in names}
        if not fns or None in fns.values():
            return None
        self.add(earlier_steps_part(step, checkpoint, timeout=self.timeout))
        return step, fns

    def need(self, module: ModuleType, name: str, book: tuple[str, str] | None = None):
        """`module.name`, or None after recording that it is missing.

        `book` = (name, description): what the online book's contract calls it; a file that defines
        that instead is checked through the step's adapter, and the header says so.
        """
        found = getattr(module, name, None)
        if found is None and book is not None and (found := getattr(module, book[0], None)) is not None:
            self.contract(book[1])
        elif found is None:
            also = f" (nor {book[0]}, the online book's name)" if book else ""
            self.add(Part(self.names[0], FAIL, f"{self.path.name} defines no {name}{also}"))
        return found

    def contract(self, description: str) -> None:
        """Records that the file follows the online book's contract for this step (see each step's adapter)."""
        self.book = True
        self.report.header.append(f"Contract: the online book's step {book_number(self.path, self.step)}: "
                                  f"{description}; checked on the same numbers")

    def call(self, fn, *args, **kwargs):
        """`fn(*args)`, the learner's code, under the check's time limit. Once a call ran out of time, the
        check calls nothing more (the next would most likely loop as long): each later part is a SKIP saying
        why, and the learner waits one limit, not one a part."""
        if self.out_of_time:
            raise LearnerError(f"not run: your code ran out of time above ({self.timeout:g} s); fix that first",
                               not_run=True)
        hits = learner.limits_hit()
        try:
            return learner.call(fn, *args, timeout=self.timeout, checking=self.path, **kwargs)
        finally:
            self.out_of_time = self.out_of_time or learner.limits_hit() > hits

    def add(self, part: Part) -> Part:
        self.report.parts.append(part)
        return part

    def run_part(self, name: str, fn, args, want: np.ndarray, axes: tuple[str, ...],
                 mistakes=(), mistake_args=(), what: str | None = None,
                 tol: Tolerance = ONE_LAYER, localise=None) -> Part:
        """Calls `fn(*args)`, compares with `want`; mistakes are computed on the array args + mistake_args.

        When the output is wrong and no mistake matches, `localise(got)` (see checker.diagnosis.localise) adds
        lines saying which sub-part is wrong.
        """
        if fn is None:
            return self.add(Part(name, FAIL, f"{what or name} is missing"))
        try:
            got = to_numpy(self.call(fn, *(tensor(a) if isinstance(a, np.ndarray) else a for a in args)),
                           f"{what or name}()")
        except LearnerError as e:
            return self.add(Part.from_error(name, e))
        verdict = compare(got, want, axes=axes, mistakes=[], tol=tol)
        if not verdict.ok and mistakes:  # only now compute what each known mistake would give
            inputs = [a.astype(np.float64) for a in args if isinstance(a, np.ndarray)]
            outs = mistake_outputs(mistakes, *inputs, *mistake_args)
            verdict = compare(got, want, axes=axes, mistakes=outs, tol=tol)
        part = Part.from_verdict(name, verdict)
        if not verdict.ok and verdict.mistake is None and localise is not None and got.shape == want.shape:

            try:
                lines = localise(got)
            except Exception:  # noqa: BLE001 - a probe that cannot run (the learner's code failing in it) adds nothing
                lines = []
            x = next((a for a in args if isinstance(a, np.ndarray)), None)
            part.details += lines + unplaced(lines, got, want, x)
        return self.add(part)

    def construct(self, build, state: dict[str, np.ndarray], summary: str, *, try_forward):
        """The learner's module from `build()`, with `state` loaded, after a PASS "construction" part.

        On failure: a "construction" part saying what is wrong, TODO parts for
        the rest if `try_forward(module)` shows they are not written either,
        and None; the caller then finishes the report.
        """
        try:
            module = load_module(self, build, state)
        except LearnerError as e:
            self.add(Part.from_error("construction", e))
            after = self.names[self.names.index("construction") + 1:]
            self.todo_only(after, lambda: try_forward(build()))
            return None
        self.add(Part("construction", PASS, summary))
        return module

    def compiled_part(self, learner_step: ModuleType, checkpoint: Checkpoint, refs: dict) -> Part:
        """The step's piece compiled with symbolic dimensions, as `pixi run gpt2` compiles it.

        Runs only once every part before it passes (a new graph takes ~15 s to
        compile); otherwise the part is left to `finish` as skipped.
        """
        if any(p.status != PASS for p in self.report.parts):
            return None
        what = registry.step(self.step).probe.what
        print(f"(compiling your {what} with a symbolic batch and length, as pixi run gpt2 does: "
              "~15 s after a change, ~2 s when unchanged)", file=sys.stderr, flush=True)
        try:
            verdict = probe(self.step, learner_step, checkpoint, refs, self)
        except LearnerError as e:
            return self.add(Part("compiled", FAIL, f"your {what} cannot be compiled with a symbolic batch and "
                                 f"length, as pixi run gpt2 compiles it: {e}", [SYMBOLIC]))
        part = Part.from_verdict("compiled", verdict)
        part.summary = f"symbolic batch and length, as pixi run gpt2 runs it: {part.summary}"
        if not verdict.ok:
            part.details.append(f"run op by op your {what} is right: what changes is how MAX compiles it")
        return self.add(part)

    def point_to_earlier_steps(self, part: Part) -> None:
        """When `part` fails and so does the "earlier steps" part, repeat which step to fix first."""
        earlier = self.report.parts[0]
        if part.status != PASS and earlier.name == "earlier steps" and earlier.status != PASS:
            # said first; the probes' lines would blame this part for what an earlier step does
            own = [d for d in part.details if not d.startswith(("where", "these probes"))]
            part.details = [*earlier.details, *own]

    def todo_only(self, names: list[str], fn, *args) -> None:
        """Records parts `names` as TODO if `fn(*args)` is not written yet; otherwise records nothing.

        For a part that cannot be checked (its module did not load) but whose
        TODO status is still worth telling. It runs lazily: nothing is computed
        (a whole GPT-2's random initialisation would take seconds), only traced.
        """
        from max.experimental import functional as F

        try:
            with F.lazy():
                self.call(fn, *args)
        except LearnerError as e:
            if e.todo:
                for name in names:
                    self.add(Part.from_error(name, e))

    def finish(self, skipped_because: str = "") -> Report:
        """The report, with any parts not reached marked as skipped."""
        done = {p.name for p in self.report.parts}
        self.report.parts += [Part(n, SKIP, skipped_because) for n in self.names if n not in done]
        self.report.parts.sort(key=lambda p: self.names.index(p.name))
        self.report.printed = learner.printed()
        self.report.cut_short = learner.limits_hit() > self.limits_hit
        return self.report
