"""Broken step files, made from the solutions: what learners hand the checker.

Each Breakage turns a solution's source into a broken copy and says which
words the report must show. `where` marks the line the message must point at
(the line holding `marker`). The same table is the book's troubleshooting
section: tests/test_robustness.py holds the two together.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable

# The code each step's breakages go into: the function or method at the end of the step's path.
ENTRY = {"02": "causal_mask", "03": "LayerNorm.forward", "04": "GPT2MLP.forward", "05": "GPT2TokenEmbedding.forward",
         "06": "GPT2PositionEmbedding.forward", "07": "GPT2MultiHeadAttention.forward", "08": "residual_step",
         "09": "GPT2Block.forward", "10": "GPT2Model.forward", "11": "GPT2LMHeadModel.forward", "12": "generate",
         "13": "GPT2WithCache.forward"}
CLASS = {"01": "GPT2Config", "03": "LayerNorm", "04": "GPT2MLP", "05": "GPT2TokenEmbedding",
         "06": "GPT2PositionEmbedding", "07": "GPT2MultiHeadAttention", "09": "GPT2Block", "10": "GPT2Model",
         "11": "GPT2LMHeadModel", "13": "GPT2WithCache"}
TENSOR_STEPS = [s for s in ENTRY if s not in ("12", "13")]  # whose entry returns a Tensor
_MAX = "from max.experimental.tensor import Tensor as _T\n"


def _node(source: str, qualname: str) -> ast.FunctionDef:
    node = ast.parse(source)
    for name in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == name)
    return node


def at_start(stmt: str) -> Callable[[str, str], str]:
    """Puts `stmt` first in the step's entry function (after its docstring)."""
    def edit(source: str, step: str) -> str:
        fn = _node(source, ENTRY[step])
        first = (fn.body[1] if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
                 else fn.body[0])
        lines = source.splitlines(keepends=True)
        lines.insert(first.lineno - 1, " " * first.col_offset + stmt + "\n")
        return (_MAX if "_T." in stmt else "") + "".join(lines)
    return edit


def returns(template: str) -> Callable[[str, str], str]:
    """Rewrites each `return X` of the entry function as `return <template with X>`."""
    def edit(source: str, step: str) -> str:
        fn = _node(source, ENTRY[step])
        lines = source.splitlines(keepends=True)
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                value = ast.get_source_segment(source, node.value)
                i = node.lineno - 1
                start = lines[i].index("return")
                indent = lines[i][:start]
                lines[i:node.end_lineno] = [f"{indent}return {template.format(value.replace(chr(10), ' '))}\n"]
        return "".join(lines)
    return edit


def replace(old: str, new: str) -> Callable[[str, str], str]:
    """Replaces `old` by `new`, with {cls} and {fn} standing for the step's class and entry function."""
    def edit(source: str, step: str) -> str:
        names = {"cls": CLASS.get(step, ""), "fn": ENTRY.get(step, "").rpartition(".")[2]}
        o, n = old.format(**names), new.format(**names)
        assert o in source, (step, o)
        return source.replace(o, n, 1)
    return edit


def rename_class(source: str, step: str) -> str:
    """The step's class renamed everywhere in the file, as a learner renaming it would."""
    return re.sub(rf"\b{CLASS[step]}\b", CLASS[step] + "Renamed", source)


def int_of_length(source: str, step: str) -> str:
    """The sequence length made a Python int first thing: fine op by op, impossible with a symbolic length."""
    length = {"02": "sequence_length", "07": "hidden_states.shape[1]"}[step]
    return at_start(f"_length = int({length})")(source, step)


def append(text: str) -> Callable[[str, str], str]:
    return lambda source, step: source + text


@dataclass(frozen=True)
class Breakage:
    name: str  # what the learner did
    steps: list[str]  # the steps it is tried on
    edit: Callable[[str, str], str]  # (solution source, step) -> broken source
    says: str  # words the report must show (troubleshooting page: "you see")
    do: str  # what to do about it (troubleshooting page: "what to do")
    marker: str | None = None  # the message must point at the line holding this text
    passes: bool = False  # the check still passes (print noise)


ALL = [f"{n:02d}" for n in range(1, 14)]
CLASS_STEPS = [s for s in CLASS if s != "01"]

