"""Steps 03 onwards: each solution passes, each skeleton is TODO in every part,
each correct variant passes, and each injected mistake fails its part and is
named. Step 07, 01 and 02 have their own files."""

from pathlib import Path

import pytest

from checker import step03, step04, step05, step06, step08, step09, step10, step11, step12
from checker.paths import REPO
from checker.report import FAIL, PASS, TODO
from tests.conftest import mutate, solution_source

CHECKS = {"03": step03, "04": step04, "05": step05, "06": step06, "08": step08, "09": step09, "10": step10, "11": step11, "12": step12}
VARIANTS = Path(__file__).parent / "variants"

# step -> [(mistake id to be named, first failing part, text in the solution, replacement)]
MUTATIONS = {
    "03": [
        ("ln-unbiased-variance", "forward", "var = (centered * centered).mean(axis=-1)",
         "var = (centered * centered).sum(axis=-1) / (int(x.shape[-1]) - 1)"),
        ("ln-eps-outside-sqrt", "forward", "F.sqrt(var + self.eps)", "(F.sqrt(var) + self.eps)"),
        ("ln-no-eps", "forward", "F.sqrt(var + self.eps)", "F.sqrt(var)"),
        ("ln-no-affine", "forward", " * self.weight + self.bias\n", "\n"),
        ("ln-swapped-affine", "forward", " * self.weight + self.bias\n", " * self.bias + self.weight\n"),
        ("ln-wrong-axis", "forward", "mean = x.mean(axis=-1)  # [..., 1]: reductions keep the axis\n"
         "        centered = x - mean\n        var = (centered * centered).mean(axis=-1)",
         "mean = x.mean(axis=-2)\n        centered = x - mean\n        var = (centered * centered).mean(axis=-2)"),
    ],
    "04": [
        ("gelu-exact", "forward", 'approximate="tanh"', 'approximate="none"'),
        ("relu", "forward", 'F.gelu(hidden_states, approximate="tanh")', "F.relu(hidden_states)"),
        ("no-activation", "forward", 'F.gelu(hidden_states, approximate="tanh")', "hidden_states"),
        ("mlp-no-c-proj", "forward", "return self.c_proj(hidden_states)  # [B, T, C]", "return hidden_states"),
        ("mlp-no-fc-bias", "forward", "hidden_states = self.c_fc(hidden_states)  # [B, T, 4C]",
         "hidden_states = hidden_states @ self.c_fc.weight.T"),
    ],
    "05": [
        ("embedding-scaled", "forward", "return F.gather(self.weight, input_ids, axis=0)",
         "return F.gather(self.weight, input_ids, axis=0) * (768 ** 0.5)"),
        ("embedding-off-by-one", "forward", "F.gather(self.weight, input_ids, axis=0)",
         "F.gather(self.weight, input_ids + 1, axis=0)"),
    ],
    "06": [
        ("positions-ignore-past", "after 5 cached tokens", "Tensor.arange(past_length, past_length + seq_len,",
         "Tensor.arange(0, seq_len,"),
        ("positions-off-by-one", "positions 0..9", "Tensor.arange(past_length, past_length + seq_len,",
         "Tensor.arange(past_length + 1, past_length + seq_len + 1,"),
    ],
    "08": [
        ("residual-no-residual", "attention half", "return residual + sublayer(ln(hidden_states))",
         "return sublayer(ln(hidden_states))"),
        ("residual-normed-residual", "attention half", "residual = hidden_states", "residual = ln(hidden_states)"),
        ("residual-post-norm", "attention half", "return residual + sublayer(ln(hidden_states))",
         "return ln(residual + sublayer(hidden_states))"),
        ("residual-no-norm", "attention half", "return residual + sublayer(ln(hidden_states))",
         "return residual + sublayer(hidden_states)"),
    ],
    "09": [
        ("block-ln-swapped", "forward", "self.ln_1, self.attn)\n        return residual_step(hidden_states, self.ln_2,",
         "self.ln_2, self.attn)\n        return residual_step(hidden_states, self.ln_1,"),
        ("block-mlp-first", "forward", "hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
         "        return residual_step(hidden_states, self.ln_2, self.mlp)",
         "hidden_states = residual_step(hidden_states, self.ln_2, self.mlp)\n"
         "        return residual_step(hidden_states, self.ln_1, self.attn)"),
        ("block-no-mlp", "forward", "return residual_step(hidden_states, self.ln_2, self.mlp)", "return hidden_states"),
        ("block-parallel", "forward", "hidden_states = residual_step(hidden_states, self.ln_1, self.attn)\n"
         "        return residual_step(hidden_states, self.ln_2, self.mlp)",
         "return residual_step(hidden_states, self.ln_1, self.attn) + self.mlp(self.ln_2(hidden_states))"),
    ],
    "10": [
        ("model-no-ln-f", "forward", "return self.ln_f(hidden_states)", "return hidden_states"),
        ("model-no-positions", "forward", "self.wte(input_ids) + self.wpe(seq_len)", "self.wte(input_ids)"),
        ("model-one-block", "forward", "for block in self.h:", "for block in list(self.h)[:1]:"),
        ("model-blocks-reversed", "forward", "for block in self.h:", "for block in reversed(list(self.h)):"),
    ],
    "11": [
        ("logits-softmax", "logits",
         ("from max.experimental.nn import Module", "return hidden_states @ self.transformer.wte.weight.T"),
         ("from max.experimental import functional as F\nfrom max.experimental.nn import Module",
          "return F.softmax(hidden_states @ self.transformer.wte.weight.T)")),
    ],
}

