"""GPT-2's registration with MAX 26.7's serving stack: the architecture entry `max serve` looks up."""

from __future__ import annotations

from max.graph.weights import WeightsFormat
from max.pipelines.context import TextContext
from max.pipelines.kv_cache.memory_planner import PagedMemoryPlanner
from max.pipelines.lib import SupportedArchitecture
from max.pipelines.modeling.types import PipelineTask

from gpt2_arch.config import GPT2ArchConfig
from gpt2_arch.model import GPT2BatchProcessor, GPT2PipelineModel
from gpt2_arch.pipeline import GPT2Pipeline
from gpt2_arch.tokenizer import GPT2Tokenizer

gpt2_arch = SupportedArchitecture(
    name="GPT2LMHeadModel",
    task=PipelineTask.TEXT_GENERATION,
    example_repo_ids=["openai-community/gpt2"],
    default_encoding=GPT2ArchConfig.DEFAULT_ENCODING,
    supported_encodings=GPT2ArchConfig.SUPPORTED_ENCODINGS,
    pipeline_model=GPT2PipelineModel,
    pipeline_cls=GPT2Pipeline,
    tokenizer=GPT2Tokenizer,
    context_type=TextContext,
    default_weights_format=WeightsFormat.safetensors,
    config=GPT2ArchConfig,
    batching=GPT2BatchProcessor,
    memory_planner=PagedMemoryPlanner,
    multi_gpu_supported=False,
    supports_overlap_scheduler=False,
    supports_device_graph_capture=False,
)
