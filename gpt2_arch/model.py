"""GPT-2's pipeline model for MAX 26.7's serving stack: your step 14 or step 18 model, compiled for ragged batches.

The compiled graph takes what MAX's ragged batch processor makes for every batch:

    tokens [T] int64, return_n_logits [1] int64, input_row_offsets [B+1] uint32, *kv (the paged cache)

and returns logits with their row offsets, and each request's next-token logits [B, V]. MAX's serving
stack samples from the last, and computes log-probabilities from both: `echo` with `logprobs` (an
evaluation harness scoring a prompt) reads every prompt row's logits, which MAX keeps only when
started with --enable-echo (runtime.server starts it so).

- Step 14's GPT2Paged gives every new row's logits [T, V]; the learner's last_rows picks the next-token rows.
- Step 18's GPT2PagedQ8 is handed the rows whose logits are wanted: each request's last, or every row
  when a request of the batch asks for its prompt's log-probabilities (return_n_logits is set to say
  so, from the requests): a prompt of 512 rows costs one row of the 50257-wide head, not 512.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, ClassVar

from max import tree
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from max.nn.kv_cache import KVCacheInputsPerDevice
from max.pipelines.architectures.llama3_modulev3.batch_processor import Llama3ModuleV3BatchProcessor
from max.pipelines.context import TextContext
from max.pipelines.lib import ModelOutputs, ModuleV3Outputs, ModuleV3PipelineModelWithKVCache
from max.pipelines.lib.log_probabilities import LogProbabilitiesMixin
from safetensors.numpy import load_file

from gpt2_arch.config import GPT2ArchConfig
from runtime.aligned import aligned
from runtime.checkpoints import learner_config
from runtime.files import MODEL_FILE
from runtime.learner import LearnerError, import_step, imported_steps
from runtime.server import SERVED
from runtime.threads import yield_to_host

# huggingface_hub is imported inside the functions that use it: importing it takes seconds.

REPO = Path(__file__).resolve().parent.parent
ALL_ROWS = 2  # return_n_logits when a request of the batch wants every row's logits (1: the last rows only)


class GPT2BatchProcessor(Llama3ModuleV3BatchProcessor):
    """MAX's ragged batching: every request's new tokens end to end, and the rows where each ends."""


def served_file() -> Path:
    return Path(os.environ.get(SERVED) or REPO / "steps" / "step_14.py").resolve()


def checkpoint_folder(model_path: str) -> Path:
    """`--model`'s folder: a local folder as given, a Hugging Face repo id from the hub's cache."""
    if Path(model_path).is_dir():
        return Path(model_path)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(model_path))


def learner_model(kv_params, checkpoint_dir: Path) -> Module:
    """The graph to serve: the served file's GPT2PagedQ8 (step 18) if it defines one, else its GPT2Paged
    (step 14), around the learner's step 11 GPT2LMHeadModel loaded by their load_hf_weights; every weight
    moved to a cache line's start (runtime.aligned), wherever the learner's code made it."""
    path = served_file()
    served = import_step(path, "_served_step")
    eleven = next((m for m in imported_steps(served).values()  # the file that defines the model
                   if getattr(getattr(m, "GPT2LMHeadModel", None), "__module__", None) == m.__name__), None)
    if eleven is None:
        raise LearnerError(f"{path.name} imports no step 11: import GPT2LMHeadModel and load_hf_weights from it")
    config = learner_config(json.loads((checkpoint_dir / "config.json").read_text()))
    with F.lazy():
        lm = eleven.GPT2LMHeadModel(config)
    eleven.load_hf_weights(lm, load_file(checkpoint_dir / MODEL_FILE))
    if hasattr(served, "GPT2PagedQ8"):
        return aligned(ServedFastGPT2(served.GPT2PagedQ8(lm, kv_params), kv_params))
    return aligned(ServedGPT2(served.GPT2Paged(lm, kv_params), served.last_rows, kv_params))


def kv_collection_of(kv_params, kv_inputs):
    """The paged cache's graph inputs, as MAX hands them, made one collection again."""
    flat = iter(x._graph_value for x in kv_inputs)
    (kv_collection,) = tree.leaves(kv_params.unflatten_kv_inputs(flat), leaf=KVCacheInputsPerDevice)
    return kv_collection


class ServedGPT2(Module):
    """The graph MAX's serving stack runs: its inputs unpacked for the learner's GPT2Paged."""

    def __init__(self, paged, last_rows, kv_params):
        self.paged = paged
        self.last_rows = last_rows
        self.kv_params = kv_params

    def forward(self, tokens, return_n_logits, input_row_offsets, *kv_inputs) -> ModuleV3Outputs:
        del return_n_logits  # every row's logits, always: their offsets are the rows' own
        logits = self.paged(tokens, kv_collection_of(self.kv_params, kv_inputs), input_row_offsets)  # [T, V]
        last = F.gather(logits, self.last_rows(input_row_offsets), axis=0)  # [B, V]
        return ModuleV3Outputs(next_token_logits=last, logits=logits, logit_offsets=input_row_offsets,
                               hidden_states=None)


