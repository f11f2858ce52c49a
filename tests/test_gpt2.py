"""`pixi run gpt2`: the course's model writes, and its tokens equal transformers'."""

import pytest

from tests.conftest import run_python


def _gpt2(*args):
    return run_python("-m", "gpt2", *args)


def test_solutions_generate_the_same_tokens_as_transformers(checkpoint):
    done = _gpt2("The cat sat on the mat because", "--solutions", "--max-new-tokens", "20", "--compare")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "random weights, so the text is gibberish" in done.stdout
    assert "Token ids identical for all 20 new tokens" in done.stdout
    assert "Your step 13 passes: the text comes from your KV cache" in done.stdout
    assert "tokens/s without a cache)" in done.stdout and "tokens/s with your KV cache:" in done.stdout


def test_a_learner_without_step_13_writes_without_a_cache(checkpoint, learner_repo):
    """Finished steps 01-12 and step 13's skeleton: the text comes from generate, and gpt2 says why."""
    from runtime.paths import REPO

    (learner_repo / "steps" / "step_13.py").write_text((REPO / "steps" / "step_13.py").read_text())
    done = run_python("-m", "gpt2", "The cat sat", "--max-new-tokens", "5", cwd=learner_repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(no KV cache: your step 13 is not done yet (not implemented yet (steps/step_13.py:" in done.stdout
    assert "tokens/s without a cache)" in done.stdout and "with your KV cache" not in done.stdout


def test_unfinished_steps_say_what_to_do(checkpoint):
    done = _gpt2("Hello")
    assert done.returncode == 1
    assert "Your model could not be built: not implemented yet (steps/step_11.py:" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.heavy
def test_solutions_write_on_int8_weights_and_fast_with_flash_attention(checkpoint):
    """--int8 --fast with the solutions (one run: the checks and compiles they share, once): the text also
    comes from step 16's decode, with its speed against the cache alone and how many of its tokens equal
    float32's; and from step 17's FlashAttention, each decode step on step 16's int8 products."""
    done = _gpt2("The cat sat on the mat because", "--solutions", "--max-new-tokens", "12", "--int8", "--fast")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Your step 16 passes: the last text comes from your int8 weights" in done.stdout
    assert "tokens/s on int8 weights:" in done.stdout and "the same tokens as float32 for the first" in done.stdout
    assert "Your step 17 passes: --fast decodes with your FlashAttention and your int8 products" in done.stdout
    assert "fast: The cat sat on the mat because" in done.stdout
    assert "tokens/s with your FlashAttention and your int8 products (GPT2FlashQ8): " in done.stdout
