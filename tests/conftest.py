import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
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


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "DS_ENV_FILE")


def clean_env(**extra) -> dict:
    """This process's environment for a child stage, without the rank variables
    an in-process trainer (rlvr.distributed.init) leaves behind: with them, a
    stage would take itself for a rank already started by the launcher."""
    return {**{k: v for k, v in os.environ.items() if k not in RANK_VARIABLES}, **extra}


def copy_repo(dst: Path) -> Path:
    """A fresh git+DVC checkout of the tracked files, for end-to-end runs."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file() and not f.startswith(("reports/", "dvc.lock")):
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dst, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=dst, check=True, env=env)
    return dst


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
