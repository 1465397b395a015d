"""Every command the README documents is exercised by a test (or by CI itself), and the
README stays a page: its generated blocks current (tests/tools/test_doc_blocks.py), under 15 KB."""

import re

from helpers import REPO

# command (as the README writes it, without its comment) -> where it runs: "file::test" or CI's own script
EXERCISED = {
    "bash .ci/install && . .venv/bin/activate && dvc repro": ".ci/run",
    ".venv/bin/python -m pytest -q tests": ".ci/run",
    "bash .ci/install-gpu && . .venv/bin/activate": "tests/test_readme.py::test_the_gpu_install_pins_what_it_says",
    "rlvr smoke params/disco_1.5b.yaml": "tests/e2e/test_smoke_run.py::",
    "cp params/disco_1.5b.yaml params.yaml": "tests/settings/test_recipes.py::test_recipe_loads_unchanged",
    "rlvr memory": "tests/tools/test_memory.py::test_the_command_prints_a_budget_and_exits_by_fit",
    "dvc repro": "tests/e2e/test_pipeline.py::pipeline",
    "dvc exp run -S eval.k=8": "tests/e2e/test_pipeline.py::test_a_params_change_makes_only_its_stages_stale",
    "dvc exp run --queue -S train.lr=5e-5": "tests/e2e/test_pipeline.py::test_queued_experiments_land_in_the_main_mlflow_store",
    "rlvr sweep run": "tests/e2e/test_pipeline.py::test_queued_experiments_land_in_the_main_mlflow_store",
    "dvc plots show": "tests/e2e/test_pipeline.py::test_dvc_plots_show_renders_the_reports_figures_offline",
    "rlvr ui": "tests/e2e/test_ui.py::test_one_command_serves_the_store_and_prints_the_training_view",
    # rlvr ui runs this very `mlflow ui --backend-store-uri <store>` (rlvr.tracking.ui)
    "mlflow ui --backend-store-uri sqlite:///$PWD/mlflow.db":
        "tests/e2e/test_ui.py::test_one_command_serves_the_store_and_prints_the_training_view",
    "rlvr methods params/disco_1.5b.yaml": "tests/tools/test_tools.py::test_methods_lists_each_method_with_its_objective_and_changed_settings",
    "dvc exp show --only-changed --drop 'Created|State|Executor|.*/|maj@' --keep 'avg@'":
        "tests/tools/test_doc_blocks.py::",
}


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [re.split(r"\s{2,}#", line)[0].strip() for b in blocks for line in b.splitlines() if line.strip()]


def test_every_readme_command_is_exercised():
    assert set(readme_commands()) <= set(EXERCISED), set(readme_commands()) - set(EXERCISED)
    for command, where in EXERCISED.items():
        path, _, name = where.partition("::")
        assert (REPO / path).exists(), (command, path)
        if name:
            assert re.search(rf"^def {name}\(|^@pytest.fixture[^\n]*\ndef {name}\(", (REPO / path).read_text(),
                             re.M), (command, where)


def test_the_gpu_install_pins_what_it_says():
    """No GPU here: the script is valid bash and installs the versions the README names."""
    import subprocess

    script = REPO / ".ci/install-gpu"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text() + (REPO / "pyproject.toml").read_text()
    for pin in ("torch==2.13.0", "deepspeed==0.19.8", "vllm==0.32.0"):
        assert pin in text, pin


def test_the_readme_is_a_page():
    assert len((REPO / "README.md").read_bytes()) < 15_000