BREAKAGES = [
    Breakage("syntax error", ALL, append("\ndef broken(:\n    pass\n"), "SyntaxError in",
             "fix the line shown; the caret marks where Python stopped", "def broken(:"),
    Breakage("indentation error", ALL, append("\ndef broken():\nreturn 1\n"), "IndentationError in",
             "indent the block under its def/if/for by 4 spaces", "return 1"),
    Breakage("import of a missing module", ALL, append("\nimport not_a_module_anywhere\n"),
             "No module named 'not_a_module_anywhere'",
             "fix the import; a package the course needs is missing if it names numpy or transformers "
             "(see Set up)", "import not_a_module_anywhere"),
    Breakage("a MAX module of an earlier release", ["03", "07"], append("\nimport max.nn.module_v2\n"),
             "MAX 26.7 has no module max.nn.module_v2",
             "use `max.experimental.nn`, `.tensor`, `.functional`; the online book's names are mapped (see "
             "Coming from the online book)", "import max.nn.module_v2"),
    Breakage("a MAX name of an earlier release", ["03", "07"], append("\nfrom max.nn.module_v3 import LinearV2\n"),
             "MAX 26.7's max.experimental.nn has no LinearV2",
             "use the name MAX 26.7 gives it (its Python API reference, `max.experimental`)",
             "from max.nn.module_v3 import LinearV2"),
    Breakage("name error when the file loads", ALL, append("\nundefined_name + 1\n"),
             "NameError: name 'undefined_name' is not defined", "define or import the name", "undefined_name + 1"),
    Breakage("name error inside your code", list(ENTRY), at_start("helper_never_defined()"),
             "NameError: name 'helper_never_defined' is not defined", "define or import the name",
             "helper_never_defined()"),
    Breakage("a function left as `pass` (returns None)", TENSOR_STEPS, at_start("return None"),
             "returned None", "finish the function and `return` its result"),
    Breakage("a missing function or method", list(ENTRY), replace("def {fn}(", "def {fn}_renamed("), "defines no",
             "name it exactly as the step's skeleton does"),
    Breakage("a generator that never yields (returns None)", ["12"], replace("        yield token\n", ""),
             "returned None", "`yield` each new token id as it is made"),
    Breakage("an attribute used but never set", [s for s in CLASS_STEPS if "." in ENTRY.get(s, "")],
             at_start("self.never_set_in_init.shape"), "has no attribute 'never_set_in_init'",
             "create it in __init__ (self.name = ...) or fix the name", "self.never_set_in_init"),
    Breakage("a wrong class name", list(CLASS), rename_class, "defines no",
             "name the class exactly as the step's skeleton does"),
    Breakage("a module that is not a MAX Module", CLASS_STEPS, replace("class {cls}(Module):", "class {cls}:"),
             "is not a max.experimental.nn.Module", "subclass max.experimental.nn.Module, as the skeleton does"),
    Breakage("a wrong output shape", TENSOR_STEPS, returns("({}).reshape([-1])"), "expected [",
             "compare your shapes with the shapes in the step's docstring"),
    Breakage("a wrong dtype", TENSOR_STEPS, returns("({}).cast(__import__('max.dtype').dtype.DType.float64)"),
             "expected float32", "keep float32: look for the op that changed the dtype"),
    Breakage("NaN in the output", TENSOR_STEPS, returns("({}) * float('nan')"), "NaN or inf",
             "look for a division by zero, a log of 0, or -inf times 0"),
    Breakage("a Python list returned", TENSOR_STEPS, returns("[{}]"), "returned a list",
             "return one Tensor"),
    Breakage("a numpy array returned", TENSOR_STEPS, returns("__import__('numpy').from_dlpack({})"),
             "returned a numpy array", "build the result with MAX Tensor operations"),
    Breakage("a matmul of mismatched shapes inside MAX", list(ENTRY), at_start("_T.zeros([2, 3]) @ _T.zeros([4, 5])"),
             "MAX could not build a matmul (@)", "the shapes in the message are your operands': "
             "make their inner dimensions agree", "_T.zeros([2, 3]) @ _T.zeros([4, 5])"),
    Breakage("a reshape to the wrong number of elements", list(ENTRY), at_start("_T.zeros([2, 3]).reshape([5])"),
             "MAX could not build reshape", "the new shape must hold as many elements as the old",
             "_T.zeros([2, 3]).reshape([5])"),
    Breakage("an index past the end of a table in F.gather", list(ENTRY),
             at_start("__import__('max.experimental.functional', fromlist=['gather']).gather(_T.zeros([4, 3]), "
                      "_T.from_dlpack(__import__('numpy').array([0, 7])), axis=0)"),
             "F.gather was given index 7, but the axis it reads has 4 entries",
             "look at how the indices are made: ids or positions past the table, or an offset off by one",
             "_T.zeros([4, 3])"),
    Breakage("an index past the end of an axis", list(ENTRY), at_start("_T.zeros([4, 3])[5]"),
             "index 5 is past the end of an axis of size 4", "index within the axis (0 to size - 1, or from the "
             "end with -1)", "_T.zeros([4, 3])[5]"),
    Breakage("an infinite loop", list(ENTRY), at_start("while True: pass"), "no result after",
             "find the loop that never ends; --timeout S changes the limit"),
    Breakage("an infinite loop when the file loads", ALL, append("\nwhile True:\n    pass\n"), "no result after",
             "move work out of the file's top level, or end the loop"),
    Breakage("print() in your code", list(ENTRY), at_start("print('debugging', 42)"), "your code printed",
             "nothing: printed lines are shown apart from the verdict", passes=True),
    Breakage("a Python int of the length (right op by op, not compiled)", ["02", "07"], int_of_length,
             "cannot be compiled with a symbolic batch and length",
             "keep the length a Dim: Tensor ops take it as it is (pixi run gpt2 compiles your model for any length)",
             "_length = int("),
    Breakage("a mask from arange and <= (MAX miscompiles it)", ["02"],
             replace("    return F.band_part(mask, num_lower=None, num_upper=num_tokens, exclude=True)",
                     "    q = Tensor.arange(0, sequence_length, dtype=DType.int64, device=device).reshape([-1, 1])\n"
                     "    k = Tensor.arange(0, total, dtype=DType.int64, device=device).reshape([1, -1])\n"
                     "    return F.where(k <= q + num_tokens, Tensor(0.0, dtype=dtype, device=device), mask)"),
             "the mask masks nothing (all 0) once compiled",
             "build it with F.band_part; `python -m checker.max_bugs` shows MAX's fault on its own"),
]


