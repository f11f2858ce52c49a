"""Finding and verifying checkpoints: the synthetic one and the Hugging Face cache.
What goes wrong with them is in test_machine.py."""

import shutil

from checker import weights


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
