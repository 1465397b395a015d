"""Screenshots of `mlflow ui` and the report as a person sees them (headless
Chromium with a fresh profile, Debian's package `chromium`).

    python docs/screenshots.py            # needs a filled mlflow.db and reports/ (dvc repro)

Starts `mlflow ui` on localhost against the repository's store, then saves
docs/mlflow_runs.png (the runs table at the URL `python -m rlvr.tracking`
prints: the model-training view, one row per stage run), docs/mlflow_train_metrics.png
(a train run's metric charts), docs/mlflow_compare.png (the compare view of
two methods' train runs) and docs/report.png (the first screen of
reports/index.html).
"""

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mlflow.tracking import MlflowClient

from rlvr.tracking import experiment_tags, runs_url

PORT = 5055
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def shoot(url: str, out: Path, width: int = 1600, height: int = 1000, wait_ms: int = 20000) -> None:
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir=/tmp/chromium-{out.stem}", f"--window-size={width},{height}",
                    f"--virtual-time-budget={wait_ms}", "--hide-scrollbars", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=180)
    print(f"wrote {out}")


def main() -> None:
    uri = f"sqlite:///{ROOT / 'mlflow.db'}"
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--port", str(PORT),
                           "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{PORT}"
        for _ in range(120):
            try:
                urllib.request.urlopen(base, timeout=2)
                break
            except OSError:
                time.sleep(1)
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name("rlvr")
        # per method, its newest train run that trained (a run resumed at its last step logs no metrics)
        newest = client.search_runs([exp.experiment_id], "tags.stage LIKE 'train@%'", max_results=500,
                                    order_by=["attributes.start_time DESC"])
        train = list({r.data.tags["model"]: r.info.run_id for r in reversed(newest)
                      if "reward_mean" in r.data.metrics}.values())
        for key, value in experiment_tags(2).items():  # the default's k, as `python -m rlvr.tracking` sets it
            client.set_experiment_tag(exp.experiment_id, key, value)
        shoot(runs_url(exp.experiment_id, PORT), HERE / "mlflow_runs.png", width=1900)
        shoot(f"{base}/#/experiments/{exp.experiment_id}/runs/{train[0]}/model-metrics?workflowType=machine_learning",
              HERE / "mlflow_train_metrics.png", wait_ms=90000)
        compare = json.dumps(train[:2])
        shoot(f"{base}/#/compare-runs?runs={compare}&experiments={json.dumps([exp.experiment_id])}"
              "&workflowType=machine_learning", HERE / "mlflow_compare.png", wait_ms=90000)
        shoot((ROOT / "reports" / "index.html").as_uri(), HERE / "report.png")
    finally:
        ui.terminate()


if __name__ == "__main__":
    main()