@dataclass(frozen=True)
class Trouble:
    """Something wrong with the machine or the files rather than the code (tests/test_machine.py)."""

    name: str
    says: str
    do: str


MACHINE = {t.name: t for t in [
    Trouble("code stuck inside MAX (a compile that never ends)", "could not be interrupted",
            "if a first compile is just slow, raise the limit: --timeout 900"),
    Trouble("no weights downloaded, no network", "SYNTHETIC GPT-2-shaped checkpoint",
            "nothing: the checks compare with transformers on a synthetic checkpoint; `pixi run weights` "
            "fetches GPT-2 when you are online"),
    Trouble("`pixi run weights` offline", "Could not reach the Hugging Face hub",
            "check the connection or HTTPS_PROXY; nothing was changed"),
    Trouble("a download that stopped", "The download stopped",
            "run `pixi run weights` again: it resumes where it stopped"),
    Trouble("a download that never finished", "the download did not finish",
            "run `pixi run weights` again: it resumes where it stopped"),
    Trouble("a damaged or truncated weights file", "is damaged: its sha256 is",
            "`pixi run weights --force` fetches it again"),
    Trouble("a read-only weights/ folder", "cannot write the synthetic checkpoint",
            "make weights/ writable, or work in a writable copy"),
    Trouble("a read-only .cache/ folder", "", "nothing: references are recomputed each time instead of cached"),
    Trouble("Python older than 3.13", "This course needs Python 3.13",
            "use `pixi run`, or make the venv with python3.13"),
    Trouble("a missing package", "Missing Python package(s)",
            "`pixi install`, or the pip set-up's second line in your venv"),
    Trouble("running from another folder", "", "nothing: paths are found from the repository, not the current folder"),
]}


def troubleshooting_rows() -> list[str]:
    """The troubleshooting page's table, one row per breakage and trouble."""
    def cell(text: str) -> str:
        return f"`{text}`" if text else "(it just works)"

    rows = [f"| {b.name} | {cell(b.says)} | {b.do} |" for b in BREAKAGES]
    rows += [f"| {t.name} | {cell(t.says)} | {t.do} |" for t in MACHINE.values()]
    return rows
