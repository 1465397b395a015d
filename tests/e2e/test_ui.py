"""rlvr ui: one command starts MLflow's UI on the project's store and
prints the training view's URLs (the runs table, the chart view)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import yaml
from helpers import REPO, clean_env
from mlflow.tracking import MlflowClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_command_serves_the_store_and_prints_the_training_view(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp = MlflowClient(store).create_experiment("rlvr")
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["tracking"]["uri"] = store
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "rlvr.tracking.ui", "--params", str(tmp_path / "params.yaml"),
                             "--port", str(port), "--no-browser"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=clean_env(), start_new_session=True)
    lines = []
    try:
        deadline = time.time() + 180
        while time.time() < deadline and not any(line.startswith("serving") for line in lines):
            lines.append(proc.stdout.readline())
            assert proc.poll() is None, "".join(lines)
        assert any(line.startswith("serving") for line in lines), "".join(lines)
        urls = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines if ": " in line}
        assert urls["runs table"] == (f"http://127.0.0.1:{port}/#/experiments/{exp}/runs?workflowType="
                                      "machine_learning&viewStateShareKey=runs")
        assert urls["per-step curves"] == urls["runs table"] + "&compareRunsMode=CHART"
        # the server answers on the project's store, with the training view set on the experiment
        reply = json.load(urllib.request.urlopen(
            f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/get?experiment_id={exp}", timeout=10))
        tags = {t["key"]: t["value"] for t in reply["experiment"]["tags"]}
        assert "mlflow.sharedViewState.runs" in tags
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
