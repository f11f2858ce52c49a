"""Step 12 for the online book's February 2026 steps 09 and 10, whose files step 12's own check cannot
read (checker.harness.layout places them here); the adapter beside step 12's check, sharing its parts.

The book split this course's step 12 in two, with a Hugging Face tokenizer and [1, T] Tensors of ids:

    09  encode_text(text, tokenizer, device, max_length=128) -> [1, T] int64 Tensor
        decode_tokens(token_ids, tokenizer) -> str
    10  generate_text(model, tokenizer, device, prompt, max_new_tokens=50, temperature=0.8,
                      do_sample=True) -> str: encodes the prompt with step 09, appends one token per
        call of the model (argmax, or a draw from softmax(logits / temperature) with numpy's global
        generator) and returns the decoded text

Parts, for step 09: encode_text (the prompt's ids, exact), max_length (truncation), decode_tokens
(the ids of the prompt and its greedy continuation back to the tokenizer's text). For step 10: the
earlier steps it uses; greedy (do_sample=False on the course's compiled GPT-2: the new ids equal
Hugging Face generate's, and the text returned is theirs); distribution (BOOK_DRAWS tokens sampled in
one call on scripted spread logits, numpy seeded by the check, against softmax(logits / T)). No eos,
top_k or seed is in the book's contract, so none is checked. The model's calls are recorded: the
tokens generate_text made are read from the ids it passes, whatever its loop prints.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from checker.harness.deps import earlier_steps_part
from checker.harness.layout import defined
from checker.harness.runner import StepRun
from checker.references.reference import NEW_TOKENS, PROMPT, greedy_continuation
from checker.reporting.compare import Mistake
from checker.reporting.report import FAIL, PASS, Part, Report
from checker.steps.step12.check import BOOK_DRAWS, BOOK_TV_LIMIT, compiled_solution, greedy_part, prepare, scored
from checker.steps.step12.mistakes import GREEDY_MISTAKES, RAW_TOKENS
from checker.steps.step12.reference import CANDIDATES, SPREAD, TEMPERATURE, VOCAB
from runtime.checkpoints import Checkpoint
from runtime.learner import LearnerError
from runtime.tokenizer import tokenizer_of

# MAX and transformers are imported inside the functions that use them: importing them takes seconds.

__all__ = ["check", "prepare"]
# The page's sampler casts float32 probabilities to float64 and draws with np.random.choice, which
# wants their sum to be 1 within 1.5e-8; a float32 softmax over 50257 ids is off by ~1e-7.
NOT_NORMALISED = Mistake(
    "probabilities-not-normalised", "np.random.choice refused the probabilities: a float32 softmax cast to "
    "float64 sums to 1 only within float32's precision, and numpy wants 1 within 1.5e-8",
    "divide them by their sum before drawing: probs_np = probs_np / probs_np.sum()")
NOT_FED_BACK = next(m for m in GREEDY_MISTAKES if m.id == "greedy-not-fed-back")
ENCODE_PARTS = ["encode_text", "max_length", "decode_tokens"]
GENERATE_PARTS = ["earlier steps", "greedy", "distribution"]
SHORT = 3  # max_length of the truncation part


def hf_tokenizer(checkpoint: Checkpoint):
    """The checkpoint's tokenizer as the book's code uses it: a transformers tokenizer (encode with
    max_length and truncation, decode with skip_special_tokens), read from tokenizer.json offline."""
    from transformers import GPT2TokenizerFast

    return GPT2TokenizerFast(tokenizer_file=str(checkpoint.path / "tokenizer.json"))


def _ids(value, what: str) -> np.ndarray:
    """A [1, T] int64 MAX Tensor of ids from learner code, as numpy; else a LearnerError saying what it is."""
    from max.experimental.tensor import Tensor

    if not isinstance(value, Tensor):
        raise LearnerError(f"{what} returned {type(value).__name__}, not a max Tensor of token ids")
    array = np.from_dlpack(value.to(_cpu()))
    if array.dtype != np.int64 or array.ndim != 2 or array.shape[0] != 1:
        raise LearnerError(f"{what} returned a {array.dtype} Tensor of shape {list(array.shape)}; expected int64 "
                           "[1, T] (a batch of one sequence)")
    return array


def _cpu():
    from max.driver import CPU

    return CPU()


def check(path: Path, checkpoint: Checkpoint, *, timeout: float = 300.0) -> Report:
    tokenizer = tokenizer_of(checkpoint)
    prompt = tokenizer.encode(PROMPT).ids
    want = greedy_continuation(checkpoint, prompt)
    if "generate_text" not in defined(path):
        run = StepRun("12", "encode_text, decode_tokens", path, checkpoint,
                      f"prompt {PROMPT!r} ({len(prompt)} tokens) and its greedy continuation; the checkpoint's "
                      "tokenizer, as a transformers tokenizer", ENCODE_PARTS, timeout=timeout)
        step = run.import_step()
        if step is None:
            return run.finish("needs the file to import")
        return _check_encode_decode(run, step, checkpoint, prompt, want)
    run = StepRun("12", "generate_text", path, checkpoint,
                  f"prompt {PROMPT!r} ({len(prompt)} tokens), {NEW_TOKENS} new tokens; greedy on the course's own "
                  "GPT-2, compiled; sampling on scripted logits that are spread", GENERATE_PARTS, timeout=timeout)
    generate_text = (step := run.import_step()) and run.need(step, "generate_text")
    if generate_text is None:
        return run.finish("needs generate_text")
    run.add(earlier_steps_part(step, checkpoint, timeout=timeout))
    hf = hf_tokenizer(checkpoint)

    def tokens(model, n: int, **kw) -> tuple[list[int], object]:
        """generate_text's first n new ids (it is asked for one more, whose call shows the n) and its result."""
        recorded = _Recorded(model)
        text = run.call(generate_text, recorded, hf, _cpu(), PROMPT, max_new_tokens=n + 1, **kw)
        if not recorded.seen:
            raise LearnerError("generate_text never called the model")
        if recorded.seen[-1][:len(prompt)] != prompt:
            raise LearnerError(f"generate_text passed the model ids {recorded.seen[-1][:8]}..., which do not "
                               f"start with the prompt's {prompt[:8]}...: encode the prompt with encode_text")
        return recorded.seen[-1][len(prompt):], (text, recorded)

    model = compiled_solution(checkpoint)
    try:
        greedy, (text, recorded) = tokens(model, NEW_TOKENS, do_sample=False)
        if not greedy and len(recorded.seen) > 1:  # each call saw the prompt alone
            part = Part("greedy", FAIL, f"the model was given the prompt alone at all {len(recorded.seen)} calls",
                        mistake=NOT_FED_BACK)
        else:
            part = greedy_part(lambda *a, **k: greedy, model, prompt, want)
        if part.status == PASS:
            part = _text_part(part, text, hf, recorded)
        run.add(part)
    except LearnerError as e:
        run.add(Part.from_error("greedy", e))

    np.random.seed(0)
    try:
        draws, _ = tokens(_SpreadLogits(), BOOK_DRAWS, do_sample=True, temperature=TEMPERATURE)
    except LearnerError as e:
        part = run.add(Part.from_error("distribution", e))
        part.mistake = NOT_NORMALISED if "probabilities do not sum to 1" in str(e) else None
        return run.finish()
    run.add(scored(draws, "generate_text", f"{BOOK_DRAWS} tokens sampled by generate_text from {CANDIDATES} "
                    f"spread logits at T={TEMPERATURE}", None, BOOK_TV_LIMIT))
    return run.finish()


