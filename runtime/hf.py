"""Hugging Face's GPT-2 on a checkpoint: what every figure and every check is held to.

torch and transformers are imported inside the function: importing them takes seconds.
"""

from __future__ import annotations

from runtime.checkpoints import Checkpoint


def load_hf_model(checkpoint: Checkpoint):
    """The Hugging Face GPT2LMHeadModel for `checkpoint`, float32, eval mode, on the CPU."""
    import torch
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging

    torch.set_grad_enabled(False)
    logging.disable_progress_bar()  # "Loading weights" would land in the middle of a report
    return GPT2LMHeadModel.from_pretrained(
        checkpoint.path, dtype=torch.float32, attn_implementation="eager"
    ).eval()
