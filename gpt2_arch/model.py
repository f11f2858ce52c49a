"""GPT-2's pipeline model for MAX 26.7's serving stack: your step 14 model, compiled for ragged batches.

The compiled graph takes what MAX's ragged batch processor makes for every batch:

    tokens [T] int64, return_n_logits [1] int64, input_row_offsets [B+1] uint32, *kv (the paged cache)

and returns every new row's logits [T, V] float32 (the learner's GPT2Paged) with their row offsets
(input_row_offsets), and each request's next-token logits [B, V], the rows the learner's last_rows
picks. MAX's serving stack samples from the last, and computes log-probabilities from both: `echo`
with `logprobs` (an evaluation harness scoring a prompt) reads every prompt row's logits, which MAX
keeps only when started with --enable-echo (runtime.server starts it so).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

from max import tree
from max.experimental import functional as F
from max.experimental.nn import Module
from max.nn.kv_cache import KVCacheInputsPerDevice
from max.pipelines.architectures.llama3_modulev3.batch_processor import Llama3ModuleV3BatchProcessor
from max.pipelines.context import TextContext
from max.pipelines.lib import ModuleV3Outputs, ModuleV3PipelineModelWithKVCache
from max.pipelines.lib.log_probabilities import LogProbabilitiesMixin
from safetensors.numpy import load_file

from gpt2_arch.config import GPT2ArchConfig
from runtime.checkpoints import learner_config
from runtime.files import MODEL_FILE
from runtime.learner import LearnerError, import_step, imported_steps

# huggingface_hub is imported inside the functions that use it: importing it takes seconds.

REPO = Path(__file__).resolve().parent.parent
STEP14 = "GPT2_STEP14"  # the environment variable naming the step 14 file to serve


class GPT2BatchProcessor(Llama3ModuleV3BatchProcessor):
    """MAX's ragged batching: every request's new tokens end to end, and the rows where each ends."""


def step14_file() -> Path:
    return Path(os.environ.get(STEP14) or REPO / "steps" / "step_14.py").resolve()


def checkpoint_folder(model_path: str) -> Path:
    """`--model`'s folder: a local folder as given, a Hugging Face repo id from the hub's cache."""
    if Path(model_path).is_dir():
        return Path(model_path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model_path))


def learner_model(kv_params, checkpoint_dir: Path):
    """The learner's GPT2Paged around their step 11 GPT2LMHeadModel, loaded by their load_hf_weights, and
    their last_rows."""
    path = step14_file()
    fourteen = import_step(path, "_served_step14")
    eleven = next((m for m in imported_steps(fourteen).values()  # the file that defines the model
                   if getattr(getattr(m, "GPT2LMHeadModel", None), "__module__", None) == m.__name__), None)
    if eleven is None:
        raise LearnerError(f"{path.name} imports no step 11: import GPT2LMHeadModel and load_hf_weights from it")
    config = learner_config(json.loads((checkpoint_dir / "config.json").read_text()))
    with F.lazy():
        lm = eleven.GPT2LMHeadModel(config)
    eleven.load_hf_weights(lm, load_file(checkpoint_dir / MODEL_FILE))
    return fourteen.GPT2Paged(lm, kv_params), fourteen.last_rows


class ServedGPT2(Module):
    """The graph MAX's serving stack runs: its inputs unpacked for the learner's GPT2Paged."""

    def __init__(self, paged, last_rows, kv_params):
        self.paged = paged
        self.last_rows = last_rows
        self.kv_params = kv_params

    def forward(self, tokens, return_n_logits, input_row_offsets, *kv_inputs) -> ModuleV3Outputs:
        del return_n_logits  # every row's logits, always: their offsets are the rows' own
        flat = iter(x._graph_value for x in kv_inputs)
        (kv_collection,) = tree.leaves(self.kv_params.unflatten_kv_inputs(flat), leaf=KVCacheInputsPerDevice)
        logits = self.paged(tokens, kv_collection, input_row_offsets)  # [T, V]
        last = F.gather(logits, self.last_rows(input_row_offsets), axis=0)  # [B, V]
        return ModuleV3Outputs(next_token_logits=last, logits=logits, logit_offsets=input_row_offsets,
                               hidden_states=None)


class GPT2PipelineModel(LogProbabilitiesMixin, ModuleV3PipelineModelWithKVCache[TextContext]):
    """Builds the learner's model from the checkpoint folder and compiles it for ragged batches."""

    model_config_cls: ClassVar[type[GPT2ArchConfig]] = GPT2ArchConfig
    batch_processor_cls: ClassVar[type[GPT2BatchProcessor]] = GPT2BatchProcessor

    def load_model(self):
        model_config = self._create_model_config({})
        self._init_distributed_runtime(model_config)
        paged, last_rows = learner_model(self.kv_params, checkpoint_folder(self.pipeline_config.model.model_path))
        served = ServedGPT2(paged, last_rows, self.kv_params)
        types = self._get_compile_input_types(model_config)
        self._wire_batch_processor(served, model_config)
        return served.compile(*types)

    def _create_model_config(self, state_dict: dict[str, Any]) -> Any:
        del state_dict
        return GPT2ArchConfig.initialize(self.pipeline_config, max_seq_len=self.max_seq_len)