def _text_part(part: Part, text, hf, recorded: _Recorded) -> Part:
    """The greedy part, failed when generate_text did not return the text of the ids it made."""
    last = int(np.argmax(recorded.last[0, -1]))  # the token after the last call, greedy
    wanted = hf.decode(recorded.seen[-1] + [last], skip_special_tokens=True)
    if text == wanted:
        part.summary += "; the text returned is theirs"
        return part
    return Part("greedy", FAIL, f"the ids are right, but generate_text returned {text!r:.60}, expected their text "
                f"{wanted!r:.60}", ["return decode_tokens(generated_tokens, tokenizer) once the loop is done"])


class _Recorded:
    """The model generate_text is given, recording the ids of each call and the last logits."""

    def __init__(self, model):
        self.model, self.seen, self.last = model, [], None

    def __call__(self, ids):
        self.seen.append([int(t) for t in np.asarray(np.from_dlpack(ids.to(_cpu())) if hasattr(ids, "to")
                                                     else ids).reshape(-1)])
        logits = self.model(ids)
        self.last = np.from_dlpack(logits.to(_cpu()))
        return logits


class _SpreadLogits:
    """Stands in for GPT-2: logits [1, 1, VOCAB] for the last position only, SPREAD at ids 0..CANDIDATES-1
    and -1e4 elsewhere, the same at every call (a whole [1, T, VOCAB] per call would cost more than the
    sampling it serves)."""

    def __call__(self, ids):
        from max.experimental.tensor import Tensor

        logits = np.full((1, 1, VOCAB), -1e4, dtype=np.float32)
        logits[0, 0, :CANDIDATES] = SPREAD
        return Tensor.from_dlpack(logits)


