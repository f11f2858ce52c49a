"""Step 08, written differently: the sub-layer's output first, the stream added after.
Correct: the check must pass it."""


def residual_step(hidden_states, ln, sublayer):
    update = sublayer(ln(hidden_states))
    return update + hidden_states
