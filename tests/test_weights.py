"""Finding and verifying checkpoints: the synthetic one and the Hugging Face cache.
What goes wrong with them is in test_machine.py."""

import shutil

import numpy as np

from runtime import checkpoints as weights


def test_synthetic_checkpoint_is_gpt2_shaped_and_verified(checkpoint):
    assert checkpoint.kind == "synthetic" and not checkpoint.is_real
    assert "SYNTHETIC" in checkpoint.describe()
    config = checkpoint.config()
    assert (config["n_embd"], config["n_head"], config["n_layer"], config["vocab_size"]) == (768, 12, 12, 50257)
    t = checkpoint.tensors(["transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias"])
    assert t["transformer.h.0.attn.c_attn.weight"].shape == (768, 2304)  # Conv1D: [in, out]
    assert abs(t["transformer.h.0.attn.c_attn.bias"]).max() > 0  # non-zero biases keep the checks sensitive
    assert weights.sha256_file(checkpoint.path / weights.MODEL_FILE) == checkpoint.sha256


def test_hugging_face_cache_is_found_and_verified(checkpoint, tmp_path, monkeypatch):
    """A checkpoint in the Hugging Face cache layout is used, checked against its blob name."""
    snapshot = tmp_path / "models--openai-community--gpt2" / "snapshots" / "0123abcd"
    blobs = tmp_path / "models--openai-community--gpt2" / "blobs"
    snapshot.mkdir(parents=True)
    blobs.mkdir()
    (tmp_path / "models--openai-community--gpt2" / "refs").mkdir()
    (tmp_path / "models--openai-community--gpt2" / "refs" / "main").write_text("0123abcd")
    for name, blob in [(weights.MODEL_FILE, checkpoint.sha256), ("config.json", "config-blob")]:
        shutil.copyfile(checkpoint.path / name, blobs / blob)
        (snapshot / name).symlink_to(blobs / blob)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(weights, "DOWNLOADED", tmp_path / "not-downloaded")
    monkeypatch.setattr(weights, "_STAMPS", tmp_path / "verified.json")
    found = weights.find_checkpoint("auto")
    assert found.kind == "hf-cache" and found.sha256 == checkpoint.sha256
    assert "Hugging Face cache" in found.describe()


def test_gpt2_scale_standin_has_gpt2s_magnitudes(checkpoints):
    """What runtime/standins.py and the book's checks page say of the GPT-2-scale stand-in, measured on the check
    inputs."""
    from checker.references.attention_np import softmax
    from checker.references.reference import activations
    from runtime.standins import MASSIVE_CHANNELS

    scale = checkpoints["scale"]
    assert scale.kind == "scale" and "GPT-2-SCALE" in scale.describe() and scale.layer == 2
    refs = activations(scale)
    x = refs["block_in"]  # h[2]'s input
    massive = np.abs(x[:, 0, list(MASSIVE_CHANNELS)])
    assert massive.min() > 2500 and np.median(np.abs(x)) < 2, "massive activations on the first token"
    assert np.abs(np.delete(x, 0, axis=1)).max() < 20, "only on the first token"
    D = refs["q"].shape[-1]
    T = refs["q"].shape[2]
    scores = refs["q"] @ np.swapaxes(refs["k"], -1, -2) / np.sqrt(D)
    weights = softmax(np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, scores))
    assert weights[:, :, 1:, 0].mean() > 0.3, "an attention sink on the first token"
    assert np.abs(refs["last_hidden"]).max() > 500
    logits = refs["logits"]
    assert logits.mean() < -50 and np.abs(logits).max() > 500 and logits.std() > 100
