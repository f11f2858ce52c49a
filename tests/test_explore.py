"""The attention explorations: head heatmaps, the step 07 equivalences, head
ablation. Each writes what it drew as JSON; the tests read the numbers back."""

import json

import numpy as np
import pytest

from checker.references.reference import activations
from explore import ablate, heads
from explore.attention import entropy, step07_class
from explore.equivalence import explore, head_counts
from runtime.paths import REPO
from tests.conftest import run_python, with_mistake

TEXT = "The cat sat on the mat because it was tired"


def test_heads_figure_and_its_numbers(checkpoint, tmp_path, capsys):
    out = tmp_path / "heads.png"
    assert heads.main([TEXT, "--solutions", "--layer", "1", "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    w = np.array(data["weights"])  # [H, T, T]
    T = len(data["tokens"])
    assert w.shape == (12, T, T) and T == len(data["ids"]) > 5 and data["layer"] == 1
    assert np.allclose(w.sum(-1), 1.0, atol=1e-5)  # each query's weights sum to 1
    assert np.abs(np.triu(w, 1)).max() < 1e-7  # no weight on future tokens
    assert data["max_abs_diff_vs_transformers"] < 1e-4
    assert np.allclose(data["entropy"], entropy(w))
    assert "SYNTHETIC" in data["title"] and not data["real_gpt2"] and data["seed"] is not None
    from PIL import Image

    with Image.open(out) as png:
        assert png.size == (1280, 1020) and len(np.unique(np.asarray(png.convert("L")))) > 50  # drawn, not blank
    assert "entropy" in capsys.readouterr().out


def test_heads_figure_has_one_panel_per_head():
    w = np.tril(np.ones((6, 4, 4)))
    w /= w.sum(-1, keepdims=True)
    fig = heads.figure(w, ["a", "b", "c", "d"], entropy(w), "title")
    assert sum(ax.get_visible() and ax.axison for ax in fig.axes[:-1]) == 6  # the last axes is the colour bar
    assert fig.axes[0].get_xlabel() == "key token" and fig.axes[0].get_ylabel() == "query token"
    assert fig.axes[-1].get_ylabel() == "attention weight"
    assert [ax.get_title() for ax in fig.axes[:2]] == [f"head 0  H={entropy(w)[0]:.2f}",
                                                        f"head 1  H={entropy(w)[1]:.2f}"]


def test_heads_on_an_unfinished_step_says_so(checkpoint, capsys):
    assert heads.main([TEXT]) == 1  # the skeleton of step 07
    assert "pixi run s07" in capsys.readouterr().err


def test_equivalences_hold_for_the_solution(checkpoint):
    ok, lines, data = explore(step07_class(True), checkpoint, activations(checkpoint), checkpoint.layer)
    assert ok, lines
    assert data["all_hold"] and data["parameters_by_head_count"]["12"] == data["formula"] == 2_362_368
    assert "2,362,368 = 4*768^2 + 4*768 = 2,362,368: yes" in lines[0]
    assert "the same for all 18 head counts that divide 768" in lines[1] and len(head_counts(768)) == 18


def test_equivalences_catch_a_wrong_module(checkpoint, write_step):
    from runtime.learner import import_step

    path = write_step(with_mistake("07", "scale-sqrt-n-embd"))
    ok, lines, _ = explore(import_step(path, "_wrong07").GPT2MultiHeadAttention, checkpoint, activations(checkpoint),
                           checkpoint.layer)
    assert not ok and "vs your module" in lines[-1]


@pytest.mark.slow  # its explicit loops bring MAX ops no step uses: ~3.5 min to compile on a cold cache
def test_explore_flag(checkpoint):
    run = run_python("-m", "checker", "07", "--check-solution", "--explore")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "explicit loops over sequences, heads, queries and keys" in run.stdout
    assert "Wrote out/explore-07.json" in run.stdout
    data = json.loads((REPO / "out" / "explore-07.json").read_text())
    assert data["all_hold"] and data["single_head_max_diff"] < 1e-5 and "SYNTHETIC" in data["checkpoint"]


@pytest.fixture(scope="module")
def short_text(tmp_path_factory):
    path = tmp_path_factory.mktemp("ablate") / "short.txt"
    path.write_text("The cat sat on the mat because it was tired.")
    return path


@pytest.mark.heavy  # ~4 min: every head of the model ablated in turn (tests/conftest.py: the tiers)
def test_ablation_ranks_heads_and_counts_the_removable(checkpoint, tmp_path, short_text):
    out = tmp_path / "ablate.png"
    assert ablate.main(["--solutions", "--text", str(short_text), "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    delta, ranked, curve, n = data["delta_loss"], data["ranked_heads"], data["cumulative_loss"], \
        data["removable_within_1pct"]
    base = data["baseline_loss"]
    assert len(delta) == 12 and sorted(ranked) == list(range(12))
    assert [delta[h] for h in ranked] == sorted(delta)
    assert all(loss <= base * 1.01 for loss in curve[:n]) and (n == 12 or curve[n] > base * 1.01)
    assert abs(curve[0] - (base + delta[ranked[0]])) < 1e-9  # the first removal is the head alone
    assert "SYNTHETIC" in data["title"] and out.exists() and out.stat().st_size > 10_000


def test_ablation_loss_is_cross_entropy():
    logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [1 / 3, 1 / 3, 1 / 3]]))
    assert ablate.next_token_loss(logits, [0, 1, 2]) == pytest.approx(-(np.log(0.25) + np.log(0.1)) / 2)
