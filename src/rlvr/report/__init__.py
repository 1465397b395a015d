"""The report: paper-style tables with intervals, the paper-claims verdicts,
and the training-dynamics figures, from the stage outputs.

Inputs, per run (rlvr.runs): reports/eval/<run>/{metrics.json, problems.jsonl,
by_step.json} and reports/train/<run>/steps.csv, plus the published numbers.
Outputs: reports/results.md, reports/index.html (figures inlined),
reports/figures/*.png, reports/curves.csv (every run's steps, for `dvc plots`)
and reports/headline.json (the mean scores per method, for `dvc exp show`).
Every number of ours carries a 95% bootstrap interval over problems; words
such as "better" appear only where an interval allows them (rlvr.stats).

inputs.py reads the runs, tables.py and claims.py make the tables,
figures.py the plots, format.py writes markdown and HTML, and build.py puts
the sections (a list) and figures in order.
"""

from rlvr.report.build import build_report
from rlvr.report.inputs import per_problem

__all__ = ["build_report", "per_problem"]
