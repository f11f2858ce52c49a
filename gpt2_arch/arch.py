"""GPT-2's registration with MAX's serving stack (MAX 26.7): its config and architecture entry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from max.graph.weights import WeightsFormat
from max.pipelines.context import TextContext
from max.pipelines.kv_cache.memory_planner import PagedMemoryPlanner
from max.pipelines.lib import SupportedArchitecture, TextTokenizer
from max.pipelines.lib.interfaces.arch_config import ArchConfigWithAttentionKVCache
from max.pipelines.modeling.config_enums import SupportedEncoding
from max.pipelines.modeling.types import PipelineTask

from gpt2_arch.model import GPT2BatchProcessor, GPT2PipelineModel


@dataclass
class GPT2ArchConfig(ArchConfigWithAttentionKVCache):
    """What MAX sizes the paged KV cache by: one key and one value [H, D] per position, per layer."""

    DEFAULT_ENCODING: ClassVar[SupportedEncoding] = "float32"
    SUPPORTED_ENCODINGS: ClassVar[set[SupportedEncoding]] = {"float32"}

    @property
    def num_key_value_heads(self) -> int:
        return self.huggingface_config.n_head  # GPT-2 keeps every head's keys (no grouped-query attention)

    @property
    def head_dim(self) -> int:
        return self.huggingface_config.n_embd // self.huggingface_config.n_head

    @property
    def num_layers(self) -> int:
        return self.huggingface_config.n_layer

    @classmethod
    def calculate_max_seq_len(cls, huggingface_config, model_config) -> int:
        """n_positions: GPT-2 has a learned embedding for positions 0 .. 1023, none beyond."""
        requested = model_config.max_length
        if requested is not None and requested > huggingface_config.n_positions:
            raise ValueError(f"max_length {requested} is past GPT-2's n_positions "
                             f"({huggingface_config.n_positions}): it has no embedding for those positions")
        return requested or huggingface_config.n_positions


gpt2_arch = SupportedArchitecture(
    name="GPT2LMHeadModel",
    task=PipelineTask.TEXT_GENERATION,
    example_repo_ids=["openai-community/gpt2"],
    default_encoding=GPT2ArchConfig.DEFAULT_ENCODING,
    supported_encodings=GPT2ArchConfig.SUPPORTED_ENCODINGS,
    pipeline_model=GPT2PipelineModel,
    tokenizer=TextTokenizer,
    context_type=TextContext,
    default_weights_format=WeightsFormat.safetensors,
    config=GPT2ArchConfig,
    batching=GPT2BatchProcessor,
    memory_planner=PagedMemoryPlanner,
    multi_gpu_supported=False,
    supports_overlap_scheduler=False,
    supports_device_graph_capture=False,
)
