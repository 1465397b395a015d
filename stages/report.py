"""DVC stage: tables, claims and figures from every evaluate and train output."""

from pathlib import Path

from rlvr.cli import stage_timer
from rlvr.report import build_report
from rlvr.report.scale import RunScale
from rlvr.runs import all_runs
from rlvr.settings.load import params_or_exit
from rlvr.tracking.tracker import Tracker

if __name__ == "__main__":
    params = params_or_exit()
    profile = params.report.paper_profile
    objectives = {name: m.objective for name, m in params.methods.items()}
    with stage_timer("report") as summary:
        out = build_report(all_runs(params), Path("."), Path("reports"),
                           Path(params.data.vendor_dir) / "paper_results.yaml", profile, objectives,
                           params.report.ablations, RunScale.of(params))
        with Tracker.for_stage(params, "report", model="report", system_metrics=False,
                               logged={"methods": list(objectives), "seeds": params.seeds,
                                       "paper_profile": profile}) as tracker:
            for path in ["reports/results.md", "reports/index.html", "reports/headline.json",
                         "reports/grader_agreement.json", *out["figures"]]:
                tracker.log_artifact(path, "report")
        summary.update(methods=len(out["methods"]), figures=len(out["figures"]))
