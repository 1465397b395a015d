from pathlib import Path

import pytest
from helpers import REPO

E2E = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(config, items):
    """Everything under tests/e2e is slow (the end-to-end tier); gpu tests skip without CUDA."""
    import torch

    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if E2E in item.path.parents:
            item.add_marker(pytest.mark.slow)
        if skip and "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def base_model(tmp_path_factory) -> Path:
    """The real base model as a safetensors checkpoint (made once per session)."""
    built = REPO / "models" / "base" / "model.safetensors"
    if built.exists():
        return built.parent
    from rlvr.model import materialize

    return materialize("smollm2", tmp_path_factory.mktemp("model") / "base")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, base_model) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer: the real vLLM/DeepSpeed
    code paths in seconds instead of minutes."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny") / "model"
    tok = AutoTokenizer.from_pretrained(base_model)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def device_model():
    """A tiny Llama whose weights report another device (tests/device_audit.py)."""
    from device_audit import audit_model

    return audit_model()
