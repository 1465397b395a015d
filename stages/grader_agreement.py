"""DVC stage: ours against each paper's grader, on this run's samples and on synthetic endings."""

from pathlib import Path

from rlvr.atomic import write_json
from rlvr.cli import stage_timer
from rlvr.grading.agreement import agreement
from rlvr.settings.load import params_or_exit

if __name__ == "__main__":
    params = params_or_exit()
    with stage_timer("grader_agreement") as summary:
        result = agreement(Path(params.eval.out_dir), params.data.eval_dir, Path(params.data.vendor_dir),
                           params.prompt.answer_after, params.verifier.workers)
        write_json(Path("reports/grader_agreement.json"), result)
        summary.update({f"{where}_n": r["n"] for where, r in result.items() if isinstance(r, dict)})
