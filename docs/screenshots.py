"""Screenshots of `mlflow ui` and the report as a person sees them (headless
Chromium with a fresh profile, Debian's package `chromium`).

    python docs/screenshots.py            # needs a filled mlflow.db and reports/ (dvc repro)

Starts `mlflow ui` on localhost against the repository's store, then saves,
each from a fresh browser profile (what a first visit sees):
docs/mlflow_runs.png (the runs table at the URL `rlvr ui`
prints: the model-training view, one row per training), docs/mlflow_train_metrics.png
(a training run's first screen of charts), docs/mlflow_compare.png (the chart
view: every training's per-step curves) and docs/report.png (the first screen
of reports/index.html).
"""

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mlflow.tracking import MlflowClient

from rlvr.settings.load import load_params
from rlvr.tracking.views import experiment_tags, runs_url, view_of

PORT = 5055
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def shoot(url: str, out: Path, width: int = 1600, height: int = 1000, wait_ms: int = 20000) -> None:
    profile = Path(f"/tmp/chromium-{out.stem}")
    shutil.rmtree(profile, ignore_errors=True)  # a first visit: no saved view mode, no closed panels
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--window-size={width},{height}",
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
        for key, value in experiment_tags(*view_of(load_params(ROOT / "params.yaml"))).items():
            client.set_experiment_tag(exp.experiment_id, key, value)  # as `rlvr ui` does
        train = client.search_runs([exp.experiment_id], "tags.table = 'model'", max_results=1,
                                   order_by=["attributes.start_time DESC"])[0].info.run_id
        shoot(runs_url(exp.experiment_id, PORT), HERE / "mlflow_runs.png", width=1900)
        shoot(f"{base}/#/experiments/{exp.experiment_id}/runs/{train}/model-metrics?workflowType=machine_learning",
              HERE / "mlflow_train_metrics.png", wait_ms=240000)
        shoot(runs_url(exp.experiment_id, PORT, chart=True), HERE / "mlflow_compare.png", width=1900,
              wait_ms=90000)
        shoot((ROOT / "reports" / "index.html").as_uri(), HERE / "report.png")
    finally:
        ui.terminate()


if __name__ == "__main__":
    main()
