"""GPT-2's architecture config for MAX 26.7's serving stack: what the paged KV cache is sized by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from max.pipelines.lib.interfaces.arch_config import ArchConfigWithAttentionKVCache
from max.pipelines.modeling.config_enums import SupportedEncoding


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
    def construct_kv_params(cls, huggingface_config, pipeline_config, devices, kv_cache_config, cache_dtype):
        """The paged cache's shape: n_layer layers of keys and values, n_head heads of head_dim each."""
        return kv_cache_config.to_params(
            dtype=cache_dtype,
            n_kv_heads=huggingface_config.n_head,
            head_dim=huggingface_config.n_embd // huggingface_config.n_head,
            num_layers=huggingface_config.n_layer,
            devices=devices,
            data_parallel_degree=pipeline_config.model.data_parallel_degree,
        )

    @classmethod
    def calculate_max_seq_len(cls, huggingface_config, model_config) -> int:
        """n_positions: GPT-2 has a learned embedding for positions 0 .. 1023, none beyond."""
        requested = model_config.max_length
        if requested is not None and requested > huggingface_config.n_positions:
            raise ValueError(f"max_length {requested} is past GPT-2's n_positions "
                             f"({huggingface_config.n_positions}): it has no embedding for those positions")
        return requested or huggingface_config.n_positions
