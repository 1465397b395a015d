"""What several test modules share: the repository, a child's environment and a
fresh checkout for end-to-end runs, the objective contract's synthetic
mini-batch, and the tiny training params. Test modules import this, never
each other."""

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import torch
import yaml

from rlvr.objectives.base import Needs, PolicyBatch

REPO = Path(__file__).resolve().parents[1]


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



# The recipes whose whole path the dry runs take on the CPU (tests/e2e/test_dry_runs.py): DisCO's on Llama.
# SIREN's Qwen2 recipe is the smoke's (tests/e2e/test_smoke_run.py); every other recipe runs the
# objectives, prompt and grader of one of these two (tests/settings/test_recipes.py).
DRY_RUNS = [REPO / "params" / "disco_8b.yaml"]


# ---- the objective contract's mini-batch ------------------------------------------------

N_GROUPS, N, T = 3, 4, 6


def mini_batch(seed: int = 0, rewards=(1.0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 1, 0)) -> PolicyBatch:
    """Three groups of four responses of unequal lengths, every field a loss may read."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (N_GROUPS * N,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    rows = N_GROUPS * N
    return PolicyBatch(
        logp=(-torch.rand(rows, T, generator=g) * 2).requires_grad_(),
        old_logp=-torch.rand(rows, T, generator=g) * 2, mask=mask, rewards=torch.tensor(rewards), group_size=N,
        max_response_len=T, ref_logp=-torch.rand(rows, T, generator=g) * 2,
        entropy=(torch.rand(rows, T, generator=g) * 3).requires_grad_(),
        topp_entropy=(torch.rand(rows, T, generator=g) * 2).requires_grad_(), entropy_anchor=0.7)


def needed_only(batch: PolicyBatch, needs: Needs) -> PolicyBatch:
    """`batch` with only the fields `needs` asks the trainer for."""
    return dataclasses.replace(
        batch, entropy=batch.entropy if "entropy" in needs.entropies else None,
        topp_entropy=batch.topp_entropy if "topp_entropy" in needs.entropies else None,
        ref_logp=batch.ref_logp if needs.reference_model else None,
        entropy_anchor=batch.entropy_anchor if needs.anchor else None)



# ---- a tiny training --------------------------------------------------------------------

TINY_TRAIN = {"steps": 2, "questions_per_step": 2, "responses_per_question": 2, "mini_batch_questions": 2,
              "micro_batch_questions": 1, "max_response_tokens": 16, "checkpoint_every": 1, "lr": 1e-4}

def objectives_as_methods() -> dict[str, dict]:
    """Each registered objective as a method, with the first example its module
    declares (the contract's two-step training), plus GRPO with a reference
    model and DAPO with its rollout side."""
    from rlvr.objectives.registry import objectives

    methods = {name: {"objective": name, **spec.examples[0]} for name, spec in objectives().items()}
    return {**methods, "grpo_kl": {"objective": "grpo", "kl_coef": 0.01},
            "dapo_sampling": {"objective": "dapo", "clip_high": 0.28, "dynamic_sampling": True,
                              "dynamic_sampling_rounds": 1, "overlong_buffer": 4}}


ALL_METHODS = objectives_as_methods()


def tiny_params(tmp_path: Path, methods=None):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["data"].update({"out_dir": str(tmp_path / "data"), "vendor_dir": str(REPO / "data/vendor")})
    raw["data"]["arithmetic"].update({"levels": [1, 2], "n_train": 40, "n_test_per_level": 2,
                                       "n_validation_per_level": 0})
    raw["engine"].update({"kv_cache_gib": 1, "max_model_len": 512})
    for section in ("eval", "validation"):  # the suite's budget: the default's own 80 tokens cost 2.5x the time here
        raw[section]["max_new_tokens"] = 32
    raw["train"].update(TINY_TRAIN)
    raw["methods"] = methods or ALL_METHODS
    raw.pop("sweep", None)  # the default's sweep names its methods
    return raw


def code_that_runs(tree, as_program: bool = False):
    """A module's AST without what never runs when it is imported: its
    `if __name__ == "__main__":` block (unless it is the program) and its
    `if TYPE_CHECKING:` blocks (imports for annotations only)."""
    import ast

    def skipped(node) -> bool:
        if not isinstance(node, ast.If):
            return False
        test = ast.unparse(node.test)
        return test.endswith("TYPE_CHECKING") or (not as_program and "__main__" in test and "__name__" in test)

    tree.body = [node for node in tree.body if not skipped(node)]
    return tree
