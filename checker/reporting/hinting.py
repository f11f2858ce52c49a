"""The words hints are made of: links to MAX's API reference and to the other references the hints
cite, and the ladders several steps share (each step's own are in its folder: checker/steps/stepNN/hints.py)."""

DOCS = "https://docs.modular.com/max/api/python"


def api(name: str) -> str:
    """The reference page of a MAX API: 'F.softmax', 'Tensor.reshape', 'nn.Linear' or 'graph.Dim'."""
    kind, _, attr = name.partition(".")
    if kind == "F":
        return f"{DOCS}/experimental.functional/#max.experimental.functional.{attr}"
    if kind == "Tensor":
        return f"{DOCS}/generated/max.experimental.tensor.Tensor/#max.experimental.tensor.Tensor.{attr}"
    if kind == "nn":
        return f"{DOCS}/generated/max.experimental.nn.{attr}/"
    return f"{DOCS}/graph/#max.graph.{attr}"


HF_CONFIG = "https://huggingface.co/docs/transformers/model_doc/gpt2#transformers.GPT2Config"
TOKENIZER = "https://huggingface.co/docs/tokenizers/api/tokenizer#tokenizers.Tokenizer"
NUMPY_RANDOM = "https://numpy.org/doc/stable/reference/random/generator.html"
NUMPY_SORT = "https://numpy.org/doc/stable/reference/generated/numpy.sort.html"
PYTHON_YIELD = "https://docs.python.org/3/reference/simple_stmts.html#the-yield-statement"


EARLIER = ["An earlier step that your file imports fails its own check; this step cannot pass before it does.",
           "The line names the step: its own check (pixi run sNN) says which of its parts fails and why.",
           "Run the check the details name, fix that step, then come back: this check re-runs it first."]
COMPILED = ["Op by op your code is right; compiled into a graph, as pixi run gpt2 runs it, it is not.",
            f"Compiled, the batch and the length are symbols ({api('graph.Dim')}), not numbers: Tensor ops take "
            "them as they are; int(), range() and numpy on them cannot be compiled.",
            "A mask from a column and a row of positions compared (arange, <=) is miscompiled by MAX 26.7 "
            "(python -m checker.max_bugs): build it with F.band_part instead."]
TWO_LINEARS = ["Name the layers as Hugging Face's checkpoint does, so its weights load by name.",
               f"Linear ({api('nn.Linear')}) takes the input size, then the output size, and bias=True.",
               "Linear(in_dim, out_dim, bias=True): check the order and that the bias is on."]


def table(rows: str) -> list[str]:
    """The construction ladder of an embedding table: one row per token (step 05) or per position (step 06)."""
    return [f"One row per {rows}: a [{'vocab_size' if rows == 'token' else 'n_positions'}, n_embd] table, "
            "named weight, whose values the checkpoint replaces.",
            f"Tensor.zeros ({api('Tensor.zeros')}) makes a tensor of a given shape.",
            f"A zeros tensor of [config.{'vocab_size' if rows == 'token' else 'n_positions'}, config.n_embd], "
            "assigned to self.weight."]
