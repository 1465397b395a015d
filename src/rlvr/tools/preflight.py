"""The pipeline's first stage (stages/check_params.py): every rule of a params
file at once, plus what params alone cannot tell: that each model it names
(model.source, checkpoints:) resolves on this machine, that each dataset
entry's file holds what the entry says (rlvr.data.checks), and, on a GPU node,
that each method fits its GPU (rlvr.tools.memory).

DVC removes a stage's outputs just before running it, so a bad value found by
a later stage costs what that stage had made. Every stage depends on this one,
which writes the same file whenever it passes: it reruns on any params change,
stops `dvc repro` with the whole list of problems before anything is removed,
and otherwise changes nothing downstream.
"""

from __future__ import annotations

import os
from pathlib import Path

from rlvr.data.checks import dataset_problems
from rlvr.schema import ConfigError
from rlvr.settings.load import read_yaml
from rlvr.settings.methods import recipe_params
from rlvr.settings.sections import Params

CHECKED = Path("runs/params.checked")  # the stage's output; its content never changes


def check_recipe(path: str | Path = "params.yaml") -> Params:
    """The params of `path`, or one ConfigError listing every problem."""
    problems: list[str] = []
    params = recipe_params(read_yaml(path), problems)
    if params is not None:
        problems += model_problems(params)
        problems += dataset_problems(params.data)
    if params is not None and not problems:
        problems += gpu_memory_problems(params)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)), str(path))
    return params


def model_problems(params: Params) -> list[str]:
    named = {"model.source": params.model.source}
    named.update({f"checkpoints.{name}": source for name, source in params.checkpoints.items()
                  if isinstance(source, str) and source})
    return [p for where, source in named.items() if (p := source_problem(where, source))]


def gpu_memory_problems(params: Params) -> list[str]:
    """On a GPU node, each method that cannot fit this GPU (rlvr.tools.memory's worst
    case, with the setting that would fit); nothing without CUDA."""
    import torch

    from rlvr.settings.methods import check_methods
    from rlvr.tools.memory import check_this_gpu

    if not torch.cuda.is_available():
        return []
    problems = []
    for method in check_methods(params).values():
        try:
            check_this_gpu(params, method)
        except ConfigError as e:
            problems += [p for p in e.problems if p not in problems]
    return problems


def source_problem(where: str, source: str) -> str | None:
    """Why `source` (smollm2, a local model directory or a hub id) cannot be
    loaded here, or None. A hub id resolves if it is in the local cache, or,
    with the hub on, if the hub has it (its download is the stage's work)."""
    if source == "smollm2":
        from rlvr.model import smollm2_gguf_path

        try:
            smollm2_gguf_path()
        except FileNotFoundError as e:
            return f"'{where}': {e}"
        return None
    path = Path(source).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            return f"'{where}': {source} has no config.json: point it at a Hugging Face model directory"
        return None
    local = f"'{where}': {source} is not a local directory (none at {path.resolve()})"
    if source.startswith(("/", ".", "~")) or source.count("/") != 1:
        return f"{local}, nor a hub id (owner/name)"
    if _cached(source):
        return None
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return (f"{local}, and as a hub id it is not in the local Hugging Face cache with the hub switched off "
                f"(HF_HUB_OFFLINE=1): download it first (`hf download {source}`) or name a local directory")
    missing = _missing_on_hub(source)
    return f"{local}, and as a hub id {missing}" if missing else None


def _missing_on_hub(repo_id: str) -> str | None:
    from huggingface_hub import model_info
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        model_info(repo_id, timeout=10)
    except RepositoryNotFoundError:
        return "the hub has no such model (or it is private: log in with `hf auth login`)"
    except Exception as e:  # noqa: BLE001  no network, a proxy, a timeout: the stage would fail the same way
        return (f"the hub could not be reached to look for it ({type(e).__name__}); on a machine without "
                f"internet, download it elsewhere into the cache and set HF_HUB_OFFLINE=1, or name a local directory")
    return None


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    # the cache named now (HF_HUB_CACHE), not the one huggingface_hub read at import
    return isinstance(try_to_load_from_cache(repo_id, "config.json", cache_dir=os.environ.get("HF_HUB_CACHE")), str)


def write_checked() -> Path:
    CHECKED.parent.mkdir(parents=True, exist_ok=True)
    CHECKED.write_text("params.yaml passed every check of stages/check_params.py\n")
    return CHECKED
