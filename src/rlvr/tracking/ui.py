"""The training view in MLflow, by one command:

    rlvr ui            # start MLflow's UI on the project's store, open the runs table
    rlvr ui --print    # only print the URLs (a server already running)

MLflow 3.17 opens any new browser in its GenAI view, and the root URL that
`mlflow ui` prints leads there; the URLs here open the model-training view:
the runs table (one row per training, its evaluation's headline on it) and
the chart view of the trainings' per-step curves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rlvr.settings.load import load_params
from rlvr.tracking.provenance import tracking_uri
from rlvr.tracking.views import experiment_tags, runs_url, view_of


def main(argv=None) -> int:
    """Open the training view: the runs table (one row per training, its evaluation's
    headline on it) and the chart view of the trainings' curves: starts MLflow's UI
    on the project's store and opens the runs table in a browser where one is at
    hand (--print: only the URLs, for a server already running)."""
    import argparse

    from mlflow.tracking import MlflowClient

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--print", action="store_true", dest="only_print",
                    help="print the two URLs for a server already running; start nothing")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=5000)
    ap.add_argument("--no-browser", action="store_true", help="start the server, open no browser")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    uri = tracking_uri(params.tracking.uri)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(params.tracking.experiment)
    if exp is None:
        print(f"error: no experiment '{params.tracking.experiment}' in {uri} yet: run `dvc repro` first",
              file=sys.stderr)
        return 1
    for key, value in experiment_tags(*view_of(params)).items():
        client.set_experiment_tag(exp.experiment_id, key, value)
    table = runs_url(exp.experiment_id, args.port, args.host)
    print(f"runs table:         {table}")
    print(f"per-step curves:    {runs_url(exp.experiment_id, args.port, args.host, chart=True)}", flush=True)
    return 0 if args.only_print else serve(uri, args.host, args.port, None if args.no_browser else table)


def serve(uri: str, host: str, port: int, open_url: str | None) -> int:
    """`mlflow ui` on the store `uri` until Ctrl-C; the browser opens `open_url` once the server answers."""
    import urllib.request
    import webbrowser

    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", host,
                               "--port", str(port)])
    try:
        for _ in range(120):  # MLflow starts in a few seconds; a busy machine, longer
            if server.poll() is not None:
                print(f"error: mlflow ui exited with status {server.returncode} (is port {port} taken? --port)",
                      file=sys.stderr)
                return 1
            try:
                urllib.request.urlopen(f"http://{host}:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        print(f"serving {uri} at http://{host}:{port} (Ctrl-C stops it)", flush=True)
        if open_url and _has_browser():
            webbrowser.open(open_url)
        return server.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(10)


def _has_browser() -> bool:
    """A browser that can show a page here: a desktop session, or a macOS/Windows one."""
    import webbrowser

    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False
    try:
        webbrowser.get()
        return True
    except webbrowser.Error:
        return False


if __name__ == "__main__":
    from rlvr.cli import tool

    tool(main)