# (text in solution 12, what replaces it, the failing part, words its message must contain)
GENERATION = [
    ("next_token(np.from_dlpack(logits)[0, -1]", "next_token(np.from_dlpack(logits)[0, 0]", "greedy",
     "the first position's logits were used"),
    ("return int(np.argmax(logits))", "return int(np.argmin(logits))", "greedy", "argmin"),
    ("logits = logits.astype(np.float64) / temperature", "logits = logits.astype(np.float64) * temperature",
     "distribution", "multiplied by the temperature"),
    ("    if top_k is not None:\n        kth", "    if False:\n        kth", "top_k=1", "must pick the best token"),
    ("rng = np.random.default_rng(seed)\n    ids", "rng = np.random.default_rng()\n    ids", "seeded sampling",
     "the same seed gave different tokens"),
    ("return tokenizer.encode(text).ids", "return tokenizer.encode(text.lower()).ids", "encode/decode", "encode gave"),
]


@pytest.mark.parametrize("old, new, part, says", GENERATION)
def test_generation_mistakes_fail_the_right_part(checkpoint, write_step, old, new, part, says):
    report = step12.check(write_step(mutate(solution_source("12"), old, new), "step_12.py"), checkpoint)
    failing = [p for p in report.parts if p.status != PASS]
    assert failing and failing[0].name == part, report.render()
    assert says in failing[0].summary + " ".join(failing[0].details), report.render()


# (text in solution 11, what replaces it, the failing part, words its message must contain)
LOADING = [
    ('if layer in CONV1D_LAYERS and name.endswith(".weight"):',
     'if layer in CONV1D_LAYERS and name.endswith(".weight") and "attn.c_proj" not in name:',
     "loading this checkpoint", "holds Hugging Face's [in, out] layout"),
    ('if layer in CONV1D_LAYERS and name.endswith(".weight"):', 'if False:',
     "loading this checkpoint", "c_attn"),
    ('if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":',
     'if name == "lm_head.weight":', "loading the original GPT-2 layout", "attn.bias"),
    ('if name.endswith((".attn.bias", ".attn.masked_bias")) or name == "lm_head.weight":',
     'if name.endswith((".attn.bias", ".attn.masked_bias")):', "loading the original GPT-2 layout", "lm_head"),
    ('if not name.startswith("transformer."):', "if False:", "loading the original GPT-2 layout", ""),
    ('if name.endswith((".attn.bias", ".attn.masked_bias"))', 'if name.endswith(("attn.bias", ".attn.masked_bias"))',
     "loading this checkpoint", "transformer.h.0.attn.c_attn.bias' is missing"),  # also drops c_attn.bias
]


