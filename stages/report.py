"""DVC stage: tables and figures from every evaluate and train output."""

from pathlib import Path

from rlvr.cli import params_or_exit, stage_timer
from rlvr.report import build_report
from rlvr.tracking import Tracker

if __name__ == "__main__":
    params = params_or_exit()
    report = params.extra.get("report") or {}
    runs = params.extra.get("eval_runs", ["base"])
    methods = list(params.extra.get("methods") or {})
    with stage_timer("report") as summary:
        out = build_report(runs, methods, Path(params.eval.out_dir), Path("runs"), Path("reports"),
                           Path(params.data.vendor_dir) / "paper_results.yaml", report.get("paper_profile"))
        with Tracker("report", params.tracking.experiment, params.tracking.uri, model="report",
                     params={"runs": runs, "paper_profile": report.get("paper_profile")}) as tracker:
            for path in ["reports/results.md", "reports/index.html", *out["figures"]]:
                tracker.log_artifact(path, "report")
        summary.update(runs=len(out["runs"]), figures=len(out["figures"]))
