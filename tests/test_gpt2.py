"""`pixi run gpt2`: the course's model writes, and its tokens equal transformers'."""

from tests.conftest import run_python


def _gpt2(*args):
    return run_python("-m", "gpt2", *args)


def test_solutions_generate_the_same_tokens_as_transformers(checkpoint):
    done = _gpt2("The cat sat on the mat because", "--solutions", "--max-new-tokens", "20", "--compare")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "random weights, so the text is gibberish" in done.stdout
    assert "Token ids identical for all 20 new tokens" in done.stdout
    assert "tokens/s)" in done.stdout


def test_unfinished_steps_say_what_to_do(checkpoint):
    done = _gpt2("Hello")
    assert done.returncode == 1
    assert "Your model could not be built: not implemented yet (steps/step_11.py:" in done.stderr
    assert "Traceback" not in done.stderr