@pytest.mark.parametrize("old, new, part, says", LOADING)
def test_loading_mistakes_fail_the_right_part(checkpoint, write_step, old, new, part, says):
    report = step11.check(write_step(mutate(solution_source("11"), old, new), "step_11.py"), checkpoint)
    failing = [p for p in report.parts if p.status != PASS]
    assert failing and failing[0].name == part and says in failing[0].summary + " ".join(failing[0].details), \
        report.render()


# step -> [(text in the solution, replacement, words the construction failure must contain)]
CONSTRUCTION = {
    "03": [("self.bias = Tensor.zeros([dim])  # beta, [C]", "self.beta = Tensor.zeros([dim])", "no parameter bias")],
    "04": [
        ("Linear(config.n_embd, config.n_inner, bias=True)", "Linear(config.n_inner, config.n_embd, bias=True)",
         "arguments look swapped"),
        ("Linear(config.n_inner, config.n_embd, bias=True)", "Linear(config.n_inner, config.n_embd, bias=False)",
         "c_proj has no bias"),
    ],
    "05": [("Tensor.zeros([config.vocab_size, config.n_embd])", "Tensor.zeros([config.n_embd, config.vocab_size])",
            "its two axes are swapped")],
    "10": [("self.h = ModuleList(", "self.blocks = ModuleList(", "no self.h: name it as GPT-2's checkpoint does")],
    "06": [("self.weight = Tensor.zeros([config.n_positions", "self.table = Tensor.zeros([config.n_positions",
            "no parameter weight (it holds table [1024, 768])")],
}


@pytest.mark.parametrize("step", CHECKS)
def test_solution_passes(checkpoint, step):
    report = CHECKS[step].check(REPO / "solutions" / f"solution_{step}.py", checkpoint)
    assert report.ok, report.render()


@pytest.mark.parametrize("step", CHECKS)
def test_skeleton_is_todo_in_every_part(checkpoint, step):
    report = CHECKS[step].check(REPO / "steps" / f"step_{step}.py", checkpoint)
    own = [p for p in report.parts if p.name != "earlier steps"]
    assert [p.status for p in own] == [TODO] * len(own), report.render()
    assert "Traceback" not in report.render()


def test_block_names_the_earlier_step_to_fix_first(checkpoint):
    """The skeletons of steps 09 and 10 use the skeletons of 01-08: the check says to start with 01."""
    for check, step in ((step09, "09"), (step10, "10")):
        report = check.check(REPO / "steps" / f"step_{step}.py", checkpoint)
        earlier = report.part("earlier steps")
        assert earlier.status == FAIL and "01 FAILS" in earlier.summary
        assert earlier.details == ["fix step 01 first: pixi run s01 (or python -m checker 01)"]


@pytest.mark.parametrize(
    "variant", sorted(p.name for p in VARIANTS.glob("step*.py") if not p.name.startswith("step07"))
)
def test_correct_variant_passes(checkpoint, variant):
    report = CHECKS[variant[4:6]].check(VARIANTS / variant, checkpoint)
    assert report.ok, report.render()


@pytest.mark.parametrize(
    "step, mistake, part, old, new",
    [(step, *m) for step, ms in MUTATIONS.items() for m in ms],
    ids=[m[0] for ms in MUTATIONS.values() for m in ms],
)
def test_injected_mistake_fails_and_is_named(checkpoint, write_step, step, mistake, part, old, new):
    path = write_step(mutate(solution_source(step), old, new), f"step_{step}.py")
    report = CHECKS[step].check(path, checkpoint)
    failing = [p for p in report.parts if p.status != PASS]
    assert failing and failing[0].name == part, report.render()
    assert failing[0].mistake is not None and failing[0].mistake.id == mistake, report.render()


@pytest.mark.parametrize(
    "step, old, new, says", [(step, *c) for step, cs in CONSTRUCTION.items() for c in cs]
)
def test_construction_mistake_is_explained(checkpoint, write_step, step, old, new, says):
    path = write_step(mutate(solution_source(step), old, new), f"step_{step}.py")
    report = CHECKS[step].check(path, checkpoint)
    part = report.part("construction")
    assert part.status == FAIL and says in part.summary, report.render()