def _check_encode_decode(run: StepRun, step, checkpoint: Checkpoint, prompt: list[int], want: list[int]) -> Report:
    """The book's step 09: encode_text and decode_tokens against the checkpoint's tokenizer."""
    fns = {name: run.need(step, name) for name in ("encode_text", "decode_tokens")}
    if None in fns.values():
        return run.finish("needs encode_text and decode_tokens")
    encode_text, decode_tokens = fns["encode_text"], fns["decode_tokens"]
    tokenizer, hf = tokenizer_of(checkpoint), hf_tokenizer(checkpoint)
    for name, max_length, wanted in (("encode_text", 128, prompt), ("max_length", SHORT, prompt[:SHORT])):
        try:
            got = _ids(run.call(encode_text, PROMPT, hf, _cpu(), max_length=max_length), "encode_text")[0].tolist()
        except LearnerError as e:
            run.add(Part.from_error(name, e))
            continue
        setting = f"encode_text({PROMPT!r}, max_length={max_length})"
        if got == wanted:
            run.add(Part(name, PASS, f"{setting}: the tokenizer's {len(wanted)} ids, as an int64 [1, {len(wanted)}] "
                         "Tensor", margin=0.0))
        else:
            run.add(Part(name, FAIL, f"{setting} gave {got[:8]}, expected {wanted[:8]}",
                         [] if name == "encode_text" else ["pass max_length and truncation=True to tokenizer.encode"]))
    # The prompt and its continuation, less ids the tokenizer lacks (the stand-ins' vocabularies are smaller).
    ids = prompt + [i for i in want if i < tokenizer.get_vocab_size()]
    try:
        from max.experimental.tensor import Tensor

        text = run.call(decode_tokens, Tensor.from_dlpack(np.array([ids], dtype=np.int64)), hf)
    except LearnerError as e:
        run.add(Part.from_error("decode_tokens", e))
        return run.finish()
    wanted_text = tokenizer.decode(ids)
    if text == wanted_text:
        run.add(Part("decode_tokens", PASS, f"a [1, {len(ids)}] Tensor of ids back to the tokenizer's text",
                     margin=0.0))
    else:
        raw = "".join(tokenizer.id_to_token(i) for i in ids)
        run.add(Part("decode_tokens", FAIL, f"decode_tokens gave {text!r:.40}, expected {wanted_text!r:.40}",
                     mistake=RAW_TOKENS if text == raw else None))
    return run.finish()
