"""The sizes of the models the recipes train, from their config.json (or
the known ones offline): what the memory budget multiplies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rlvr.schema import ConfigError
from rlvr.settings.sections import Params

_QWEN_1_5B = dict(hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960, vocab=151936, qkv_bias=True)
_QWEN_7B = dict(hidden=3584, layers=28, heads=28, kv_heads=4, intermediate=18944, vocab=152064, qkv_bias=True)
_LLAMA_8B = dict(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=128256)


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool  # the LM head is the embedding matrix
    qkv_bias: bool = False  # Qwen2

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads

    @property
    def layer_params(self) -> int:
        h, kv = self.hidden, self.kv_dim
        attention = 2 * h * h + 2 * h * kv + ((h + 2 * kv) if self.qkv_bias else 0)
        return attention + 3 * h * self.intermediate + 2 * h

    @property
    def params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return embeddings + self.layers * self.layer_params + self.hidden


KNOWN_SHAPES = {
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": ModelShape(**_QWEN_1_5B, tied=False),
    "Qwen/Qwen2.5-Math-1.5B": ModelShape(**_QWEN_1_5B, tied=True),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": ModelShape(**_QWEN_7B, tied=False),
    "Qwen/Qwen2.5-Math-7B": ModelShape(**_QWEN_7B, tied=False),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": ModelShape(**_LLAMA_8B, tied=False),
    "meta-llama/Llama-3.1-8B": ModelShape(**_LLAMA_8B, tied=False),
    "meta-llama/Llama-3.1-8B-Instruct": ModelShape(**_LLAMA_8B, tied=False),
}


def shape_from_config(config: dict) -> ModelShape:
    return ModelShape(hidden=config["hidden_size"], layers=config["num_hidden_layers"],
                      heads=config["num_attention_heads"],
                      kv_heads=config.get("num_key_value_heads", config["num_attention_heads"]),
                      intermediate=config["intermediate_size"], vocab=config["vocab_size"],
                      tied=bool(config.get("tie_word_embeddings", False)),
                      qkv_bias=config.get("model_type") == "qwen2")


def model_shape(params: Params) -> ModelShape:
    """The shape of params' model: a local model directory's config.json, a
    known hub model, or else the prepared model's (models/base, made from the
    source by prepare_model)."""
    source, prepared = Path(params.model.source), Path(params.model.out_dir) / "config.json"
    if (source / "config.json").exists():
        return shape_from_config(json.loads((source / "config.json").read_text()))
    if params.model.source in KNOWN_SHAPES:
        return KNOWN_SHAPES[params.model.source]
    if prepared.exists():
        return shape_from_config(json.loads(prepared.read_text()))
    raise ConfigError([f"model.source '{params.model.source}': its shape is unknown before the model is "
                       f"prepared; run `dvc repro prepare_model` first (or add it to rlvr.tools.model_shapes.KNOWN_SHAPES)"])