def logit_rows(num_tokens, return_n_logits: Tensor, input_row_offsets: Tensor) -> tuple[Tensor, Tensor]:
    """The rows whose logits are computed and their offsets per request: each request's last row, or every
    row when return_n_logits[0] is ALL_ROWS.

    num_tokens T, return_n_logits [1] int64, input_row_offsets [B+1] uint32 -> rows [R] int64, offsets [B+1] uint32
    """
    offsets = F.cast(input_row_offsets, DType.int64)
    every = return_n_logits[0] >= ALL_ROWS  # a bool scalar
    rows = Tensor.arange(num_tokens, dtype=DType.int64, device=offsets.device)  # [T]
    last = F.sum(F.cast(rows[:, None] == offsets[None, 1:] - 1, DType.int64), axis=-1).reshape([-1]) > 0  # [T]
    chosen = F.nonzero(F.cast(every | last, DType.int64), "logit_rows").reshape([-1])  # [R]
    lengths = offsets[1:] - offsets[:-1]  # [B]
    counts = F.where(every, lengths, F.cast(lengths > 0, DType.int64))  # [B]: every row, or the last (none for no row)
    starts = F.concat([Tensor([0], dtype=DType.int64, device=offsets.device), F.cumsum(counts, axis=0)], axis=0)
    return chosen, F.cast(starts, DType.uint32)


class ServedFastGPT2(Module):
    """The graph MAX's serving stack runs on step 18: the learner's GPT2PagedQ8 given the rows to score."""

    def __init__(self, paged, kv_params):
        self.paged = paged
        self.kv_params = kv_params

    def forward(self, tokens, return_n_logits, input_row_offsets, *kv_inputs) -> ModuleV3Outputs:
        rows, offsets = logit_rows(tokens.shape[0], return_n_logits, input_row_offsets)  # [R], [B+1]
        logits = self.paged(tokens, kv_collection_of(self.kv_params, kv_inputs), input_row_offsets, rows)  # [R, V]
        last = F.gather(logits, F.cast(offsets[1:], DType.int64) - 1, axis=0)  # [B, V]: each request's last row
        return ModuleV3Outputs(next_token_logits=last, logits=logits, logit_offsets=offsets, hidden_states=None)


class GPT2PipelineModel(LogProbabilitiesMixin, ModuleV3PipelineModelWithKVCache[TextContext]):
    """Builds the learner's model from the checkpoint folder and compiles it for ragged batches."""

    model_config_cls: ClassVar[type[GPT2ArchConfig]] = GPT2ArchConfig
    batch_processor_cls: ClassVar[type[GPT2BatchProcessor]] = GPT2BatchProcessor

    def load_model(self):
        model_config = self._create_model_config({})
        self._init_distributed_runtime(model_config)
        served = learner_model(self.kv_params, checkpoint_folder(self.pipeline_config.model.model_path))
        types = self._get_compile_input_types(model_config)
        self._wire_batch_processor(served, model_config)
        compiled = served.compile(*types)
        yield_to_host()  # the step's host work runs at once beside MAX's spinning threads (runtime/threads.py)
        return compiled

    def execute(self, model_inputs) -> ModelOutputs:
        """The compiled graph on MAX's own input buffers, in the order it was compiled with, its outputs left as
        the buffers they are: MAX's execute checks each argument and wraps each output in a Tensor every step
        (about a millisecond of a step on 2 cores)."""
        outputs = tree.unflatten(self.model.out_tree, self.model.execute_raw(*model_inputs.buffers))
        return ModelOutputs(logits=outputs.logits, next_token_logits=outputs.next_token_logits,
                            logit_offsets=outputs.logit_offsets)

    def prepare_initial_token_inputs(self, replica_batches, kv_cache_inputs=None, return_n_logits: int = 1):
        """MAX's inputs for a batch, return_n_logits saying whether a request wants its prompt's rows scored."""
        echo = any(context.log_probabilities_echo for batch in replica_batches for context in batch)
        return super().prepare_initial_token_inputs(replica_batches, kv_cache_inputs,
                                                    return_n_logits=ALL_ROWS if echo else 1)

    def compute_log_probabilities(self, session, model_inputs, model_outputs, next_tokens, batch_top_n, batch_echo):
        """MAX's log-probabilities; from the next-token rows alone when no request echoes its prompt (step 18's
        graph then scores no other row)."""
        if not any(batch_echo):
            model_outputs = dataclasses.replace(model_outputs, logits=None)
        return super().compute_log_probabilities(session, model_inputs, model_outputs, next_tokens, batch_top_n,
                                                 batch_echo)

    def _create_model_config(self, state_dict: dict[str, Any]) -> Any:
        del state_dict
        return GPT2ArchConfig.initialize(self.pipeline_config, max_seq_len=self.max_seq_len)
